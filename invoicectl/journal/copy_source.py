"""The SQLite journal a copy reads (``copying``): read-only, in one read transaction, never
migrated; refused, with nothing written, when it is not a journal at this schema."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from invoicectl.errors import JournalError
from invoicectl.journal.copy_checks import (
    NOTHING_WRITTEN,
    CopyMismatch,
    CopyRefused,
    listed,
    same_migrations,
)
from invoicectl.journal.migrations import MIGRATION_SET, WORKER_TABLES
from invoicectl.journal.sqlite_open import refuse_missing

_SQLITE_MAGIC = b"SQLite format 3\x00"


def check_source_file(source: Path) -> None:
    """A regular file with SQLite's header; else the line every command says of it (a
    directory, a FIFO, an empty file, one of several names), or that none is there."""
    try:
        source.stat()
    except (FileNotFoundError, NotADirectoryError):
        raise CopyRefused(
            f"no SQLite journal at {source}: name the journal to copy with --journal or"
            f" INVOICECTL_JOURNAL; {NOTHING_WRITTEN}"
        ) from None
    except OSError as error:  # links that loop, no permission to look
        raise CopyRefused(
            f"the journal {source} cannot be looked at: {error.strerror or error};"
            f" {NOTHING_WRITTEN}"
        ) from None
    try:
        refuse_missing(source)
    except JournalError as refusal:
        raise CopyRefused(str(refusal)) from None
    with source.open("rb") as file:
        header = file.read(100)
    if not header.startswith(_SQLITE_MAGIC):
        raise CopyRefused(
            f"{source} is not a SQLite database (its header is not SQLite's), so not a"
            f" journal; {NOTHING_WRITTEN}"
        )


class Source:
    """The SQLite journal, read-only, in one read transaction: the journal as it was when the
    copy began, whatever else reads it meanwhile."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self.conn = conn
        self.journal_id: str | None = None

    def check_schema(self) -> None:
        names = {name for (name,) in self.conn.execute("SELECT name FROM sqlite_master")}
        if "invoices" not in names or "_sqlite_migrations" not in names:
            raise CopyRefused(
                f"{self.path} holds no invoicectl journal (no invoices table); {NOTHING_WRITTEN}"
            )
        rows = self.conn.execute(
            "SELECT name FROM _sqlite_migrations WHERE migration_set = ?", (MIGRATION_SET,)
        )
        same_migrations({name for (name,) in rows}, f"the journal {self.path}", upgrade=True)
        row = self.conn.execute("SELECT journal_id FROM identity WHERE id = 1").fetchone()
        self.journal_id = None if row is None else str(row[0])

    def tables(self) -> dict[str, tuple[list[str], str]]:
        """Each table to copy: its columns in order, and its key column."""
        found = {}
        rows = self.conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            " AND name != '_sqlite_migrations' ORDER BY name"
        ).fetchall()
        for (name,) in rows:
            if name in WORKER_TABLES:  # who works on what now: no history to carry over
                continue
            info = self.conn.execute(f'PRAGMA table_info("{name}")').fetchall()
            keys = [column[1] for column in info if column[5]]
            if len(keys) != 1:
                raise CopyRefused(f"{self.path}: table {name} has no one-column key; not a journal")
            found[str(name)] = ([str(column[1]) for column in info], str(keys[0]))
        return found

    def rows(self, table: str, columns: Sequence[str], key: str, batch: int) -> Iterator[list[Any]]:
        cursor = self.conn.execute(f"SELECT {listed(columns)} FROM {table} ORDER BY {key}")
        while chunk := cursor.fetchmany(batch):
            yield chunk

    def head(self) -> tuple[int, str]:
        row = self.conn.execute("SELECT seq, hash FROM chain ORDER BY seq DESC LIMIT 1").fetchone()
        return (0, "0" * 64) if row is None else (int(row[0]), str(row[1]))


@contextmanager
def opened_source(path: Path) -> Iterator[Source]:
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    except sqlite3.Error as error:
        raise CopyRefused(f"{path} cannot be opened: {error}; {NOTHING_WRITTEN}") from None
    try:
        conn.execute("BEGIN")
        source = Source(path, conn)
        try:
            source.check_schema()
        except sqlite3.DatabaseError as error:
            raise CopyRefused(
                f"{path} cannot be read as a journal ({error}); {NOTHING_WRITTEN}"
            ) from None
        try:
            yield source
        except sqlite3.DatabaseError as error:
            raise CopyMismatch(
                f"{path} could not be read to its end ({error}): the copy was rolled back,"
                " the target holds none of it; run invoicectl verify on the journal"
            ) from None
    finally:
        conn.close()

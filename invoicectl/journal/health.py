"""A journal looked at from outside, for ``invoicectl doctor``: read-only, never migrated.

``examine(path)`` opens the file with ``mode=ro`` (as ``audit`` does), so that a doctor run
creates, changes and migrates nothing: what it finds is SQLite's ``quick_check`` (the
integrity check without the index cross-checks: seconds for a journal of millions of rows,
not minutes), with the cross-checks for the invoices table alone (``_invoices_indexes``),
the base URL the journal is bound to, whether its schema is this version's,
and its size with its WAL. A file SQLite cannot read at all is a ``JournalHealth`` whose
``error`` says why, never an exception.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from invoicectl.errors import JournalError
from invoicectl.journal.migrations import MIGRATIONS, _applied, all_applied, user_tables
from invoicectl.journal.sqlite_open import lacking_schema, not_regular, several_names

# quick_check stops after this many problems; one screenful says enough.
_MAX_PROBLEMS = 10


@dataclass(frozen=True)
class JournalHealth:
    path: Path
    exists: bool
    size: int = 0  # bytes of the file
    wal_size: int = 0  # bytes of its -wal beside it
    writable: bool = False  # the file and its directory (for -wal, -shm and the lock)
    problems: list[str] = field(default_factory=list)  # quick_check's lines, [] when ok
    bound_base_url: str | None = None
    # current, older (migrated at the next open), newer, none, foreign (another program's
    # database), damaged (fully migrated by its record, yet lacking ``missing``)
    schema: str = "current"
    missing: list[str] = field(default_factory=list)
    error: str | None = None  # SQLite could not read it: why


def examine(path: Path) -> JournalHealth:
    """What the journal at ``path`` is like; nothing is created, written or migrated."""
    try:
        path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return JournalHealth(path=path, exists=False, writable=_creatable(path.parent))
    except OSError as error:  # links that loop, no permission to look
        return JournalHealth(path=path, exists=True, error=error.strerror or str(error))
    kind = not_regular(path)
    if kind is not None:  # a FIFO would block the read-only open below, forever
        return JournalHealth(path=path, exists=True, error=f"not a regular file but {kind}")
    if (several := several_names(path)) is not None:  # every other command refuses it
        return JournalHealth(path=path, exists=True, error=several)
    wal = Path(f"{path}-wal")
    found = JournalHealth(
        path=path,
        exists=True,
        size=path.stat().st_size,
        wal_size=wal.stat().st_size if wal.exists() else 0,
        writable=os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK),
    )
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as error:
        return replace(found, error=str(error))
    try:
        said = [str(line) for (line,) in conn.execute(f"PRAGMA quick_check({_MAX_PROBLEMS})")]
        schema = _schema(conn)
        if schema == "older" and (refused := _refused_upgrade(conn)) is not None:
            return replace(found, error=refused)  # what the next run would say, and do
        missing = lacking_schema(conn) if schema == "current" else []
        return replace(
            found,
            problems=(_stale_indexes(conn) or _invoices_indexes(conn))
            if said == ["ok"]
            else _problems(said),
            bound_base_url=_bound_base_url(conn),
            schema="damaged" if missing else schema,
            missing=missing,
        )
    except sqlite3.Error as error:  # not a database, or damaged past what quick_check reads
        return replace(found, error=str(error))
    finally:
        conn.close()


def _problems(said: list[str]) -> list[str]:
    """quick_check's findings, one line each, without its "*** in database main ***"."""
    lines = (" ".join(line.split()) for text in said for line in text.splitlines())
    return [line for line in lines if line and not line.startswith("***")]


def _stale_indexes(conn: sqlite3.Connection) -> list[str]:
    """Indexes that list another number of rows than their tables hold. quick_check does
    not compare them, and a command that reads by one misses the rows it lacks: a send
    skipped three pending invoices, and status counted them as none, exit 0."""
    found = []
    indexes = conn.execute(
        "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index'"
    ).fetchall()
    for name, table, sql in indexes:
        columns = conn.execute(f'PRAGMA index_info("{name}")').fetchall()
        if not columns or columns[0][2] is None:  # on an expression: not judged
            continue
        # A partial index holds the rows of its WHERE: counted both ways under it.
        head, where, condition = (sql or "").rpartition(" WHERE ")
        within = f" AND ({condition})" if where and head else ""
        first = columns[0][2]
        # By a condition on its first column, or SQLite counts by the smallest b-tree.
        by_index = sum(
            conn.execute(
                f'SELECT count(*) FROM "{table}" INDEXED BY "{name}"'
                f' WHERE "{first}" IS {test}{within}'
            ).fetchone()[0]
            for test in ("NULL", "NOT NULL")
        )
        in_table = conn.execute(
            f'SELECT count(*) FROM "{table}" NOT INDEXED WHERE 1{within}'
        ).fetchone()[0]
        if by_index != in_table:
            found.append(
                f"index {name} lists {by_index} rows, table {table} {in_table}: REINDEX {name}"
            )
    return found


def _invoices_indexes(conn: sqlite3.Connection) -> list[str]:
    """The invoices table's indexes checked entry by entry against its rows (SQLite's
    ``integrity_check`` of that one table: 0.36 s at 100,000 invoices). Every send plans,
    and ``status`` counts, by those indexes; one page of one written back as it was before
    a send lists as many rows as the table, in other states (helper-83: sent invoices
    planned again as replays, counted as pending), which counts alone do not see."""
    if not _has_table(conn, "invoices"):
        return []
    rows = conn.execute("PRAGMA integrity_check(invoices)")  # no limit beside a table
    said = [str(line) for (line,) in rows.fetchmany(_MAX_PROBLEMS)]
    if said == ["ok"]:
        return []
    return [f"{line}: REINDEX invoices" for line in _problems(said)]


def _bound_base_url(conn: sqlite3.Connection) -> str | None:
    if not _has_table(conn, "environment"):
        return None
    row = conn.execute("SELECT base_url FROM environment WHERE id = 1").fetchone()
    return None if row is None else str(row[0])


def _schema(conn: sqlite3.Connection) -> str:
    applied = _applied(conn)
    if not applied:
        return "foreign" if user_tables(conn) else "none"
    ours = {migration.__name__ for migration in MIGRATIONS}
    if applied - ours:
        return "newer"
    if applied < ours:
        return "older"
    return "current"


def _refused_upgrade(conn: sqlite3.Connection) -> str | None:
    """Why the next run would refuse to bring an older journal up to date (a migration that
    starts the hash chain removed from its record by hand); None when it would."""
    try:
        all_applied(_applied(conn), MIGRATIONS)
    except JournalError as refusal:
        return str(refusal)
    return None


def lacking(conn: sqlite3.Connection) -> list[str]:
    """``missing_schema`` of a journal migrated by this version (an older one lacks what its
    next open adds; a newer one is not this version's to judge)."""
    return lacking_schema(conn) if _schema(conn) == "current" else []


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
    ).fetchone()
    return row is not None


def _creatable(directory: Path) -> bool:
    """Whether a journal could be made in ``directory``, or in the nearest parent that
    exists (the first run makes the directories, mode 0700)."""
    while not directory.exists():
        if directory.parent == directory:
            return False
        directory = directory.parent
    if not directory.is_dir():
        return False
    # Tried, not asked: os.access says yes to root everywhere, /proc and read-only mounts
    # included, where the first run's mkdir would then fail.
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".invoicectl-doctor-", dir=directory))
    except OSError:
        return False
    return True

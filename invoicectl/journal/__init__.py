"""The journal: one SQLite file that holds every invoice, revision, byte, attempt and run.

It is the only place invoicectl keeps state, and the reason a crash loses nothing: WAL mode,
``synchronous=FULL``, and every state change committed before the program moves on. The
schema lives in ``migrations.py``; ingest rules (design.md, "The journal" and "Idempotency")
live here.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from invoicectl.errors import JournalError
from invoicectl.journal import packing
from invoicectl.journal.migrations import bring_up_to_date
from invoicectl.journal.records import CachedStat

STATES = ("pending", "invalid", "accepted", "rejected", "key_reused", "unknown", "amended")

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


class Journal:
    def __init__(self, path: Path, clock: Clock = utc_now) -> None:
        self.path = path
        self.clock = clock
        self.db = _open_database(path)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now(self) -> str:
        return self.clock().isoformat()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self.db.atomic():
            yield

    # ---- reading ------------------------------------------------------------------------

    def known_sha256(self) -> set[str]:
        """Every content the journal holds a revision of."""
        return _known_sha256(self.db.conn)

    def facts(self, invoice_id: str, sha256: str) -> dict[str, Any]:
        """What the parser found in one revision."""
        row = self.db.execute(
            "SELECT facts FROM revisions WHERE invoice_id = ? AND sha256 = ?",
            (invoice_id, sha256),
        ).fetchone()
        return dict(json.loads(row[0]))

    def cached_stats(self, paths: list[str]) -> dict[str, CachedStat]:
        """For each of ``paths`` hashed before, the stat and content recorded then."""
        # One query per window of paths, not one per path.
        rows = self.db.conn.execute(
            "SELECT path, size, mtime_ns, ctime_ns, inode, checked_at_ns, sha256, invoice_id"
            " FROM file_stats WHERE path IN (SELECT value FROM json_each(?))",
            (json.dumps(paths),),
        )
        return {row[0]: CachedStat(row[1:6], row[6], row[7]) for row in rows}

    def has_stats_under(self, directory: str) -> bool:
        """Whether a file under ``directory`` (a path as stored) was hashed before."""
        return _has_stats_under(self.db.conn, directory)

    def remember_stats(
        self, entries: Iterable[tuple[str, tuple[int, ...], str, str | None]]
    ) -> None:
        """Record each file's stat as it was hashed: (path, stat, sha256, the content's
        invoice ID or None when not at hand)."""
        self.db.conn.executemany(
            "INSERT OR REPLACE INTO file_stats"
            " (path, size, mtime_ns, ctime_ns, inode, checked_at_ns, sha256, invoice_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(path, *key, sha, invoice_id) for path, key, sha, invoice_id in entries],
        )

    def invoice(self, invoice_id: str) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self.db.execute(
            "SELECT * FROM invoices WHERE invoice_id = ?", (invoice_id,)
        ).fetchone()
        return row

    def invoices(self, state: str | None = None) -> list[sqlite3.Row]:
        sql = "SELECT * FROM invoices"
        params: tuple[str, ...] = ()
        if state is not None:
            sql += " WHERE state = ?"
            params = (state,)
        return list(self.db.execute(sql + " ORDER BY invoice_id", params).fetchall())

    def unidentified_files(self) -> list[sqlite3.Row]:
        return list(self.db.execute("SELECT * FROM unidentified_files ORDER BY path").fetchall())

    def state_counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STATES, 0)
        for state, count in self.db.execute(
            "SELECT state, count(*) FROM invoices GROUP BY state"
        ).fetchall():
            counts[state] = count
        unidentified = self.db.execute("SELECT count(*) FROM unidentified_files").fetchone()
        counts["invalid"] += unidentified[0]
        return counts

    def revisions(self, invoice_id: str) -> list[sqlite3.Row]:
        return list(
            self.db.execute(
                "SELECT * FROM revisions WHERE invoice_id = ? ORDER BY id", (invoice_id,)
            ).fetchall()
        )

    def attempts(self, invoice_id: str) -> list[sqlite3.Row]:
        return list(
            self.db.execute(
                "SELECT * FROM attempts WHERE invoice_id = ? ORDER BY id", (invoice_id,)
            ).fetchall()
        )

    def events(self, invoice_id: str) -> list[sqlite3.Row]:
        return list(
            self.db.execute(
                "SELECT * FROM events WHERE invoice_id = ? ORDER BY id", (invoice_id,)
            ).fetchall()
        )

    def content(self, sha256: str) -> bytes:
        """The exact bytes stored for one revision, checked against their sha256."""
        row = self.db.execute(
            "SELECT codec, data FROM blobs WHERE sha256 = ?", (sha256,)
        ).fetchone()
        if row is None:
            raise JournalError(f"the journal has no stored bytes for content {sha256[:12]}")
        try:
            data = packing.unpack(row[0], bytes(row[1]))
        except (ValueError, RuntimeError) as error:  # lz4 reports a broken frame as either
            raise JournalError(
                f"the journal's stored bytes for content {sha256[:12]} cannot be read back "
                f"({error}); the journal file is damaged"
            ) from None
        if hashlib.sha256(data).hexdigest() != sha256:
            raise JournalError(
                f"the journal's stored bytes for content {sha256[:12]} no longer match their "
                "sha256; the journal file is damaged"
            )
        return data

    # ---- writing ------------------------------------------------------------------------

    def update_invoice(self, invoice_id: str, **values: Any) -> None:
        values["updated_at"] = self.now()
        assignments = ", ".join(f"{column} = :{column}" for column in values)
        self.db.execute(
            f"UPDATE invoices SET {assignments} WHERE invoice_id = :invoice_id",
            {**values, "invoice_id": invoice_id},
        )

    def add_event(
        self, invoice_id: str | None, kind: str, detail: str, run_id: int | None = None
    ) -> None:
        self.db.execute(
            "INSERT INTO events (invoice_id, run_id, at, kind, detail) VALUES (?, ?, ?, ?, ?)",
            (invoice_id, run_id, self.now(), kind, detail),
        )

    # ---- reconcile ----

    def adopt_transaction(
        self,
        invoice_id: str,
        *,
        expected_state: str,
        idempotency_key: str | None,
        transaction_id: str,
        remote_status: str | None,
        checked_at: str,
        accepted_at: str,
        detail: str,
        run_id: int | None = None,
    ) -> bool:
        """Record that ``transaction_id`` is this invoice's send: state ``accepted``, one event.

        Only if the invoice is still in ``expected_state`` under ``idempotency_key`` (what
        reconcile judged); False, and nothing written, when it has moved on since.
        """
        with self.transaction():
            cursor = self.db.execute(
                "UPDATE invoices SET state = 'accepted', reason = NULL, transaction_id = ?,"
                " remote_status = ?, remote_checked_at = ?, accepted_at = ?, updated_at = ?"
                " WHERE invoice_id = ? AND state = ? AND idempotency_key IS ?",
                (transaction_id, remote_status, checked_at, accepted_at, self.now())
                + (invoice_id, expected_state, idempotency_key),
            )
            if cursor.rowcount != 1:
                return False
            self.add_event(invoice_id, "adopted", detail, run_id)
        return True

    def record_remote_status(
        self,
        invoice_id: str,
        *,
        transaction_id: str,
        status: str | None,
        checked_at: str,
        run_id: int | None = None,
    ) -> bool:
        """Record the delivery status GoRoute reports for an accepted invoice's transaction;
        an event when it changed. False when the invoice no longer holds that transaction."""
        with self.transaction():
            row = self.db.execute(
                "SELECT remote_status FROM invoices"
                " WHERE invoice_id = ? AND state = 'accepted' AND transaction_id = ?",
                (invoice_id, transaction_id),
            ).fetchone()
            if row is None:
                return False
            self.db.execute(
                "UPDATE invoices SET remote_status = ?, remote_checked_at = ? WHERE invoice_id = ?",
                (status, checked_at, invoice_id),
            )
            if status != row[0]:
                change = f"{transaction_id}: {row[0] or 'none'} -> {status}"
                self.add_event(invoice_id, "delivery", change, run_id)
        return True


# SQLite's default is 4 KB. A scan stores megabytes of bytes, which WAL mode writes twice (to
# the log, then to the database at each checkpoint), one page per system call: with 16 KB
# pages a first scan of 20,000 invoices spends 0.2 s less CPU committing (0.39 s -> 0.17 s).
# A send's commits touch a few pages each, so they write a few times more bytes, still well
# under a megabyte a second at the API's pace.
_PAGE_SIZE = 16384


def peek_known_sha256(path: Path, directory: str) -> frozenset[str] | None:
    """For a scan of ``directory`` that has not opened the journal yet: every content the
    journal at ``path`` holds, or None when it holds stats for files under ``directory`` (a
    re-scan, where those decide which files to read) or cannot be read this way. Read-only:
    nothing is created, locked or migrated; a journal that does not exist holds nothing."""
    if not path.exists():
        return frozenset()
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        return None if _has_stats_under(conn, directory) else frozenset(_known_sha256(conn))
    except sqlite3.Error:  # not a journal, or one of another schema
        return None
    finally:
        conn.close()


def _known_sha256(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT sha256 FROM revisions")}


def _has_stats_under(conn: sqlite3.Connection, directory: str) -> bool:
    prefix = directory.rstrip("/") + "/"
    # Every path that starts with prefix sorts from prefix up to prefix with '0' for '/'.
    row = conn.execute(
        "SELECT 1 FROM file_stats WHERE path >= ? AND path < ? LIMIT 1",
        (prefix, prefix[:-1] + "0"),
    ).fetchone()
    return row is not None


# How long opening a new journal waits for another process that is setting it up.
_SETUP_WAIT_SECONDS = 10.0


def _set_wal_mode(conn: sqlite3.Connection) -> None:
    """WAL mode, which the first process to open a new journal sets. Switching takes an
    exclusive lock, and SQLite answers "database is locked" at once, without busy_timeout,
    to a process that tries while another switches: two runs opening a new journal at the
    same moment (a cron run and a person) would fail. Retry, briefly."""
    deadline = time.monotonic() + _SETUP_WAIT_SECONDS
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


class Database:
    """The journal's SQLite connection, as sqlite-utils' ``Database`` behaved for it.

    Outside ``atomic`` each statement commits on its own: the connection is in SQLite's own
    autocommit mode and never opens a transaction behind the caller's back. ``atomic`` makes
    a block one transaction, and a block inside another a savepoint.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def execute(
        self, sql: str, parameters: Sequence[Any] | Mapping[str, Any] = ()
    ) -> sqlite3.Cursor:
        return self.conn.execute(sql, parameters)

    @contextmanager
    def atomic(self) -> Iterator[None]:
        if self.conn.in_transaction:
            with self._savepoint():
                yield
            return
        self.conn.execute("BEGIN")
        try:
            yield
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:  # an error may have ended it already
                self.conn.execute("ROLLBACK")
            raise

    @contextmanager
    def _savepoint(self) -> Iterator[None]:
        # SQLite rolls back to and releases the innermost savepoint of a name.
        self.conn.execute("SAVEPOINT nested")
        try:
            yield
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK TO SAVEPOINT nested")
                self.conn.execute("RELEASE SAVEPOINT nested")
            raise
        self.conn.execute("RELEASE SAVEPOINT nested")

    def close(self) -> None:
        self.conn.close()


def _open_database(path: Path) -> Database:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        # Created 0600 before SQLite writes a byte: the journal holds invoices.
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    try:
        conn = sqlite3.connect(path, isolation_level=None)
    except sqlite3.DatabaseError as error:
        raise JournalError(f"cannot open the journal {path}: {error}") from None
    try:
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA busy_timeout = 10000")
        # Takes effect only in a new journal, before WAL mode: see _PAGE_SIZE.
        conn.execute(f"PRAGMA page_size = {_PAGE_SIZE}")
        _set_wal_mode(conn)
        conn.execute("PRAGMA synchronous = FULL")
        bring_up_to_date(conn)
    except sqlite3.DatabaseError as error:
        conn.close()
        raise JournalError(f"cannot open the journal {path}: {error}") from None
    except BaseException:
        conn.close()
        raise
    for suffix in ("-wal", "-shm"):
        sidecar = Path(f"{path}{suffix}")
        if sidecar.exists():
            sidecar.chmod(0o600)
    return Database(conn)

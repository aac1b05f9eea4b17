"""The journal's connection, and what every part of the journal shares.

``Database`` is the only object that holds the connection (opened by ``sqlite_open``, or
``pg_database`` for PostgreSQL). ``JournalBase`` holds it for the journal's parts
(``invoices``, ``sending``, ``scans``), each a mixin over it, assembled into ``Journal``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from invoicectl.errors import JournalError
from invoicectl.journal.chain import Head, append, append_rows, append_values, head
from invoicectl.journal.records import Written


class Database:
    """The journal's SQLite connection, as sqlite-utils' ``Database`` behaved for it.

    Outside ``atomic`` each statement commits on its own: the connection is in SQLite's own
    autocommit mode and never opens a transaction behind the caller's back. ``atomic`` makes
    a block one transaction, and a block inside another a savepoint.
    """

    # What opens a write transaction: the write lock first (``_Atomic``).
    begin: tuple[str, ...] = ("BEGIN IMMEDIATE",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        # The chain's head as the open transaction left it (``JournalBase.chained``): once
        # the transaction has written, no other connection can append until it ends, so the
        # head need not be read again. Forgotten whenever a transaction or savepoint ends
        # other than by a RELEASE.
        self.chain_head: Head | None = None

    def execute(
        self, sql: str, parameters: Sequence[Any] | Mapping[str, Any] = ()
    ) -> sqlite3.Cursor:
        return self.conn.execute(sql, parameters)

    def atomic(self) -> AbstractContextManager[None]:
        return _Atomic(self)

    def close(self) -> None:
        self.conn.close()


class _Atomic:
    """``Database.atomic``: a transaction, or inside one a savepoint. A class rather than a
    generator: a send enters some twenty of these an invoice, and each generator-based
    context manager cost a few microseconds more to enter and leave."""

    __slots__ = ("_db", "_nested")

    def __init__(self, db: Database) -> None:
        self._db = db
        self._nested = False

    def __enter__(self) -> None:
        conn = self._db.conn
        self._nested = conn.in_transaction
        if self._nested:
            conn.execute("SAVEPOINT nested")
        else:
            self._db.chain_head = None
            # The write lock first, waited for (busy_timeout): a transaction that read first
            # and wrote next could not upgrade while another connection wrote, and SQLite
            # answers that "database is locked" at once, without waiting (seen as a first
            # send's begin_run failing while `status` opened the new journal).
            for statement in self._db.begin:
                conn.execute(statement)

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        conn = self._db.conn
        if self._nested:
            # SQLite rolls back to and releases the innermost savepoint of a name.
            if kind is None:
                conn.execute("RELEASE SAVEPOINT nested")
                return
            self._db.chain_head = None
            if conn.in_transaction:
                conn.execute("ROLLBACK TO SAVEPOINT nested")
                conn.execute("RELEASE SAVEPOINT nested")
            return
        try:
            if kind is None:
                try:
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            elif conn.in_transaction:  # an error may have ended it already
                conn.execute("ROLLBACK")
        finally:
            self._db.chain_head = None


Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def _never() -> bool:
    return False


class JournalBase:
    """What every part of the journal holds: where it is, its clock, its connection (opened
    by the backend's class: ``composed.Journal`` for SQLite, ``pg_journal.PgJournal``)."""

    def __init__(self, path: Path, clock: Clock, db: Database) -> None:
        self.path = path
        self.clock = clock
        self.db = db
        self.closed = False
        # Whether the run lock this journal is held under was lost (``RunLock.lost``): set
        # by ``locked_journal`` for a SQLite journal; a send stops taking work when it is.
        self.run_lock_lost: Callable[[], bool] = _never

    def close(self) -> None:
        self.closed = True
        self.db.close()

    def __enter__(self) -> JournalBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now(self) -> str:
        return self.clock().isoformat()

    def transaction(self) -> AbstractContextManager[None]:
        """One SQLite transaction; inside another, a savepoint. ``Database.atomic`` itself,
        not a generator around it: a send enters some twenty of these an invoice."""
        return self.db.atomic()

    def write_batch(self, writes: Sequence[Callable[[], Any]]) -> list[Written]:
        """Every write of ``writes`` in one transaction, so one sync makes them all durable;
        each in a savepoint of its own, so one that raises is undone alone and its exception
        is its result. Raises, with none of them durable, when the transaction cannot commit
        or SQLite ended it (a full disk may roll back the whole transaction)."""
        if self.db.conn.in_transaction:  # a savepoint of it would make nothing durable
            raise JournalError(f"{self.path}: a transaction was left open; nothing was written")
        results: list[Written] = []
        with self.transaction():
            for write in writes:
                try:
                    with self.transaction():
                        value = write()
                except Exception as error:
                    if not self.db.conn.in_transaction:
                        raise
                    results.append(Written(None, error))
                else:
                    results.append(Written(value, None))
        return results

    def savepoints_in_memory(self) -> None:
        """Keep the undo copies of savepoints (SQLite's sub-journals) in memory from now on.

        Every write of a grouped commit runs in a savepoint (``write_batch``), and SQLite
        keeps the pages a savepoint changes in a temporary file: one created, unlinked and
        written (a 16 KB page at a time) per transaction, about 60 system calls an invoice,
        which made a third of the journal's CPU in a send. In memory they cost a copy of the
        few pages each transaction touches. Switching drops this connection's temporary
        tables (a scan's ``temp.scan`` and ``temp.ids``), whose rows a scan has finished
        with; they stay on disk during a scan, where they grow with the outbox."""
        if self.db.conn.in_transaction:
            raise JournalError(f"{self.path}: a transaction was left open; nothing was written")
        self.db.execute("PRAGMA temp_store = MEMORY")

    def add_event(
        self, invoice_id: str | None, kind: str, detail: str, run_id: int | None = None
    ) -> None:
        """An event of the audit trail: an operator decision or a change worth keeping."""
        with self.transaction():
            rows = self.db.execute(
                "INSERT INTO events (invoice_id, run_id, at, kind, detail) VALUES (?, ?, ?, ?, ?)"
                " RETURNING *",
                (invoice_id, run_id, self.now(), kind, detail),
            )
            self.chained_rows("events", [dict(row) for row in rows])

    def chain_head(self) -> tuple[int, str]:
        """(sequence number, hash) of the chain's last event."""
        return head(self.db.conn)

    def chained(self, table: str, keys: list[Any]) -> None:
        """The chain's events for rows of ``table`` just written (``chain.append_rows``):
        every write method calls it (or ``chained_rows``) after its write, inside the same
        transaction, so no caller can change a covered row without its event."""
        self._chain_with(lambda after: append_rows(self.db.conn, table, keys, self.now(), after))

    def chained_rows(self, table: str, rows: list[dict[str, Any]]) -> None:
        """``chained`` for rows the write itself returned whole (``RETURNING *``)."""
        self._chain_with(lambda after: append(self.db.conn, table, rows, self.now(), after))

    def chained_values(self, table: str, names: Sequence[str], rows: list[tuple[Any, ...]]) -> None:
        """``chained_rows`` for rows read as SQLite gives them (a ``SELECT *`` through
        ``plain_cursor``: values in the order of ``names``), which the chain encodes in less
        time than dicts (``chain.append_values``): a scan's many new rows."""
        self._chain_with(
            lambda after: append_values(self.db.conn, table, names, rows, self.now(), after)
        )

    def plain_cursor(self) -> sqlite3.Cursor:
        """A cursor whose rows are tuples, not ``sqlite3.Row``: for rows read by the many."""
        cursor = self.db.conn.cursor()
        cursor.row_factory = None
        return cursor

    def _chain_with(self, appending: Callable[[Head | None], Head]) -> None:
        assert self.db.conn.in_transaction, "chain events are written in their change's transaction"
        self.db.chain_head = appending(self.db.chain_head)

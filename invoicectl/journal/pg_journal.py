"""The journal in a PostgreSQL database: ``Journal``'s every method, on a shared server.

``PgJournal`` is the SQLite ``Journal`` with a PostgreSQL connection under it
(``pg_connection``: the same statements, translated), and its own statements where SQLite's
cannot be translated: a scan's temporary tables (PostgreSQL has no ``rowid`` and keeps
booleans apart from integers), the due dates it reads again, and the SQLite-only settings
(``synchronous``, ``temp_store``). The guarantees are the same: each write commits before
the method returns, a transaction commits whole, the chain is appended in the transaction of
the change, and writers take turns (the write lock every transaction takes first).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, cast

from invoicectl.journal.contents import StoredContents
from invoicectl.journal.database import Clock, utc_now
from invoicectl.journal.due_dates import DueDateRecords
from invoicectl.journal.history import HistoryRecords
from invoicectl.journal.invoices import InvoiceRecords
from invoicectl.journal.monitoring import MonitoringRecords
from invoicectl.journal.pg_connection import PgConnection, network_limits
from invoicectl.journal.pg_database import open_pg_database
from invoicectl.journal.pg_workers import (
    LIVE_RUN,
    NOW,
    check_claim,
    check_not_held,
    claim,
    claimed_elsewhere,
    idle_limit_ms,
    register,
    reserve_slot,
    retire,
)
from invoicectl.journal.records import FACT_COLUMNS, Attempt, Invoice, InvoiceState, LiveClaims
from invoicectl.journal.renumbering import RenumberingRecords
from invoicectl.journal.scans import _COLUMNS, _SAME_STAT, ScanRecords
from invoicectl.journal.sending import SendingRecords
from invoicectl.locations import JournalURL

_SAME = _SAME_STAT.replace("j.value = f.size", "j.value = f.size::text")


class PgStoredContents(StoredContents):
    """``StoredContents`` over PostgreSQL: a scan's forked worker opens its own connection
    (a connection must never cross a fork: both ends would speak on one socket)."""

    def __init__(self, location: JournalURL, conn: PgConnection, unless: Collection[str]) -> None:
        super().__init__(location, conn, unless)  # type: ignore[arg-type]
        self._location = location

    def _connection(self) -> Any:
        if self._conn is None or self._pid != os.getpid():
            import psycopg

            self._pid = os.getpid()
            url = self._location.connection_url()
            self._conn = PgConnection(  # type: ignore[assignment]
                psycopg.connect(url, autocommit=True, **network_limits(url))
            )
        return self._conn

    @property
    def error_kinds(self) -> tuple[type[Exception], ...]:
        import psycopg

        return (psycopg.Error,)


class PgScanRecords(ScanRecords, DueDateRecords):
    """A scan's statements that SQLite's dialect cannot say for PostgreSQL."""

    def stored_contents(self, unless: Collection[str] = frozenset()) -> StoredContents:
        return PgStoredContents(self.path, self.db.conn, unless)  # type: ignore[arg-type]

    def take_unchanged(
        self, prefix: str, found: Mapping[str, str], racy_ns: int, unless: Collection[str] = ()
    ) -> set[str]:
        same, params = _SAME, {"found": json.dumps(found), "racy_ns": racy_ns}
        if unless:
            same += " AND f.sha256 NOT IN (SELECT value FROM json_each(:unless))"
            params["unless"] = json.dumps([*unless])
        cursor = self.db.execute(
            "INSERT INTO temp.scan (invoice_id, sha256, name, path)"
            " SELECT f.invoice_id, f.sha256, substr(f.path, :name_at), f.path"
            " FROM json_each_text(CAST(:found AS json)) AS j"
            f" JOIN file_stats AS f ON f.path = j.key WHERE {same}",
            {**params, "name_at": len(prefix) + 1},
        )
        if cursor.rowcount == len(found):
            return set()
        rows = self.db.execute(
            "SELECT j.key FROM json_each_text(CAST(:found AS json)) AS j WHERE NOT EXISTS"
            f" (SELECT 1 FROM file_stats AS f WHERE f.path = j.key AND {same})",
            params,
        )
        return {path for (path,) in rows}

    def begin_scan(self) -> None:
        columns = ", ".join(f'{name} TEXT COLLATE "C"' for name in FACT_COLUMNS)
        self.db.execute(
            'CREATE TEMP TABLE IF NOT EXISTS scan (invoice_id TEXT COLLATE "C",'
            ' sha256 TEXT COLLATE "C", name TEXT COLLATE "C", path TEXT COLLATE "C",'
            f" reason TEXT, {columns}, rowid BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY)"
        )
        # TRUNCATE: SQLite's DELETE of every row drops the table's pages; PostgreSQL's reads
        # each row (the last scan's, or add_history's, thousands).
        self.db.execute("TRUNCATE pg_temp.scan")

    @contextmanager
    def bulk_writes(self) -> Iterator[None]:
        """As SQLite's: a scan's stores commit without waiting for the disk (the server's
        ``synchronous_commit = off``, which never corrupts; a crash loses only the last
        commits, which the next scan reads again); settling commits as usual."""
        if self.db.conn.in_transaction:
            yield
            return
        self.db.execute("SET synchronous_commit = off")
        try:
            yield
        finally:
            self.db.execute("SET synchronous_commit = on")

    def group_by_id(self) -> None:
        self.db.execute(
            'CREATE TEMP TABLE IF NOT EXISTS ids (invoice_id TEXT COLLATE "C" PRIMARY KEY,'
            " one_content BOOLEAN, scan_row BIGINT, same BOOLEAN, state TEXT)"
        )
        self.db.execute(
            "CREATE OR REPLACE TEMP VIEW fresh AS"
            " SELECT i.invoice_id, s.sha256, s.path, i.scan_row FROM temp.ids i"
            " JOIN temp.scan s ON s.rowid = i.scan_row WHERE i.one_content AND i.same IS NULL"
        )
        self.db.execute("TRUNCATE pg_temp.ids")
        # Autovacuum never analyses a temporary table: without figures the planner reads
        # every invoice to join a scan of three files.
        self.db.execute("ANALYZE pg_temp.scan")
        # An ID in several files stands for its file named first, as SQLite's grouping says.
        self.db.execute(
            "INSERT INTO temp.ids"
            " SELECT g.invoice_id, g.one_content, g.scan_row, g.sha256 = i.current_sha256, i.state"
            " FROM (SELECT DISTINCT ON (invoice_id) invoice_id, rowid AS scan_row,"
            "   min(sha256) OVER w = max(sha256) OVER w AS one_content,"
            "   min(sha256) OVER w AS sha256"
            "   FROM temp.scan WHERE invoice_id IS NOT NULL"
            "   WINDOW w AS (PARTITION BY invoice_id)"
            "   ORDER BY invoice_id, path) g"
            " LEFT JOIN invoices i ON i.invoice_id = g.invoice_id"
        )

    def count_unchanged(self, unless: InvoiceState) -> int:
        (count,) = self.db.execute(
            "SELECT count(*) FROM temp.ids WHERE one_content AND same AND state != ?",
            (unless,),
        ).fetchone()
        return int(count)

    def fill_columns(self, scan_row: int, columns: tuple[str | None, ...]) -> None:
        self.db.execute(
            f"UPDATE temp.scan SET ({_COLUMNS}) = ROW({', '.join('?' * len(columns))})"
            " WHERE rowid = ?",
            (*columns, scan_row),
        )

    _NO_DUE_DATE_IN_FACTS = "(CAST(r.facts AS jsonb) -> 'due_date') IS NULL"

    def _date_revisions(self, invoice_id: str, sha256: str, due_date: str | None) -> list[int]:
        # SQLite's json_set keeps the rest of the text as it was; so does this, in Python.
        rows = self.db.execute(
            "SELECT id, facts FROM revisions WHERE invoice_id = ? AND sha256 = ?",
            (invoice_id, sha256),
        ).fetchall()
        for revision_id, facts in rows:
            updated = {**json.loads(facts), "due_date": due_date}
            self.db.execute(
                "UPDATE revisions SET facts = ? WHERE id = ?",
                (json.dumps(updated, separators=(",", ":"), ensure_ascii=False), revision_id),
            )
        return [revision_id for revision_id, _ in rows]


class WorkerRecords(InvoiceRecords, SendingRecords):
    """The PostgreSQL journal's writes with the claims' rules in them. ``worker_id`` is set
    while this connection's process is a send worker (``become_worker``), else None."""

    worker_id: int | None = None
    # Whether this connection holds the run lock alone (``pg_run_lock`` not shared: scan,
    # validate, the journal commands). Then no send worker runs: each holds the lock shared
    # for its whole run, and the server lets go of a dead one's with its session, however it
    # died. So a lease still unexpired (a worker killed a moment ago) is no live worker's.
    alone: bool = False

    def become_worker(self, run_id: int, lease: float) -> int:
        """Registered as a send worker with ``lease`` seconds (``pg_workers.register``).

        A worker's transactions never wait on anything but the server (no request, no
        sleep inside one), so one idle in a transaction for half a lease is a process that
        was paused (SIGSTOP, a frozen VM) while it held the write lock: the server ends that
        session (``idle_in_transaction_session_timeout``), which rolls it back and lets the
        lock go, before the other workers' heartbeats, which wait for that lock, miss their
        own leases. The paused worker finds its connection gone when it wakes, and stops."""
        self.db.execute(f"SET idle_in_transaction_session_timeout = {idle_limit_ms(lease)}")
        self.worker_id = register(self.db, run_id, lease)
        return self.worker_id

    def retire_worker(self) -> None:
        if self.worker_id is not None:
            retire(self.db, self.worker_id)
            self.worker_id = None

    def claim_invoices(self, candidates: list[str], limit: int) -> list[str]:
        assert self.worker_id is not None
        return claim(self.db, self.worker_id, candidates, limit)

    def claimed_elsewhere(self) -> LiveClaims | None:
        return claimed_elsewhere(self.db, self.worker_id)

    def reserve_slot(self, account: str, interval: float, span: float, rate: int) -> float:
        return reserve_slot(self.db, account, interval, span, rate)

    def begin_attempt(
        self,
        run_id: int,
        invoice_id: str,
        revision_sha256: str,
        idempotency_key: str,
        body_sha256: str,
        started_at: str,
    ) -> int:
        """The write-ahead row, with the guard in its transaction (the module doc)."""
        with self.transaction():
            if self.worker_id is not None:
                check_claim(self.db, self.worker_id, invoice_id)
            return super().begin_attempt(
                run_id, invoice_id, revision_sha256, idempotency_key, body_sha256, started_at
            )

    def save(self, invoice: Invoice, *, was: Invoice, touch: bool = True) -> bool:
        """``save``, refused (``InvoiceBusy``, ``ClaimLost``) while another live worker holds
        the invoice; checked in the write's own transaction."""
        with self.transaction():
            if not self.alone:
                check_not_held(self.db, self.worker_id, invoice.invoice_id)
            return super().save(invoice, was=was, touch=touch)

    def _not_claimed(self, alias: str) -> str:
        if self.alone:
            return ""
        return (
            " AND NOT EXISTS (SELECT 1 FROM claims c JOIN workers w ON w.id = c.worker_id"
            f" WHERE c.invoice_id = {alias}.invoice_id AND w.lease_until > {NOW})"
        )

    def unanswered_attempts(self) -> list[Attempt]:
        """What a dead run left: never an attempt of a live worker's run (it is in flight)."""
        live = "" if self.alone else f" AND NOT {LIVE_RUN}"
        rows = self.db.execute(f"SELECT * FROM attempts WHERE outcome IS NULL{live} ORDER BY id")
        return [Attempt(**dict(row)) for row in rows]


class PgJournal(
    WorkerRecords, PgScanRecords, RenumberingRecords, HistoryRecords, MonitoringRecords
):
    """One open PostgreSQL journal; ``with PgJournal(url) as journal: ...`` closes it. The
    SQLite ``Journal``'s parts (``composed``), over a PostgreSQL connection."""

    def __init__(self, location: JournalURL, clock: Clock = utc_now) -> None:
        super().__init__(location, clock, open_pg_database(location))  # type: ignore[arg-type]

    def __enter__(self) -> PgJournal:
        return self

    def clock_offset(self) -> float:
        """Seconds the server's clock is ahead of this host's (negative: behind), from one round
        trip. Leases and the shared budget use it; a key's window, the host's (``doctor``)."""
        before = time.time()
        (server,) = self.db.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()
        return float(server) - (before + time.time()) / 2

    def invoice_total(self) -> int:
        """The number the server keeps (``pg_database.pg001_invoice_total``): a count(*)
        would read every invoice."""
        (total,) = self.db.execute("SELECT total FROM invoice_total").fetchone()
        return int(total)

    def savepoints_in_memory(self) -> None:
        """PostgreSQL keeps a savepoint's undo in its own memory: nothing to change."""

    def check_underway(self) -> bool:
        """Whether another session holds the check turn (``take_check_turn``), or a check begun
        never recorded its end (its host stopped or gone: the next send's check ends it). Asked
        in a first send's write transaction, whose shared hold on the turn lasts to its commit:
        a check starting meanwhile waits for that attempt row, never reading it as unsent."""
        (free,) = self.db.execute(
            f"SELECT pg_try_advisory_xact_lock_shared({_CHECK_LOCK})"
        ).fetchone()
        return not free or self.unfinished_history_check() is not None


# One run at a time on a PostgreSQL journal, as the SQLite journal's run lock: a session
# advisory lock, which the server lets go when the connection ends, however the process did.
# Send workers take it shared: any number of them at once, and none beside a command that
# must be alone (which takes it exclusive, and is refused while a worker runs).
_RUN_LOCK = 0x1A7C_0002
# The scan a send starts with: one at a time among the workers (waited for, not refused).
_SCAN_LOCK = 0x1A7C_0003
# A first send's history check, with the scan before it: no worker first-sends meanwhile.
_CHECK_LOCK = 0x1A7C_0004


@contextmanager
def pg_run_lock(journal: PgJournal, command: str, *, shared: bool = False) -> Iterator[None]:
    """Held for the block, or ``JournalLocked`` at once naming the holder's command."""
    from invoicectl.errors import JournalLocked

    conn = cast(PgConnection, journal.db.conn)
    kind = "_shared" if shared else ""
    (taken,) = conn.execute(f"SELECT pg_try_advisory_lock{kind}({_RUN_LOCK})").fetchone()
    if not taken:
        who = _holder(conn, _RUN_LOCK) or "another invoicectl run"
        alone = "one run at a time, but for send workers, which share it"
        raise JournalLocked(
            f"the journal {journal.path} is in use by {who}: {alone}; {command}"
            " did nothing. Run again when it has finished"
        )
    journal.alone = not shared
    try:
        yield
    finally:
        journal.alone = False
        if not conn.raw.closed:
            conn.execute(f"SELECT pg_advisory_unlock{kind}({_RUN_LOCK})")


@contextmanager
def pg_scan_turn(journal: PgJournal) -> Iterator[None]:
    """The block while no other worker's scan runs (waited for: scans are short)."""
    conn = cast(PgConnection, journal.db.conn)
    conn.execute(f"SELECT pg_advisory_lock({_SCAN_LOCK})")
    try:
        yield
    finally:
        if not conn.raw.closed:
            conn.execute(f"SELECT pg_advisory_unlock({_SCAN_LOCK})")


# A wait for the check turn is made of waits this long (the session's lock_timeout, 60 s,
# would end one that a check outlasts): between two, the waiter may stop (``take_check_turn``).
_TURN_SLICE = "2s"


def take_check_turn(
    journal: PgJournal, between: Callable[[float, str], None]
) -> Callable[[], None]:
    """The check turn, waited for (another host's check, or the first sends in their write
    transactions); returns what gives it back. The server lets it go when the session ends,
    however the process did, so a check that died stops no other host for long. The wait is
    in slices of ``_TURN_SLICE``, in the server's queue for the lock (first sends arriving
    meanwhile wait behind it); after each, ``between(seconds waited, holder)`` may raise to
    stop waiting (a deadline, a stop signal held by the run, ``TURN_WAIT``)."""
    from psycopg.errors import LockNotAvailable

    conn = cast(PgConnection, journal.db.conn)
    started = time.monotonic()
    (before,) = conn.execute("SHOW lock_timeout").fetchone()
    conn.execute(f"SET lock_timeout = '{_TURN_SLICE}'")
    try:
        while True:
            try:
                conn.execute(f"SELECT pg_advisory_lock({_CHECK_LOCK})")
                break
            except LockNotAvailable:
                holder = _holder(conn, _CHECK_LOCK) or "a session gone since"
                between(time.monotonic() - started, holder)
    finally:
        if not conn.raw.closed:
            conn.execute("SELECT set_config('lock_timeout', ?, false)", (before,))

    def give_back() -> None:
        if not conn.raw.closed:
            conn.execute(f"SELECT pg_advisory_unlock({_CHECK_LOCK})")

    return give_back


def _holder(conn: PgConnection, lock: int) -> str | None:
    """The session holding ``lock``, as ``pg_stat_activity`` names it; None if none does."""
    row = conn.execute(
        "SELECT a.application_name, a.pid FROM pg_locks l JOIN pg_stat_activity a"
        " ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.objid = ? AND l.granted LIMIT 1",
        (lock,),
    ).fetchone()
    return None if row is None else f"{row[0] or 'a session'} (server pid {row[1]})"

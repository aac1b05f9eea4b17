"""The journal: one SQLite file (or a PostgreSQL database) that holds every invoice,
revision, byte, attempt and run.

It is the only place invoicectl keeps state, the only home of SQL, and the reason a crash
loses nothing: WAL mode, ``synchronous=FULL``, and every state change committed before the
program moves on. ``open_journal(location)`` opens (or creates) one, a ``Journal`` for a path
or a ``PgJournal`` for a ``postgresql://`` URL (``invoicectl.locations``), and brings its
schema up to date; its methods take and return typed records (``records``), never rows. The
parts:

    database    the connection: the transaction and savepoint rules, what the parts share
    sqlite_open opening a SQLite file: WAL, synchronous=FULL, its mode, its migrations
    composed    ``Journal``: the parts below assembled over a SQLite connection
    interface   the journal's interface as a Protocol: what every module above it uses
    migrations  the schema, as numbered append-only migrations
    records     the typed records: Invoice, Revision, Attempt, Event, ...
    invoices    reading invoices and their history; ``save``, the lifecycle's one write
    sending     attempts (write-ahead), runs, the environment binding
    scans       what a scan stores, and the grouping it settles from
    packing     how stored bytes are compressed
    runlock     one run at a time: the OS lock beside the journal file
    history     its identity, whether it ever sent to a base URL, its history checks
    failures    a SQLite or system error on the journal as one line: the file, the cause
    monitoring  what the metrics ask: oldest unfinished work, closing key windows, runs
    backup      a consistent copy while a send runs (SQLite's online backup)
    pg_*        the PostgreSQL journal: ``pg_journal`` (the same parts, and what a scan says
                its own way), ``pg_connection`` (a sqlite3-like connection over psycopg),
                ``pg_dialect`` (the parts' statements translated), ``pg_database``
                (opening, migrations, failures as one line)

What each state means and when it may change is not the journal's business but the
lifecycle's (``invoicectl.lifecycle``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Container, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from invoicectl.errors import ExitCode, JournalError
from invoicectl.journal.composed import Journal
from invoicectl.journal.contents import StoredContents, has_stats_under
from invoicectl.journal.database import Clock, utc_now
from invoicectl.journal.failures import explain_os, explain_sqlite
from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.moved import refuse_if_moved
from invoicectl.journal.records import TURN_WAIT
from invoicectl.journal.runlock import RunLock
from invoicectl.journal.sqlite_open import not_regular, refuse_missing, refuse_not_regular
from invoicectl.locations import JournalURL, Location

__all__ = [
    "Clock",
    "Journal",
    "StoredContents",
    "locked_journal",
    "open_journal",
    "opened_journal",
    "peek_stored",
    "refuse_missing",
    "scan_turn",
    "shared_budget",
    "utc_now",
]


def open_journal(location: Location, clock: Clock = utc_now) -> Journal | PgJournal:
    """The journal at ``location``: a SQLite file, or a PostgreSQL database (``pg_journal``,
    imported only then: psycopg is loaded by no command that does not use it)."""
    if isinstance(location, JournalURL):
        from invoicectl.journal.pg_journal import PgJournal

        return PgJournal(location, clock)
    return Journal(location, clock)


@contextmanager
def opened_journal(location: Location, clock: Clock = utc_now) -> Iterator[Journal | PgJournal]:
    """``open_journal`` for the block, closed at its end; a database error in it is one
    ``JournalError`` line naming the journal and the cause (``failures``, ``pg_database``).
    A SQLite journal that is not there is refused, never created (``refuse_missing``)."""
    if isinstance(location, Path):
        refuse_missing(location)
    with _explained(location), open_journal(location, clock) as journal:
        yield journal


@contextmanager
def locked_journal(
    path: Location,
    command: str,
    clock: Clock = utc_now,
    *,
    shared: bool = False,
    create: bool = False,
) -> Iterator[Journal | PgJournal]:
    """The journal, for a command that writes it: one at a time (send, scan, reconcile).

    A SQLite error while it is held, or a system error naming no other file (the run lock's
    own writes name none), is the journal's: one ``JournalError`` line naming it and the
    cause (``failures``). A closed stdout (``BrokenPipeError``) is not the journal's. A
    PostgreSQL journal's run lock is the server's (``pg_journal.pg_run_lock``); ``shared``:
    there, any number of such commands (send workers, reconcile, hold/release/abandon) at
    once, none beside a command that must be alone (scan, validate). A SQLite journal's run
    lock is one run at a time, whatever ``shared`` says."""
    if isinstance(path, JournalURL):
        from invoicectl.journal.pg_journal import PgJournal, pg_run_lock

        with (
            _explained(path),
            PgJournal(path, clock) as opened,
            pg_run_lock(opened, command, shared=shared),
        ):
            yield opened
        return
    if not create:
        refuse_missing(path)
    refuse_not_regular(path)  # before its lock file is made beside it
    with _explained(path), RunLock(path, command=command) as lock:
        refuse_if_moved(path, command)
        with Journal(path, clock) as journal:
            journal.run_lock_lost = lock.lost
            yield journal


def shared_budget(journal: JournalBackend, account: str | None) -> Callable[..., float] | None:
    """The API account's request slots, shared by every process on a PostgreSQL journal
    (``pg_workers.reserve_slot``; ``goroute.limiter``'s ``permits``); None on SQLite, where
    one run at a time keeps the account's budget in its own limiter."""
    if isinstance(journal, Journal) or account is None:
        return None
    return partial(cast(Any, journal).reserve_slot, account)


@contextmanager
def scan_turn(journal: JournalBackend) -> Iterator[None]:
    """The block while no other send worker scans (a PostgreSQL journal); a SQLite journal's
    run lock already makes its one run the only one."""
    if isinstance(journal, Journal):
        yield
        return
    from invoicectl.journal.pg_journal import PgJournal, pg_scan_turn

    with pg_scan_turn(cast(PgJournal, journal)):
        yield


class CheckTurnBusy(JournalError):
    """Another host's history check held the turn past this send's wait: nothing was sent;
    exit 75, as for any deadline, the next run continues."""

    exit_code = ExitCode.INCOMPLETE


class CheckTurn:
    """A send's history check (``send/history.py``) on a journal several hosts send from,
    held from before the scan whose invoices it will check to the check's end: while one
    host holds it, no other first-sends an invoice (``lifecycle.evidence``), which it might
    be about to find at GoRoute. A SQLite journal's run lock makes its one run the only one,
    and this does nothing there.

    The wait for it ends with the run's deadline (``left``: seconds, None for none), after
    ``TURN_WAIT``, or when ``stop`` raises (a stop signal the run holds, between two tries);
    one it does not hold interrupts the wait where it is, as it does the scan."""

    def __init__(
        self,
        journal: JournalBackend,
        *,
        left: Callable[[], float | None] = lambda: None,
        stop: Callable[[], None] = lambda: None,
    ) -> None:
        self.journal = journal
        self.left = left
        self.stop = stop
        self._give_back: Callable[[], None] | None = None

    def take(self) -> None:
        """Wait for the turn and hold it, until ``give_back`` (nothing on SQLite)."""
        if self._give_back is None and not isinstance(self.journal, Journal):
            from invoicectl.journal.pg_journal import PgJournal, take_check_turn

            self._give_back = take_check_turn(cast(PgJournal, self.journal), self._between)

    def _between(self, waited: float, holder: str) -> None:
        self.stop()
        left = self.left()
        if waited < TURN_WAIT and (left is None or left > 0):
            return
        past = "past this send's --deadline" if waited < TURN_WAIT else f"for {waited:.0f} s"
        raise CheckTurnBusy(
            f"the check turn of the journal {self.journal.path} is held by {holder}, another "
            f"host's history check, {past}: this send waited for it and sent nothing; the "
            "next run continues"
        )

    def give_back(self) -> None:
        give_back, self._give_back = self._give_back, None
        if give_back is not None:
            give_back()


@contextmanager
def _explained(location: Location) -> Iterator[None]:
    if isinstance(location, JournalURL):
        import psycopg

        from invoicectl.journal.pg_database import pg_failure

        try:
            yield
        except psycopg.Error as error:  # opening says its own: this came once it was open
            failure = pg_failure(error, location)
            raise type(failure)(_noted(str(failure), error)) from None
        return
    try:
        yield
    except sqlite3.DatabaseError as error:
        raise JournalError(_noted(explain_sqlite(error, location), error)) from None
    except OSError as error:
        if isinstance(error, BrokenPipeError) or error.filename:
            raise
        raise JournalError(_noted(explain_os(error, location), error)) from None


def _noted(line: str, error: BaseException) -> str:
    """``line`` and what the command added to the error on its way up (a send's requests)."""
    return "; ".join([line, *getattr(error, "__notes__", ())])


def peek_stored(path: Path, directory: str) -> Container[str] | None:
    """For a scan of ``directory`` that has not opened the journal yet: the contents the
    journal at ``path`` holds (``StoredContents``, asked one sha256 at a time), or None when
    it holds stats for files under ``directory`` (a re-scan, where those decide which files
    to read) or cannot be read this way. Read-only: nothing is created, locked or migrated;
    a journal that does not exist holds nothing."""
    if not path.exists():
        return frozenset()
    if not_regular(path):  # a FIFO would block here; opening the journal says what it is
        return None
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        if has_stats_under(conn, directory):
            return None
        conn.execute("SELECT 1 FROM revisions LIMIT 1").fetchall()
    except sqlite3.Error:  # not a journal, or one of another schema
        return None
    finally:
        conn.close()
    # Its connection opens at its first question, in the worker that asks (not this process).
    return StoredContents(path)


if TYPE_CHECKING:  # each journal is a JournalBackend; mypy checks it here
    from invoicectl.journal.pg_journal import PgJournal

    _backend: type[JournalBackend] = Journal
    _pg_backend: type[JournalBackend] = PgJournal

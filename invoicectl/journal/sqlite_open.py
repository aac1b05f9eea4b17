"""Opening a SQLite journal: WAL mode, ``synchronous=FULL`` and a busy timeout; the file
created 0600 before SQLite writes a byte; the schema brought up to date (``migrations``) on
every open."""

from __future__ import annotations

import functools
import os
import sqlite3
import stat
import time
from pathlib import Path

from invoicectl.errors import JournalError
from invoicectl.journal.chain import head_is_whole, head_links
from invoicectl.journal.database import Database
from invoicectl.journal.failures import (
    explain_empty,
    explain_missing,
    explain_os,
    explain_sqlite,
)
from invoicectl.journal.migrations import NewerJournal, bring_up_to_date, refuse_foreign
from invoicectl.journal.shape import SHAPE_DIGEST, missing_schema, refuse_lacking, shape_digest

# SQLite's default is 4 KB. A scan stores megabytes of bytes, which WAL mode writes twice (to
# the log, then to the database at each checkpoint), one page per system call: with 16 KB
# pages a first scan of 20,000 invoices spends 0.2 s less CPU committing (0.39 s -> 0.17 s).
# A send's commits touch a few pages each, so they write a few times more bytes, still well
# under a megabyte a second at the API's pace.
_PAGE_SIZE = 16384


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


def not_regular(path: Path) -> str | None:
    """What ``path`` is when it is there but not a regular file (a link is followed): "a
    directory", "a FIFO (named pipe)", ...; None for a regular file, for nothing there, or
    for what cannot be looked at (opening it says why). SQLite opening a FIFO blocks until
    a writer comes, forever; a directory or a device reads as "disk I/O error"."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a file"


def refuse_not_regular(path: Path) -> None:
    """``JournalError`` when the journal's path is there but not a regular file, or is one
    of several names (hard links) of one file."""
    kind = not_regular(path)
    if kind is not None:
        raise JournalError(
            f"the journal {path} is not a regular file but {kind}: nothing was read or "
            "changed; name the journal's file with --journal or INVOICECTL_JOURNAL"
        )
    if (several := several_names(path)) is not None:
        raise JournalError(
            f"the journal {path} is {several}; nothing was read or changed. Keep one name "
            "(remove the others; a symbolic link is fine)"
        )


def several_names(path: Path) -> str | None:
    """What is wrong with ``path`` when its file has other names (hard links); else None.
    SQLite keeps a -wal, and invoicectl a run lock, per name: two runs through two names
    would both run, each writing its own log over the other's records."""
    try:
        names = path.stat().st_nlink
    except OSError:
        return None
    if names < 2:
        return None
    return (
        f"one of {names} names (hard links) of the same file: SQLite keeps a write-ahead log "
        "and invoicectl a run lock for each name, so two runs through two names would lose "
        "each other's records"
    )


def refuse_missing(path: Path) -> None:
    """For a command that only reads the journal or decides on what it holds (status, show,
    hold, reconcile, doctor, ...): a journal that is not there is one ``JournalError`` line,
    and nothing is created. A new, empty journal would report "nothing needs attention"
    for a path mistyped, unmounted or lost; only a scan or send (which take an outbox)
    makes one. An empty file (0 bytes) is refused the same way: set up, it too would be a new
    journal that reports nothing, where a journal was cut to nothing or never set up."""
    try:
        size = path.stat().st_size
    except (FileNotFoundError, NotADirectoryError):
        raise JournalError(explain_missing(path)) from None
    except OSError as error:
        raise JournalError(explain_os(error, path)) from None
    refuse_not_regular(path)
    if size == 0:
        raise JournalError(explain_empty(path))


def open_database(path: Path) -> Database:
    """The journal at ``path``, created if need be; a failure is one ``JournalError`` line
    naming the file and its cause (``failures``)."""
    refuse_not_regular(path)
    refuse_foreign_log(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not path.exists():
            # Created 0600 before SQLite writes a byte: the journal holds invoices.
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    except OSError as error:
        raise JournalError(explain_os(error, path)) from None
    try:
        # By its absolute path: SQLite takes ":memory:" (and "") for a database in memory,
        # which no run keeps; the journal is the file just made, whatever its name.
        conn = sqlite3.connect(path.absolute(), isolation_level=None)
    except sqlite3.DatabaseError as error:
        raise JournalError(explain_sqlite(error, path)) from None
    try:
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA busy_timeout = 10000")
        # Takes effect only in a new journal, before WAL mode: see _PAGE_SIZE.
        conn.execute(f"PRAGMA page_size = {_PAGE_SIZE}")
        refuse_foreign(conn)  # before WAL mode is set: another program's file stays as it is
        _set_wal_mode(conn)
        conn.execute("PRAGMA synchronous = FULL")
        bring_up_to_date(conn)
        refuse_lacking(lacking_schema(conn), path)
        if not head_is_whole(conn):
            raise JournalError(
                f"the journal {path} is damaged: the last event of its hash chain is "
                "unreadable (the file cut short or overwritten?); nothing was changed. "
                "`invoicectl verify` shows the damage; restore the journal from a backup"
            )
    except sqlite3.DatabaseError as error:
        conn.close()
        raise JournalError(explain_sqlite(error, path)) from None
    except NewerJournal as newer:
        conn.close()
        raise newer.at(path) from None
    except BaseException:
        conn.close()
        raise
    for suffix in ("-wal", "-shm"):
        sidecar = Path(f"{path}{suffix}")
        if sidecar.exists():
            sidecar.chmod(0o600)
    return Database(conn)


# A write-ahead log no longer than its header holds no frame: nothing to read with the journal.
_WAL_HEADER_BYTES = 32


def refuse_foreign_log(path: Path) -> None:
    """A write-ahead log beside the journal is read as part of it, and the last connection
    to close writes it into the journal for good. A log of another journal, or of another
    copy of this one (moved or restored beside it), would leave a mix of both files. So a
    log with frames is first read with the journal read-only (a read-only connection never
    writes the log into the journal), and a journal it shows damaged is refused as found.
    What cannot be read that way (locked, unreadable) is left for the open to explain. The
    log is the one beside the file a symbolic link leads to, where SQLite looks for it."""
    try:
        journal = path.resolve()
        if Path(f"{journal}-wal").stat().st_size <= _WAL_HEADER_BYTES:
            return
        reader = sqlite3.connect(f"{journal.as_uri()}?mode=ro", uri=True)
    except (OSError, sqlite3.Error):
        return
    try:
        whole = head_is_whole(reader) and head_links(reader)
    except sqlite3.OperationalError:  # no chain yet (an old journal), locked, unreadable
        return
    except sqlite3.DatabaseError:  # "database disk image is malformed"
        whole = False
    finally:
        reader.close()
    if not whole:
        raise JournalError(
            f"the journal {path} reads as damaged with the write-ahead log {journal}-wal "
            "beside it (a log of another journal or copy, moved or restored beside it?); "
            "nothing was changed, and the log was not written into the journal. If the log "
            f"is not this journal's, move it and {journal.name}-shm away; else restore the "
            "journal from a backup"
        )


@functools.cache
def lacking_schema(conn: sqlite3.Connection) -> list[str]:
    """What of this version's schema the journal on ``conn`` (brought up to date) lacks: its
    shape read in one query, and the reference built only for a journal that differs (a
    table or column dropped, or added)."""
    if shape_digest(conn) == SHAPE_DIGEST:
        return []
    return missing_schema(conn, reference_schema())


def reference_schema() -> sqlite3.Connection:
    """A journal of this version's schema, in memory: made once, by the migrations."""
    reference = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    bring_up_to_date(reference)
    return reference

"""A consistent copy of the journal, safe beside a running send: ``invoicectl backup DEST``.

Copying the file with ``cp`` while a send runs can copy a database without the commits still
in its -wal, or a page torn mid-write. SQLite's online backup API (``Connection.backup``)
copies what one read transaction sees, in one step: in WAL mode a reader never blocks the
writer (a send goes on committing while the copy is made) and the copy is every commit made
before it began, whole. It is written to a temporary file beside DEST (0600: the journal
holds invoices), switched to a single self-contained file (rollback journal mode, no -wal),
checked with ``PRAGMA integrity_check``, fsynced, and renamed over DEST, then the directory
is fsynced: DEST is the old copy or the new one, never half of one. The run lock is not
taken: the copy needs none, and a cron backup must not fail because a send is running.

To restore: stop the cron job, copy DEST to the journal's path (with no -wal or -shm beside
it), start again. The outbox marker (``send/marker.py``) then tells the next send that the
journal lost the runs after the backup, and that send checks GoRoute before sending.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from contextlib import suppress
from dataclasses import dataclass
from glob import escape as glob_escape
from pathlib import Path

from invoicectl.errors import JournalError
from invoicectl.journal.health import lacking
from invoicectl.journal.runlock import alive
from invoicectl.journal.sqlite_open import refuse_missing

# How long the copy waits for a writer that holds SQLite's locks (a checkpoint, a migration).
_BUSY_TIMEOUT_MS = 10_000


@dataclass(frozen=True)
class BackupResult:
    source: Path
    destination: Path
    size: int  # bytes
    invoices: int
    runs: int

    def line(self) -> str:
        return (
            f"backed up the journal {self.source} to {self.destination}: {self.size} bytes, "
            f"{self.invoices} invoices, {self.runs} runs, integrity ok"
        )


def backup(source: Path, destination: Path) -> BackupResult:
    """Copy the journal at ``source`` to ``destination`` atomically; check the copy."""
    refuse_missing(source)
    destination = destination.absolute()
    if destination.is_dir():
        raise JournalError(f"the backup destination {destination} is a directory; name a file")
    if not destination.parent.is_dir():
        raise JournalError(
            f"the backup destination's directory {destination.parent} does not exist"
        )
    if destination.resolve() == source.resolve():
        raise JournalError(f"the backup destination {destination} is the journal itself")
    for suffix in ("-wal", "-shm"):
        if Path(f"{destination}{suffix}").exists():
            raise JournalError(
                f"{destination}{suffix} exists: {destination} is open as a database somewhere; "
                "back up to another path"
            )
    temporary = destination.with_name(f".{destination.name}.{os.getpid()}.tmp")
    replaced = False
    try:
        _clear_leftovers(destination)
        _copy(source, temporary)
        invoices, runs = _check(temporary)
        _fsync(temporary)
        os.replace(temporary, destination)
        replaced = True
        _fsync_directory(destination.parent)
    except sqlite3.DatabaseError as error:
        raise JournalError(
            f"cannot back up the journal {source} to {destination}: {error}"
        ) from None
    except OSError as error:
        # The journal is only read (SQLite's errors on it are the DatabaseError above): a
        # system error here is DEST's, and the advice is about DEST, not --journal.
        raise JournalError(_unwritable(destination, error, replaced)) from None
    finally:
        for leftover in (temporary, Path(f"{temporary}-journal")):
            # On a read-only or vanished DEST this fails too; the next backup clears it.
            with suppress(OSError):
                leftover.unlink(missing_ok=True)
    return BackupResult(source, destination, destination.stat().st_size, invoices, runs)


def _unwritable(destination: Path, error: OSError, replaced: bool) -> str:
    """One line for a backup DEST the system refused: DEST, the system's words, and what a
    person does about it (another destination, most often)."""
    advice = {
        errno.EROFS: "back up to a file on a writable file system, or remount this one read-write",
        errno.ENOSPC: "free space there, or back up to another file system",
        errno.EDQUOT: "free space, or back up to another file system",
        errno.EACCES: f"this user may not write in {destination.parent}: back up to a "
        "directory it can write to, or change that one's owner or mode",
        errno.EPERM: f"this user may not write in {destination.parent} (immutable? see "
        "`lsattr`): back up to a directory it can write to",
    }.get(error.errno or 0, "back up to another destination, or fix this one")
    outcome = (
        f"the copy is at {destination}, but its directory could not be synced"
        if replaced
        else "no backup was made (what was there is as it was); the journal is untouched"
    )
    return (
        f"cannot write the backup to {destination}: {error.strerror or error}; {advice}; {outcome}"
    )


def _clear_leftovers(destination: Path) -> None:
    """Remove the temporary copies that backups to ``destination`` killed half way left
    (each a journal's size), but those of a backup still running."""
    for leftover in destination.parent.glob(f".{glob_escape(destination.name)}.*.tmp*"):
        pid = leftover.name[len(destination.name) + 2 :].split(".", 1)[0]
        if pid.isascii() and pid.isdigit() and not alive(int(pid)):
            leftover.unlink(missing_ok=True)


def _copy(source: Path, temporary: Path) -> None:
    # Read-only: a backup must not create, migrate or write the journal it copies.
    reader = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)
    try:
        reader.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        os.close(os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        writer = sqlite3.connect(temporary, isolation_level=None)
        try:
            reader.backup(writer)  # every page in one step: one read transaction, one snapshot
            # One self-contained file: no -wal beside the copy for a later open to miss.
            writer.execute("PRAGMA journal_mode = DELETE")
        finally:
            writer.close()
    finally:
        reader.close()


def _check(path: Path) -> tuple[int, int]:
    """(invoices, runs) in the copy, after ``PRAGMA integrity_check`` says ok and it holds
    every table and column of this version's schema."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        problems = [row[0] for row in conn.execute("PRAGMA integrity_check")]
        if problems != ["ok"]:
            raise sqlite3.DatabaseError(f"the copy fails its integrity check: {problems[0]}")
        # Renamed over last night's good copy, a copy no invoicectl could use would be a loss.
        if missing := lacking(conn):
            raise sqlite3.DatabaseError(
                f"the journal is damaged: its schema lacks {', '.join(missing)}; the backup "
                "there was left as it was; `invoicectl verify` shows what else differs"
            )
        invoices = conn.execute("SELECT count(*) FROM invoices").fetchone()[0]
        runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
        return int(invoices), int(runs)
    finally:
        conn.close()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

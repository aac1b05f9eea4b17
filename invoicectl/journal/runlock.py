"""One run at a time on a journal: an exclusive OS lock, and who holds it.

``RunLock(journal)`` takes ``flock(LOCK_EX | LOCK_NB)`` on ``<journal>.lock`` (created 0600
beside the journal) or raises ``JournalLocked`` at once, naming the holder. The kernel owns
the lock, not the file: it goes away with the process that held it, however that process
ended (exit, crash, SIGKILL), so a lock left by a dead process is no lock, with no stale-lock
heuristics. The file only *describes* the holder: pid, host, start time and command, written
as JSON after the lock is taken and cleared when it is released. A killed holder leaves its
description behind; nothing reads it except to explain a refusal while the lock is held.

Limits: the lock belongs to the open file description, so a child made by ``fork()`` shares
it until it exits (``exec`` does not: the descriptor is close-on-exec). On NFS, Linux maps
``flock`` onto POSIX record locks; a journal on a network share is not a supported setup.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import stat
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from invoicectl.errors import JournalError, JournalLocked

# The winner writes its description just after taking the lock; a loser reading in between
# sees an empty file. A short wait covers that window without ever blocking a real run.
_HOLDER_READ_TRIES = 5
_HOLDER_READ_PAUSE = 0.02
# How often taking the lock is tried again when its file is replaced as it is taken.
_LOCK_TRIES = 3


@dataclass(frozen=True)
class LockHolder:
    pid: int
    host: str
    started_at: str  # ISO 8601 UTC, e.g. 2026-11-29T09:40:12Z
    command: str

    @classmethod
    def this_process(cls, command: str, now: datetime) -> LockHolder:
        started_at = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return cls(os.getpid(), socket.gethostname(), started_at, command)

    def describe(self) -> str:
        return f"pid {self.pid} on host {self.host}, since {self.started_at}"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> LockHolder | None:
        """The holder described by ``text``, or None if it is empty or not a description."""
        try:
            data = json.loads(text)
            return cls(
                pid=int(data["pid"]),
                host=str(data["host"]),
                started_at=str(data["started_at"]),
                command=str(data["command"]),
            )
        except (ValueError, TypeError, KeyError):
            return None


def lock_path_for(journal_path: Path) -> Path:
    """Where the lock of ``journal_path`` lives: beside the real file, ``<journal>.lock``.

    Resolved first, so a journal reached through a symbolic link has the same lock. Links
    that loop are one ``JournalError`` line.
    """
    try:
        real = journal_path.resolve()
    except (RuntimeError, OSError) as error:  # Python 3.11 says RuntimeError for a loop
        raise JournalError(
            f"cannot use the journal {journal_path}: its symbolic links loop or cannot be "
            f"followed ({error}); name the journal's file with --journal or INVOICECTL_JOURNAL"
        ) from None
    return real.with_name(real.name + ".lock")


def _utc_now() -> datetime:
    return datetime.now(UTC)


class RunLock:
    """Context manager: hold the journal's run lock for the duration of the ``with``."""

    def __init__(
        self,
        journal_path: Path,
        command: str = "send",
        *,
        now: Callable[[], datetime] = _utc_now,
    ) -> None:
        self.journal_path = journal_path
        self.path = lock_path_for(journal_path)
        self.command = command
        self._now = now
        self._fd: int | None = None
        self._directory: int | None = None  # the lock's directory, open: see ``lost``
        self.holder: LockHolder | None = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def acquire(self) -> LockHolder:
        """Take the lock now or raise ``JournalLocked``; returns this run's description."""
        if self._fd is not None:
            raise RuntimeError(f"{self.path} is already locked by this RunLock")
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        for _ in range(_LOCK_TRIES):
            fd = _open_lock_file(self.path, os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = read_holder(fd)
                os.close(fd)
                pings = holder is not None and holder.command in ("send", "reconcile")
                raise JournalLocked(self._refusal(holder), holder_pings=pings) from None
            except BaseException:
                os.close(fd)
                raise
            if _still_named(self.path, fd):
                break
            # Removed or replaced between the open and the lock (a person, or a clean-up):
            # a lock on a file the name no longer reaches keeps no other run out.
            os.close(fd)
        else:
            raise JournalError(
                f"cannot lock the journal {self.journal_path}: its lock file {self.path} "
                f"was removed or replaced {_LOCK_TRIES} times while being locked"
            )
        self._fd = fd
        try:
            self._directory = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:  # then ``lost`` looks the name up by the path
            self._directory = None
        self.holder = LockHolder.this_process(self.command, self._now())
        write_holder(fd, self.holder)
        return self.holder

    def lost(self) -> bool:
        """Whether the lock file was removed or replaced since it was locked (a person, or a
        clean-up of old files): another run may then lock a new one and run beside this. The
        name is looked up in the directory the lock was taken in, held open, so a directory
        renamed on the way (the lock still there, and found through the new name by any
        other run) is no lost lock (helper-84)."""
        if self._fd is None:
            return False
        if self._directory is None:
            return not _still_named(self.path, self._fd)
        return not _still_named(self.path.name, self._fd, self._directory)

    def release(self) -> None:
        """Clear the description and drop the lock (closing the descriptor drops it)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        if self._directory is not None:
            os.close(self._directory)
            self._directory = None
        try:
            # Cleared first, while still ours: a clean exit leaves no description behind.
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)
            self.holder = None

    def _refusal(self, holder: LockHolder | None) -> str:
        # What was refused did nothing (the lock comes first): said, with when to run it
        # again (helper-106: `hold` beside cron's send said only who held the journal).
        again = f"; {self.command} did nothing: run it again once that run has finished"
        if holder is None:
            return f"another invoicectl run holds the journal {self.journal_path}{again}"
        return (
            f"another invoicectl {holder.command} holds the journal {self.journal_path} "
            f"({holder.describe()}){again}"
        )


@dataclass(frozen=True)
class LockState:
    """The run lock as ``invoicectl doctor`` sees it: held or free, and by whom."""

    held: bool
    holder: LockHolder | None = None  # the holder's description, when it has written one


def lock_state(journal_path: Path) -> LockState:
    """Whether a run holds ``journal_path``'s lock now, and who, without taking it where
    the kernel can tell (Linux's ``/proc/locks``): looking must never make a cron run that
    starts at that instant exit 6. Elsewhere, a shared lock tried for an instant answers."""
    try:
        fd = _open_lock_file(lock_path_for(journal_path), os.O_RDONLY)
    except FileNotFoundError:  # no run ever took it
        return LockState(held=False)
    try:
        held = _held_per_kernel(os.fstat(fd))
        if held is None:
            held = _held_per_probe(fd)
        return LockState(held=True, holder=read_holder(fd)) if held else LockState(held=False)
    finally:
        os.close(fd)


def send_elsewhere(journal_path: Path) -> LockHolder | None:
    """The ``send`` of another process that holds ``journal_path``'s run lock now (``status``
    beside cron's send), never taking it; None when none does, or this process holds it, or
    the lock cannot be looked at (a look must never fail the command that asks)."""
    try:
        state = lock_state(journal_path)
    except (OSError, JournalError):
        return None
    holder = state.holder
    if not state.held or holder is None or holder.command != "send":
        return None
    if holder.host == socket.gethostname() and (holder.pid == os.getpid() or not alive(holder.pid)):
        # This process; or a description left by a send gone, read while something else
        # holds the lock (another command, before it writes its own: helper-105).
        return None
    return holder


def alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this host (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: it runs
        pass
    return True


def _open_lock_file(path: Path, flags: int) -> int:
    """The lock file opened (made 0600 with ``O_CREAT``): never a link's target, never
    waiting on a FIFO (``O_NONBLOCK``); anything but a regular file is one line."""
    extra = os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags | extra, 0o600)
    except OSError as error:
        if error.errno not in (errno.ELOOP, errno.ENXIO):  # the caller says what else it is
            raise
        raise _not_a_lock_file(path) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _not_a_lock_file(path)
    return fd


def _not_a_lock_file(path: Path) -> JournalError:
    return JournalError(
        f"the journal's lock file {path} is not a regular file (a link, a FIFO, a device); "
        "remove it (a run makes it again)"
    )


def _still_named(path: Path | str, fd: int, directory: int | None = None) -> bool:
    """Whether ``path`` (in the open ``directory``, when given) still names the file open as
    ``fd``, and that file still has a name at all."""
    try:
        named = os.stat(path, dir_fd=directory, follow_symlinks=False)
    except OSError:
        return False
    held = os.fstat(fd)
    return held.st_nlink > 0 and (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def _held_per_kernel(info: os.stat_result) -> bool | None:
    """Whether ``/proc/locks`` lists a flock on this file (device and inode); None when
    there is no such list to read."""
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as listed:
            lines = listed.readlines()
    except OSError:
        return None
    wanted = (os.major(info.st_dev), os.minor(info.st_dev), info.st_ino)
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 4242 fe:00:2146374 0 EOF"; a waiter's line has "->".
        if len(fields) < 6 or fields[1] != "FLOCK":
            continue
        major, minor, inode = (fields[5].split(":") + ["", "", ""])[:3]
        try:
            if (int(major, 16), int(minor, 16), int(inode)) == wanted:
                return True
        except ValueError:
            continue
    return False


def _held_per_probe(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def write_holder(fd: int, holder: LockHolder) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, (holder.to_json() + "\n").encode(), 0)


def read_holder(fd: int) -> LockHolder | None:
    for attempt in range(_HOLDER_READ_TRIES):
        holder = LockHolder.from_json(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
        if holder is not None:
            return holder
        if attempt + 1 < _HOLDER_READ_TRIES:
            time.sleep(_HOLDER_READ_PAUSE)
    return None

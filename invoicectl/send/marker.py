"""The outbox's own memory of who last sent from it: ``OUTBOX/.invoicectl-journal``.

A journal can be lost (its file truncated, its directory removed) or rolled back (its -wal
deleted, an older backup restored) and a new or older one made in its place says nothing of
the sends it forgot. The outbox outlives it, so each send leaves a small JSON marker there
before its first request: per base URL, the journal's random id (``Journal.identity``), its
path, and the run (id and start time) that is about to send. The next send to that base URL
compares: another journal id, or this journal without that run, means history was lost
(``send/history.py``). A try of ``--sandbox`` on the same outbox keeps its own entry. The
journal keeps one of its own beside it too (``journal_marker``), for the runs that sent
other outboxes' invoices.

The marker is a hint for detection and for a clear message, never the safety itself: a
journal with no history is checked whether or not a marker is there. It is written
atomically (a temporary file, fsync, rename, fsync of the directory), so a crash leaves the
old marker or the new one. Its name does not end in ``.xml``, so no scan reads it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from invoicectl.flocks import flock_within

MARKER_NAME = ".invoicectl-journal"
_TURN_WAIT = 5.0  # seconds a marker's writer waits for another's turn


@dataclass(frozen=True)
class Marker:
    journal_id: str
    journal: str  # the journal's path, as the run that wrote the marker saw it
    base_url: str  # the entry's key: the base URL, with the profile's name when there is one
    run_id: int
    run_started_at: str
    host: str = ""
    # The last attempt of the run the journal had made durable when this was written (the
    # marker is written again as the run goes, ``MarkerKeeper``); None before the first.
    attempts_through: int | None = None

    def describe(self) -> str:
        started = self.run_started_at
        return f"journal {self.journal_id[:12]} at {self.journal}, run {self.run_id} at {started}"


def marker_entry(base_url: str, profile: str | None) -> str:
    """The key of a run's entry: its base URL, and its profile's name when it has one
    (`send --all-profiles` sends from one outbox to one base URL through several accounts'
    journals, and each is not the others')."""
    return base_url if profile is None else f"{base_url} (profile {profile})"


def marker_path(outbox: Path) -> Path:
    return outbox / MARKER_NAME


def journal_marker(journal: Path | object) -> tuple[Path, ...]:
    """The journal's own marker, beside a SQLite journal (``journal.db.marker``), as a 1-tuple;
    for a PostgreSQL journal this host's marker of it (``postgresql_marker``). Every send
    writes it, whatever outbox it sends from: the
    journal sends every outbox's pending invoices, so a run that sent another outbox's and was
    then lost to an older backup restored over the journal file is in no marker of the outbox
    sent next (helper-92). It lives as long as the journal's directory, the outbox's as long
    as the outbox: each tells what the other cannot. Beside the journal's real path, as its run
    lock is (helper-94: two links to one journal kept a marker each), and beside the link too
    when it is one."""
    if not isinstance(journal, Path):
        return postgresql_marker(str(journal))
    named, real = journal, Path(os.path.realpath(journal))
    # Beside its real path (one marker whatever link names it) and beside the name given: a
    # link pointed at a restored copy (helper-100) leaves the marker of the runs it lost there.
    return tuple(dict.fromkeys(path.with_name(path.name + ".marker") for path in (real, named)))


def postgresql_marker(url: str) -> tuple[Path, ...]:
    """A PostgreSQL journal's marker on this host, named by a digest of its URL without the
    password (``url``, as ``str(JournalURL)`` gives it) in the user's state directory, made
    there 0700: a database restored from an older dump has no file beside it, and each host
    that sends from it keeps one of its own runs. () where no state directory can be told."""
    try:
        state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    except (RuntimeError, KeyError):  # no HOME and no passwd entry
        return ()
    directory = state / "invoicectl" / "postgresql-markers"
    with contextlib.suppress(OSError):  # else the write says why, once
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    return (directory / f"{hashlib.sha256(url.encode()).hexdigest()[:32]}.marker",)


def read_marker(path: Path, base_url: str) -> tuple[Marker | None, str | None]:
    """(the marker of the last send to ``base_url`` in the marker file ``path``, None),
    (None, None) when there is none, or (None, why the file is unusable)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError) as error:
        return None, f"cannot read the marker {path} ({_cause(error)}); it is ignored"
    sends = _sends(text)
    if sends is None:
        return None, f"the marker {path} is not one invoicectl wrote; it is ignored"
    data = sends.get(base_url)
    if data is None:
        return None, None
    try:
        return (
            Marker(
                journal_id=str(data["journal_id"]),
                journal=str(data["journal"]),
                base_url=base_url,
                run_id=int(data["run_id"]),
                run_started_at=str(data["run_started_at"]),
                host=str(data.get("host", "")),
                attempts_through=_optional_int(data.get("attempts_through")),
            ),
            None,
        )
    except (ValueError, TypeError, KeyError):
        return None, f"the marker {path} is not one invoicectl wrote; it is ignored"


def other_journals(outbox: Path, base_url: str, own: str, journal_id: str) -> dict[str, str]:
    """The journals, other than ``journal_id``, that sent from ``outbox`` to ``base_url``
    itself through another profile than the entry ``own`` (an entry ``BASE_URL (profile
    NAME)`` or ``BASE_URL``), by entry: {entry: journal path or URL}. Another base URL (a
    test environment, the sandbox) is another GoRoute, and is not one of them; another
    journal in this profile's own entry is a journal replaced (``send/history.py``). {} when
    there is no usable marker."""
    try:
        sends = _sends(marker_path(outbox).read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError):
        return {}
    return {
        entry: str(data.get("journal", ""))
        for entry, data in sends.items()
        if (entry == base_url or entry.startswith(f"{base_url} (profile "))
        and entry != own
        and data.get("journal_id") != journal_id
        and data.get("journal")
    }


def write_marker(path: Path, marker: Marker) -> str | None:
    """Record ``marker`` as the last send to its base URL in the marker file ``path`` (the
    other base URLs' entries kept), atomically; None when done, else why it could not be."""
    with _writers_turn(path.parent):
        return _write_entry(path, marker)


@contextlib.contextmanager
def _writers_turn(directory: Path) -> Iterator[None]:
    """The marker's directory locked (``flock``) while one writer reads, changes and replaces
    the file: the profiles of ``send --all-profiles`` write one outbox's marker at once, and
    each dropped the entries the others had just written (helper-94). A writer that holds it
    for ``_TURN_WAIT`` seconds (stopped) is not waited for longer: the file is replaced whole
    either way, so the worst is that one entry, not the file, is lost."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        yield  # the write says what is wrong with the directory
        return
    try:
        with contextlib.suppress(OSError):  # a file system without flock: written as before
            flock_within(fd, _TURN_WAIT, 0.005)
        yield
    finally:
        os.close(fd)  # the lock goes with it


def _write_entry(path: Path, marker: Marker) -> str | None:
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        sends = _sends(path.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError):
        sends = {}
    entry = {**asdict(marker), "host": marker.host or socket.gethostname()}
    sends[marker.base_url] = entry
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, (json.dumps({"sends": sends}, sort_keys=True) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
        directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except OSError as error:
        with contextlib.suppress(OSError):  # a read-only outbox refuses even this (EROFS)
            temporary.unlink(missing_ok=True)
        return (
            f"cannot write the marker {path} ({_cause(error)}): a later loss of this "
            "journal's history will not be detected by it (a journal with no history is "
            "still checked)"
        )
    return None


def _optional_int(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(value)
    return value


class MarkerKeeper:
    """This run's marker entry, written again as the run's attempts become durable (at most
    every ``EVERY`` seconds, off the event loop, and once more when the run has ended).

    A journal rolled back to a point inside a run (a backup taken while it sent and restored,
    its -wal lost after a checkpoint had written part of the run to the main file) still
    holds that run, so the run's id alone does not tell it lost anything: the marker's
    ``attempts_through`` does (``history_loss.history_lost``). What the journal made durable in
    the last ``EVERY`` seconds before a kill is not in the marker yet: a rollback to inside
    that stretch is the one it cannot tell."""

    EVERY = 1.0

    def __init__(
        self, files: tuple[Path, ...], marker: Marker, warn: Callable[[str], None]
    ) -> None:
        # The outbox's marker, its marked subdirectories' (``marked_below``), the journal's own
        self.files = files
        self.marker = marker
        self.warn = warn
        self.through = 0  # the last attempt known durable
        self.written = 0
        self.failed: set[Path] = set()  # one line each, not one a second
        self._lock = threading.Lock()  # the last write, from the run's end, waits for another

    def durable(self, attempt_id: int) -> None:
        self.through = max(self.through, attempt_id)

    async def keep(self) -> None:
        """Until cancelled: the marker brought up to date every ``EVERY`` seconds."""
        import asyncio  # here: the marker is read by runs that start no loop

        while True:
            await asyncio.sleep(self.EVERY)  # wall time: the disk's pace, not the run's clock
            if self.through != self.written:
                await asyncio.to_thread(self.write)

    def write(self) -> None:
        with self._lock:
            through = self.through
            if through == self.written:
                return
            self.written = through
            self._write_each(replace(self.marker, attempts_through=through))

    def start(self) -> MarkerKeeper:
        """The marker written in each file before the run's first request."""
        self._write_each(self.marker)
        return self

    def _write_each(self, marker: Marker) -> None:
        for path in self.files:
            if path not in self.failed and (problem := write_marker(path, marker)):
                self.failed.add(path)
                self.warn(f"invoicectl: warning: {problem}")


def _sends(text: str) -> dict[str, Any] | None:
    """The marker's entries by base URL; None when ``text`` is not a marker."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    sends = data.get("sends") if isinstance(data, dict) else None
    if not isinstance(sends, dict) or not all(isinstance(v, dict) for v in sends.values()):
        return None
    return sends


def _cause(error: OSError | UnicodeDecodeError) -> str:
    if isinstance(error, OSError):
        return error.strerror or str(error)
    return "not UTF-8 text"

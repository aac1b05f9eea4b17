"""The outbox's own memory of who last sent from it: ``OUTBOX/.invoicectl-journal``.

A journal can be lost (its file truncated, its directory removed) or rolled back (its -wal
deleted, an older backup restored) and a new or older one made in its place says nothing of
the sends it forgot. The outbox outlives it, so each send leaves a small JSON marker there
before its first request: per base URL, the journal's random id (``Journal.identity``), its
path, and the run (id and start time) that is about to send. The next send to that base URL
compares: another journal id, or this journal without that run, means history was lost
(``send/history.py``). A try of ``--sandbox`` on the same outbox keeps its own entry.

The marker is a hint for detection and for a clear message, never the safety itself: a
journal with no history is checked whether or not a marker is there. It is written
atomically (a temporary file, fsync, rename, fsync of the directory), so a crash leaves the
old marker or the new one. Its name does not end in ``.xml``, so no scan reads it.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

MARKER_NAME = ".invoicectl-journal"


@dataclass(frozen=True)
class Marker:
    journal_id: str
    journal: str  # the journal's path, as the run that wrote the marker saw it
    base_url: str
    run_id: int
    run_started_at: str
    host: str = ""

    def describe(self) -> str:
        started = self.run_started_at
        return f"journal {self.journal_id[:12]} at {self.journal}, run {self.run_id} at {started}"


def marker_path(outbox: Path) -> Path:
    return outbox / MARKER_NAME


def read_marker(outbox: Path, base_url: str) -> tuple[Marker | None, str | None]:
    """(the marker of the last send to ``base_url`` from ``outbox``, None), (None, None) when
    there is none, or (None, why the file is unusable)."""
    path = marker_path(outbox)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError) as error:
        return None, f"cannot read the outbox marker {path} ({_cause(error)}); it is ignored"
    sends = _sends(text)
    if sends is None:
        return None, f"the outbox marker {path} is not one invoicectl wrote; it is ignored"
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
            ),
            None,
        )
    except (ValueError, TypeError, KeyError):
        return None, f"the outbox marker {path} is not one invoicectl wrote; it is ignored"


def write_marker(outbox: Path, marker: Marker) -> str | None:
    """Record ``marker`` as the last send to its base URL from ``outbox`` (the other base
    URLs' entries kept), atomically; None when done, else why it could not be."""
    path = marker_path(outbox)
    temporary = path.with_name(f"{MARKER_NAME}.{os.getpid()}.tmp")
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
        directory = os.open(outbox, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        return (
            f"cannot write the outbox marker {path} ({_cause(error)}): a later loss of this "
            "journal's history will not be detected by it (a journal with no history is "
            "still checked)"
        )
    return None


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

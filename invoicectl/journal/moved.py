"""A SQLite journal copied to PostgreSQL is an archive: no run writes it again.

After ``journal copy`` has committed, a note beside the SQLite file (``journal.db.moved``)
says where the journal went and when; the file itself is left byte for byte as it was. Every
command that writes a journal (``locked_journal``: send, scan, reconcile, the operator's
decisions) refuses a file with such a note: both journals carry one identity and continue
from one chain head and one run number, so a send from the old file could not be told from
one from the new journal by the outbox's marker, and what it sent would look pending in
PostgreSQL; past a key's 24 hours, GoRoute would deliver it twice. Reading the file (status,
show, verify, export) stays allowed. Removing the note is how a person undoes the move.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from invoicectl.errors import JournalError


def note_of(path: Path) -> Path:
    """Beside the real file: a journal reached through a symbolic link has the same note
    (as it has the same lock, ``runlock.lock_path_for``)."""
    real = path.resolve()
    return real.with_name(real.name + ".moved")


def note_move(path: Path, target: str, at: str) -> None:
    """Beside the SQLite journal at ``path``: it now lives at ``target`` (printed without a
    password), since ``at``. Written whole, then renamed into place, 0600."""
    note = note_of(path)
    partial = note.with_name(note.name + ".partial")
    data = json.dumps({"moved_to": target, "at": at}, indent=2) + "\n"
    descriptor = os.open(partial, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
        stream.write(data)
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(partial, note)


def refuse_if_moved(path: Path, command: str) -> None:
    """``JournalError`` when the journal at ``path`` was moved to PostgreSQL."""
    note = note_of(path)
    try:
        said = json.loads(note.read_text("utf-8"))
        where, when = str(said["moved_to"]), str(said["at"])
    except FileNotFoundError:
        return
    except (OSError, ValueError, KeyError, TypeError):
        where, when = "another journal (the note cannot be read)", "an earlier run"
    raise JournalError(
        f"the journal {path} was copied to {where} at {when} and is an archive now: "
        f'{command} did nothing; set journal = "{where}" (config file, --journal or '
        f"INVOICECTL_JOURNAL) to run from there. To write this file again anyway, remove {note}"
    )

"""Two journals never send from one outbox at once: each send holds a turn there.

Two profiles without a ``sender`` on one outbox (two accounts, two journals) each take every
file, and ``other_accounts`` holds here what the other journal has already sent. Run at the
same minute by two cron lines, each would look before the other had sent anything, and both
would send a new invoice. So each send holds a turn on its outbox for the whole run, per
base URL and journal: a shared ``flock`` on ``OUTBOX/.invoicectl-sends/<url>-<journal>-<how>
.lock`` (the workers of one PostgreSQL journal share theirs). A send that finds another
journal's turn to the same base URL held is refused at once, before its first request, exit
6, and the next run goes on. A send of one supplier's files (a profile's send of
``--all-profiles``, ``--supplier``) meets another journal's send of every file or of the same
supplier's, never another supplier's.

A recursive send (``below``) also holds ``below-<url>-<journal>-<how>.lock`` there: it takes
the files of every directory under its outbox, so a send of one of them from another journal
meets it as it would meet a turn of its own outbox, and the other way round (the recursive
send takes its turn in each subdirectory another send has turns in: ``marked_below``).
Each takes its own turn first and looks for the other's after, so of two starting together
at least one sees the other.

Turns are taken one at a time through the directory's ``gate`` (held for an instant), so two
runs starting together cannot both look before either holds its turn. The kernel owns each
lock: a run that dies (even ``kill -9``) holds no turn, with no stale-lock heuristics; the
file only names its last holder, for the refusal. An outbox where no file can be made (a
read-only one) has no turns; the marker cannot be written there either (``send/marker.py``).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from invoicectl.errors import JournalLocked
from invoicectl.flocks import flock_within
from invoicectl.journal.runlock import LockHolder, read_holder, write_holder
from invoicectl.locations import Location
from invoicectl.scan.candidates import walk
from invoicectl.send.marker import MARKER_NAME

TURNS = ".invoicectl-sends"
_GATE = "gate"
_EVERY = "every"
_BELOW = "below-"  # a recursive send's turn on the directories under its outbox
_GATE_WAIT = 5.0  # seconds; the gate is held for an instant, unless a holder is stopped
_GATE_PAUSE = 0.01
# The end of each refusal's line: why, and what the operator does.
_BOTH_WOULD_SEND = (
    "both take its new invoices, and each would send them once more: this run sent nothing, "
    "the next one goes on once that one has ended"
)


@contextmanager
def outbox_turn(
    outbox: Path,
    base_url: str,
    journal_id: str,
    supplier: str | None,
    journal: Location,
    below: bool = False,
) -> Iterator[None]:
    """This journal's turn to send from ``outbox`` to ``base_url``, held for the block, or
    ``JournalLocked`` at once when another journal's send there would meet it, or a recursive
    send of a directory above it. ``supplier``: the only supplier whose files this send takes,
    None for every file; ``journal``: where it is, named (without a password) to another run
    this one refuses; ``below``: the send also takes the files of every directory under it."""
    directory = outbox / TURNS
    prefix, takes = _digest(base_url), _EVERY if supplier is None else _digest(supplier)
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
        gate = _opened(directory / _GATE)
    except OSError:  # a read-only outbox: no turns, as no marker; those above still count
        _refuse_below_others(outbox, prefix, journal_id, takes)
        yield
        return
    names = [f"{prefix}-{journal_id}-{takes}.lock"]
    if below:
        names.append(f"{_BELOW}{names[0]}")
    held: list[int] = []
    try:
        try:
            _through_gate(gate, outbox)
            holder = LockHolder.this_process(f"send to {journal}", datetime.now(UTC))
            for name in names:
                held.append(_opened(directory / name))
                fcntl.flock(held[-1], fcntl.LOCK_SH | fcntl.LOCK_NB)  # only ever held shared
                write_holder(held[-1], holder)
            _refuse_beside_others(directory, outbox, prefix, journal_id, takes)
        finally:
            os.close(gate)  # the gate is free again; the turn stays held
        _refuse_below_others(outbox, prefix, journal_id, takes)
        yield
    finally:
        for fd in held:
            os.close(fd)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _opened(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def _through_gate(gate: int, outbox: Path) -> None:
    if not flock_within(gate, _GATE_WAIT, _GATE_PAUSE):
        raise JournalLocked(
            f"another invoicectl send has held the gate of {outbox / TURNS} for over "
            f"{_GATE_WAIT:.0f} s (a stopped process?); this run sent nothing: run it "
            "again once that process has ended"
        )


def _refuse_beside_others(
    directory: Path, outbox: Path, prefix: str, journal_id: str, takes: str
) -> None:
    """``JournalLocked`` when another journal's turn this one would meet is held now."""
    holder = _held_turn(directory, "", prefix, journal_id, takes)
    if holder is not None:
        raise JournalLocked(
            f"a send through another journal is sending from {outbox} now ({holder}); "
            f"{_BOTH_WOULD_SEND}"
        )


def _refuse_below_others(outbox: Path, prefix: str, journal_id: str, takes: str) -> None:
    """``JournalLocked`` when another journal's recursive send of a directory above
    ``outbox`` (its real path) holds its turn there now. Each one's turns are read through
    its gate; a directory whose turns cannot be read has none, as a read-only outbox, nor
    has one of another user's (a shared ``/tmp``: anyone could hold a gate there)."""
    for above in Path(os.path.realpath(outbox)).parents:
        directory = above / TURNS
        try:
            if os.stat(directory).st_uid != os.getuid():
                continue
            gate = os.open(directory / _GATE, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            _through_gate(gate, above)
            holder = _held_turn(directory, _BELOW, prefix, journal_id, takes)
        except OSError:
            continue
        finally:
            os.close(gate)
        if holder is not None:
            raise JournalLocked(
                f"a send through another journal is sending from {above} and every directory "
                f"under it, {outbox} among them, now ({holder}); {_BOTH_WOULD_SEND}"
            )


def _held_turn(directory: Path, kind: str, prefix: str, journal_id: str, takes: str) -> str | None:
    """Who holds a turn of ``kind`` ("" or ``_BELOW``) in ``directory`` that a send by
    ``journal_id`` taking ``takes`` meets, or None. Read under the directory's gate."""
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".lock") or name.startswith(_BELOW) != bool(kind):
            continue
        head, _, how = name.removeprefix(kind).removesuffix(".lock").rpartition("-")
        url, _, other = head.partition("-")
        if url != prefix or other in ("", journal_id):
            continue
        if _EVERY not in (takes, how) and how != takes:
            continue  # two sends of two suppliers' files take different files
        holder = _held_by(directory / name)
        if holder is not None:
            return holder
    return None


def _held_by(path: Path) -> str | None:
    """Who holds the turn at ``path`` (its description), or None when nobody does."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # under the gate: nobody waits
        except BlockingIOError:
            holder = read_holder(fd)
            return "another journal" if holder is None else f"{holder.command}: {holder.describe()}"
        return None
    finally:
        os.close(fd)


def outboxes_of(outbox: Path, recursive: bool) -> tuple[Path, ...]:
    """The directories whose markers a run of ``outbox`` reads: the outbox first, then, when
    it is ``recursive``, the subdirectories ``marked_below`` it."""
    return (outbox, *marked_below(outbox)) if recursive else (outbox,)


def marked_below(outbox: Path) -> tuple[Path, ...]:
    """The subdirectories of ``outbox`` a recursive scan reads (links not followed, as its
    walk) that hold a marker of their own: each an outbox once sent on its own, then moved
    below this one, whose invoices a journal since lost may have sent. A recursive run reads
    and writes their markers as its outbox's (``send/history.py``) and takes its turn in each
    (``outbox_turn``). A subdirectory with turns but no marker yet counts too: a
    send of it on its own takes its turn at its start and writes its marker only after its
    scan and history check, which can last minutes. Sorted; one walk of the tree's names,
    no file read."""
    below = [
        Path(directory)
        for directory, subdirs, files in walk(str(outbox))
        if (MARKER_NAME in files or TURNS in subdirs) and directory != str(outbox)
    ]
    return tuple(sorted(below, key=lambda path: path.parts))

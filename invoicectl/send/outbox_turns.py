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
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from invoicectl.errors import JournalLocked
from invoicectl.journal.runlock import LockHolder, read_holder, write_holder
from invoicectl.locations import Location

TURNS = ".invoicectl-sends"
_GATE = "gate"
_EVERY = "every"
_GATE_WAIT = 5.0  # seconds; the gate is held for an instant, unless a holder is stopped
_GATE_PAUSE = 0.01


@contextmanager
def outbox_turn(
    outbox: Path, base_url: str, journal_id: str, supplier: str | None, journal: Location
) -> Iterator[None]:
    """This journal's turn to send from ``outbox`` to ``base_url``, held for the block, or
    ``JournalLocked`` at once when another journal's send there would meet it. ``supplier``:
    the only supplier whose files this send takes, None for every file; ``journal``: where it
    is, named (without a password) to another run this one refuses."""
    directory = outbox / TURNS
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
        gate = _opened(directory / _GATE)
    except OSError:  # a read-only outbox: no turns, as no marker
        yield
        return
    prefix, takes = _digest(base_url), _EVERY if supplier is None else _digest(supplier)
    own = f"{prefix}-{journal_id}-{takes}.lock"
    try:
        _through_gate(gate, outbox)
        turn = _opened(directory / own)
        try:
            fcntl.flock(turn, fcntl.LOCK_SH | fcntl.LOCK_NB)  # only ever held shared
            _refuse_beside_others(directory, outbox, prefix, journal_id, takes)
            write_holder(turn, LockHolder.this_process(f"send to {journal}", datetime.now(UTC)))
        except BaseException:
            os.close(turn)
            raise
    finally:
        os.close(gate)  # the gate is free again; the turn stays held
    try:
        yield
    finally:
        os.close(turn)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _opened(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def _through_gate(gate: int, outbox: Path) -> None:
    end = time.monotonic() + _GATE_WAIT
    while True:
        try:
            fcntl.flock(gate, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= end:
                raise JournalLocked(
                    f"another invoicectl send has held the gate of {outbox / TURNS} for over "
                    f"{_GATE_WAIT:.0f} s (a stopped process?); this run sent nothing: run it "
                    "again once that process has ended"
                ) from None
            time.sleep(_GATE_PAUSE)


def _refuse_beside_others(
    directory: Path, outbox: Path, prefix: str, journal_id: str, takes: str
) -> None:
    """``JournalLocked`` when another journal's turn this one would meet is held now."""
    for name in sorted(os.listdir(directory)):
        head, _, how = name.removesuffix(".lock").rpartition("-")
        url, _, other = head.partition("-")
        if url != prefix or other in ("", journal_id):
            continue
        if _EVERY not in (takes, how) and how != takes:
            continue  # two sends of two suppliers' files take different files
        holder = _held_by(directory / name)
        if holder is not None:
            raise JournalLocked(
                f"a send through another journal is sending from {outbox} now ({holder}); both "
                "take its new invoices, and each would send them once more: this run sent "
                "nothing, the next one goes on once that one has ended"
            )


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

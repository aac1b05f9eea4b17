"""What an outbox's markers say of a journal's history (``marked_lost``), and what a run
knows of a history check before it scans: whether its send's check is certain
(``check_ahead``), and what a run that scans but sends nothing leaves to the next send
(``leave_check_to_next_send``).

A scan records the outbox's invoices in the journal as never sent, whether or not a journal
since lost sent them. The outbox's marker says so (``marked_lost``), but only a send of that
outbox reads it: a send of another outbox into the same journal plans every pending invoice,
and would send those unchecked. So a run that scans and sends nothing reads the marker as a
send to its base URL would, and where it says the journal lost history records a check begun
(``{"begun": true}``) before its first file: until a send of any outbox has made that check,
no invoice goes out for the first time.

A recursive run reads, beside its outbox's marker, those of the subdirectories it scans that
hold one of their own (``outbox_turns.marked_below``): an outbox sent on its own, then moved below
another, keeps the memory of the journal that sent it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from invoicectl.send.marker import (
    Marker,
    journal_marker,
    marker_entry,
    marker_path,
    read_marker,
)

if TYPE_CHECKING:
    from pathlib import Path

    from invoicectl.journal.interface import JournalBackend
    from invoicectl.journal.records import JournalIdentity

AHEAD = "the outbox's marker says this journal lost history"  # the begun row's why


def history_lost(
    journal: JournalBackend,
    identity: JournalIdentity,
    marker: Marker | None,
    outbox: Path | None,
    path: Path,
) -> str | None:
    """Why ``marker``, read from ``path`` (``outbox``'s, or the journal's own when None),
    says this journal lost history, or None when it does not."""
    if marker is None:
        return None
    whose = f"{outbox} was last sent from" if outbox else f"its marker {path} names"
    sent = f"{outbox} was last sent from it" if outbox else f"its marker {path} says it sent"
    if marker.journal_id != identity.journal_id:
        return (
            f"the journal {journal.path} (created {identity.created_at}) is not the one "
            f"{whose} ({marker.describe()}): the history of those sends is not in this one"
        )
    if journal.run_started_at(marker.run_id) != marker.run_started_at:
        return (
            f"the journal {journal.path} has lost history: {sent} in "
            f"run {marker.run_id} ({marker.run_started_at}), which it no longer holds (an "
            "older backup restored, or its -wal file lost?)"
        )
    through = marker.attempts_through
    if through is not None and (held := journal.last_attempt_of(marker.run_id) or 0) < through:
        return (
            f"the journal {journal.path} has lost history: {sent} in "
            f"run {marker.run_id} ({marker.run_started_at}), whose requests it holds only up "
            f"to attempt {held}, not {through} (a backup taken during that run restored, or "
            "its -wal file lost?)"
        )
    return None


def marked_lost(
    journal: JournalBackend,
    entry: str,
    outboxes: Sequence[Path],
    warn: Callable[[str], None] = lambda line: None,
) -> str | None:
    """Why the marker entry ``entry`` of one of ``outboxes`` (an outbox, and the
    subdirectories a recursive run reads as outboxes of their own: ``outbox_turns.marked_below``)
    or of the journal's own marker (``journal_marker``) says this journal lost history; None
    when none does (a subdirectory without a marker).
    A marker that cannot be used is a warning (``warn``), not a reason: a journal with no
    history is checked anyway."""
    identity = journal.identity()
    places: list[tuple[Path | None, Path]] = [(outbox, marker_path(outbox)) for outbox in outboxes]
    places += [(None, path) for path in journal_marker(journal.path)]
    for outbox, path in places:
        marker, problem = read_marker(path, entry)
        if problem:
            warn(f"invoicectl: warning: {problem}")
        if (lost := history_lost(journal, identity, marker, outbox, path)) is not None:
            return lost
    return None


def check_ahead(
    journal: JournalBackend, base_url: str, profile: str | None, outboxes: Sequence[Path]
) -> str | None:
    """Why a send's history check is certain before its scan (``journal.CheckTurn``):
    ``fresh`` (never sent to ``base_url`` nor checked), ``unfinished`` (a check begun never
    ended), ``lost`` (a marker of ``outboxes`` says so: ``marked_lost``); None (a long
    silence shows later)."""
    if not journal.has_sent_to(base_url) and not journal.history_checked(base_url):
        return "fresh"
    if journal.unfinished_history_check() is not None:
        return "unfinished"
    return "lost" if marked_lost(journal, marker_entry(base_url, profile), outboxes) else None


def begin_check_ahead(
    journal: JournalBackend,
    base_url: str,
    profile: str | None,
    outboxes: Sequence[Path],
    take_turn: Callable[[], None],
) -> str | None:
    """``check_ahead``, read again once the check turn is taken (``take_turn``, when any check
    is due): another host's check that held it ("unfinished") has ended since, and its end
    would leave this outbox's lost invoices with no check begun. When "lost", a check begun
    is recorded, before the scan: a run stopped before its check leaves what it scanned to
    the next send's, of any outbox (one row at most while one is unfinished)."""
    if check_ahead(journal, base_url, profile, outboxes) is None:
        return None
    take_turn()
    ahead = check_ahead(journal, base_url, profile, outboxes)
    if ahead == "lost":
        journal.record_history_check(base_url, None, AHEAD, {"begun": True})
    return ahead


def leave_check_to_next_send(
    journal: JournalBackend,
    outboxes: Sequence[Path],
    base_url: str,
    profile: str | None,
    take_turn: Callable[[], None] = lambda: None,
) -> None:
    """Before a scan that sends nothing (``scan``, ``send --dry-run``, ``validate``): a
    check begun, left to the next send of any outbox, when a marker of ``outboxes`` (the
    outbox, and a recursive scan's marked subdirectories) says this journal lost history
    (as ``check_ahead`` reads it) for the base URL and profile the journal is bound to, the
    ones its sends use (a scan's may differ: it needs no base URL, its environment may lack
    the send's ``$GOROUTE_BASE_URL``, its ``--profile``, and another profile's entry names
    another journal), else for this run's. A journal fresh to the base URL needs none (its
    next send there checks), nor one with a check unfinished.

    ``take_turn``: where a check may run beside this scan (a dry run beside another host's
    send workers; ``scan`` and ``validate`` are alone on a journal), the check turn
    (``CheckTurn.take``), held by the caller through the scan (``begin_check_ahead``)."""
    if (bound := journal.bound_base_url()) is not None:
        base_url, named, rest = bound.partition(" (profile ")
        profile = rest[:-1] if named and rest.endswith(")") else None
    begin_check_ahead(journal, base_url, profile, outboxes, take_turn)

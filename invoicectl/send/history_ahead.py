"""What a run knows of a history check before it scans: whether its send's check is certain
(``check_ahead``), and what a run that scans but sends nothing leaves to the next send
(``leave_check_to_next_send``).

A scan records the outbox's invoices in the journal as never sent, whether or not a journal
since lost sent them. The outbox's marker says so (``history_loss.history_lost``), but only a
send of that outbox reads it: a send of another outbox into the same journal plans every
pending invoice, and would send those unchecked. So a run that scans and sends nothing reads
the marker as a send to its base URL would, and where it says the journal lost history records
a check begun (``{"begun": true}``) before its first file: until a send of any outbox has made
that check, no invoice goes out for the first time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from invoicectl.send.marker import marker_entry, read_marker

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from invoicectl.journal.interface import JournalBackend

AHEAD = "the outbox's marker says this journal lost history"  # the begun row's why


def check_ahead(
    journal: JournalBackend, base_url: str, profile: str | None, outbox: Path | None
) -> str | None:
    """Why a send's history check is certain before its scan (``journal.CheckTurn``):
    ``fresh`` (never sent to ``base_url`` nor checked), ``unfinished`` (a check begun never
    ended), ``lost`` (``outbox``'s marker says so); None (a long silence shows later)."""
    # Imported here: a scan of an outbox no send marked (most) imports no GoRoute code.
    from invoicectl.send.history_loss import history_lost

    if not journal.has_sent_to(base_url) and not journal.history_checked(base_url):
        return "fresh"
    if journal.unfinished_history_check() is not None:
        return "unfinished"
    marker = None if outbox is None else read_marker(outbox, marker_entry(base_url, profile))[0]
    return "lost" if history_lost(journal, journal.identity(), marker, outbox) else None


def begin_check_ahead(
    journal: JournalBackend,
    base_url: str,
    profile: str | None,
    outbox: Path | None,
    take_turn: Callable[[], None],
) -> str | None:
    """``check_ahead``, read again once the check turn is taken (``take_turn``, when any check
    is due): another host's check that held it ("unfinished") has ended since, and its end
    would leave this outbox's lost invoices with no check begun. When "lost", a check begun
    is recorded, before the scan: a run stopped before its check leaves what it scanned to
    the next send's, of any outbox (one row at most while one is unfinished)."""
    if check_ahead(journal, base_url, profile, outbox) is None:
        return None
    take_turn()
    ahead = check_ahead(journal, base_url, profile, outbox)
    if ahead == "lost":
        journal.record_history_check(base_url, None, AHEAD, {"begun": True})
    return ahead


def leave_check_to_next_send(
    journal: JournalBackend,
    outbox: Path,
    base_url: str,
    profile: str | None,
    take_turn: Callable[[], None] = lambda: None,
) -> None:
    """Before a scan that sends nothing (``scan``, ``send --dry-run``, ``validate``): a
    check begun, left to the next send of any outbox, when ``outbox``'s marker says this
    journal lost history (as ``check_ahead`` reads it) for the base URL and profile the
    journal is bound to, the ones its sends use (a scan's may differ: it needs no base URL,
    its environment may lack the send's ``$GOROUTE_BASE_URL``, its ``--profile``, and
    another profile's entry names another journal), else for this run's. A journal fresh to
    the base URL needs none (its next send there checks), nor one with a check unfinished.

    ``take_turn``: where a check may run beside this scan (a dry run beside another host's
    send workers; ``scan`` and ``validate`` are alone on a journal), the check turn
    (``CheckTurn.take``), held by the caller through the scan (``begin_check_ahead``)."""
    if (bound := journal.bound_base_url()) is not None:
        base_url, named, rest = bound.partition(" (profile ")
        profile = rest[:-1] if named and rest.endswith(")") else None
    begin_check_ahead(journal, base_url, profile, outbox, take_turn)

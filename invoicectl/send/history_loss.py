"""How a send tells that its journal may have lost history (``history_lost``: the outbox's
marker; ``silence_lost``: a long silence), and how far back a check of it looks
(``horizon_of``).

A journal rolled back together with its outbox (a VM snapshot restored, a whole disk's backup)
keeps a marker that agrees with it, so ``history_lost`` sees nothing, and the invoices it sent
after the snapshot read as never sent. Sent again under their keys within GoRoute's 24 hours,
they are answered with the first send; after them, a second copy is delivered. That can only
happen once every lost send is older than the window, and the journal's own last request is
older still: so a send whose journal has made no request for ``SILENCE`` first asks for one
page of GoRoute's newest transactions (one GET). One of them carrying the number of an invoice
this journal never sent makes the run check its history in full, as for any journal that lost
history. One page: a rollback's sends are the account's newest, unless another system has sent
more than a page since.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Protocol

from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import Invoice, JournalIdentity
from invoicectl.lifecycle.window import KEY_WINDOW, REPLAY_MARGIN, moment
from invoicectl.send.marker import Marker
from invoicectl.send.options import SendOptions

# The newest 20,000 transactions at most: 200 pages take 2 minutes at the standard tier's
# 100 requests a minute, once in a journal's life.
MAX_PAGES = 200
PAGE_SIZE = 100
# A journal that made no request for this long may have lost sends GoRoute no longer answers
# a replay of: the key window, less the margin a replay keeps.
SILENCE = KEY_WINDOW - REPLAY_MARGIN


class RunClocks(Protocol):
    """What the check reads time from (``runs.Clocks``)."""

    @property
    def monotonic(self) -> Callable[[], float]: ...
    @property
    def sleep(self) -> Callable[[float], Awaitable[None]]: ...


def history_lost(
    journal: JournalBackend,
    identity: JournalIdentity,
    marker: Marker | None,
    base_url: str,
    options: SendOptions,
) -> str | None:
    """Why the outbox's marker says this journal lost history, or None when it does not."""
    if marker is None:
        return None
    outbox = options.outbox
    if marker.journal_id != identity.journal_id:
        return (
            f"the journal {journal.path} (created {identity.created_at}) is not the one "
            f"{outbox} was last sent from ({marker.describe()}): the history of those sends "
            "is not in this one"
        )
    if journal.run_started_at(marker.run_id) != marker.run_started_at:
        return (
            f"the journal {journal.path} has lost history: {outbox} was last sent from it in "
            f"run {marker.run_id} ({marker.run_started_at}), which it no longer holds (an "
            "older backup restored, or its -wal file lost?)"
        )
    through = marker.attempts_through
    if through is not None and (held := journal.last_attempt_of(marker.run_id) or 0) < through:
        return (
            f"the journal {journal.path} has lost history: {outbox} was last sent from it in "
            f"run {marker.run_id} ({marker.run_started_at}), whose requests it holds only up "
            f"to attempt {held}, not {through} (a backup taken during that run restored, or "
            "its -wal file lost?)"
        )
    return None


def silence_lost(
    journal: JournalBackend,
    sendable: Callable[[], list[Invoice]],
    probe: Callable[[list[Invoice]], set[str] | None],
    warn: Callable[[str], None],
) -> str | None:
    """Why a journal silent past ``SILENCE`` may have lost sends; None when it was not silent
    that long, has nothing to send now, or GoRoute's newest page (``probe``: the numbers of
    the invoices asked for that it carries, None when it could not be read) names none of
    them. A page that could not be read is a warning, not a reason: a key that may send but
    not list, or a list that is down, must not stop every send of a journal with its history.
    Only the invoices this run may send are asked for: files that come back to the outbox
    after a later send (a restored outbox, exported again) are not covered."""
    last = journal.last_request_at()
    now = journal.clock()
    if last is None or now - moment(last) < SILENCE:
        return None
    invoices = sendable()
    if not invoices:
        return None
    found = probe(invoices)
    silent = f"the journal {journal.path} has made no request since {last}"
    if found is None:  # a key that may send but not list must not stop every send
        warn(
            f"invoicectl: warning: {silent}, and GoRoute's newest transactions could not be "
            "read: a journal rolled back with its outbox would go unnoticed"
        )
        return None
    if not found:
        return None
    named = ", ".join(sorted(found)[:5]) + (", ..." if len(found) > 5 else "")
    return (
        f"{silent}, yet GoRoute's newest transactions include {len(found)} invoice(s) it never "
        f"sent ({named}): was it rolled back with its outbox (a VM snapshot or a disk backup "
        "restored), or does another system send these invoices?"
    )


def horizon_of(invoices: list[Invoice], now: datetime) -> datetime | None:
    """How far back a send of these invoices can be: the oldest issue date less LOOK_BACK;
    None (search to the page bound) when one has no date, or one issued after ``now``."""
    from invoicectl.reconcile.search_result import LOOK_BACK

    dates = [issued_on(invoice, now) for invoice in invoices]
    if not dates or any(date is None for date in dates):
        return None
    return min(date for date in dates if date is not None) - LOOK_BACK


def issued_on(invoice: Invoice, now: datetime) -> datetime | None:
    """The issue date, a bound on when the invoice was sent; None when it bounds nothing:
    undated, or pre-dated (issued after ``now``, so it may have been sent any time before)."""
    if not invoice.issue_date:
        return None
    try:
        issued = datetime.fromisoformat(invoice.issue_date[:10]).replace(tzinfo=UTC)
    except ValueError:
        return None
    return None if issued > now else issued

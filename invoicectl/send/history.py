"""A journal that lost its history never sends blind: what GoRoute holds is asked first.

"None delivered twice" rests on the journal's memory of what it sent. A journal made anew
(its file truncated, its directory removed, its -wal deleted before a checkpoint) or rolled
back (an older backup restored, a -wal lost after one) takes invoices it sent for never sent;
inside a key's 24 hours GoRoute would answer a replay, after them it delivers a second copy.

So before the sender starts (``check_history``, called once by ``send/runner.py``), a send
checks GoRoute's transactions list when either holds:

- **no history**: the journal records no request by any run against this base URL and no
  earlier history check for it (``Journal.has_sent_to``, ``Journal.history_checked``);
- **lost history**: the outbox's marker, or the journal's own (``send/marker.py``), names
  another journal, or this journal and a run it no longer holds;
- **a long silence**: the journal made no request for longer than GoRoute's key window, and
  GoRoute's transactions created since its last request name an invoice it never sent (a
  journal rolled back together with its outbox: ``history_loss.silence_lost``).

The check asks for every invoice this journal never sent a request for, held or invalid ones
too (a release or a fixed file would send them later, unchecked), through the list search
``reconcile`` uses (``Lookups.search_numbers``: paced, retried, newest first, cursor followed),
back to the oldest issue date among them less ``LOOK_BACK`` (an invoice is not sent before it
is issued; the week covers time zones; one pre-dated after today has no such bound: the search
goes to its page bound), at most ``MAX_PAGES`` pages and ``CHECK_SECONDS`` (or what
``--deadline`` leaves). Then, per invoice:

- GoRoute holds a transaction with its number: it is held for ``reconcile``, and the finding
  stands as evidence (``lifecycle.evidence``: a release needs ``--force``); when exactly one
  is this invoice (receiver and document type match, reconcile's ``compare``) its id is kept
  as the invoice's ``existing_transaction_id``, so ``reconcile`` judges it and ``reconcile
  --apply`` adopts it;
- the search did not reach back to its issue date (less ``LOOK_BACK``): held as not checked;
- otherwise it is sent.

The list unreadable (GoRoute down, the route refused, ``--deadline``): nothing is sent and
``HistoryUnchecked`` stops the run (exit 75, 1 when the list is refused, 5 for the key);
``--trust-new-journal`` sends unchecked. A check made (or skipped on purpose) is recorded in
``history_checks``: never again for that base URL, unless a marker later says history was
lost. Every finding is one loud line on stderr (``options.warn``)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from invoicectl.errors import CredentialsRefused, ExitCode
from invoicectl.goroute.outcomes import AuthRefused, Rejected, WrongEndpoint
from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import Invoice
from invoicectl.lifecycle.evidence import HISTORY_CHECK, last_word
from invoicectl.lifecycle.holds import hold_with_evidence
from invoicectl.send.history_ahead import marked_lost
from invoicectl.send.history_loss import (
    MAX_PAGES,
    PAGE_SIZE,
    SEEN_WHY,
    SILENCE_PAGES,
    NewestPages,
    NewestRead,
    RunClocks,
    covered,
    horizon_of,
    issued_before_a_loss,
    never_sent,
    new_versions,
    not_its_own,
    note_loss,
    seen_elsewhere,
    sendable_now,
    sent_only,
    silence_lost,
    still_as_read,
    to_be_sent,
    unfinished,
)
from invoicectl.send.history_texts import (
    Finding,
    HistoryUnchecked,
    failure_code,
    failure_text,
    finding_text,
    found_reason,
    no_such_route,
    not_checked_reason,
    unchecked,
)
from invoicectl.send.marker import Marker, MarkerKeeper, journal_marker, marker_entry, marker_path
from invoicectl.send.options import SendOptions
from invoicectl.settings import Settings
from invoicectl.text import first_few

# The search imports reconcile, the limiter and asyncio where it runs: most sends make none.
if TYPE_CHECKING:
    import httpx

    from invoicectl.goroute.transactions import TransactionPage
    from invoicectl.reconcile.search_result import Search

CHECK_SECONDS = 180.0
# Past the time limit, a request already in flight may finish within this much (with a
# --deadline that binds, the send's own stop grace: the deadline is a hard bound).
_GRACE_SECONDS = 30.0
HELD_BY = HISTORY_CHECK
LOUD = "invoicectl: WARNING:"
SEEN_BY = "seen by a send after the journal had been silent past the key window"


def check_history(
    journal: JournalBackend,
    settings: Settings,
    options: SendOptions,
    run_id: int,
    *,
    transport: httpx.AsyncBaseTransport | None,
    clocks: RunClocks,
    take_turn: Callable[[], None],
    run: Callable[[Coroutine[Any, Any, Search]], Search] | None = None,
) -> tuple[SendOptions, MarkerKeeper | None]:
    """Check GoRoute before a journal with no (or lost) history sends; leave the outbox
    marker naming this journal and run. Returns ``options`` with the deadline less the time
    the check took, and the keeper of the marker written (None when none was), for the run
    to bring up to date as it sends. Raises ``HistoryUnchecked`` when the check was needed
    and failed. ``take_turn``: called before it checks (``journal.CheckTurn``). ``run``
    runs the search (the send's runner: cancelled by a stop signal, since its GETs change
    nothing remote; ``asyncio.run`` when not given)."""
    started = clocks.monotonic()
    base_url, warn = settings.base_url, options.warn
    entry = marker_entry(base_url, settings.profile)
    outboxes = options.marked()
    identity = journal.identity()
    fresh = not journal.has_sent_to(base_url) and not journal.history_checked(base_url)
    lost = marked_lost(journal, entry, outboxes, warn)
    if not fresh and journal.unfinished_history_check():  # or another host's, running:
        take_turn()  # read again after its turn, once it has ended
        lost = lost or unfinished(journal)
    again = new_versions(journal, options.new_versions)
    if not (lost or fresh or options.trust_new_journal):  # rolled back with its outbox?
        probe = _newest_pages(journal, settings, options, transport, clocks, run)
        lost, seen = silence_lost(journal, lambda: sendable_now(journal) + again, probe, warn)
        if seen:
            journal.record_history_check(base_url, run_id, SEEN_WHY, {"seen_elsewhere": seen})
        if options.deadline is not None:  # the full check has what the probe left
            left = max(0.0, options.deadline - (clocks.monotonic() - started))
            options = replace(options, deadline=left)
            started = clocks.monotonic()
    late, to_check = (None, []) if lost or fresh else issued_before_a_loss(journal)
    lost = lost or late  # after a loss: those the journal did not hold then, first met now
    if lost or fresh:  # no other host first-sends from here to the check's end
        take_turn()
    if (lost and not late) or fresh:  # read when it matters
        to_check = never_sent(journal) + again
    if (lost or fresh) and to_check:
        why = lost or f"the journal {journal.path} has never sent to {base_url}"
        if options.trust_new_journal:
            trusted = [invoice.invoice_id for invoice in to_check]
            journal.record_history_check(base_url, run_id, why, {"trusted": trusted})
            warn(
                f"{LOUD} {why}; --trust-new-journal: sending {len(to_check)} invoices without "
                "checking what GoRoute already holds"
            )
        else:
            finding = _check(
                journal, settings, options, run_id, why, to_check, transport, clocks, lost, run
            )
            warn(f"{LOUD} {why}: {finding_text(finding)}")
            options = replace(options, new_versions=finding.unheld(options.new_versions))
            if lost and not late:  # what was issued by now is checked when first met
                note_loss(journal, base_url, run_id)
    elif lost:  # the marker stays: an invoice released later must still meet the check
        warn(f"{LOUD} {lost}; nothing to send now")
    _hold_seen_elsewhere(journal, warn)
    keeper = None
    files = (*map(marker_path, outboxes), *journal_marker(journal.path))
    if files and not (lost and not to_check):
        here = Marker(
            journal_id=identity.journal_id,
            journal=str(journal.path),
            base_url=entry,
            run_id=run_id,
            run_started_at=journal.run_started_at(run_id) or journal.now(),
        )
        keeper = MarkerKeeper(files, here, warn).start()
    if options.deadline is not None:
        left = max(0.0, options.deadline - (clocks.monotonic() - started))
        options = replace(options, deadline=left)
    return options, keeper


def _check(
    journal: JournalBackend,
    settings: Settings,
    options: SendOptions,
    run_id: int,
    why: str,
    invoices: list[Invoice],
    transport: httpx.AsyncBaseTransport | None,
    clocks: RunClocks,
    lost: str | None,
    run: Callable[[Coroutine[Any, Any, Search]], Search] | None,
) -> Finding:
    import asyncio

    limit = CHECK_SECONDS
    deadline_binds = options.deadline is not None and options.deadline < limit
    if options.deadline is not None:
        limit = min(limit, options.deadline)
    end = clocks.monotonic() + limit
    timed_out = False

    def out_of_time() -> bool:
        nonlocal timed_out
        timed_out = timed_out or clocks.monotonic() >= end
        return timed_out

    grace = min(_GRACE_SECONDS, options.stop_grace) if deadline_binds else _GRACE_SECONDS
    if journal.unfinished_history_check() is None:  # begun unless before the scan; ended below
        journal.record_history_check(settings.base_url, run_id, why, {"begun": True})
    try:
        horizon = horizon_of(invoices, journal.clock())
        search = (run or asyncio.run)(
            _search(settings, options, transport, clocks, invoices, horizon, out_of_time,
                    limit + grace)
        )  # fmt: skip
    except TimeoutError:
        raise unchecked(
            why,
            f"GoRoute's transactions list did not answer in {round(limit + grace, 1):g} s (the "
            f"check's {round(limit, 1):g} s, then {round(grace, 1):g} s for the request in flight)",
        ) from None
    if isinstance(search.failure, AuthRefused):
        refused = search.failure
        raise CredentialsRefused(
            f"the API refused the credentials (HTTP {refused.http_status}"
            f"{f' {refused.code}' if refused.code else ''}: {refused.message or 'no message'}) "
            "when asked for its transactions list before a journal's first send; nothing "
            "changed state. Check GOROUTE_API_KEY or --api-key-file"
        )
    if isinstance(search.failure, WrongEndpoint):
        raise HistoryUnchecked(search.failure.message, ExitCode.COULD_NOT_RUN)
    if not lost and isinstance(search.failure, Rejected) and no_such_route(search.failure):
        # A new journal, no marker saying the outbox was sent from another, and an API (an
        # emulator, a gateway) that has no transactions list: nothing could be found; the
        # check is recorded as impossible there, loudly, rather than stopping every send.
        unsupported = f"HTTP {search.failure.http_status}"
        journal.record_history_check(settings.base_url, run_id, why, {"unsupported": unsupported})
        every = tuple(invoice.invoice_id for invoice in invoices)
        return Finding((), (), every, unsupported=unsupported)
    if search.failure is not None:
        raise unchecked(why, failure_text(search.failure), failure_code(search.failure))
    if deadline_binds and timed_out and not search.summary.complete:
        raise unchecked(why, f"--deadline left {limit:.1f} s, not enough to finish the check")
    finding = _judge(journal, invoices, search, journal.clock())
    summary = search.summary
    journal.record_history_check(
        settings.base_url,
        run_id,
        why,
        {
            "found": list(finding.found),
            "not_checked": list(finding.not_checked),
            "to_send": len(finding.to_send),
            "pages": summary.pages,
            "transactions": summary.transactions,
            "complete": summary.complete,
            "note": summary.note,
        },
    )
    return finding


async def _search(
    settings: Settings,
    options: SendOptions,
    transport: httpx.AsyncBaseTransport | None,
    clocks: RunClocks,
    invoices: list[Invoice],
    horizon: datetime | None,
    out_of_time: Callable[[], bool],
    seconds: float,
    max_pages: int = MAX_PAGES,
    feed: Callable[[TransactionPage], object] | None = None,
) -> Search:
    # Imported here: a send whose journal has history never pays for them.
    import asyncio

    from invoicectl.goroute.client import GoRouteClient
    from invoicectl.goroute.limiter import RateLimiter
    from invoicectl.reconcile.search import Lookups

    assert settings.api_key is not None
    limiter = RateLimiter(options.rate_per_minute, clock=clocks.monotonic, sleep=clocks.sleep)
    timeout = settings.request_timeout  # each request's, as the run's (helper-96)
    async with GoRouteClient(
        settings.base_url, settings.api_key, transport=transport, request_timeout=timeout
    ) as client:
        lookups = Lookups(client, limiter, options.policy, 1)
        async with asyncio.timeout(seconds):
            return await lookups.search_numbers(
                {invoice.invoice_id for invoice in invoices},
                limit=PAGE_SIZE,
                max_pages=max_pages,
                horizon=horizon,
                out_of_time=out_of_time,
                feed=feed,
            )


def _newest_pages(
    journal: JournalBackend,
    settings: Settings,
    options: SendOptions,
    transport: httpx.AsyncBaseTransport | None,
    clocks: RunClocks,
    run: Callable[[Coroutine[Any, Any, Search]], Search] | None,
) -> Callable[[list[Invoice], datetime], NewestPages | None]:
    """GoRoute's transactions created since a time, newest first (``NewestRead``), for
    ``silence_lost``; None when no page could be read. The pages read count, whatever stopped
    the search after them; none is asked for once half the time is spent."""
    import asyncio

    def probe(invoices: list[Invoice], since: datetime) -> NewestPages | None:
        seconds = min(limit for limit in (CHECK_SECONDS, options.deadline) if limit is not None)
        half_spent = clocks.monotonic() + seconds / 2
        read = NewestRead(journal)
        search = _search(
            settings, options, transport, clocks, invoices, since,
            lambda: read.anchored or clocks.monotonic() >= half_spent, seconds, SILENCE_PAGES,
            read.read,
        )  # fmt: skip
        try:
            found: Search | None = (run or asyncio.run)(search)
        except TimeoutError:
            found = None
        failure = None if found is None else found.failure
        if not read.pages:  # a first page refused as no such route: no list to look at
            no_list = isinstance(failure, Rejected) and no_such_route(failure)
            return NewestPages(set()) if no_list else None
        txns = read.transactions()
        wanted = {invoice.invoice_id: invoice for invoice in invoices}
        numbers = {  # a --new-version's own earlier sends are no sign of a rollback
            number
            for txn in sent_only(txns)
            if (number := (txn.invoice_number or "").strip()) in wanted
            and not_its_own(journal, wanted[number], (txn,))
        }
        short: str | None = None  # why the pages read stop short of ``since``
        if found is None or found.failure is not None:
            short = f"the list stopped answering after {len(read.pages)} page(s)"
        elif not (read.anchored or found.summary.complete):
            short = found.summary.note
        return NewestPages(numbers, txns, short)

    return probe


def _hold_seen_elsewhere(journal: JournalBackend, warn: Callable[[str], None]) -> None:
    """Hold each invoice this run may send whose number a silence probe saw GoRoute hold
    (``history_loss.seen_elsewhere``): a restored outbox's file exported again, say. One
    small query when there is none, which is nearly always."""
    held = []
    for invoice, txns in seen_elsewhere(journal, lambda: sendable_now(journal)):
        if last_word(journal, invoice.invoice_id) is None:  # else it was judged
            reason, existing = found_reason(invoice, txns, by=SEEN_BY)
            hold_with_evidence(journal, invoice, reason, HELD_BY, existing)
            held.append(invoice.invoice_id)
    if held:
        warn(
            f"{LOUD} {len(held)} invoice(s) GoRoute already holds, {SEEN_BY}: {first_few(held, 5)}"
        )


def _judge(
    journal: JournalBackend, invoices: list[Invoice], search: Search, now: datetime
) -> Finding:
    """Hold what GoRoute holds and what the search could not vouch for; the rest is sent."""
    found: list[str] = []
    not_checked: list[str] = []
    to_send: list[str] = []
    for read in invoices:
        invoice = still_as_read(journal, read)
        if invoice is None:  # another host's send took it up meanwhile: its own check judged it
            continue
        invoice_id = invoice.invoice_id
        txns = not_its_own(journal, invoice, sent_only(search.by_number.get(invoice_id, ())))
        if txns:
            reason, existing = found_reason(invoice, txns)
            hold_with_evidence(journal, invoice, reason, HELD_BY, existing)
            found.append(invoice_id)
        elif covered(invoice, search.summary, now):
            if to_be_sent(invoice):
                to_send.append(invoice_id)
        else:  # not vouched for: a release needs --force too
            hold_with_evidence(
                journal, invoice, not_checked_reason(invoice, search.summary), HELD_BY
            )
            not_checked.append(invoice_id)
    return Finding(tuple(found), tuple(not_checked), tuple(to_send))

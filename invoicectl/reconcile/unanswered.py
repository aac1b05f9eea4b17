"""Judging sends found (or not) through the transactions-list search.

Every ``unknown`` invoice (a request went out, no answer came back) is looked for in the
transactions list by invoice number and receiver, and so is a ``key_reused`` one whose 422
named no transaction. Which matches count as this journal's send depends on when they were
created (``CLOCK_SLACK`` after, ``LOOK_BACK`` before the first attempt); exactly one is judged
by ``matching.matched``; none means the key's 24-hour window decides: open, ``send`` replays
it safely; closed, a resend could deliver a duplicate and a person decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime

from invoicectl.goroute.outcomes import Outcome, Transient
from invoicectl.goroute.times import parse_time
from invoicectl.goroute.transactions import Found, Transaction
from invoicectl.lifecycle.window import KEY_WINDOW, REPLAY_MARGIN, window_open
from invoicectl.reconcile.failed_lookups import lookup_failed
from invoicectl.reconcile.matching import (
    CLOCK_SLACK,
    api_side,
    compare,
    first_time,
    matched,
)
from invoicectl.reconcile.search_result import LOOK_BACK, Search, SearchSummary
from invoicectl.reconcile.verdicts import (
    Case,
    JournalSide,
    Verdict,
    Window,
    build_case,
)


def judge_searched(
    invoice_id: str,
    side: JournalSide,
    search: Search | None,
    now: datetime,
    fetched: Mapping[str, Outcome | None] | None = None,
) -> Case:
    """The verdict on an invoice looked for in the transactions list. ``fetched``: the
    transactions GET since, by id: a list row carries no content hash, its GET may."""
    window = key_window(side, now)
    if search is None or search.failure is not None:
        failure = search.failure if search else None
        return lookup_failed(invoice_id, side, failure, None, window)
    matches = [
        txn
        for txn in search.by_number.get(invoice_id, ())
        if not compare(invoice_id, side, txn) and txn.transaction_id not in side.earlier_keys
    ]
    ours, earlier = _by_age(side, matches)
    if side.state == "key_reused":
        # The key carried a request before this journal's: a match may well be older.
        ours, earlier = ours + earlier, []
    if earlier:
        return _sent_earlier(invoice_id, side, ours, earlier, window)
    if len(ours) == 1:
        # A key_reused invoice whose 422 named no transaction is adopted like any other.
        adopt = Verdict.already_sent if side.state == "key_reused" else Verdict.unknown_found
        row = ours[0]
        fetch = (fetched or {}).get(row.transaction_id or "", _NOT_FETCHED)
        if fetch is _NOT_FETCHED:  # the first judgment, which asks for the GET
            case = matched(invoice_id, side, row, row.transaction_id, adopt=adopt, window=window)
            return _short_of_earlier(case, side, search.summary)
        if not isinstance(fetch, Found):  # what the match holds is not known: nothing adopted
            return lookup_failed(invoice_id, side, fetch, api_side(row), window)
        txn = fetch.transaction
        if differences := compare(invoice_id, side, txn):
            # The list and the GET contradict each other: neither says what GoRoute holds.
            return build_case(
                invoice_id,
                Verdict.lookup_failed,
                side,
                api=api_side(row),
                detail=f"the transactions list shows {row.transaction_id} as this invoice, but "
                f"its own GET says otherwise ({'; '.join(differences)}); what happened is "
                "still unknown",
                window=window,
            )
        case = matched(invoice_id, side, txn, row.transaction_id, adopt=adopt, window=window)
        return _short_of_earlier(case, side, search.summary)
    if ours:
        return build_case(
            invoice_id,
            Verdict.unknown_ambiguous,
            side,
            detail=f"{len(ours)} transactions match: {_listed(ours)}",
            window=window,
        )
    return _not_found_in_list(invoice_id, side, search.summary, window)


def _short_of_earlier(case: Case, side: JournalSide, summary: SearchSummary) -> Case:
    """``case``, marked ``short_search`` when its one match failed and the search stopped short
    of ``LOOK_BACK`` before the first attempt: an earlier delivery of the invoice may lie
    beyond, so the verdict on this send clears no evidence of one (helper-86: a busy
    account's list, cut at its page bound, cleared it, and a plain release sent it again).
    The verdict stands: the failed transaction is this key's (helper-88)."""
    if case.verdict is not Verdict.sent_then_failed or summary.complete:
        return case
    first, reached = first_time(side), parse_time(summary.reached)
    if first is not None and reached is not None and reached <= first - LOOK_BACK:
        return case
    beyond = (
        f"; the search stopped short ({summary.note}): evidence of an earlier delivery, if "
        "any, stands"
    )
    return replace(case, short_search=True, detail=case.detail + beyond)


# A list match whose own GET was not asked for (yet): judged on its row, which asks for it.
_NOT_FETCHED = Transient(reason="not fetched")


def key_window(side: JournalSide, now: datetime) -> Window:
    """(open, closes at) as ``send`` sees it: 24 h less the replay margin from first use."""
    started = first_time(side)
    if started is None:
        return None, None
    closes = started + KEY_WINDOW - REPLAY_MARGIN
    return window_open(started.isoformat(), now), closes.isoformat()


def _by_age(
    side: JournalSide, matches: list[Transaction]
) -> tuple[list[Transaction], list[Transaction]]:
    """(created since the first attempt, created before it) among ``matches``.

    "Since" allows ``CLOCK_SLACK``; a match that cannot be dated cannot be shown to be this
    journal's send and counts as earlier. Matches older than ``LOOK_BACK`` before the first
    attempt are left out: the search does not always reach them, so counting the ones it
    happened to see would make the verdict depend on the page size.
    """
    first = first_time(side)
    if first is None:
        return matches, []
    ours: list[Transaction] = []
    earlier: list[Transaction] = []
    for txn in matches:
        created = parse_time(txn.created_at)
        if created is not None and created < first - LOOK_BACK:
            continue
        if created is None or created < first - CLOCK_SLACK:
            earlier.append(txn)
        else:
            ours.append(txn)
    return ours, earlier


def _sent_earlier(
    invoice_id: str,
    side: JournalSide,
    ours: list[Transaction],
    earlier: list[Transaction],
    window: Window,
) -> Case:
    first = side.key_first_used_at or side.first_attempt_at
    undated = any(parse_time(txn.created_at) is None for txn in earlier)
    before = (
        f"created before this journal's first attempt under key {side.idempotency_key} "
        f"({first}){' or undated, so not shown to be since' if undated else ''}: "
        f"{_listed(earlier)}"
    )
    if ours:
        return build_case(
            invoice_id,
            Verdict.unknown_ambiguous,
            side,
            detail=f"{len(ours) + len(earlier)} transactions match: since the first attempt "
            f"{_listed(ours)}; {before}",
            window=window,
        )
    open_, closes = window
    replay = (
        f"; while the key's window is open (until {closes}) `invoicectl send` replays this "
        "journal's request, which would deliver the invoice again"
        if open_
        else ""
    )
    return build_case(
        invoice_id,
        Verdict.unknown_sent_earlier,
        side,
        api=api_side(earlier[0]) if len(earlier) == 1 else None,
        detail=f"only an earlier send matches, {before}; this journal's own send was not "
        f"found{replay}",
        window=window,
    )


def _listed(txns: list[Transaction]) -> str:
    return ", ".join(
        f"{t.transaction_id} ({t.status or 'no status'}, created {t.created_at or 'undated'})"
        for t in txns
    )


def _not_found_in_list(
    invoice_id: str,
    side: JournalSide,
    summary: SearchSummary,
    window: Window,
) -> Case:
    if summary.complete:
        searched = f"not in the {summary.transactions} transactions searched ({summary.note})"
    else:
        searched = (
            f"not found in the {summary.transactions} searched; the search was incomplete "
            f"({summary.note})"
        )
    open_, closes = window
    if side.state == "key_reused":
        return build_case(
            invoice_id,
            Verdict.not_found,
            side,
            detail=f"the 422 named no usable existing_transaction_id; {searched}",
            window=window,
        )
    if open_:
        return build_case(
            invoice_id,
            Verdict.unknown_not_found_window_open,
            side,
            action=f"`invoicectl send DIR` replays it under key {side.idempotency_key} "
            f"(safe until {closes})",
            detail=searched,
            window=window,
        )
    when = f"closed at {closes}" if closes else "cannot be dated, so it counts as closed"
    verdict = (
        Verdict.unknown_not_found_window_closed
        if summary.complete
        else Verdict.unknown_search_incomplete
    )
    return build_case(
        invoice_id,
        verdict,
        side,
        detail=f"{searched}; the replay window of key {side.idempotency_key} {when}: "
        "a resend could deliver a duplicate",
        window=window,
    )

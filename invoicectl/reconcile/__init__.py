"""Reconcile: what really happened to every refused, unanswered or changed send, and what next.

``reconcile()`` reads the journal, asks GoRoute (GETs only, paced and retried as ``send``),
and returns a ``ReconcileReport``: one ``Case`` per invoice that needs a look, each with a
``Verdict``, both sides (what the journal tried to send, what the API holds) and the next
step. It never sends a document, never prints, never exits.

The verdicts, what each asks, its exit code and its order: ``Verdict`` (``verdicts.py``).

The key's window is ``send``'s (``lifecycle.window_open``): 24 hours less ``REPLAY_MARGIN``, so
reconcile never calls a window open that ``send`` would hold. A transaction is this invoice's
only if its number and receiver match, its content hash (``metadata.sha256``, when GoRoute
gives one back) is the one the key carried, and, for an unanswered send, it was created after
the key's first attempt (less ``CLOCK_SLACK``). The list search looks ``LOOK_BACK`` further back
for earlier sends of the same invoice; older transactions are never counted, whatever the page
size, so the verdict does not depend on how the list happens to be paged.

Journal writes: ``--apply`` adopts (state ``accepted``, the transaction id, its status), one
SQLite transaction and one event row per invoice, and only if the invoice is still in the
state and under the key it was judged in. Delivery status of ``accepted`` invoices is always
recorded (``remote_status``, ``remote_checked_at``, an event when it changes), with or without
``--apply``: a fact about a transaction the journal already owns, not a decision. All lookups
finish before anything is written: a 401/403 (``CredentialsRefused``) changes nothing.

This module is the public face: ``reconcile()``, which sends each invoice to its judge and
writes back what the verdicts allow (``write_back``, through the lifecycle), and the names
callers use, re-exported from the modules that own them:

- ``verdicts``: ``Verdict`` (each with its ``Guidance``, in display order), the ``Case`` data,
  and ``build_case``, which every judge ends in;
- ``report``: the ``ReconcileReport`` a reconcile returns;
- ``subjects``: which invoices need a look, and what the journal says about each;
- ``search``: every GET, and the transactions-list search; ``search_result`` what it found;
- ``key_reused``, ``unanswered``, ``delivery`` and ``journal_only`` judge each kind of invoice;
  ``matching`` compares a transaction with the journal's side and reads the times compared.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

from invoicectl.errors import ExitCode, InvoiceBusy, worst
from invoicectl.goroute.client import GoRouteClient
from invoicectl.goroute.limiter import RateLimiter
from invoicectl.goroute.retry import RetryPolicy
from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import Invoice
from invoicectl.lifecycle.decisions import adopt, doubt, record_delivery
from invoicectl.lifecycle.evidence import operators_word_stands, standing_evidence
from invoicectl.lifecycle.holds import hold, record_verdict
from invoicectl.lifecycle.next_steps import unheld
from invoicectl.reconcile.delivery import judge_delivery, recorded_failure
from invoicectl.reconcile.journal_only import judge_amended, judge_conflict, judged_beneath
from invoicectl.reconcile.key_reused import judge_key_reused
from invoicectl.reconcile.matching import CLOCK_SLACK, compare
from invoicectl.reconcile.progress import OnLookup
from invoicectl.reconcile.report import ReconcileReport
from invoicectl.reconcile.search import Lookups
from invoicectl.reconcile.search_result import LOOK_BACK, SearchSummary
from invoicectl.reconcile.subjects import Subject, find_subjects
from invoicectl.reconcile.unanswered import judge_searched
from invoicectl.reconcile.verdicts import (
    GUIDANCE,
    VERDICT_ORDER,
    ApiSide,
    Case,
    Guidance,
    JournalSide,
    Verdict,
    build_case,
)

__all__ = [
    "CLOCK_SLACK",
    "GUIDANCE",
    "LOOK_BACK",
    "VERDICT_ORDER",
    "ApiSide",
    "Case",
    "Guidance",
    "JournalSide",
    "ReconcileReport",
    "SearchSummary",
    "Verdict",
    "compare",
    "reconcile",
]


def utc_now() -> datetime:
    return datetime.now(UTC)


async def reconcile(
    journal: JournalBackend,
    client: GoRouteClient,
    *,
    limiter: RateLimiter,
    policy: RetryPolicy,
    apply: bool = False,
    now: Callable[[], datetime] = utc_now,
    list_limit: int = 100,
    max_list_pages: int = 50,
    concurrency: int = 10,
    run_id: int | None = None,
    on_progress: OnLookup | None = None,
) -> ReconcileReport:
    """Judge every invoice that needs a look; with ``apply``, adopt the unambiguous ones.

    ``on_progress`` hears how far the lookups have got (``reconcile.progress``); the waits
    are told by the limiter's ``on_wait``.

    Raises ``CredentialsRefused`` (exit 5) on a 401/403, before anything is written.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    subjects = find_subjects(journal)
    lookups = Lookups(client, limiter, policy, concurrency, on_progress)
    # Windows are judged, and verdicts dated, as of the search's start: what it found then
    # says nothing of a request another host's send made while it ran (``_sent_since``).
    moment = now()
    await lookups.run(subjects, list_limit=list_limit, max_list_pages=max_list_pages)
    cases = [judge(subject, lookups, moment) for subject in subjects]
    if await lookups.fetch(_without_content_hash(cases)):
        cases = [judge(subject, lookups, moment) for subject in subjects]
    checked_at = moment.isoformat()
    cases, applied, recorded, held = write_back(journal, cases, apply, checked_at, run_id)
    ordered = tuple(sorted(cases, key=lambda c: (VERDICT_ORDER.index(c.verdict), c.invoice_id)))
    return ReconcileReport(
        cases=ordered,
        applied=tuple(applied),
        recorded=tuple(recorded),
        held=tuple(held),
        exit_code=worst(*(case.exit_code for case in ordered)),
        apply=apply,
        checked_at=checked_at,
        requests=lookups.requests,
        search=lookups.search_summary,
    )


def judge(subject: Subject, lookups: Lookups, now: datetime) -> Case:
    """Send the invoice to the judge that owns its case, once every lookup has finished.

    ``key_reused``: the transaction a 422 named; ``unanswered``: the transactions-list search
    (and a 422 that named none); ``delivery``: an accepted invoice's delivery status;
    ``journal_only``: amended invoices and 409 conflicts. Pure: nothing here asks GoRoute or
    writes the journal.
    """
    side = subject.side
    if side.state == "amended":
        if subject.get_id is None and not subject.search:
            return judge_amended(subject.invoice_id, side)
        beneath = replace(subject, side=replace(side, state=side.state_before_amend or ""))
        return judged_beneath(side, judge(beneath, lookups, now))
    if side.state == "rejected":
        return judge_conflict(subject.invoice_id, side)
    if side.state == "accepted":
        if subject.get_id is None:
            return recorded_failure(subject.invoice_id, side)
        return judge_delivery(subject.invoice_id, side, lookups.transactions.get(subject.get_id))
    if subject.get_id is not None:
        return judge_key_reused(
            subject.invoice_id, side, subject.get_id, lookups.transactions.get(subject.get_id)
        )
    return judge_searched(subject.invoice_id, side, lookups.search, now, lookups.transactions)


# Verdicts on a transaction that may have come from the list, whose rows carry no content
# hash: its own GET (with ``metadata``) may show it is another version of the invoice.
_TO_SEE_IN_FULL = (Verdict.content_unconfirmed, Verdict.unknown_found, Verdict.sent_then_failed)


def _without_content_hash(cases: list[Case]) -> list[str]:
    """The transactions found in the list that need their own GET: the list gives no
    ``metadata``, and without its content hash a ``key_reused`` invoice's cannot be adopted,
    nor an ``unknown`` one's told from another version of it (a delivery all the same).
    ``Lookups.fetch`` leaves out those already fetched."""
    return [
        case.api.transaction_id
        for case in cases
        if case.verdict in _TO_SEE_IN_FULL and case.api and case.api.transaction_id
    ]


def write_back(
    journal: JournalBackend, cases: list[Case], apply: bool, checked_at: str, run_id: int | None
) -> tuple[list[Case], list[str], list[str], list[str]]:
    """Record what the verdicts allow: (the cases as written, ids adopted, ids recorded, ids
    held).

    Every verdict reached is recorded on its invoice with the time (a failed lookup reached
    none and leaves the last one as it was), and the delivery
    status of ``accepted`` invoices; with ``apply`` the transactions found are adopted, one
    SQLite transaction and one event row per invoice, and only if the invoice is still in the
    state and under the key it was judged in, and what must not be sent on its own is held
    (a ``held`` verdict), with the verdict as the reason.
    """
    written: list[Case] = []
    applied: list[str] = []
    recorded: list[str] = []
    held: list[str] = []
    for case in cases:
        try:
            case = _write_case(journal, case, apply, checked_at, run_id, (applied, recorded, held))
        except InvoiceBusy:  # a send worker replays it now: its answer will settle it
            case = replace(case, action=f"left to the send worker holding it; {case.action}")
        written.append(case)
    return written, applied, recorded, held


def _write_case(
    journal: JournalBackend,
    case: Case,
    apply: bool,
    checked_at: str,
    run_id: int | None,
    lists: tuple[list[str], list[str], list[str]],
) -> Case:
    """One case's writes (``write_back``); ``InvoiceBusy`` when a send worker holds it."""
    applied, recorded, held = lists
    with journal.transaction():  # a verdict to hold and its hold commit together
        if _sent_since(journal, case):
            return _moved_on(case)
        case = _record(journal, case, apply, checked_at, run_id, held)
    if _fresh_delivery_status(case) and record_delivery(
        journal,
        case.invoice_id,
        transaction_id=case.journal.transaction_id or "",
        status=case.api.status if case.api else None,
        checked_at=checked_at,
        run_id=run_id,
    ):
        recorded.append(case.invoice_id)
    guidance = GUIDANCE[case.verdict]
    if not (apply and guidance.adoptable):
        return case
    txn = case.api.transaction_id if case.api else None
    key = case.journal.idempotency_key
    if txn and (owner := journal.transaction_owner(txn, case.invoice_id, key)):
        return replace(
            case,
            action=f"not adopted: {txn} is invoice {owner}'s in this journal (an answer meant "
            "for another lookup); investigate",
        )
    if _adopt(journal, case, checked_at, run_id):
        applied.append(case.invoice_id)
        adopted = f"adopted {txn or ''}; state now accepted"
        case = replace(case, applied=True, exit_code=ExitCode.OK, action=adopted)
    elif _sent_since(journal, case):  # between its verdict and its adoption (helper-98)
        case = _moved_on(case)
    return case


def _moved_on(case: Case) -> Case:
    return build_case(
        case.invoice_id,
        Verdict.lookup_failed,
        case.journal,
        api=case.api,
        detail="it moved on while this reconcile searched (a send, on another host maybe, "
        "sent or replayed it): the search says nothing of that; what happened is still unknown",
        window=(case.window_open, case.window_closes_at),
    )


def _sent_since(journal: JournalBackend, case: Case) -> bool:
    """Whether the invoice moved on since the journal side it was judged on was read: another
    state or key, or (for one not accepted) a request under its key started since."""
    side, key = case.journal, case.journal.idempotency_key
    invoice = journal.invoice(case.invoice_id)
    if invoice is None or (invoice.state, invoice.idempotency_key) != (side.state, key):
        return True
    if side.state == "accepted":
        return False
    attempts = journal.attempts(case.invoice_id)  # as ``subjects`` read them
    started = [a.started_at for a in attempts if key is None or a.idempotency_key == key]
    return (started[-1] if started else None) != side.last_attempt_at


# A failed send judged on a search cut short, evidence of an earlier delivery standing (helper-89).
_EVIDENCE_STANDS = (
    "a failed send, but evidence of an earlier delivery stands, and the search did not reach "
    "back to it: ask GoRoute; if it was not delivered, `invoicectl release {invoice_id} --force`"
    ", then {then}`invoicectl send DIR --new-version {invoice_id}`"
)
# While the key's window is open, a new version is refused until the key is replayed.
_REPLAY_FIRST = "`invoicectl send DIR` (it replays the key), `invoicectl reconcile`, then "


def _record(
    journal: JournalBackend,
    case: Case,
    apply: bool,
    checked_at: str,
    run_id: int | None,
    held: list[str],
) -> Case:
    """The verdict reached, and with ``apply`` the hold it calls for."""
    if case.verdict is Verdict.lookup_failed:  # no verdict reached: keep the last
        return case
    failed = case.verdict is Verdict.sent_then_failed
    keys = case.api.transaction_id if failed and case.api is not None else None
    clears = not case.short_search
    guidance = GUIDANCE[case.verdict]
    before = journal.invoice(case.invoice_id) if apply and guidance.held else None  # as read
    word_stands = (
        before is not None
        and _the_keys_own_finding(case, before)
        and operators_word_stands(journal, before, str(case.verdict))
    )
    record_verdict(journal, case.invoice_id, str(case.verdict), checked_at, run_id, keys, clears)
    now = journal.invoice(case.invoice_id) if case.short_search else None
    if now is not None and standing_evidence(journal, now) is not None:  # its step is refused
        then = _REPLAY_FIRST if case.window_open else ""
        case = replace(case, action=_EVIDENCE_STANDS.format(invoice_id=case.invoice_id, then=then))
    if apply and case.journal.state == "accepted" and case.verdict is Verdict.different_document:
        return _doubted(journal, case, run_id)
    if apply and case.journal.state == "accepted" and case.verdict is Verdict.other_version:
        # Unknown, so its row no longer claims the transaction; held, and the evidence its
        # verdict recorded keeps every send from replaying it.
        case = replace(_doubted(journal, case, run_id), action=case.action)
    if apply and guidance.held and word_stands:  # helper-89: it was held again, each run
        return _released_over(journal, case)
    if apply and guidance.held:
        reason = f"reconcile: {guidance.title}"
        if hold(journal, case.invoice_id, reason, by="reconcile").done:
            held.append(case.invoice_id)
            case = replace(case, action=f"held ({reason}); {case.action}")
    return case


def _the_keys_own_finding(case: Case, invoice: Invoice) -> bool:
    """A finding on the one transaction the key's 422 named, read by its own GET: the next
    run reads the same transaction again, so the same verdict is the same finding. Never a
    search's, whose finds may change under one verdict (helper-94: an earlier delivery found
    later went unheld, and `--new-version` delivered twice), nor another version's, which
    is a delivery of the invoice whatever was said of it."""
    txn = case.api.transaction_id if case.api is not None else None
    return (
        case.journal.state == "key_reused"
        and case.verdict in (Verdict.content_unconfirmed, Verdict.not_found)
        and txn is not None
        and txn == invoice.existing_transaction_id
    )


def _released_over(journal: JournalBackend, case: Case) -> Case:
    """A finding an operator's ``release --force`` answered: not held again."""
    invoice = journal.invoice(case.invoice_id)
    step = unheld(invoice, journal.clock(), word_given=True) if invoice is not None else ""
    return replace(
        case,
        action=f"not held again: an operator's `release --force` answered this same finding; "
        f"{step} (`invoicectl hold {case.invoice_id}` holds it)",
    )


def _doubted(journal: JournalBackend, case: Case, run_id: int | None) -> Case:
    """An accepted invoice whose transaction is another document, made ``unknown``: its
    key is replayed by ``send`` inside the window, looked up by ``reconcile`` after it."""
    txn = case.journal.transaction_id or ""
    reason = f"reconcile: GoRoute's {txn} is another document ({case.detail})"
    if not doubt(journal, case.invoice_id, transaction_id=txn, reason=reason, run_id=run_id):
        return case
    return replace(
        case,
        action="now unknown under its key: `invoicectl send` replays it while the key's "
        "window is open, `invoicectl reconcile` looks it up after",
    )


def _fresh_delivery_status(case: Case) -> bool:
    """A delivery status just read from GoRoute (not a failure the journal already had)."""
    if case.verdict not in (Verdict.delivered, Verdict.delivery_failed, Verdict.delivery_pending):
        return False
    return case.journal.remote_status != "failed"


def _adopt(journal: JournalBackend, case: Case, checked_at: str, run_id: int | None) -> bool:
    api = case.api
    if api is None or api.transaction_id is None or case.journal.state == "amended":
        return False  # an amended invoice's file holds other content than that transaction
    how = "the 422's existing transaction" if case.journal.state == "key_reused" else "found"
    return adopt(
        journal,
        case.invoice_id,
        expected_state=case.journal.state,
        idempotency_key=case.journal.idempotency_key,
        transaction_id=api.transaction_id,
        remote_status=api.status,
        checked_at=checked_at,
        accepted_at=api.created_at or checked_at,
        detail=f"reconcile adopted {api.transaction_id} ({how}, status {api.status or 'none'}) "
        f"for key {case.journal.idempotency_key}",
        run_id=run_id,
    )

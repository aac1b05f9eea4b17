"""Judging: the journal's side and GoRoute's answer, compared into one ``Case`` per invoice.

Pure: every lookup has finished before ``judge`` runs, and nothing here asks GoRoute or
writes the journal. ``compare`` decides whether a transaction is this invoice (number,
receiver, document type); the content hash and the dates decide whether it is the content
this journal sent, and sent by it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from invoicectl.errors import ExitCode
from invoicectl.goroute.client import Found as FoundTransaction
from invoicectl.goroute.client import NotFound, Transaction
from invoicectl.goroute.outcomes import Outcome, RateLimited, Rejected, Transient
from invoicectl.lifecycle.window import KEY_WINDOW, REPLAY_MARGIN, window_open
from invoicectl.reconcile.search import (
    LOOK_BACK,
    Lookups,
    Search,
    SearchSummary,
    first_time,
    parse_time,
)
from invoicectl.reconcile.subjects import Subject
from invoicectl.reconcile.verdicts import GUIDANCE, ApiSide, Case, JournalSide, Verdict

# A transaction can look a little older than the first attempt that created it when the two
# clocks disagree. Anything older than this before the first attempt was not created by it.
CLOCK_SLACK = timedelta(minutes=10)
IN_PROGRESS_STATUSES = frozenset({"pending", "processing", "sending"})

Window = tuple[bool | None, str | None]  # (still open, closes at)


def judge(subject: Subject, lookups: Lookups, now: datetime) -> Case:
    side = subject.side
    if side.state == "amended":
        return _amended(subject.invoice_id, side)
    if side.state == "rejected":
        return _conflict(subject.invoice_id, side)
    if side.state == "accepted":
        if subject.get_id is None:
            return _recorded_failure(subject.invoice_id, side)
        return _delivery(subject.invoice_id, side, lookups.transactions.get(subject.get_id))
    if subject.get_id is not None:
        return _key_reused(
            subject.invoice_id, side, subject.get_id, lookups.transactions.get(subject.get_id)
        )
    return _searched(subject.invoice_id, side, lookups.search, now)


def _case(
    invoice_id: str,
    verdict: Verdict,
    side: JournalSide,
    *,
    action: str | None = None,
    needs_person: bool | None = None,
    api: ApiSide | None = None,
    detail: str = "",
    window: Window = (None, None),
) -> Case:
    guidance = GUIDANCE[verdict]
    person = guidance.needs_person if needs_person is None else needs_person
    exit_code = ExitCode.NEEDS_RECONCILE if person else guidance.exit_code
    step = action if action is not None else guidance.next_step.replace("ID", invoice_id)
    return Case(
        invoice_id=invoice_id,
        verdict=verdict,
        needs_person=person,
        action=step,
        journal=side,
        api=api,
        window_open=window[0],
        window_closes_at=window[1],
        detail=detail,
        exit_code=exit_code,
    )


def _key_reused(invoice_id: str, side: JournalSide, txn_id: str, outcome: Outcome | None) -> Case:
    if isinstance(outcome, NotFound):
        return _case(
            invoice_id,
            Verdict.not_found,
            side,
            api=ApiSide(txn_id),
            detail=f"the 422 named transaction {txn_id}; GoRoute answers 404 for it",
        )
    if not isinstance(outcome, FoundTransaction):
        return _lookup_failed(invoice_id, side, outcome, ApiSide(txn_id))
    return _matched(invoice_id, side, outcome.transaction, txn_id, adopt=Verdict.already_sent)


def _matched(
    invoice_id: str,
    side: JournalSide,
    txn: Transaction,
    txn_id: str | None,
    *,
    adopt: Verdict,
    window: Window = (None, None),
) -> Case:
    """The verdict on a transaction that should be this invoice's."""
    api = ApiSide.of(txn, txn_id)
    differences = compare(invoice_id, side, txn)
    notes = _date_notes(side, txn)
    content = _content_difference(side, txn)
    if differences:
        verdict, detail = Verdict.different_document, differences + ([content] if content else [])
    elif content:
        return _case(
            invoice_id,
            Verdict.different_document,
            side,
            api=api,
            action=f"investigate: GoRoute's {api.transaction_id} is another version of "
            f"{invoice_id}, not the content this journal sent under key {side.idempotency_key}; "
            "if GoRoute's version is the right one, restore the file to it and run `invoicectl "
            f"scan DIR`; to send this content as well: `invoicectl send DIR --new-version "
            f"{invoice_id}`",
            detail="; ".join([content, *notes]),
            window=window,
        )
    elif txn.status == "failed":
        verdict, detail = Verdict.sent_then_failed, [f"transaction {api.transaction_id} failed"]
    elif adopt is Verdict.already_sent and txn.status in IN_PROGRESS_STATUSES:
        verdict, detail = Verdict.in_progress, [f"transaction {api.transaction_id} is {txn.status}"]
    else:
        status = txn.status or "no status given"
        return _case(
            invoice_id,
            adopt,
            side,
            api=api,
            action=f"`invoicectl reconcile --apply` adopts {api.transaction_id}",
            detail="; ".join(
                [f"transaction {api.transaction_id} is this invoice ({status})", *notes]
            ),
            window=window,
        )
    return _case(
        invoice_id, verdict, side, api=api, detail="; ".join(detail + notes), window=window
    )


def compare(invoice_id: str, side: JournalSide, txn: Transaction) -> list[str]:
    """How ``txn`` differs from the journal's invoice; [] when it is the same invoice.

    The receiver matches on scheme and id, or on the id alone when the API gives no scheme
    (case-insensitive: Peppol participant ids are). A missing document type is not a
    difference; a missing invoice number is, since nothing then ties the two together.
    """
    differences: list[str] = []
    number = (txn.invoice_number or "").strip()
    if not number:
        differences.append("the API record carries no invoice number to match")
    elif number != invoice_id:
        differences.append(f"invoice number: API {number}, journal {invoice_id}")
    if not _same_receiver(side.receiver, txn):
        shown = txn.receiver or txn.receiver_id
        differences.append(f"receiver: API {shown}, journal {side.receiver}")
    if txn.document_type and _squash(txn.document_type) != _squash(side.document_type):
        differences.append(f"document type: API {txn.document_type}, journal {side.document_type}")
    return differences


def _content_difference(side: JournalSide, txn: Transaction) -> str | None:
    """How the content differs, when GoRoute gives back the hash invoicectl sent with it.

    Every send carries ``metadata.sha256``, the hash of the content its key carries; a
    transaction whose hash is another one holds other content under the same invoice number.
    """
    theirs = txn.metadata.get("sha256")
    sent = side.sent_sha256
    if not isinstance(theirs, str) or not theirs.strip() or not sent:
        return None
    if theirs.strip().casefold() == sent.casefold():
        return None
    return (
        f"same invoice number, different content: the API's transaction carries sha256 "
        f"{theirs.strip()}, the journal sent sha256 {sent} under this key"
    )


def _same_receiver(journal_receiver: str | None, txn: Transaction) -> bool:
    if txn.receiver_id is None or journal_receiver is None:
        return True  # nothing to compare against; the invoice number carries the match
    scheme, sep, identifier = journal_receiver.partition(":")
    if not sep:
        scheme, identifier = "", journal_receiver
    if txn.receiver_id.casefold() != identifier.casefold():
        return False
    return txn.receiver_scheme is None or not scheme or txn.receiver_scheme == scheme


def _squash(text: str) -> str:
    return "".join(char for char in text.casefold() if char.isalnum())


def _date_notes(side: JournalSide, txn: Transaction) -> list[str]:
    created = parse_time(txn.created_at)
    first = parse_time(side.first_attempt_at or side.key_first_used_at)
    if created is None or first is None or created >= first - CLOCK_SLACK:
        return []
    return [
        f"created {txn.created_at}, before this journal's first attempt ({side.first_attempt_at}):"
        " something else sent it"
    ]


def _searched(invoice_id: str, side: JournalSide, search: Search | None, now: datetime) -> Case:
    window = _window(side, now)
    if search is None or search.failure is not None:
        failure = search.failure if search else None
        return _lookup_failed(invoice_id, side, failure, None, window)
    matches = [
        txn for txn in search.by_number.get(invoice_id, ()) if not compare(invoice_id, side, txn)
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
        return _matched(invoice_id, side, ours[0], None, adopt=adopt, window=window)
    if ours:
        return _case(
            invoice_id,
            Verdict.unknown_ambiguous,
            side,
            detail=f"{len(ours)} transactions match: {_listed(ours)}",
            window=window,
        )
    return _not_found_in_list(invoice_id, side, search.summary, window)


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
    before = (
        f"created before this journal's first attempt under key {side.idempotency_key} "
        f"({first}): {_listed(earlier)}"
    )
    if ours:
        return _case(
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
    return _case(
        invoice_id,
        Verdict.unknown_sent_earlier,
        side,
        api=ApiSide.of(earlier[0]) if len(earlier) == 1 else None,
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
        return _case(
            invoice_id,
            Verdict.not_found,
            side,
            detail=f"the 422 carried no existing_transaction_id; {searched}",
            window=window,
        )
    if open_:
        return _case(
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
    return _case(
        invoice_id,
        verdict,
        side,
        detail=f"{searched}; the replay window of key {side.idempotency_key} {when}: "
        "a resend could deliver a duplicate",
        window=window,
    )


def _window(side: JournalSide, now: datetime) -> Window:
    """(open, closes at) as ``send`` sees it: 24 h less the replay margin from first use."""
    started = first_time(side)
    if started is None:
        return None, None
    closes = started + KEY_WINDOW - REPLAY_MARGIN
    return window_open(started.isoformat(), now), closes.isoformat()


def _amended(invoice_id: str, side: JournalSide) -> Case:
    sent, current = side.sent_sha256 or "?", side.current_sha256 or "?"
    before = (
        f"; before the change it was {side.state_before_amend}" if side.state_before_amend else ""
    )
    where = f" (transaction {side.transaction_id})" if side.transaction_id else ""
    return _case(
        invoice_id,
        Verdict.amended,
        side,
        action=f"restore the file to the content sent (sha256 {sent}), then `invoicectl scan "
        f"DIR`; or `invoicectl send DIR --new-version {invoice_id}` to send the new content "
        f"(sha256 {current}) under a new key",
        detail=f"key {side.idempotency_key} carried revision {side.sent_revision} "
        f"(sha256 {sent}) first on {side.first_attempt_at or side.key_first_used_at}{where}; "
        f"the file is now revision {side.current_revision} (sha256 {current}){before}",
    )


def _conflict(invoice_id: str, side: JournalSide) -> Case:
    return _case(
        invoice_id,
        Verdict.needs_decision,
        side,
        detail=f"GoRoute answered 409 (conflict, duplicate) on {side.last_attempt_at}",
    )


def _delivery(invoice_id: str, side: JournalSide, outcome: Outcome | None) -> Case:
    txn_id = side.transaction_id
    if isinstance(outcome, NotFound):
        return _case(
            invoice_id,
            Verdict.not_found,
            side,
            api=ApiSide(txn_id),
            detail=f"accepted as {txn_id}, but GoRoute answers 404 for it now",
        )
    if not isinstance(outcome, FoundTransaction):
        return _lookup_failed(invoice_id, side, outcome, ApiSide(txn_id))
    txn = outcome.transaction
    api = ApiSide.of(txn, txn_id)
    if txn.status == "delivered":
        return _case(
            invoice_id,
            Verdict.delivered,
            side,
            api=api,
            detail=f"delivered {txn.delivered_at or ''}".rstrip(),
        )
    if txn.status == "failed":
        return _case(
            invoice_id,
            Verdict.delivery_failed,
            side,
            api=api,
            detail=f"transaction {txn_id} failed",
        )
    return _case(
        invoice_id,
        Verdict.delivery_pending,
        side,
        api=api,
        detail=f"transaction {txn_id} is {txn.status or 'without a status'}",
    )


def _recorded_failure(invoice_id: str, side: JournalSide) -> Case:
    return _case(
        invoice_id,
        Verdict.delivery_failed,
        side,
        api=ApiSide(side.transaction_id, status="failed"),
        detail=f"transaction {side.transaction_id} failed (recorded earlier)",
    )


def _lookup_failed(
    invoice_id: str,
    side: JournalSide,
    outcome: Outcome | None,
    api: ApiSide | None,
    window: Window = (None, None),
) -> Case:
    refused = isinstance(outcome, Rejected)
    return _case(
        invoice_id,
        Verdict.lookup_failed,
        side,
        api=api,
        needs_person=refused,
        detail=_failure_text(outcome) + "; what happened is still unknown",
        window=window,
    )


def _failure_text(outcome: Outcome | None) -> str:
    if isinstance(outcome, Transient):
        return f"no usable answer after retries: {outcome.reason}"
    if isinstance(outcome, RateLimited):
        return "still rate limited (429) after waiting as long as --max-wait allows"
    if isinstance(outcome, Rejected):
        code = f" {outcome.code}" if outcome.code else ""
        return f"the API refused the lookup (HTTP {outcome.http_status}{code}: {outcome.message})"
    return "the lookup did not run"

"""The transitions an operator or reconcile decides: a new version, an adoption, a delivery.

Each is refused where it could deliver an invoice twice, and each leaves an event behind.
"""

from __future__ import annotations

from datetime import datetime

from invoicectl.errors import UsageError
from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import DUPLICATE_CHECK, Hold, Invoice, InvoiceState, beneath
from invoicectl.lifecycle.evidence import (
    DISMISSED,
    dismissed_since_first_use,
    last_word,
    standing_evidence,
)
from invoicectl.lifecycle.keys import idempotency_key, next_key
from invoicectl.lifecycle.refusals import not_shown_undelivered, refusal_may_hide_delivery
from invoicectl.lifecycle.transitions import Transition, allowed, write
from invoicectl.lifecycle.window import datable, moment, window_closed


def check_new_version(journal: JournalBackend, invoice_id: str, now: datetime) -> Invoice:
    """Refuse ``--new-version`` where a new key could deliver the invoice twice."""
    invoice = journal.invoice(invoice_id)
    if invoice is None:
        raise UsageError(f"no invoice {invoice_id!r} in the journal {journal.path}")
    state = invoice.state
    if invoice.held_by == DUPLICATE_CHECK:
        raise UsageError(
            f"invoice {invoice_id} is held: {invoice.hold_reason}. --new-version sends the "
            "content the journal holds, which may be neither file's; the scan that finds one "
            "file left lifts the hold"
        )
    if invoice.hold is not None:
        raise UsageError(
            f"invoice {invoice_id} is {invoice.hold} ({invoice.hold_reason}); "
            + ("`invoicectl release` it first" if invoice.hold is Hold.held else "it is final")
        )
    first_use = _first_use(journal, invoice, now)
    window_closed_now = window_closed(first_use, now)
    if _may_be_delivered(invoice) and not window_closed_now:
        raise UsageError(_replay_first(invoice) if first_use else _undated(invoice))
    if refusal_may_hide_delivery(journal, invoice) and not (
        window_closed_now and _word_since_refusal(journal, invoice)
    ):
        raise UsageError(_refused_may_be_delivered(invoice, window_closed_now))
    if (evidence := standing_evidence(journal, invoice)) is not None:
        raise UsageError(
            f"invoice {invoice_id}: {evidence}, and a new key could deliver it twice: "
            "`invoicectl reconcile --apply` adopts that transaction if it is this invoice's; "
            f"`invoicectl release {invoice_id} --force` only once you know it is not"
        )
    unsettled = _not_shown_undelivered(invoice, first_use)
    if unsettled and not dismissed_since_first_use(journal, invoice):
        # An edited file (amended over unknown or key_reused) does not settle what its key's
        # send did: the same rule, so that an edit is never a way round reconcile's verdict.
        raise UsageError(not_shown_undelivered(invoice, beneath(invoice)))
    if beneath(invoice) is InvoiceState.accepted and invoice.remote_status != "failed":
        # An edit of an accepted invoice's file settles nothing about its delivery.
        raise UsageError(_not_failed(invoice))
    if not allowed(Transition.new_version, state):
        raise UsageError(
            f"invoice {invoice_id} is {state}; --new-version is for amended, rejected, "
            "key_reused and unknown invoices after `invoicectl reconcile` has shown what "
            "GoRoute holds, and for accepted invoices whose delivery failed"
        )
    return invoice


def _word_since_refusal(journal: JournalBackend, invoice: Invoice) -> bool:
    """Whether the operator's ``release --force`` is the last word on the invoice, given
    after the last request under its key ended (the refusal): a word given before it, on
    other evidence, says nothing of what that request delivered (helper-84)."""
    last = last_word(journal, invoice.invoice_id)
    if last is None or last.kind != DISMISSED:
        return False
    ends = [
        attempt.finished_at or attempt.started_at
        for attempt in journal.attempts(invoice.invoice_id)
        if attempt.idempotency_key == invoice.idempotency_key
    ]
    try:
        return all(moment(last.at) >= moment(end) for end in ends)
    except ValueError:  # a time changed by hand: no word since
        return False


def _refused_may_be_delivered(invoice: Invoice, window_closed_now: bool) -> str:
    """Why ``--new-version`` waits for the operator's word on a refusal that may hide a
    delivery: reconcile cannot look a 409 up (it names no transaction)."""
    invoice_id = invoice.invoice_id
    wait = "" if window_closed_now else "once the key's 24-hour window has closed, "
    return (
        f"invoice {invoice_id} was refused under key {invoice.idempotency_key}, but may have "
        "been delivered under it all the same (a 409, or a request before the refusal got no "
        "answer), and a new key could deliver it twice; reconcile cannot tell (a 409 names no "
        f"transaction): {wait}look for it at GoRoute, and only once you know it was not "
        f"delivered, `invoicectl release {invoice_id} --force`, then --new-version"
    )


def _first_use(journal: JournalBackend, invoice: Invoice, now: datetime) -> str | None:
    """When the key first carried a request, as the journal can date it: its recorded first
    use, else the earliest start of an attempt under it (a first use lost, or changed by
    hand); None when neither is a time, or both lie in the future (the clock went back)."""
    if datable(invoice.key_first_used_at, now):
        return invoice.key_first_used_at
    starts = [
        attempt.started_at
        for attempt in journal.attempts(invoice.invoice_id)
        if attempt.idempotency_key == invoice.idempotency_key and datable(attempt.started_at, now)
    ]
    return min(starts, key=moment) if starts else None


def _undated(invoice: Invoice) -> str:
    """Why a new key is refused when no time tells how long ago the old one first left."""
    return (
        f"invoice {invoice.invoice_id} is {invoice.state} under key {invoice.idempotency_key}, "
        f"whose first use the journal cannot date ({invoice.key_first_used_at!r}: no time, or "
        "later than now, the clock having gone back since): GoRoute's 24-hour window for it "
        "may be open, and a new key could deliver it twice. `invoicectl reconcile` looks it "
        f"up; `invoicectl abandon {invoice.invoice_id} --force` if you know it was delivered; once "
        "the clock is past that time by 24 hours, --new-version is taken"
    )


def _not_failed(invoice: Invoice) -> str:
    """Why an accepted invoice gets no new key: delivered, on its way, or its delivery status
    not read since it was accepted (a replay's answer names the transaction, not its fate).
    An edited one is told that reconcile reads the status of the sent content only."""
    accepted = f"invoice {invoice.invoice_id} is accepted"
    if invoice.state is not InvoiceState.accepted:
        accepted = f"invoice {invoice.invoice_id} is {invoice.state} over accepted"
    if invoice.transaction_id:
        accepted += f" (transaction {invoice.transaction_id})"
    if invoice.remote_status == "delivered":
        return (
            f"{accepted} and delivered: a new version would deliver it twice; a delivered "
            "invoice is corrected by a credit note and a new invoice number"
        )
    if invoice.state is not InvoiceState.accepted:
        fate = f"{invoice.remote_status}, not failed" if invoice.remote_status else "not known"
        return (
            f"{accepted} and its delivery is {fate}: a new version could deliver it twice. "
            "Restore the file to the content "
            f"sent (`invoicectl show {invoice.invoice_id}` names it) for `invoicectl "
            "reconcile` to read its delivery status; --new-version only once it failed"
        )
    if invoice.remote_status:
        return (
            f"{accepted} and its delivery is {invoice.remote_status}, not failed: "
            "`invoicectl reconcile` reads its status again; --new-version only once it failed"
        )
    return (
        f"{accepted} and its delivery is not known to have failed: `invoicectl reconcile` "
        "reads its delivery status; --new-version only once it says delivery failed"
    )


def _replay_first(invoice: Invoice) -> str:
    """Why a new key is refused while the old one may have delivered, and what to do instead:
    an unknown invoice is replayed by `send`; an amended or duplicate one only once its file
    holds again the content its key carried (`send` replays nothing held)."""
    refused = (
        f"its key {invoice.idempotency_key}'s 24-hour window is still open, and a new key could "
        "deliver it twice"
    )
    if invoice.state is InvoiceState.unknown:
        return (
            f"invoice {invoice.invoice_id} is unknown and {refused}: `invoicectl send` replays "
            "it safely under the same key"
        )
    if invoice.state is InvoiceState.pending:  # its file never changed (helper-98)
        return (
            f"invoice {invoice.invoice_id} is pending with a request under its key (in flight "
            f"now, a send worker's maybe, or answered with an error worth retrying); {refused}:"
            " `invoicectl send` sends it under that same key, and `invoicectl status` then "
            "shows its answer"
        )
    return (
        f"invoice {invoice.invoice_id} is {invoice.state} and its send under the old content got "
        f"no answer; {refused}. Restore the file to the content that key carried (`invoicectl "
        f"show {invoice.invoice_id}` names it), then `invoicectl send` replays it under the same "
        "key; or wait until the window has closed and `invoicectl reconcile` has looked it up"
    )


def _may_be_delivered(invoice: Invoice) -> bool:
    """Whether a request under the invoice's key may have reached GoRoute with no final
    answer recorded: unknown, or held (amended, a duplicate) with an unknown send beneath."""
    if invoice.key_first_used_at is None:
        return False
    settled = (InvoiceState.accepted, InvoiceState.rejected, InvoiceState.key_reused)
    return beneath(invoice) not in settled


# Reconcile's verdicts that showed a send under the key is no delivery of the invoice.
_SHOWN_UNDELIVERED = frozenset(
    {
        "sent_then_failed",
        "unknown_not_found_window_closed",  # a search reaching back to its first use
        "different_document",
        "not_found",
        "content_unconfirmed",  # its evidence stands until `release --force`
    }
)


def _not_shown_undelivered(invoice: Invoice, first_used: str | None) -> bool:
    """An unknown or key_reused invoice (an amended one too, over either) that reconcile has
    not judged, since its key was first used (``first_used``, as dated), to hold no delivery
    at GoRoute (found, in progress, or not judged at all)."""
    if beneath(invoice) not in (InvoiceState.unknown, InvoiceState.key_reused):
        return False
    if invoice.verdict not in _SHOWN_UNDELIVERED or not invoice.verdict_at:
        return True
    if first_used is None:  # a key used, but no record says since when: no verdict is since
        return invoice.key_first_used_at is not None
    try:
        return moment(invoice.verdict_at) < moment(first_used)
    except ValueError:  # a verdict time changed by hand: not shown since
        return True


def new_version(journal: JournalBackend, invoice_id: str, run_id: int) -> str:
    """The operator's explicit decision: send the current content under the next key."""
    invoice = check_new_version(journal, invoice_id, journal.clock())
    key = idempotency_key(invoice_id, invoice.key_version + 1)
    with journal.transaction():
        write(
            journal,
            Transition.new_version,
            invoice,
            state=InvoiceState.pending,
            reason=None,
            ingested_at=journal.now(),
            **next_key(invoice.key_version),
        )
        journal.add_event(
            invoice_id,
            "new_version",
            f"operator chose to send content {invoice.current_sha256[:12]} under {key} "
            f"(was {invoice.state} under {invoice.idempotency_key})",
            run_id,
        )
    return key


def adopt(
    journal: JournalBackend,
    invoice_id: str,
    *,
    expected_state: str,
    idempotency_key: str | None,
    transaction_id: str,
    remote_status: str | None,
    checked_at: str,
    accepted_at: str,
    detail: str,
    run_id: int | None = None,
) -> bool:
    """Record that ``transaction_id`` is this invoice's send: state ``accepted``, one event.

    Only if the invoice is still in ``expected_state`` under ``idempotency_key`` (what
    reconcile judged); False, and nothing written, when it has moved on since.
    """
    with journal.transaction():
        invoice = journal.invoice(invoice_id)
        if (
            invoice is None
            or invoice.state != expected_state
            or invoice.idempotency_key != idempotency_key
            or invoice.hold is Hold.abandoned
            or not allowed(Transition.adopt, invoice.state)
            or (
                # Never sent from here: only the transaction a history check found for it.
                invoice.state is InvoiceState.pending
                and invoice.existing_transaction_id != transaction_id
            )
            # GoRoute gives each document its own: another invoice's is no send of this one.
            or journal.transaction_owner(transaction_id, invoice_id, idempotency_key) is not None
        ):
            return False
        # The transaction found settles what a hold was waiting for.
        write(
            journal,
            Transition.adopt,
            invoice,
            state=InvoiceState.accepted,
            reason=None,
            transaction_id=transaction_id,
            remote_status=remote_status,
            remote_checked_at=checked_at,
            accepted_at=accepted_at,
            hold=None,
            hold_reason=None,
            held_at=None,
            held_by=None,
        )
        settled = f"; settles the hold ({invoice.hold_reason})" if invoice.hold else ""
        journal.add_event(invoice_id, "adopted", detail + settled, run_id)
    return True


def doubt(
    journal: JournalBackend,
    invoice_id: str,
    *,
    transaction_id: str,
    reason: str,
    run_id: int | None = None,
) -> bool:
    """An acceptance that named another document's transaction (an answer meant for another
    request) proves nothing: the invoice is ``unknown`` under its key, which ``send`` replays
    inside its window and ``reconcile`` looks up after it, as for any send never answered.
    Only if it is still accepted as ``transaction_id``; False, and nothing written, if not."""
    with journal.transaction():
        invoice = journal.invoice(invoice_id)
        if (
            invoice is None
            or invoice.transaction_id != transaction_id
            or not allowed(Transition.doubt, invoice.state)
        ):
            return False
        write(
            journal,
            Transition.doubt,
            invoice,
            state=InvoiceState.unknown,
            reason=reason,
            transaction_id=None,
            accepted_at=None,
            remote_status=None,
            remote_checked_at=None,
            # No verdict yet on what the key's send did: a new key waits for reconcile's.
            verdict=None,
            verdict_at=None,
        )
        journal.add_event(
            invoice_id, "doubted", f"was accepted as {transaction_id}: {reason}", run_id
        )
    return True


def record_delivery(
    journal: JournalBackend,
    invoice_id: str,
    *,
    transaction_id: str,
    status: str | None,
    checked_at: str,
    run_id: int | None = None,
) -> bool:
    """Record the delivery status GoRoute reports for an accepted invoice's transaction;
    an event when it changed. False when the invoice no longer holds that transaction."""
    with journal.transaction():
        invoice = journal.invoice(invoice_id)
        if (
            invoice is None
            or invoice.state is not InvoiceState.accepted
            or invoice.transaction_id != transaction_id
        ):
            return False
        before = invoice.remote_status
        write(
            journal,
            Transition.record_delivery,
            invoice,
            touch=False,
            remote_status=status,
            remote_checked_at=checked_at,
        )
        if status != before:
            change = f"{transaction_id}: {before or 'none'} -> {status}"
            journal.add_event(invoice_id, "delivery", change, run_id)
    return True

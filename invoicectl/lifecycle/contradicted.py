"""Invoices the journal's row calls never sent under their first key, though its attempts
hold a request that may have delivered it (accepted, unanswered, a 5xx, a 422's transaction):
the row was edited by hand, or lost and the file scanned in again. Sending would deliver the
invoice a second time, so it is held, with the evidence standing (``evidence``) and the
transaction named, if any, for ``reconcile`` to judge and adopt, as the history check holds
what GoRoute already has.
"""

from __future__ import annotations

from invoicectl.errors import InvoiceBusy
from invoicectl.goroute.identifiers import checked_id
from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import InvoiceState
from invoicectl.lifecycle.evidence import dismissed_since_first_use, note_evidence
from invoicectl.lifecycle.holds import hold
from invoicectl.lifecycle.refusals import NOT_PROCESSED

HELD_BY = "send"
# What a request's outcome says of an invoice never delivered by it: refused unread, or not
# sent at all, or rejected (a rejected invoice changed goes out under its next key).
_UNDELIVERED = (*NOT_PROCESSED, "rejected")


def hold_contradicted(journal: JournalBackend) -> list[str]:
    """Hold every such invoice; their IDs. Reads the pending invoices (an index), most often
    none, and asks the attempts of the few never sent."""
    never_sent = {
        invoice.invoice_id: invoice
        for invoice in journal.invoices(InvoiceState.pending)
        if invoice.key_first_used_at is None and invoice.key_version <= 1 and invoice.hold is None
    }
    requested = journal.requested_before(list(never_sent), _UNDELIVERED) if never_sent else {}
    held: list[str] = []
    for invoice_id, txn in sorted(requested.items()):
        if dismissed_since_first_use(journal, never_sent[invoice_id]):
            continue  # the operator's `release --force` is the last word on this evidence
        reason = (
            "the journal's row says it was never sent, but the journal holds a request for it "
            f"that may have delivered it{_named(txn)}: the row was edited or lost; "
            f"`invoicectl verify` names the damage, {_way_out(invoice_id, txn)}"
        )
        try:
            with journal.transaction():
                hold(journal, invoice_id, reason, HELD_BY, existing_transaction_id=checked_id(txn))
                invoice = journal.invoice(invoice_id)
                if invoice is not None:
                    note_evidence(journal, invoice, reason)
        except InvoiceBusy:  # a live send worker holds it (PostgreSQL): the next run's
            continue
        held.append(invoice_id)
    return held


def _named(txn: str | None) -> str:
    return f" (transaction {txn})" if txn else ""


def _way_out(invoice_id: str, txn: str | None) -> str:
    """The next step: reconcile judges a named transaction; with none (a request never
    answered) only the operator can say, once GoRoute's dashboard shows no delivery."""
    if txn:
        return "`invoicectl reconcile` finds what GoRoute holds"
    return (
        f"`invoicectl release {invoice_id} --force` only once you know GoRoute holds no "
        "delivery of it"
    )

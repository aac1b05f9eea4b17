"""Judging the delivery of an ``accepted`` invoice: delivered, failed, or still on its way.

The journal already owns the transaction; reconcile GETs it to follow the delivery status
(``delivered``, ``delivery_failed``, ``delivery_pending``; one in a status GoRoute does not
document is ``delivery_pending`` for a person to look at), which ``write_back`` (the facade)
records with or without ``--apply``; a transaction that turns out to be another document
(``another_document``: a cache that answered one send with another's answer) is no
delivery of this invoice, and a person looks; one with its number in other content, not
failed, is another version of it (``other_version``): a delivery all the same. A failure
recorded earlier is reported again without a request (``recorded_failure``).
"""

from __future__ import annotations

from invoicectl.goroute.outcomes import Outcome
from invoicectl.goroute.transactions import Found, NotFound, Transaction
from invoicectl.reconcile.failed_lookups import lookup_failed
from invoicectl.reconcile.matching import (
    IN_PROGRESS_STATUSES,
    api_side,
    compare,
    content_difference,
    same_number,
)
from invoicectl.reconcile.verdicts import (
    ApiSide,
    Case,
    JournalSide,
    Verdict,
    build_case,
)
from invoicectl.text import one_line


def judge_delivery(invoice_id: str, side: JournalSide, outcome: Outcome | None) -> Case:
    """The delivery status of the accepted transaction, from what its GET answered."""
    txn_id = side.transaction_id
    if isinstance(outcome, NotFound):
        return build_case(
            invoice_id,
            Verdict.not_found,
            side,
            api=ApiSide(txn_id),
            detail=f"accepted as {txn_id}, but GoRoute answers 404 for it now",
        )
    if not isinstance(outcome, Found):
        return lookup_failed(invoice_id, side, outcome, ApiSide(txn_id))
    txn = outcome.transaction
    api = api_side(txn, txn_id)
    differences = another_document(invoice_id, side, txn)
    if differences and _another_version(invoice_id, txn):
        return build_case(
            invoice_id,
            Verdict.other_version,
            side,
            api=api,
            action=f"investigate: {invoice_id} was accepted as {txn_id}, and GoRoute's {txn_id} "
            f"is another version of {invoice_id} (its number, in other content): a delivery of "
            f"it, whatever became of this content. `invoicectl reconcile --apply` makes it "
            "unknown and holds it, so that nothing sends it again; send a change as a credit "
            "note or an invoice of its own",
            detail="; ".join(differences),
        )
    if differences:
        return build_case(
            invoice_id,
            Verdict.different_document,
            side,
            api=api,
            action=f"investigate: {invoice_id} was accepted as {txn_id}, and GoRoute's "
            f"{txn_id} is another document: that answer may have been meant for another "
            "request (a proxy or cache answering from memory), so whether this invoice reached "
            f"GoRoute is unknown; look for {invoice_id} among GoRoute's transactions",
            detail="; ".join(differences),
        )
    if txn.status == "delivered":
        return build_case(
            invoice_id,
            Verdict.delivered,
            side,
            api=api,
            detail=f"delivered {txn.delivered_at or ''}".rstrip(),
        )
    if txn.status == "failed":
        return build_case(
            invoice_id,
            Verdict.delivery_failed,
            side,
            api=api,
            detail=f"transaction {txn_id} failed",
        )
    if txn.status in IN_PROGRESS_STATUSES:
        return build_case(
            invoice_id,
            Verdict.delivery_pending,
            side,
            api=api,
            detail=f"transaction {txn_id} is {txn.status}",
        )
    # A status GoRoute documents nowhere ("rejected", "error", none at all) is no proof the
    # invoice is on its way (helper-107: one answered "rejected" was reported in progress,
    # exit 0, run after run); nor of a failure, after which a new version could deliver it
    # twice. A person asks GoRoute.
    shown = f"status {one_line(txn.status, 40)}" if txn.status else "no status"
    return build_case(
        invoice_id,
        Verdict.delivery_pending,
        side,
        api=api,
        needs_person=True,
        action=f"investigate: GoRoute gives {txn_id} {shown}, not one of pending, processing, "
        f"sending, delivered or failed, so whether {invoice_id} reaches its receiver is unknown; "
        "ask GoRoute, and run `invoicectl reconcile` again once it shows delivered or failed",
        detail=f"transaction {txn_id} has {shown}",
    )


def another_document(invoice_id: str, side: JournalSide, txn: Transaction) -> list[str]:
    """How the transaction an invoice was accepted as is another document: another invoice
    number, or another content hash than the one sent with it; [] otherwise. Only those two:
    the id came with the send's own answer, and a receiver or document type GoRoute writes
    its own way (a Peppol identifier scheme, a document type id) must never undo it."""
    number = (txn.invoice_number or "").strip()
    content = content_difference(side, txn)
    if number and number != invoice_id:
        return compare(invoice_id, side, txn) + ([content] if content else [])
    if content is None:
        return []
    return [same_number(content) if number else content]


def _another_version(invoice_id: str, txn: Transaction) -> bool:
    """Whether ``txn``, in other content, carries this invoice's number and is no failure:
    another version of it, delivered or on its way."""
    return (txn.invoice_number or "").strip() == invoice_id and txn.status != "failed"


def recorded_failure(invoice_id: str, side: JournalSide) -> Case:
    """A delivery failure the journal recorded on an earlier run: no request needed."""
    return build_case(
        invoice_id,
        Verdict.delivery_failed,
        side,
        api=ApiSide(side.transaction_id, status="failed"),
        detail=f"transaction {side.transaction_id} failed (recorded earlier)",
    )

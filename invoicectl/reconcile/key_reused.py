"""Judging a ``key_reused`` invoice by the transaction its 422 named.

GoRoute refused the key (422 ``IDEMPOTENCY_KEY_REUSED``) and named the transaction that holds
it (``existing_transaction_id``); reconcile GETs that transaction. GoRoute not knowing it is
``not_found``; an answer is judged by ``matching.matched``, and adopting it is
``already_sent``. A 422 that named no transaction is searched for like an unanswered send
(``unanswered``). A never-sent invoice that a send's history check held, with the transaction
it found (``send/history.py``), is judged here the same way.
"""

from __future__ import annotations

from dataclasses import replace

from invoicectl.goroute.outcomes import Outcome
from invoicectl.goroute.transactions import Found, NotFound, Transaction
from invoicectl.reconcile.failed_lookups import lookup_failed
from invoicectl.reconcile.matching import api_side, compare, matched
from invoicectl.reconcile.verdicts import (
    ApiSide,
    Case,
    JournalSide,
    Verdict,
    build_case,
)


def judge_key_reused(
    invoice_id: str, side: JournalSide, txn_id: str, outcome: Outcome | None
) -> Case:
    """The verdict on the transaction the 422 named, from what its GET answered."""
    if isinstance(outcome, NotFound):
        named = "the 422" if side.state == "key_reused" else "the history check found"
        return build_case(
            invoice_id,
            Verdict.not_found,
            side,
            api=ApiSide(txn_id),
            detail=f"{named} transaction {txn_id}; GoRoute answers 404 for it",
        )
    if not isinstance(outcome, Found):
        return lookup_failed(invoice_id, side, outcome, ApiSide(txn_id))
    txn = outcome.transaction
    if (unsure := _unsure_difference(invoice_id, side, txn)) is not None:
        # Not a lookup to try again (it answered, and would answer the same: helper-88), and
        # no verdict of no delivery: a person tells, as for a transaction without a hash.
        return build_case(
            invoice_id,
            Verdict.content_unconfirmed,
            side,
            api=api_side(txn, txn_id),
            action=f"investigate: ask GoRoute which invoice {txn_id} is; if this one, "
            f"`invoicectl abandon {invoice_id}` records it as delivered; if not, "
            f"`invoicectl release {invoice_id} --force` lets it go on",
            detail=unsure,
        )
    case = matched(invoice_id, side, txn, txn_id, adopt=Verdict.already_sent)
    return _never_sent_here(case) if side.state == "pending" else case


def _unsure_difference(invoice_id: str, side: JournalSide, txn: Transaction) -> str | None:
    """Why the transaction's GET cannot show it is another document, though it differs:
    ``different_document`` clears the evidence that GoRoute may hold a delivery, and a send
    then goes out (helper-86). A record with no invoice number ties it to nothing, and a
    transaction a history check found in the list as this invoice that its GET says is
    another contradicts the list: neither is taken over the other. None when it matches, or
    names another number (a 422's own GET)."""
    differences = compare(invoice_id, side, txn)
    if not differences:
        return None
    said = "; ".join(differences)
    if not (txn.invoice_number or "").strip():
        return f"GoRoute's record carries no invoice number ({said}): whether it is this is unknown"
    if side.state == "pending":
        return (
            f"the history check found this transaction in the list as this invoice, but its own "
            f"GET says otherwise ({said}); what happened is still unknown"
        )
    return None


def _never_sent_here(case: Case) -> Case:
    """The next step for an invoice this journal never sent (a history check held it): it
    has no key of its own to replace, so releasing it is what sends it."""
    invoice_id = case.invoice_id
    if case.verdict is Verdict.sent_then_failed:
        return replace(
            case,
            action=f"delivery failed: `invoicectl release {invoice_id}` sends it from this journal",
        )
    detail = case.detail.replace("the journal sent sha256", "this journal would send sha256")
    detail = detail.replace(" under this key", "")
    if case.verdict is Verdict.other_version:  # its action stands: a release sends it twice
        return replace(case, detail=detail)
    if case.verdict is Verdict.different_document:
        txn = case.api.transaction_id if case.api and case.api.transaction_id else "it"
        return replace(
            case,
            action=f"investigate: GoRoute's {txn} is another document than {invoice_id}; "
            f"`invoicectl release {invoice_id}` sends {invoice_id}, `invoicectl abandon "
            f"{invoice_id}` records it as settled",
            detail=detail,
        )
    return case

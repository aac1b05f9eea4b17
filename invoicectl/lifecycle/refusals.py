"""Whether a refusal shows that nothing was delivered (``refusal_may_hide_delivery``): what
lets an edit go out under the next key at once, and what makes ``--new-version`` wait for the
operator's word (``refusal_word_due``); and whether a send that may have been delivered was
looked up before an operator abandons it (``send_not_looked_up``)."""

from __future__ import annotations

from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import Invoice, beneath
from invoicectl.journal.records import InvoiceState as S
from invoicectl.lifecycle.window import moment

# Attempts whose request the API refused unread, or that never left: no send under their
# key (``sending`` gives such a key back).
NOT_PROCESSED = ("auth_refused", "wrong_endpoint", "rate_limited", "not_sent")


def refusal_may_hide_delivery(journal: JournalBackend, invoice: Invoice) -> bool:
    """Whether a rejected invoice (or one amended or held over a rejection) may have been
    delivered all the same: its refusal was a 409 ("conflict (duplicate)": goroute-api.md
    treats it as a key reuse without an id), or an earlier request under the same key may have
    reached GoRoute and got no final answer (a lost answer, then a refusal of the retry)."""
    if beneath(invoice) is not S.rejected or invoice.idempotency_key is None:
        return False
    return any(
        attempt.http_status == 409 or attempt.outcome not in (*NOT_PROCESSED, "rejected")
        for attempt in journal.attempts(invoice.invoice_id)
        if attempt.idempotency_key == invoice.idempotency_key
    )


def refusal_word_due(journal: JournalBackend, invoice: Invoice) -> str | None:
    """Why a refused invoice may hide a delivery (``refusal_may_hide_delivery``), as the
    operator's ``release --force`` dismisses it; None when it may not. Reconcile cannot settle
    it: a 409 names no transaction, so only the operator's word, given after looking at
    GoRoute, lets ``--new-version`` send it under the next key. The same word answers an
    unanswered send reconcile's search stopped short of (``unsearched``)."""
    if beneath(invoice) is S.unknown and invoice.verdict == "unknown_search_incomplete":
        return unsearched(invoice)
    if not refusal_may_hide_delivery(journal, invoice):
        return None
    return (
        f"GoRoute refused key {invoice.idempotency_key} (a 409, or after a request that got no"
        " answer) and may hold a delivery under it"
    )


def unsearched(invoice: Invoice) -> str:
    """Why an unanswered send that reconcile's search did not reach back to waits for the
    operator's word: GoRoute's list was read newest first and stopped short of its key's
    first use, so the delivery may lie in the part not read (helper-106: ``--new-version``
    took the verdict as proof of none, and sent a delivered invoice a second time)."""
    return (
        f"reconcile's search of GoRoute's transactions stopped before key "
        f"{invoice.idempotency_key} was first used, and may have missed a delivery under it"
    )


def send_not_looked_up(journal: JournalBackend, invoice: Invoice) -> str | None:
    """Why an abandon could hide a delivery from the operator: a request under the invoice's
    key may have reached GoRoute with no answer that settles it (unknown, key_reused, a 409,
    an unanswered replay pending), and no reconcile has judged it since the key was first
    used. Abandoned, it is never looked up again: a clerk who posts it would not learn that
    GoRoute delivered it too (helper-81)."""
    state = beneath(invoice)
    unsettled = state in (S.unknown, S.key_reused) or (
        state is S.pending and invoice.key_first_used_at is not None
    )
    if not (unsettled or refusal_may_hide_delivery(journal, invoice)):
        return None
    if _judged_since(invoice.verdict_at, invoice.key_first_used_at):
        return None
    if not unsettled:  # a refusal reconcile cannot look up (it judges 409s, finding nothing)
        return (
            f"{invoice.state}, but GoRoute may hold a delivery under key "
            f"{invoice.idempotency_key} all the same (a 409, or a request before the refusal "
            "got no answer), which no reconcile can look up; abandoned, nobody would learn it. "
            "Look for it at GoRoute, then `abandon --force`"
        )
    return (
        f"{invoice.state}: its request under key {invoice.idempotency_key} may have been "
        "delivered, and no `invoicectl reconcile` has looked it up since; abandoned, it is "
        "never looked up again. Run `invoicectl reconcile` first (a delivery it finds is "
        "adopted with --apply), or `abandon --force` if you know what GoRoute holds"
    )


def _judged_since(verdict_at: str | None, first_used_at: str | None) -> bool:
    """Whether a verdict was recorded after the key first carried a request."""
    if not verdict_at:
        return False
    if not first_used_at:
        return True
    try:
        return moment(verdict_at) >= moment(first_used_at)
    except ValueError:  # a time changed by hand: not judged since
        return False


# Reconcile's verdicts on an unanswered send that found its transaction at GoRoute.
_FOUND = ("already_sent", "unknown_found", "in_progress")


def not_shown_undelivered(invoice: Invoice, before: S) -> str:
    """Why ``--new-version`` refuses an invoice reconcile has not shown undelivered since its
    key's first use (``before``: the state beneath an amended one): what to do, by verdict."""
    invoice_id, verdict = invoice.invoice_id, invoice.verdict
    shown = invoice.state if before is invoice.state else f"{invoice.state} over {before}"
    if verdict == "unknown_search_incomplete":  # searched too short: no proof
        return (
            f"invoice {invoice_id} is {shown}: {unsearched(invoice)}; ask GoRoute, and only "
            f"once you know it was not delivered, `invoicectl release {invoice_id} --force`, "
            "then --new-version"
        )
    if verdict in _FOUND and invoice.state is S.amended:
        # helper-106: the advice to release --force led back here, round and round.
        return (
            f"invoice {invoice_id} is {shown}, and reconcile found the content its key "
            f"{invoice.idempotency_key} carried at GoRoute ({verdict}): that version was "
            f"delivered, and a new version would deliver {invoice_id} twice. Restore the file "
            "to it (`invoicectl reconcile --apply` then adopts the transaction), or send the "
            "change as a credit note or an invoice of its own"
        )
    return (
        f"invoice {invoice_id} is {shown} and `invoicectl reconcile` has not shown, since "
        f"its key was first used, that GoRoute holds no delivery of it (verdict: "
        f"{verdict or 'none'}): a new key could deliver it twice; run `invoicectl "
        "reconcile` and follow its verdict (where it found a send, `invoicectl release "
        f"{invoice_id} --force` once you know it is no delivery of this invoice)"
    )

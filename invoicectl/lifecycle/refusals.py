"""Whether a refusal shows that nothing was delivered (``refusal_may_hide_delivery``): what
lets an edit go out under the next key at once, and what makes ``--new-version`` wait."""

from __future__ import annotations

from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import Invoice
from invoicectl.journal.records import InvoiceState as S

# Attempts whose request the API refused unread, or that never left: no send under their
# key (``sending`` gives such a key back).
NOT_PROCESSED = ("auth_refused", "wrong_endpoint", "rate_limited", "not_sent")


def refusal_may_hide_delivery(journal: JournalBackend, invoice: Invoice) -> bool:
    """Whether a rejected invoice (or one amended or held over a rejection) may have been
    delivered all the same: its refusal was a 409 ("conflict (duplicate)": goroute-api.md
    treats it as a key reuse without an id), or an earlier request under the same key may have
    reached GoRoute and got no final answer (a lost answer, then a refusal of the retry)."""
    beneath = invoice.state
    if beneath in (S.amended, S.invalid):
        beneath = invoice.state_before_amend or beneath
    if beneath is not S.rejected or invoice.idempotency_key is None:
        return False
    return any(
        attempt.http_status == 409 or attempt.outcome not in (*NOT_PROCESSED, "rejected")
        for attempt in journal.attempts(invoice.invoice_id)
        if attempt.idempotency_key == invoice.idempotency_key
    )

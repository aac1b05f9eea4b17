"""What happens to an invoice once nothing holds it: the rules of its state, said as the
step an operator takes next (after a ``release``, or where reconcile leaves it unheld)."""

from __future__ import annotations

from datetime import datetime

from invoicectl.journal.records import Invoice, InvoiceState
from invoicectl.lifecycle.window import window_open


def unheld(invoice: Invoice, now: datetime, *, word_given: bool = False) -> str:
    """``invoice``'s state and what its rules do with it now; ``word_given``: an operator's
    ``release --force`` has just answered the evidence, which ``--new-version`` then accepts."""
    state, invoice_id = invoice.state, invoice.invoice_id
    if state is InvoiceState.pending and invoice.key_first_used_at is None:
        return "pending; the next send sends it"
    if state in (InvoiceState.pending, InvoiceState.unknown):
        if window_open(invoice.key_first_used_at, now):
            return f"{state}; the next send replays it under {invoice.idempotency_key}"
        return f"{state}, its key's 24-hour window closed: `invoicectl reconcile` first"
    new_version = f"`invoicectl send DIR --new-version {invoice_id}`"
    if state is InvoiceState.key_reused:  # never "sends it": GoRoute may hold a delivery
        when = "you know" if word_given else "`invoicectl reconcile` shows"
        return (
            f"key_reused, its key used: {new_version} sends it under the next key, once {when} "
            "GoRoute holds no delivery of it"
        )
    if state is InvoiceState.rejected:
        return f"rejected: fix the file, then {new_version}"
    if state is InvoiceState.amended:
        return f"amended: restore the file, or {new_version}"
    return f"{state}; as before the hold"

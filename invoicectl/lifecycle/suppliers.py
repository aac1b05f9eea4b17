"""One journal, one supplier: what a profile's send does with an invoice of another.

A profile sends for one organisation (its ``sender``, a Peppol id). The scan of its send takes
only that supplier's files (``scan.ingest.SupplierFilter``); an invoice of another supplier
that is in its journal all the same (scanned before the profile had a sender, or by a send
without one) is held here, before anything is sent: never sent or replayed through this
account, shown by ``status`` as on hold with the reason, and exit 4 until a person settles
it (sends it with its own profile, abandons it). Holding changes nothing but the hold, so it
can never turn an unanswered send into a new one (``holds``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from invoicectl.errors import UsageError
from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import InvoiceState
from invoicectl.lifecycle.holds import hold

# Who holds an invoice of another supplier (the hold's ``held_by``).
SUPPLIER_CHECK = "supplier check"


def hold_other_suppliers(
    journal: JournalBackend,
    supplier: str,
    new_versions: Sequence[str] = (),
    skip: Collection[str] = (),
) -> list[str]:
    """Hold every invoice a send would send whose supplier is not ``supplier``, or whose ID
    is in ``skip`` (another profile's journal holds it as sent through its account); the IDs
    held now. A ``--new-version`` of another supplier's invoice is a usage error.

    One whose key was used is left to be replayed here, under that key: its request may
    have reached this account, and this account's answer settles it; sent through any other
    it could be delivered twice."""
    for invoice_id in new_versions:
        invoice = journal.invoice(invoice_id)
        if invoice is not None and invoice.sender_endpoint != supplier:
            raise UsageError(
                f"--new-version {invoice_id}: its supplier {invoice.sender_endpoint or '(none)'}"
                f" is not this profile's sender {supplier}; send it with its own profile"
            )
    held = []
    for invoice in journal.invoices(InvoiceState.pending, InvoiceState.unknown):
        if invoice.hold is not None or invoice.key_first_used_at is not None:
            continue
        if invoice.sender_endpoint == supplier and invoice.invoice_id not in skip:
            continue
        reason = (
            f"supplier {invoice.sender_endpoint or '(none)'} is not this profile's sender "
            f"{supplier}: never sent through this account; send it with its supplier's profile"
            if invoice.sender_endpoint != supplier
            else "another profile's journal holds it as sent through that account: never "
            "sent through this one too"
        )
        if hold(journal, invoice.invoice_id, reason, by=SUPPLIER_CHECK).done:
            held.append(invoice.invoice_id)
    return held

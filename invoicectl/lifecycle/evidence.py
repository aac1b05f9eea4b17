"""Evidence that GoRoute may hold a delivery of an invoice already: once found, it stands.

Found by a send's history check (transactions with the invoice's number, before this journal's
first send of it) or by reconcile (``unknown_sent_earlier``, ``unknown_ambiguous``: a match this
journal's own send cannot account for; ``content_unconfirmed``: this invoice, in content GoRoute
does not show). It is an event of the audit trail (``delivery_evidence``)
and stands whoever holds the invoice, whatever verdict reconcile reaches next, until one of
these clears it (``evidence_cleared``): reconcile shows the transaction is no delivery of this
invoice (``different_document``, ``sent_then_failed``), or an operator's ``release --force``
gives their word that it is not. An accepted invoice has no use for it.

While it stands, no send sends or replays the invoice (``plan``), a release needs ``--force``
and ``--new-version`` is refused.
"""

from __future__ import annotations

from typing import Protocol

from invoicectl.journal.records import Event, Invoice, InvoiceState


class JournalBackend(Protocol):
    """What evidence needs of a journal: an invoice's audit trail, read and added to."""

    def events(self, invoice_id: str) -> list[Event]: ...

    def add_event(
        self, invoice_id: str | None, kind: str, detail: str, run_id: int | None = None
    ) -> None: ...


EVIDENCE = "delivery_evidence"
CLEARED = "evidence_cleared"
# Reconcile's verdicts that found the invoice at GoRoute from a send it cannot account for;
# and those that showed a transaction found is no delivery of it.
FOUND_BEFORE = ("unknown_ambiguous", "unknown_sent_earlier", "content_unconfirmed")
NO_DELIVERY = ("different_document", "sent_then_failed")
# Who holds an invoice GoRoute already holds a transaction for, found before its first send
# (``send.history``).
HISTORY_CHECK = "history check"


def standing_evidence(journal: JournalBackend, invoice: Invoice) -> str | None:
    """Why GoRoute may hold a delivery of ``invoice`` already, or None."""
    if invoice.state is InvoiceState.accepted:
        return None
    standing: str | None = None
    recorded = False
    for event in journal.events(invoice.invoice_id):
        if event.kind == EVIDENCE:
            standing, recorded = event.detail or "found at GoRoute already", True
        elif event.kind == CLEARED:
            standing, recorded = None, True
    return standing if recorded else _from_the_hold(invoice)


def note_evidence(
    journal: JournalBackend, invoice: Invoice, why: str, run_id: int | None = None
) -> None:
    """Record ``why`` as evidence, unless evidence already stands for ``invoice``."""
    if standing_evidence(journal, invoice) is None:
        journal.add_event(invoice.invoice_id, EVIDENCE, why, run_id)


def clear_evidence(
    journal: JournalBackend, invoice: Invoice, why: str, run_id: int | None = None
) -> None:
    """Record that the standing evidence for ``invoice`` no longer holds, and why."""
    if standing_evidence(journal, invoice) is not None:
        journal.add_event(invoice.invoice_id, CLEARED, why, run_id)


def _from_the_hold(invoice: Invoice) -> str | None:
    """The evidence a hold placed before evidence was recorded as an event carries."""
    found = invoice.existing_transaction_id
    if invoice.held_by == HISTORY_CHECK and found and invoice.verdict not in NO_DELIVERY:
        return (
            f"GoRoute already holds transaction {found} with its number (found before this "
            "journal's first send of it)"
        )
    if invoice.held_by == "reconcile" and invoice.verdict in FOUND_BEFORE:
        return f"reconcile found it at GoRoute already ({invoice.verdict})"
    return None

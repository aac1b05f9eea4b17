"""The invoices a bulk ``hold``, ``release`` or ``abandon`` acts on (``candidates``)."""

from __future__ import annotations

from collections.abc import Sequence

from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import SCAN_LIFTED, Hold, InvoiceState


def candidates(
    journal: JournalBackend,
    action: str,
    states: tuple[InvoiceState, ...] = (),
    verdict: str | None = None,
) -> list[str]:
    """The invoices a bulk ``hold``, ``release`` or ``abandon`` acts on: those matching the
    filters that the action can change. A release, only those held; a hold, never an accepted
    invoice (GoRoute has it), nor one abandoned, nor one held but by a hold a scan lifts; an
    abandon, no accepted invoice but one whose delivery failed (as ``abandon`` of one invoice),
    nor one abandoned.
    Read from the indexes: a journal of a million accepted costs what the others hold."""
    if action == "release":
        return journal.invoice_ids(states, verdict, (Hold.held,))
    unaccepted = [state for state in states or InvoiceState if state is not InvoiceState.accepted]
    holds: tuple[Hold | None, ...] = (None,) if action == "hold" else (None, Hold.held)
    chosen = journal.invoice_ids(unaccepted, verdict, holds) if unaccepted else []
    if action == "hold":  # and those a scan would release by itself (``hold``)
        chosen = sorted([*chosen, *_scan_held(journal, unaccepted, verdict)])
    if action == "abandon" and (not states or InvoiceState.accepted in states):
        chosen = sorted([*chosen, *journal.failed_deliveries(verdict, holds)])
    return chosen


def _scan_held(
    journal: JournalBackend, states: Sequence[InvoiceState], verdict: str | None
) -> list[str]:
    held = (invoice for by in SCAN_LIFTED for invoice in journal.held_by(by))
    return [
        invoice.invoice_id
        for invoice in held
        if invoice.state in states and verdict in (None, invoice.verdict)
    ]

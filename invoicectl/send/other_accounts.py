"""Invoices another account already sent from this outbox: never sent again through this one.

Two profiles without a ``sender`` on one outbox (one GoRoute, two accounts, two journals)
each take every file, and each would deliver every invoice once more. The outbox's marker
(``send/marker.py``) names the journals that sent from it to this base URL; before a send
without a supplier filter, each invoice it has never sent is looked up by its ID in those
journals, and one they hold as sent (or perhaps sent) is held here, with the evidence standing
(``lifecycle.evidence``), for a person: ``release --force`` once they know that send was no
delivery of it. The cost follows this journal's unsent invoices, not the others' history.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from pathlib import Path

from invoicectl.errors import InvoiceBusy, JournalError
from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import InvoiceState
from invoicectl.lifecycle.evidence import dismissed_since_first_use, note_evidence
from invoicectl.lifecycle.holds import hold
from invoicectl.locations import Location, journal_location
from invoicectl.send.marker import other_journals

HELD_BY = "send"
# How another journal is opened: ``invoicectl.journal.opened_journal``, given by the runner.
Opener = Callable[[Location], AbstractContextManager[JournalBackend]]


def hold_sent_by_others(
    journal: JournalBackend, outbox: Path, entry: tuple[str, str], opened_journal: Opener
) -> list[str]:
    """Hold this journal's never-sent invoices another journal sent from ``outbox`` to
    ``entry``'s base URL through another profile holds as sent; their IDs. ``entry``: (base
    URL, this send's marker entry). Nothing to read when no other journal sent from it."""
    base_url, own = entry
    others = other_journals(outbox, base_url, own, journal.identity().journal_id)
    if not others:
        return []
    never_sent = {
        invoice.invoice_id: invoice
        for invoice in journal.invoices(InvoiceState.pending)
        if invoice.key_first_used_at is None and invoice.hold is None
    }
    held: list[str] = []
    if not never_sent:
        return held
    for other, where in sorted(others.items()):
        for invoice_id in sorted(_sent_there(where, never_sent, opened_journal)):
            if dismissed_since_first_use(journal, never_sent[invoice_id]):
                continue  # the operator's `release --force` is the last word on it
            reason = (
                f"the journal {where} ({other}) holds it as sent from this outbox through "
                "another account; sent here too, the receiver would have it twice: "
                f"`invoicectl release {invoice_id} --force` only once you know that send was "
                "no delivery of it"
            )
            if _held(journal, invoice_id, reason):
                held.append(invoice_id)
                del never_sent[invoice_id]
    return held


def _sent_there(where: str, invoice_ids: Iterable[str], opened_journal: Opener) -> set[str]:
    """Those of ``invoice_ids`` the journal at ``where`` holds as sent or perhaps sent; none
    when it is not there any more (a journal the marker names but that was removed)."""
    location = journal_location(where)
    if isinstance(location, Path) and not location.is_file():
        return set()
    sent: set[str] = set()
    try:
        with opened_journal(location) as other:
            for invoice_id in invoice_ids:
                invoice = other.invoice(invoice_id)
                if invoice is not None and invoice.key_first_used_at is not None:
                    sent.add(invoice_id)
    except JournalError:
        return set()  # unreadable: it cannot say; the history check covers a lost journal
    return sent


def _held(journal: JournalBackend, invoice_id: str, reason: str) -> bool:
    try:
        with journal.transaction():
            if not hold(journal, invoice_id, reason, HELD_BY).done:
                return False
            invoice = journal.invoice(invoice_id)
            if invoice is not None:
                note_evidence(journal, invoice, reason)
    except InvoiceBusy:  # a live send worker holds it (PostgreSQL)
        return False
    return True

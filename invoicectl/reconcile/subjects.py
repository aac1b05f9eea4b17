"""Reconcile's reads of the journal: which invoices need a look, before any lookup.

``find_subjects`` picks them, says what the journal holds about each (a ``JournalSide``) and
what to ask GoRoute for it (a ``Subject``). The writes after the verdicts (``write_back``) go
through the lifecycle and live in the package's facade, ``reconcile/__init__.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from invoicectl.goroute.identifiers import checked_id
from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import Hold, Invoice, InvoiceState
from invoicectl.reconcile.verdicts import JournalSide

CONFLICT = 409


@dataclass(frozen=True)
class Subject:
    """One invoice to judge: what the journal says about it and what to ask GoRoute."""

    invoice_id: str
    side: JournalSide
    # What to ask: GET this id, search the list, or nothing (amended, 409, recorded failure).
    get_id: str | None = None
    search: bool = False


def find_subjects(journal: JournalBackend) -> list[Subject]:
    """The invoices to judge; an abandoned one was settled outside invoicectl and is not."""
    subjects: list[Subject] = []
    for invoice in _open(journal, InvoiceState.key_reused):
        # An id an older invoicectl stored unchecked (64 KB, "..", a newline) is searched for
        # like a 422 that named none, rather than asked for by a broken URL.
        existing = checked_id(invoice.existing_transaction_id)
        side = _journal_side(journal, invoice)
        subjects.append(Subject(invoice.invoice_id, side, get_id=existing, search=not existing))
    for invoice in _open(journal, InvoiceState.pending):
        # Never sent from this journal, held by a send's history check because GoRoute
        # already holds a transaction for it: judged like a 422's, against what it would send.
        existing = invoice.existing_transaction_id
        if invoice.hold is Hold.held and existing:
            side = replace(_journal_side(journal, invoice), sent_sha256=invoice.current_sha256)
            subjects.append(Subject(invoice.invoice_id, side, get_id=existing))
    for invoice in _open(journal, InvoiceState.unknown):
        side = _journal_side(journal, invoice)
        subjects.append(Subject(invoice.invoice_id, side, search=True))
    for invoice in _open(journal, InvoiceState.amended):
        subjects.append(_amended(journal, invoice))
    for invoice in _open(journal, InvoiceState.rejected):
        side = _journal_side(journal, invoice)
        if side.last_http_status == CONFLICT:
            subjects.append(Subject(invoice.invoice_id, side))
    # Only those whose delivery is not known to be final: one found delivered needs nothing,
    # and a journal of years holds a million of them (journal.in_delivery, by an index).
    for invoice in journal.in_delivery():
        status, txn_id = invoice.remote_status, invoice.transaction_id
        if status == "delivered" or not txn_id or invoice.hold is Hold.abandoned:
            continue
        side = _journal_side(journal, invoice)
        get_id = None if status == "failed" else txn_id
        subjects.append(Subject(invoice.invoice_id, side, get_id=get_id))
    return subjects


def _amended(journal: JournalBackend, invoice: Invoice) -> Subject:
    """An amended invoice; over an unanswered or refused send, that send is looked up as
    it would have been before the edit: the edit does not settle what its key delivered."""
    side = _journal_side(journal, invoice)
    if invoice.state_before_amend is InvoiceState.unknown:
        return Subject(invoice.invoice_id, side, search=True)
    if invoice.state_before_amend is InvoiceState.key_reused:
        existing = checked_id(invoice.existing_transaction_id)
        return Subject(invoice.invoice_id, side, get_id=existing, search=not existing)
    return Subject(invoice.invoice_id, side)


def _open(journal: JournalBackend, state: InvoiceState) -> list[Invoice]:
    return [invoice for invoice in journal.invoices(state) if invoice.hold is not Hold.abandoned]


def _journal_side(journal: JournalBackend, invoice: Invoice) -> JournalSide:
    invoice_id, key = invoice.invoice_id, invoice.idempotency_key
    shas = [revision.sha256 for revision in journal.revisions(invoice_id)]
    attempts = [
        attempt
        for attempt in journal.attempts(invoice_id)
        if key is None or attempt.idempotency_key == key
    ]
    by_key = journal.transactions_by_key(invoice_id)
    this_key = {txn for held_by, txn in by_key if held_by == key}
    earlier_keys = {txn for held_by, txn in by_key if held_by != key} - this_key if key else set()
    return JournalSide(
        state=invoice.state,
        document_type=invoice.document_type,
        receiver=invoice.receiver or invoice.receiver_id,
        idempotency_key=key,
        sent_sha256=invoice.key_sha256,
        current_sha256=invoice.current_sha256,
        sent_revision=_position(shas, invoice.key_sha256),
        current_revision=_position(shas, invoice.current_sha256),
        first_attempt_at=attempts[0].started_at if attempts else None,
        last_attempt_at=attempts[-1].started_at if attempts else None,
        last_http_status=attempts[-1].http_status if attempts else None,
        key_first_used_at=invoice.key_first_used_at,
        transaction_id=invoice.transaction_id,
        remote_status=invoice.remote_status,
        state_before_amend=invoice.state_before_amend,
        earlier_keys=frozenset(earlier_keys),
    )


def _position(shas: list[str], sha: str | None) -> int | None:
    return shas.index(sha) + 1 if sha in shas else None

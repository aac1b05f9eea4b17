"""Reconcile's reads and writes of the journal.

Before any lookup: which invoices need a look (``find_subjects``), what the journal says about
each (a ``JournalSide``), and what to ask GoRoute for it. After the verdicts
(``write_back``): the delivery status of ``accepted`` invoices, always recorded, and with
``--apply`` the adoption of the transactions found, one SQLite transaction and one event row per
invoice, and only if the invoice is still in the state and under the key it was judged in.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from invoicectl.errors import ExitCode
from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import Invoice, InvoiceState
from invoicectl.lifecycle.decisions import adopt, record_delivery
from invoicectl.reconcile.verdicts import GUIDANCE, Case, JournalSide, Verdict

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
    subjects: list[Subject] = []
    for invoice in journal.invoices(InvoiceState.key_reused):
        existing = invoice.existing_transaction_id
        side = _journal_side(journal, invoice)
        subjects.append(Subject(invoice.invoice_id, side, get_id=existing, search=not existing))
    for invoice in journal.invoices(InvoiceState.unknown):
        side = _journal_side(journal, invoice)
        subjects.append(Subject(invoice.invoice_id, side, search=True))
    for invoice in journal.invoices(InvoiceState.amended):
        subjects.append(Subject(invoice.invoice_id, _journal_side(journal, invoice)))
    for invoice in journal.invoices(InvoiceState.rejected):
        side = _journal_side(journal, invoice)
        if side.last_http_status == CONFLICT:
            subjects.append(Subject(invoice.invoice_id, side))
    for invoice in journal.invoices(InvoiceState.accepted):
        status, txn_id = invoice.remote_status, invoice.transaction_id
        if status == "delivered" or not txn_id:
            continue
        side = _journal_side(journal, invoice)
        get_id = None if status == "failed" else txn_id
        subjects.append(Subject(invoice.invoice_id, side, get_id=get_id))
    return subjects


def _journal_side(journal: JournalBackend, invoice: Invoice) -> JournalSide:
    invoice_id, key = invoice.invoice_id, invoice.idempotency_key
    shas = [revision.sha256 for revision in journal.revisions(invoice_id)]
    attempts = [
        attempt
        for attempt in journal.attempts(invoice_id)
        if key is None or attempt.idempotency_key == key
    ]
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
    )


def _position(shas: list[str], sha: str | None) -> int | None:
    return shas.index(sha) + 1 if sha in shas else None


def write_back(
    journal: JournalBackend, cases: list[Case], apply: bool, checked_at: str, run_id: int | None
) -> tuple[list[Case], list[str], list[str]]:
    written: list[Case] = []
    applied: list[str] = []
    recorded: list[str] = []
    for case in cases:
        if _fresh_delivery_status(case) and record_delivery(
            journal,
            case.invoice_id,
            transaction_id=case.journal.transaction_id or "",
            status=case.api.status if case.api else None,
            checked_at=checked_at,
            run_id=run_id,
        ):
            recorded.append(case.invoice_id)
        if apply and GUIDANCE[case.verdict].adoptable and _adopt(journal, case, checked_at, run_id):
            applied.append(case.invoice_id)
            adopted = f"adopted {case.api.transaction_id if case.api else ''}; state now accepted"
            case = replace(case, applied=True, exit_code=ExitCode.OK, action=adopted)
        written.append(case)
    return written, applied, recorded


def _fresh_delivery_status(case: Case) -> bool:
    """A delivery status just read from GoRoute (not a failure the journal already had)."""
    if case.verdict not in (Verdict.delivered, Verdict.delivery_failed, Verdict.delivery_pending):
        return False
    return case.journal.remote_status != "failed"


def _adopt(journal: JournalBackend, case: Case, checked_at: str, run_id: int | None) -> bool:
    api = case.api
    if api is None or api.transaction_id is None:
        return False
    how = "the 422's existing transaction" if case.journal.state == "key_reused" else "found"
    return adopt(
        journal,
        case.invoice_id,
        expected_state=case.journal.state,
        idempotency_key=case.journal.idempotency_key,
        transaction_id=api.transaction_id,
        remote_status=api.status,
        checked_at=checked_at,
        accepted_at=api.created_at or checked_at,
        detail=f"reconcile adopted {api.transaction_id} ({how}, status {api.status or 'none'}) "
        f"for key {case.journal.idempotency_key}",
        run_id=run_id,
    )

"""Judging: which judge each invoice goes to, and the verdicts that need no lookup.

``judge`` sends each ``Subject`` to the module that owns its case: ``key_reused`` (the
transaction a 422 named), ``unanswered`` (the transactions-list search), ``delivery`` (an
accepted invoice's delivery status). Amended invoices and 409 conflicts are judged here from
the journal alone. Pure: every lookup has finished before ``judge`` runs, and nothing here
asks GoRoute or writes the journal.
"""

from __future__ import annotations

from datetime import datetime

from invoicectl.reconcile.cases import build_case
from invoicectl.reconcile.delivery import judge_delivery, recorded_failure
from invoicectl.reconcile.key_reused import judge_key_reused
from invoicectl.reconcile.search import Lookups
from invoicectl.reconcile.subjects import Subject
from invoicectl.reconcile.unanswered import judge_searched
from invoicectl.reconcile.verdicts import Case, JournalSide, Verdict


def judge(subject: Subject, lookups: Lookups, now: datetime) -> Case:
    side = subject.side
    if side.state == "amended":
        return _amended(subject.invoice_id, side)
    if side.state == "rejected":
        return _conflict(subject.invoice_id, side)
    if side.state == "accepted":
        if subject.get_id is None:
            return recorded_failure(subject.invoice_id, side)
        return judge_delivery(subject.invoice_id, side, lookups.transactions.get(subject.get_id))
    if subject.get_id is not None:
        return judge_key_reused(
            subject.invoice_id, side, subject.get_id, lookups.transactions.get(subject.get_id)
        )
    return judge_searched(subject.invoice_id, side, lookups.search, now)


def _amended(invoice_id: str, side: JournalSide) -> Case:
    sent, current = side.sent_sha256 or "?", side.current_sha256 or "?"
    before = (
        f"; before the change it was {side.state_before_amend}" if side.state_before_amend else ""
    )
    where = f" (transaction {side.transaction_id})" if side.transaction_id else ""
    return build_case(
        invoice_id,
        Verdict.amended,
        side,
        action=f"restore the file to the content sent (sha256 {sent}), then `invoicectl scan "
        f"DIR`; or `invoicectl send DIR --new-version {invoice_id}` to send the new content "
        f"(sha256 {current}) under a new key",
        detail=f"key {side.idempotency_key} carried revision {side.sent_revision} "
        f"(sha256 {sent}) first on {side.first_attempt_at or side.key_first_used_at}{where}; "
        f"the file is now revision {side.current_revision} (sha256 {current}){before}",
    )


def _conflict(invoice_id: str, side: JournalSide) -> Case:
    return build_case(
        invoice_id,
        Verdict.needs_decision,
        side,
        detail=f"GoRoute answered 409 (conflict, duplicate) on {side.last_attempt_at}",
    )

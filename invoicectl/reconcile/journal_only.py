"""Judging from the journal alone: amended invoices and 409 conflicts.

No GoRoute answer settles these, so reconcile asks nothing for them. An ``amended`` invoice's
file changed after its key carried other content (``judge_amended``: restore the file, or send
the new content under a new key); a send GoRoute refused with 409 (``judge_conflict``) needs a
person to ask GoRoute whether it was already delivered. Pure: nothing here writes the journal.
"""

from __future__ import annotations

from invoicectl.reconcile.verdicts import Case, JournalSide, Verdict, build_case


def judge_amended(invoice_id: str, side: JournalSide) -> Case:
    """The file changed after its key carried other content: restore it, or a new version."""
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


def judge_conflict(invoice_id: str, side: JournalSide) -> Case:
    """GoRoute answered 409 (conflict, duplicate): only GoRoute can say whether it arrived."""
    return build_case(
        invoice_id,
        Verdict.needs_decision,
        side,
        detail=f"GoRoute answered 409 (conflict, duplicate) on {side.last_attempt_at}",
    )

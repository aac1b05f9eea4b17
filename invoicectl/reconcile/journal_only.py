"""Judging amended invoices and 409 conflicts.

An ``amended`` invoice's file changed after its key carried other content (``judge_amended``:
restore the file, or send the new content under a new key); when that key's send was never
answered or was refused, it is first judged as it would have been before the edit, and the
verdict told as an amended invoice's (``judged_beneath``). A send GoRoute refused with 409
(``judge_conflict``) needs a person to ask GoRoute whether it was already delivered. Pure:
nothing here asks GoRoute or writes the journal.
"""

from __future__ import annotations

from dataclasses import replace

from invoicectl.reconcile.verdicts import GUIDANCE, Case, JournalSide, Verdict, build_case

# What a lookup may show of the send beneath an edit: a delivery of the content sent before.
_DELIVERED_BEFORE = (Verdict.already_sent, Verdict.unknown_found, Verdict.in_progress)


def judge_amended(invoice_id: str, side: JournalSide) -> Case:
    """The file changed after its key carried other content: restore it, or a new version."""
    sent, current = side.sent_sha256 or "?", side.current_sha256 or "?"
    before = (
        f"; before the change it was {side.state_before_amend}" if side.state_before_amend else ""
    )
    where = f" (transaction {side.transaction_id})" if side.transaction_id else ""
    action = (
        f"restore the file to the content sent (sha256 {sent}), then `invoicectl scan "
        f"DIR`; or `invoicectl send DIR --new-version {invoice_id}` to send the new content "
        f"(sha256 {current}) under a new key"
    )
    if side.state_before_amend == "accepted" and side.remote_status != "failed":
        action = (
            f"GoRoute accepted the content sent{where}: restore the file to it (sha256 "
            f"{sent}), or send the change (sha256 {current}) as a credit note or an invoice of "
            "its own; "
            f"`--new-version {invoice_id}` only once its delivery failed (restored, `invoicectl "
            "reconcile` reads its delivery status), or it is delivered twice"
        )
    return build_case(
        invoice_id,
        Verdict.amended,
        side,
        action=action,
        detail=f"key {side.idempotency_key} carried revision {side.sent_revision} "
        f"(sha256 {sent}) first on {side.first_attempt_at or side.key_first_used_at}{where}; "
        f"the file is now revision {side.current_revision} (sha256 {current}){before}",
    )


def judged_beneath(side: JournalSide, case: Case) -> Case:
    """``case``, the verdict on the send beneath an amended invoice, told as the amended
    invoice's: nothing is adopted (the file holds other content now), and where GoRoute holds
    the content sent before, a new version would be the invoice's second delivery."""
    invoice_id = case.invoice_id
    if case.verdict in _DELIVERED_BEFORE:
        txn = case.api.transaction_id if case.api and case.api.transaction_id else "a transaction"
        return replace(
            case,
            journal=side,
            needs_person=True,
            exit_code=GUIDANCE[Verdict.amended].exit_code,
            action=f"GoRoute holds {txn}, the content key {side.idempotency_key} carried before "
            "the file changed: that version was delivered. Restore the file to it, or send the "
            "change as a credit note or an invoice of its own; `invoicectl release "
            f"{invoice_id} --force` and `--new-version` would deliver {invoice_id} twice",
        )
    if case.verdict is Verdict.other_version:  # its action stands: no new version
        return replace(case, journal=side)
    amended = judge_amended(invoice_id, side).action
    if case.verdict is Verdict.unknown_not_found_window_open:  # send replays no amended one
        return replace(case, journal=side, action=amended)
    return replace(case, journal=side, action=f"{case.action}; then: {amended}")


def judge_conflict(invoice_id: str, side: JournalSide) -> Case:
    """GoRoute answered 409 (conflict, duplicate): only GoRoute can say whether it arrived."""
    return build_case(
        invoice_id,
        Verdict.needs_decision,
        side,
        detail=f"GoRoute answered 409 (conflict, duplicate) on {side.last_attempt_at}",
    )

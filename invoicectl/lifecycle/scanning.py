"""The transitions a scan drives (design.md, "The journal" and Idempotency rules 5 and 6).

New IDs become ``pending`` (or ``invalid`` with a reason); a change to an unsent invoice
replaces the content to send; a change to a rejected one goes out under the next key; a change
to a sent one is ``amended``, never sent under the old key; two different files with one ID
make that ID ``invalid``, and an invoice held so gets back exactly the state it had once the
clash is resolved. ``settle_seen`` decides for one ID and says what it decided, for the report.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import (
    FACT_COLUMNS,
    Invoice,
    InvoiceState,
    ScannedCopy,
    fact_columns,
)
from invoicectl.lifecycle.holds import hold_clash
from invoicectl.lifecycle.keys import next_key
from invoicectl.lifecycle.refusals import refusal_may_hide_delivery
from invoicectl.lifecycle.transitions import Transition, write

S = InvoiceState


class Seen(NamedTuple):
    """What settling one invoice ID came to, as the scan report counts it."""

    new: bool = False
    unchanged: bool = False
    changed: bool = False
    amended: bool = False
    problem: str | None = None  # reported for the ID (a never-sent one is invalid for it)
    clash: bool = False  # a sent one in several files with different content: kept as it is


def admit_fresh(journal: JournalBackend) -> tuple[list[str], list[tuple[str, str]]]:
    """Every ID the scan saw for the first time, in one content, admitted set-wise."""
    return journal.insert_fresh(valid=S.pending, invalid=S.invalid)


def settle_seen(journal: JournalBackend, found: ScannedCopy) -> Seen:
    """An ID found in one content that is new to it, or unchanged but invalid."""
    invoice = journal.invoice(found.invoice_id)
    if invoice is None:  # pragma: no cover - new single-content IDs are admitted set-wise
        raise AssertionError(f"{found.invoice_id} should have been admitted with the new ones")
    if invoice.current_sha256 == found.sha256:
        return Seen(unchanged=True, problem=_recheck(journal, invoice))
    return _change(journal, invoice, found)


# A key committed without a request (only older journals have one) is given up with it.
_NO_KEY: dict[str, Any] = {"idempotency_key": None, "key_sha256": None}


def was_sent(invoice: Invoice) -> bool:
    """Whether a request under the invoice's key may have reached GoRoute: its first
    attempt row was committed (``key_first_used_at`` is written with it), and the key was
    not given back since. A key chosen but never carried by a request is not a send: only a
    ``pending`` invoice (or one a duplicate holds ``invalid``) can have one, left by a run of
    an older invoicectl stopped before its first request."""
    if invoice.idempotency_key is None:
        return False
    beneath = _settled_state(invoice)
    return invoice.key_first_used_at is not None or beneath not in (S.pending, S.invalid)


def hold_duplicate(journal: JournalBackend, copies: list[ScannedCopy], reason: str) -> Seen:
    """One ID in several files with different content, reported each scan until one file
    is left: a never-sent invoice is ``invalid`` for ``reason`` meanwhile (neither content is
    sent). A sent one keeps its state and content (a state here once took the place of the
    state beneath an edit, amended over accepted, so that a new version got past it), and is
    held (``holds.hold_clash``): no replay, new version or correction sends the journal's
    content, which may be neither file's, until a scan finds one file left."""
    first = min(copies, key=lambda copy: copy.name)
    invoice = journal.invoice(first.invoice_id)
    if invoice is None:
        _admit(journal, first, S.invalid, reason)
        return Seen(new=True, problem=reason)
    if not was_sent(invoice):
        write(
            journal,
            Transition.hold_duplicate,
            invoice,
            state=S.invalid,
            reason=reason,
            **_NO_KEY,
        )
        return Seen(problem=reason)
    hold_clash(journal, invoice, reason)
    return Seen(problem=reason, clash=True)


def _recheck(journal: JournalBackend, invoice: Invoice) -> str | None:
    """An unchanged file may stop being invalid: the duplicate it clashed with is gone."""
    if invoice.state is not S.invalid:
        return None
    if was_sent(invoice):  # held by a duplicate in a journal of an older invoicectl
        _restore(journal, invoice, invoice.state_before_amend or S.pending)
        return None
    state, reason = _verdict(journal.facts(invoice.invoice_id, invoice.current_sha256))
    if (invoice.state, invoice.reason) != (state, reason):
        write(journal, Transition.revise, invoice, state=state, reason=reason)
    return reason


def _change(journal: JournalBackend, invoice: Invoice, found: ScannedCopy) -> Seen:
    facts = journal.facts(invoice.invoice_id, found.sha256)
    content = _content(found, facts)
    if not was_sent(invoice):
        # Never sent: the new content simply replaces the old as the one to send, and a key
        # no request carried (left by a run stopped before its first request) is no key.
        state, reason = _verdict(facts)
        write(
            journal,
            Transition.revise,
            invoice,
            state=state,
            reason=reason,
            ingested_at=journal.now(),
            **content,
            **_NO_KEY,
        )
        return Seen(changed=True, problem=reason)
    if invoice.state is S.rejected and not refusal_may_hide_delivery(journal, invoice):
        # Refused, so nothing was delivered; the fix goes out under a key of its own.
        state, reason = _verdict(facts)
        write(
            journal,
            Transition.correct,
            invoice,
            state=state,
            reason=reason,
            ingested_at=journal.now(),
            **content,
            **next_key(invoice.key_version),
        )
        journal.add_event(
            invoice.invoice_id,
            "new_version",
            f"corrected after rejection; next key is v{invoice.key_version + 1}",
        )
        return Seen(changed=True)
    if found.sha256 == invoice.key_sha256:
        # The file went back to exactly what was sent.
        _restore(journal, invoice, invoice.state_before_amend or invoice.state, **content)
        return Seen(changed=True)
    reason = (
        f"content changed after key {invoice.idempotency_key} carried other content "
        f"(sent {(invoice.key_sha256 or '')[:12]}, now {found.sha256[:12]}); "
        "it will not be sent under that key"
    )
    write(
        journal,
        Transition.amend,
        invoice,
        state=S.amended,
        reason=reason,
        state_before_amend=_settled_state(invoice),
        **content,
    )
    return Seen(changed=True, amended=True)


def _restore(
    journal: JournalBackend, invoice: Invoice, state: InvoiceState, **content: Any
) -> None:
    write(
        journal,
        Transition.restore,
        invoice,
        state=state,
        reason=None,
        state_before_amend=None,
        **content,
    )


def _settled_state(invoice: Invoice) -> InvoiceState:
    """The state to give back once what holds the invoice clears: the one it had before
    an amendment or a duplicate held it, not the hold itself."""
    held = invoice.state in (S.amended, S.invalid)
    if held and invoice.state_before_amend is not None:
        return invoice.state_before_amend
    return invoice.state


def _admit(journal: JournalBackend, found: ScannedCopy, state: InvoiceState, reason: str) -> None:
    """A new invoice ID found in more than one content: recorded, held invalid."""
    now = journal.now()
    invoice_id = found.invoice_id
    facts = journal.facts(invoice_id, found.sha256)
    journal.insert_invoice(
        Invoice(
            invoice_id=invoice_id,
            state=state,
            reason=reason,
            key_version=1,
            idempotency_key=None,
            key_sha256=None,
            key_first_used_at=None,
            state_before_amend=None,
            transaction_id=None,
            existing_transaction_id=None,
            remote_status=None,
            remote_checked_at=None,
            ingested_at=now,
            accepted_at=None,
            created_at=now,
            updated_at=now,
            **_content(found, facts),
        )
    )


def _content(found: ScannedCopy, facts: dict[str, Any]) -> dict[str, Any]:
    """The invoice columns of one content: its facts, sha256 and file."""
    values: dict[str, Any] = dict(zip(FACT_COLUMNS, fact_columns(facts), strict=True))
    del values["problem"]  # the caller decides the state and reason
    return {**values, "current_sha256": found.sha256, "source_path": found.path}


def _verdict(facts: dict[str, Any]) -> tuple[InvoiceState, str | None]:
    problem = facts.get("problem")
    return (S.invalid, problem) if problem else (S.pending, None)

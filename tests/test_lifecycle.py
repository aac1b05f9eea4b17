"""The lifecycle: which transition may start in which state, on a real journal.

The table below is written out by hand, not read from ``ALLOWED``: a change to the rules must
change both, deliberately. Each named transition is then tried from every state on a real
SQLite journal, so the table is the one the code enforces, not just a table.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from journalkit import force
from ublfactory import write_invoice

from invoicectl.errors import UsageError
from invoicectl.goroute.outcomes import Accepted
from invoicectl.journal import Journal
from invoicectl.journal.records import InvoiceState
from invoicectl.lifecycle.decisions import adopt, new_version, record_delivery
from invoicectl.lifecycle.holds import hold
from invoicectl.lifecycle.sending import WorkItem, claim_key, mark_unknown, settle
from invoicectl.lifecycle.transitions import (
    ALLOWED,
    Transition,
    TransitionRefused,
    allowed,
)
from invoicectl.scan.ingest import scan_directory

S = InvoiceState
ALL = frozenset(InvoiceState)
# rejected too: a refusal that may hide a delivery (a 409, or after a lost answer) is amended
# by an edit, not corrected under the next key (test_refusals.py).
SENT_OR_HELD = ALL

EXPECTED: dict[Transition, frozenset[InvoiceState]] = {
    Transition.admit: frozenset(),
    Transition.revise: frozenset({S.pending, S.invalid}),
    Transition.correct: frozenset({S.rejected}),
    Transition.amend: SENT_OR_HELD,
    Transition.restore: SENT_OR_HELD,
    Transition.hold_duplicate: ALL,
    Transition.claim_key: frozenset({S.pending, S.unknown}),
    Transition.use_key: frozenset({S.pending, S.unknown}),
    Transition.record_answer: frozenset({S.pending, S.unknown}),
    Transition.mark_unknown: frozenset({S.pending}),
    Transition.release_key: frozenset({S.pending, S.unknown}),
    Transition.new_version: frozenset({S.amended, S.key_reused, S.unknown, S.rejected, S.accepted}),
    Transition.adopt: frozenset({S.key_reused, S.unknown, S.pending}),
    Transition.doubt: frozenset({S.accepted}),
    Transition.record_delivery: frozenset({S.accepted}),
    Transition.record_verdict: ALL,
    Transition.hold: ALL - {S.accepted},
    # A --new-version's invoice a history check found sent under a key it does not know.
    Transition.hold_found: ALL,
    # An accepted invoice is held while several files disagree on its number.
    Transition.release: ALL,
    # accepted: once its delivery failed (holds.abandon checks that)
    Transition.abandon: ALL,
}


def test_every_transition_has_a_row() -> None:
    assert set(ALLOWED) == set(Transition) == set(EXPECTED)


@pytest.mark.parametrize("state", list(InvoiceState))
@pytest.mark.parametrize("transition", list(Transition))
def test_each_state_and_transition_is_allowed_or_refused(
    transition: Transition, state: InvoiceState
) -> None:
    assert allowed(transition, state) is (state in EXPECTED[transition])


# ---- the named transitions, from every state, on a real journal --------------------------


@pytest.fixture
def journal(tmp_path: Path, outbox: Path):
    write_invoice(outbox, "INV-1")
    with Journal(tmp_path / "journal.db") as opened:
        scan_directory(opened, outbox)
        yield opened


def in_state(journal: Journal, state: InvoiceState) -> None:
    """INV-1 in ``state``, under its first key, sent an hour ago."""
    sha256 = journal.invoice("INV-1").current_sha256  # type: ignore[union-attr]
    key = None if state in (S.pending, S.invalid) else "invoice-INV-1"
    force(
        journal,
        "INV-1",
        state=state,
        idempotency_key=key,
        key_sha256=sha256 if key else None,
        key_first_used_at="2026-01-01T00:00:00+00:00" if key else None,
        transaction_id="txn_1" if state is S.accepted else None,
    )


def item(journal: Journal) -> WorkItem:
    invoice = journal.invoice("INV-1")
    assert invoice is not None
    return WorkItem(
        "INV-1", "invoice-INV-1", invoice.current_sha256, "9915", "x", invoice.ingested_at, False
    )


def raises_refused(call: Callable[[], object]) -> bool:
    try:
        call()
    except TransitionRefused:
        return True
    return False


@pytest.mark.parametrize("state", list(InvoiceState))
def test_claim_key_only_from_pending_or_unknown(journal: Journal, state: InvoiceState) -> None:
    in_state(journal, state)
    refused = raises_refused(lambda: claim_key(journal, "INV-1", replay=False))
    assert refused is (state not in EXPECTED[Transition.claim_key])


@pytest.mark.parametrize("state", list(InvoiceState))
def test_mark_unknown_only_from_pending(journal: Journal, state: InvoiceState) -> None:
    in_state(journal, state)
    refused = raises_refused(lambda: mark_unknown(journal, "INV-1", "no answer"))
    assert refused is (state not in EXPECTED[Transition.mark_unknown])
    expected = S.unknown if not refused else state
    assert journal.invoice("INV-1").state is expected  # type: ignore[union-attr]


@pytest.mark.parametrize("state", list(InvoiceState))
def test_an_answer_is_recorded_only_from_pending_or_unknown(
    journal: Journal, state: InvoiceState
) -> None:
    in_state(journal, state)
    accepted = Accepted(http_status=202, transaction_id="txn_9")
    refused = raises_refused(lambda: settle(journal, item(journal), accepted))
    assert refused is (state not in EXPECTED[Transition.record_answer])
    if not refused:
        assert journal.invoice("INV-1").transaction_id == "txn_9"  # type: ignore[union-attr]


@pytest.mark.parametrize("state", list(InvoiceState))
def test_adopt_only_from_key_reused_or_unknown(journal: Journal, state: InvoiceState) -> None:
    """...or pending, held with the transaction a send's history check found for it."""
    in_state(journal, state)
    if state is S.pending:
        hold(journal, "INV-1", "found", "history check", existing_transaction_id="txn_found")
    adopted = adopt(
        journal,
        "INV-1",
        expected_state=state,
        idempotency_key=journal.invoice("INV-1").idempotency_key,  # type: ignore[union-attr]
        transaction_id="txn_found",
        remote_status="delivered",
        checked_at="2026-01-02T00:00:00+00:00",
        accepted_at="2026-01-01T00:00:01+00:00",
        detail="test",
    )
    assert adopted is (state in EXPECTED[Transition.adopt])
    assert (journal.invoice("INV-1").state is S.accepted) is (  # type: ignore[union-attr]
        adopted or state is S.accepted
    )


def test_a_pending_invoice_adopts_only_the_transaction_its_history_check_found(
    journal: Journal,
) -> None:
    in_state(journal, S.pending)
    hold(journal, "INV-1", "found", "history check", existing_transaction_id="txn_found")
    common = {
        "expected_state": S.pending,
        "idempotency_key": None,
        "remote_status": "delivered",
        "checked_at": "2026-01-02T00:00:00+00:00",
        "accepted_at": "2026-01-01T00:00:01+00:00",
        "detail": "test",
    }

    assert adopt(journal, "INV-1", transaction_id="txn_other", **common) is False
    assert adopt(journal, "INV-1", transaction_id="txn_found", **common) is True
    adopted = journal.invoice("INV-1")
    assert adopted is not None and adopted.state is S.accepted and adopted.hold is None


@pytest.mark.parametrize("state", list(InvoiceState))
def test_delivery_is_recorded_only_for_accepted(journal: Journal, state: InvoiceState) -> None:
    in_state(journal, state)
    recorded = record_delivery(
        journal,
        "INV-1",
        transaction_id="txn_1",
        status="delivered",
        checked_at="2026-01-02T00:00:00+00:00",
    )
    assert recorded is (state in EXPECTED[Transition.record_delivery])


@pytest.mark.parametrize("state", list(InvoiceState))
def test_new_version_never_where_a_new_key_could_deliver_twice(
    journal: Journal, state: InvoiceState
) -> None:
    in_state(journal, state)
    if state is S.accepted:  # only once its delivery failed
        force(journal, "INV-1", remote_status="failed")
    if state in (S.unknown, S.key_reused):  # only once reconcile showed no delivery
        force(journal, "INV-1", verdict="sent_then_failed", verdict_at=journal.now())
    try:
        key = new_version(journal, "INV-1", run_id=0)
    except UsageError:
        key = None
    assert (key is not None) is (state in EXPECTED[Transition.new_version])
    if key is not None:
        invoice = journal.invoice("INV-1")
        assert invoice is not None
        assert (key, invoice.state, invoice.key_version) == ("invoice-INV-1-v2", S.pending, 2)
        assert invoice.idempotency_key is None and invoice.transaction_id is None


def test_a_write_on_a_row_that_moved_on_is_refused(journal: Journal) -> None:
    was = journal.invoice("INV-1")
    assert was is not None
    in_state(journal, S.unknown)
    assert not journal.save(was, was=was)  # read as pending, now unknown: nothing written
    assert journal.invoice("INV-1").state is S.unknown  # type: ignore[union-attr]

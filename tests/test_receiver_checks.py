"""Receiver pre-flight: one participant lookup per receiver a day, and no send spent on an
invoice its receiver cannot take; counted through the emulator's own stats."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sendkit import at, emulator, send, settings_for, states
from ublfactory import write_invoice

from invoicectl.errors import ExitCode
from invoicectl.goroute.retry import RetryPolicy
from invoicectl.journal import Journal


@pytest.fixture
def journal_path(tmp_path: Path) -> Path:
    return tmp_path / "receivers.db"


def outbox_for_three_receivers(outbox: Path) -> None:
    for number in range(12):
        write_invoice(outbox, f"OK-{number:02d}")  # 9915:phase4-test-receiver
    write_invoice(outbox, "NOWHERE-1", receiver="9915:not-registered")
    write_invoice(outbox, "NOWHERE-2", receiver="9915:not-registered")
    write_invoice(outbox, "INV-ONLY", receiver="9915:invoices-only")
    write_invoice(outbox, "CN-ONLY", receiver="9915:invoices-only", document_type="CreditNote")


def test_one_lookup_per_receiver_and_no_send_where_it_cannot_land(journal_path: Path, outbox: Path):
    outbox_for_three_receivers(outbox)
    sandbox = emulator()

    _, summary = send(settings_for(journal_path), outbox, sandbox.transport())

    stats = sandbox.stats()
    assert stats["participant_lookups"] == 3  # three receivers, sixteen invoices
    assert set(stats["per_invoice"]) == {f"OK-{n:02d}" for n in range(12)} | {"INV-ONLY"}
    assert sorted(summary.held_for_receiver) == ["CN-ONLY", "NOWHERE-1", "NOWHERE-2"]
    assert summary.receiver_lookups == 3 and summary.receivers_unchecked == 0
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE  # held: a person decides
    with Journal(journal_path) as journal:
        nowhere = journal.invoice("NOWHERE-1")
        credit = journal.invoice("CN-ONLY")
        assert nowhere is not None and credit is not None
        assert (nowhere.state, nowhere.hold, nowhere.idempotency_key) == ("pending", "held", None)
        assert nowhere.hold_reason is not None
        assert "9915:not-registered is not registered" in nowhere.hold_reason
        assert "does not take CreditNote documents" in (credit.hold_reason or "")
        assert journal.attempts("NOWHERE-1") == []  # no request spent on it


def test_the_answers_are_kept_for_a_day(journal_path: Path, outbox: Path):
    write_invoice(outbox, "A-1")
    sandbox = emulator()
    send(settings_for(journal_path), outbox, sandbox.transport())
    write_invoice(outbox, "A-2")
    send(settings_for(journal_path), outbox, sandbox.transport())
    assert sandbox.stats()["participant_lookups"] == 1

    write_invoice(outbox, "A-3")
    later = at(datetime.now(UTC) + timedelta(hours=25))
    send(settings_for(journal_path), outbox, sandbox.transport(), clocks=later)
    assert sandbox.stats()["participant_lookups"] == 2

    # Back to the real clock, 25 hours behind the last run's: a wall clock set back must not
    # hold the rate limiter for the jump (it once waited the whole 25 hours).
    write_invoice(outbox, "A-4")
    send(settings_for(journal_path), outbox, sandbox.transport(), refresh_receivers=True)
    assert sandbox.stats()["participant_lookups"] == 3
    assert states(journal_path) == {f"A-{n}": "accepted" for n in range(1, 5)}


def test_a_failed_lookup_never_blocks_the_send(journal_path: Path, outbox: Path):
    write_invoice(outbox, "A-1")
    sandbox = emulator()
    sandbox.stage_participant("9915:phase4-test-receiver", lookup_error=503)
    policy = RetryPolicy(max_attempts=2, backoff_initial=0.01, backoff_max=0.02)

    _, summary = send(settings_for(journal_path), outbox, sandbox.transport(), policy=policy)

    assert states(journal_path) == {"A-1": "accepted"}
    assert summary.receivers_unchecked == 1 and summary.exit_code == ExitCode.OK
    with Journal(journal_path) as journal:
        assert journal.receiver_checks() == []  # nothing known: nothing kept


def test_no_receiver_check_sends_without_a_lookup(journal_path: Path, outbox: Path):
    write_invoice(outbox, "A-1")
    sandbox = emulator()
    send(settings_for(journal_path), outbox, sandbox.transport(), check_receivers=False)
    assert sandbox.stats()["participant_lookups"] == 0
    assert states(journal_path) == {"A-1": "accepted"}


def test_a_replay_is_never_held_for_its_receiver(journal_path: Path, outbox: Path):
    """An unanswered send goes again under its key, whatever a lookup would now say."""
    write_invoice(outbox, "A-1")
    lossy = emulator(drop_rate=1.0)
    one_try = RetryPolicy(max_attempts=1, backoff_initial=0.01, backoff_max=0.02)
    send(settings_for(journal_path), outbox, lossy.transport(), policy=one_try)
    assert states(journal_path) == {"A-1": "unknown"}
    sandbox = emulator()
    sandbox.stage_participant("9915:phase4-test-receiver", registered=False)

    _, summary = send(settings_for(journal_path), outbox, sandbox.transport())

    assert summary.replays == 1 and summary.held_for_receiver == ()
    assert sandbox.stats()["participant_lookups"] == 0


def test_invoicectl_receivers_lists_what_the_lookups_said(journal_path: Path, outbox: Path):
    outbox_for_three_receivers(outbox)
    send(settings_for(journal_path), outbox, emulator().transport())

    done = subprocess.run(
        [sys.executable, "-m", "invoicectl", "receivers", "--format", "json"]
        + ["--journal", str(journal_path)],
        capture_output=True,
        text=True,
    )

    records = {record["receiver"]: record for record in json.loads(done.stdout)}
    assert records["9915:not-registered"]["registered"] is False
    assert records["9915:invoices-only"]["takes"] == ["Invoice"]
    assert records["9915:phase4-test-receiver"]["takes"] == ["Invoice", "CreditNote"]


def test_a_receiver_id_the_lookup_cannot_ask_for_is_sent_unchecked(
    journal_path: Path, outbox: Path
):
    """An endpoint with a tab inside stopped every run with a traceback; now it goes out
    unchecked, as an outage would leave it."""
    write_invoice(outbox, "ODD-1", receiver="9915:12\t34")
    write_invoice(outbox, "OK-1")
    sandbox = emulator()

    _, summary = send(settings_for(journal_path), outbox, sandbox.transport())

    assert summary.receivers_unchecked == 1 and summary.held_for_receiver == ()
    assert states(journal_path)["OK-1"] == "accepted"
    with Journal(journal_path) as journal:
        assert len(journal.attempts("ODD-1")) == 1  # sent: GoRoute answers for it


def test_a_failed_lookup_does_not_fall_back_on_an_older_no(journal_path: Path, outbox: Path):
    """Not registered yesterday, lookup down today: the receiver may have registered since."""
    write_invoice(outbox, "A-1")
    sandbox = emulator()
    sandbox.stage_participant("9915:phase4-test-receiver", registered=False)
    send(settings_for(journal_path), outbox, sandbox.transport())
    assert states(journal_path) == {"A-1": "pending"}  # held

    write_invoice(outbox, "A-2")
    sandbox.stage_participant("9915:phase4-test-receiver", registered=True, lookup_error=503)
    later = at(datetime.now(UTC) + timedelta(hours=30))
    policy = RetryPolicy(max_attempts=2, backoff_initial=0.01, backoff_max=0.02)
    _, summary = send(
        settings_for(journal_path), outbox, sandbox.transport(), clocks=later, policy=policy
    )

    assert summary.held_for_receiver == () and summary.receivers_unchecked == 1
    assert states(journal_path)["A-2"] == "accepted"


def test_case_variants_of_one_receiver_cost_one_lookup(journal_path: Path, outbox: Path):
    write_invoice(outbox, "A-1", receiver="9915:Phase4-Test-Receiver")
    write_invoice(outbox, "A-2", receiver="9915:phase4-test-receiver")
    write_invoice(outbox, "A-3", receiver="9915:PHASE4-TEST-RECEIVER")
    sandbox = emulator()

    send(settings_for(journal_path), outbox, sandbox.transport())

    assert sandbox.stats()["participant_lookups"] == 1


def test_document_types_named_otherwise_than_peppol_cannot_say_no() -> None:
    from invoicectl.goroute.participants import takes

    invoice = (
        "urn:oasis:names:specification:ubl:schema:xsd:Invoice-2::Invoice##"
        "urn:cen.eu:en16931:2017#compliant#urn:fdc:peppol.eu:2017:poacc:billing:3.0::2.1"
    )
    assert takes((invoice,), "Invoice") and not takes((invoice,), "CreditNote")
    assert takes(("Invoice", "invoice"), "CreditNote")  # not identifiers: no answer
    assert takes((), "CreditNote")

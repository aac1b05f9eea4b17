"""A key no request carried is not a send (issue 11, item 11).

The key used to be committed before the rate limiter's wait: a run killed during that wait
left a key behind, and a later edit of the file made the invoice ``amended`` ("changed after
it was sent") with advice that would have sent the uncorrected version. Now a key is
committed with the first attempt row that carries it, and "was sent" means exactly that.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest
from backends import witness_execute
from journalkit import force
from processkit import cli_process, journal_states, run_cli, wait_for
from sendkit import FAST_RETRY, emulator, send, settings_for, states
from ublfactory import write_invoice

from invoicectl.goroute.outcomes import RateLimited, Transient
from invoicectl.journal import open_journal
from invoicectl.lifecycle.sending import (
    begin_attempt,
    claim_key,
    close_unanswered,
    record_answer,
    settle,
)
from invoicectl.locations import Location
from invoicectl.sandbox import BackgroundServer
from invoicectl.scan.ingest import scan_directory


@pytest.fixture
def journal_path(journal_at: Location) -> Location:
    return journal_at


def test_claiming_a_key_writes_nothing_until_its_first_request(outbox: Path, journal_path: Path):
    write_invoice(outbox, "INV-1", amount="100.00")
    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
        item = claim_key(journal, "INV-1", replay=False)
        assert item.key == "invoice-INV-1"
        unsent = journal.invoice("INV-1")
        assert (unsent.idempotency_key, unsent.key_sha256) == (None, None)

        # Stopped here (a signal, a kill, the deadline): nothing to give back.
        assert settle(journal, item, None) == "pending"

        begin_attempt(journal, 1, item, "body-sha")
        sent = journal.invoice("INV-1")
        assert sent.idempotency_key == "invoice-INV-1"
        assert sent.key_sha256 == item.sha256 and sent.key_first_used_at is not None


def test_an_edit_after_a_claim_without_a_request_is_a_new_revision(
    outbox: Path, journal_path: Path
):
    write_invoice(outbox, "INV-1", amount="100.00")
    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
        claim_key(journal, "INV-1", replay=False)  # the run dies in the limiter's wait
        write_invoice(outbox, "INV-1", amount="101.00")
        report = scan_directory(journal, outbox)
        row = journal.invoice("INV-1")

    assert report.amended == [] and report.changed == ["INV-1"]
    assert row.state == "pending" and row.reason is None
    assert row.idempotency_key is None and row.key_sha256 is None


def test_a_key_an_older_run_committed_without_a_request_is_given_up(
    outbox: Path, journal_path: Path
):
    """Journals written before the fix can hold such a key: it is no send either, and the
    corrected content goes out under it, not the content the key was chosen for."""
    write_invoice(outbox, "INV-1", amount="100.00")
    settings = settings_for(journal_path)
    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
        old = journal.invoice("INV-1").current_sha256
        force(journal, "INV-1", idempotency_key="invoice-INV-1", key_sha256=old)
    write_invoice(outbox, "INV-1", amount="101.00")
    sandbox = emulator()

    _, summary = send(settings, outbox, sandbox.transport())

    assert states(journal_path) == {"INV-1": "accepted"}
    with open_journal(journal_path) as journal:
        row = journal.invoice("INV-1")
        (sent,) = journal.attempts("INV-1")
    assert row.key_sha256 == row.current_sha256 != old
    assert sent.revision_sha256 == row.current_sha256
    assert summary.exit_code == 0


@pytest.mark.slow
def test_killed_in_the_limiters_wait_then_edited_is_pending_not_amended(
    outbox: Path, journal_path: Path
):
    write_invoice(outbox, "A-1")
    write_invoice(outbox, "B-2", amount="100.00")
    sandbox = emulator()
    with BackgroundServer(sandbox) as server:
        # One a minute: the second invoice waits about a minute for its start.
        args = ("send", str(outbox), "--rate", "1", "--concurrency", "1", "--order", "scan")
        process = cli_process(journal_path, server.base_url, *args, "--no-receiver-check")
        wait_for(lambda: "accepted" in journal_states(journal_path).values())
        time.sleep(0.5)  # B-2 is in the limiter's wait now
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=30)
        assert process.returncode == -signal.SIGKILL
        assert sandbox.stats()["sends_received"] == 1

        write_invoice(outbox, "B-2", amount="101.00")
        code, stdout, stderr = run_cli(journal_path, server.base_url, "scan", str(outbox))

    assert code == 0, stdout + stderr
    assert "1 changed, 0 amended" in stdout
    assert journal_states(journal_path) == {"A-1": "accepted", "B-2": "pending"}
    with open_journal(journal_path) as journal:
        row = journal.invoice("B-2")
        assert row.idempotency_key is None and row.reason is None
        assert journal.attempts("B-2") == []


def test_a_scan_after_a_dead_send_makes_an_edited_invoice_amended_over_unknown(
    outbox: Path, journal_path: Path
):
    """A run killed after its write-ahead row: the request may have been delivered. A plain
    ``scan`` of the edited file closes that attempt first, as ``send`` does, so the invoice
    is amended over ``unknown`` (reconcile looks the earlier send up), never over pending."""
    write_invoice(outbox, "INV-3", amount="100.00")
    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
        item = claim_key(journal, "INV-3", replay=False)
        begin_attempt(journal, journal.begin_run("send", {}), item, "body-sha")  # then kill -9
    write_invoice(outbox, "INV-3", amount="101.00")

    code, stdout, stderr = run_cli(journal_path, "http://127.0.0.1:9", "scan", str(outbox))

    assert code == 0 and "1 amended" in stdout, stdout + stderr
    with open_journal(journal_path) as journal:
        row = journal.invoice("INV-3")
        (attempt,) = journal.attempts("INV-3")
    assert (row.state, row.state_before_amend) == ("amended", "unknown")
    assert attempt.outcome == "no_answer"


@pytest.mark.parametrize(
    ("answer", "left"),
    [
        (Transient(reason="read timeout"), ("unknown", "invoice-INV-4")),
        (RateLimited(retry_after=30.0), ("pending", None)),  # never taken in: no send
    ],
)
def test_a_run_killed_between_two_tries_leaves_no_invoice_pending_under_a_used_key(
    outbox: Path, journal_path: Path, answer: Any, left: tuple[str, str | None]
):
    """Killed in the retry's wait after a 5xx: the invoice stayed pending with its key used,
    so past the key's 24 hours the plan held it while nothing (reconcile included) judged it.
    The next run settles it as the killed one would have: unknown, or its key given back."""
    write_invoice(outbox, "INV-4")
    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
        item = claim_key(journal, "INV-4", replay=False)
        attempt_id, row = begin_attempt(journal, journal.begin_run("send", {}), item, "body-sha")
        record_answer(journal, attempt_id, item, answer, row)  # then kill -9, in the wait

        closed = close_unanswered(journal)

        after = journal.invoice("INV-4")
    assert (after.state, after.idempotency_key) == left
    assert closed == (["INV-4"] if left[0] == "unknown" else [])


def test_a_replay_whose_request_is_not_the_one_sent_under_its_key_is_held(
    outbox: Path, journal_path: Path
):
    """The same stored bytes, read differently since (an upgrade): the request built now is
    not the one that went out under the key. It is never sent, under that key or another."""
    write_invoice(outbox, "INV-5")
    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
        item = claim_key(journal, "INV-5", replay=False)
        begin_attempt(journal, journal.begin_run("send", {}), item, "0" * 64)  # then kill -9
    sandbox = emulator()

    _, summary = send(settings_for(journal_path), outbox, sandbox.transport())

    assert sandbox.stats()["sends_received"] == 0
    assert summary.held_at_replay == ("INV-5",)
    with open_journal(journal_path) as journal:
        held = journal.invoice("INV-5")
    assert (held.state, held.hold) == ("unknown", "held")
    assert f"differs from the one sent under {item.key}" in (held.hold_reason or "")


@pytest.mark.parametrize("edited_key", ["invoice-INV-6-v2", "invoice-INV-7"])
def test_an_unknown_invoice_whose_key_no_request_carried_is_not_replayed(
    outbox: Path, journal_path: Path, edited_key: str
):
    """Its key changed outside invoicectl (a hand edit, a bad restore) after its request went
    out and its answer was lost: GoRoute has its document under the old key and has never
    seen the new one, so a replay under it would be a second document. Held, never sent."""
    write_invoice(outbox, "INV-6")
    write_invoice(outbox, "INV-7")  # its own key, carried by a request of its own
    sandbox = emulator(drop_rate=1.0)  # recorded, never answered
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), policy=type(FAST_RETRY)(max_attempts=1))
    assert states(journal_path) == {"INV-6": "unknown", "INV-7": "unknown"}
    witness_execute(
        journal_path, "UPDATE invoices SET idempotency_key = ? WHERE invoice_id = 'INV-6'",
        (edited_key,),
    )  # fmt: skip
    sandbox.set_faults(drop_rate=0.0)

    _, summary = send(settings, outbox, sandbox.transport())

    assert sandbox.stats()["per_invoice"] == {"INV-6": 1, "INV-7": 1}
    assert states(journal_path) == {"INV-6": "unknown", "INV-7": "accepted"}
    assert summary.held_at_replay == ("INV-6",)
    with open_journal(journal_path) as journal:
        held = journal.invoice("INV-6")
    assert (held.hold, held.held_by) == ("held", "replay check")
    said = f"no request of invoice INV-6 that GoRoute may have taken went out under {edited_key}"
    assert said in (held.hold_reason or "")

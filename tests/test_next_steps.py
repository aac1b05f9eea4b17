"""The next step a report names works when an operator follows it, in order, and every step
passes the same duplicate guard: each test walks one such path and counts what the emulator
received."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sendkit import emulator, send, settings_for, states
from ublfactory import write_invoice

from invoicectl.errors import UsageError
from invoicectl.goroute.retry import RetryPolicy
from invoicectl.journal import open_journal
from invoicectl.lifecycle.decisions import check_new_version
from invoicectl.locations import Location
from invoicectl.reconcile.runner import reconcile

ONE_TRY = RetryPolicy(max_attempts=1, backoff_initial=0.01, backoff_max=0.02)


@pytest.fixture
def journal_path(journal_at: Location) -> Location:
    return journal_at


def _refusal(journal_path: Location, invoice_id: str) -> str | None:
    with open_journal(journal_path) as journal:
        try:
            check_new_version(journal, invoice_id, datetime.now(UTC))
        except UsageError as error:
            return str(error)
    return None


def test_an_unanswered_send_that_failed_is_replayed_then_sent_again(
    journal_path: Location, outbox: Path
):
    """GoRoute kept the request, lost its answer, and the delivery failed, inside the key's
    window. Reconcile's next step is the replay under the key (a new key is refused while a
    replay can still say what the key did), then reconcile, then the new version: each step
    as named works, and the invoice goes out once more only at the last."""
    write_invoice(outbox, "F-1", receiver="9915:reject-all")
    sandbox = emulator(drop_rate=1.0)
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), policy=ONE_TRY)
    assert states(journal_path) == {"F-1": "unknown"}
    sandbox.advance_clock(600)  # its delivery has failed by now

    (case,) = reconcile(settings, transport=sandbox.transport()).cases
    assert case.verdict.value == "sent_then_failed"
    assert "`invoicectl send DIR` replays it under its key" in case.action, case.action
    assert "`invoicectl send` replays it" in (_refusal(journal_path, "F-1") or "")  # as named

    sandbox.set_faults(drop_rate=0.0)
    send(settings, outbox, sandbox.transport(), policy=ONE_TRY)
    assert states(journal_path) == {"F-1": "accepted"}
    assert sandbox.stats()["per_invoice"] == {"F-1": 1}  # the replay delivered nothing new
    refused = _refusal(journal_path, "F-1") or ""
    assert "`invoicectl reconcile`" in refused and "not known" in refused, refused

    (case,) = reconcile(settings, transport=sandbox.transport()).cases
    assert case.verdict.value == "delivery_failed"
    assert _refusal(journal_path, "F-1") is None
    send(settings, outbox, sandbox.transport(), policy=ONE_TRY, new_versions=("F-1",))
    assert sandbox.stats()["per_invoice"] == {"F-1": 2}


def test_a_new_versions_lost_answer_is_not_confused_with_its_first_keys_transaction(
    outbox: Path, journal_path: Location
):
    """helper-53: GoRoute held one transaction per version, yet reconcile matched the first
    key's as well (the same number and receiver): "2 transactions match", held as ambiguous,
    and the replay inside the new key's window was blocked; only --force went on."""
    write_invoice(outbox, "F-1", receiver="9915:reject-all")
    sandbox = emulator()
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), policy=ONE_TRY)
    sandbox.advance_clock(600)
    (case,) = reconcile(settings, transport=sandbox.transport()).cases
    assert case.verdict.value == "delivery_failed"
    sandbox.set_faults(drop_rate=1.0)  # the new version reaches GoRoute, its answer is lost
    send(settings, outbox, sandbox.transport(), policy=ONE_TRY, new_versions=("F-1",))
    assert states(journal_path) == {"F-1": "unknown"}
    sandbox.set_faults(drop_rate=0.0)

    (case,) = reconcile(settings, transport=sandbox.transport(), apply=True).cases

    assert case.verdict.value == "unknown_found", case.detail
    with open_journal(journal_path) as journal:
        invoice = journal.invoice("F-1")
        assert invoice is not None and invoice.state.value == "accepted"
        assert invoice.idempotency_key == "invoice-F-1-v2"
    assert sandbox.stats()["per_invoice"] == {"F-1": 2}


def test_the_same_new_version_named_twice_is_one_decision(tmp_path: Path, outbox: Path):
    """helper-53: `--new-version F-1 --new-version F-1` moved F-1 to its next key, then
    refused the second as a usage error (exit 2), the journal changed all the same."""
    import os
    import subprocess
    import sys

    from invoicectl.sandbox import DEFAULT_API_KEY, BackgroundServer

    write_invoice(outbox, "F-1", receiver="9915:reject-all")
    sandbox = emulator()
    journal = str(tmp_path / "journal.db")
    with BackgroundServer(sandbox) as server:
        environ = {**os.environ, "GOROUTE_API_KEY": DEFAULT_API_KEY,
                   "GOROUTE_BASE_URL": server.base_url}  # fmt: skip

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            command = [sys.executable, "-m", "invoicectl", *args, "--journal", journal]
            return subprocess.run(command, capture_output=True, text=True, env=environ)

        assert cli("send", str(outbox), "--no-receiver-check").returncode == 0
        sandbox.advance_clock(600)
        assert cli("reconcile").returncode == 4  # delivery_failed: a person decides
        done = cli(
            "send", str(outbox), "--no-receiver-check", "--new-version", "F-1",
            "--new-version", "F-1",
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert sandbox.stats()["per_invoice"] == {"F-1": 2}


@pytest.mark.parametrize("silent", [False, True], ids=["after a send", "after a silence"])
def test_a_first_keys_transaction_reconcile_found_is_no_send_of_the_new_version(
    outbox: Path, journal_path: Location, silent: bool
):
    """helper-54: the first send's answer lost, reconcile found its transaction (failed),
    then the new version's answer was lost too. No answer named that first transaction, so
    reconcile matched it as the new version's too ("2 transactions match", held), and after
    a day's silence the probe took it for a send a rollback lost (held as found)."""
    from datetime import UTC, datetime, timedelta

    from sendkit import at

    write_invoice(outbox, "F-1", receiver="9915:reject-all")
    sandbox = emulator(drop_rate=1.0)  # the first send's answer is lost
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), policy=ONE_TRY,
         clocks=at(datetime.now(UTC) - timedelta(hours=25)))  # fmt: skip
    sandbox.set_faults(drop_rate=0.0)
    sandbox.advance_clock(600)
    (case,) = reconcile(settings, transport=sandbox.transport(), apply=True).cases
    assert case.verdict.value == "sent_then_failed"
    if not silent:
        write_invoice(outbox, "G-1")  # another invoice sent now
        send(settings, outbox, sandbox.transport(), policy=ONE_TRY)
    sandbox.set_faults(drop_rate=1.0)  # the new version's answer is lost too
    send(settings, outbox, sandbox.transport(), policy=ONE_TRY, new_versions=("F-1",))
    sandbox.set_faults(drop_rate=0.0)

    cases = reconcile(settings, transport=sandbox.transport(), apply=True).cases

    (case,) = [case for case in cases if case.invoice_id == "F-1"]
    assert case.verdict.value == "unknown_found", case.detail
    with open_journal(journal_path) as journal:
        invoice = journal.invoice("F-1")
        assert invoice is not None and invoice.hold is None, invoice.hold_reason
        assert invoice.state.value == "accepted" and invoice.idempotency_key == "invoice-F-1-v2"
    assert sandbox.stats()["per_invoice"]["F-1"] == 2

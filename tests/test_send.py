"""invoicectl send against the emulator in process: outcomes, resume, amendments, exit codes."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from backends import witness_execute
from journalkit import force
from sendkit import (
    FAST_RETRY,
    assert_each_delivered_once,
    at,
    emulator,
    send,
    settings_for,
    states,
)
from ublfactory import write_invoice

from invoicectl.errors import EnvironmentMismatch, ExitCode, UsageError
from invoicectl.journal import open_journal
from invoicectl.lifecycle import holds
from invoicectl.lifecycle.holds import decide
from invoicectl.locations import Location
from invoicectl.reconcile.runner import reconcile
from invoicectl.runs import Clocks
from invoicectl.scan.ingest import scanning
from invoicectl.send import runner
from invoicectl.settings import Settings


@pytest.fixture
def journal_path(journal_at: Location) -> Location:
    return journal_at


def outbox_of(outbox: Path, count: int, **kwargs) -> list[str]:
    ids = [f"INV-{number:04d}" for number in range(count)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id, **kwargs)
    return ids


def test_every_pending_invoice_is_accepted_once(outbox: Path, journal_path: Path):
    ids = outbox_of(outbox, 25)
    sandbox = emulator()

    report, summary = send(settings_for(journal_path), outbox, sandbox.transport())

    assert summary.exit_code == ExitCode.OK
    assert summary.counts() == {"accepted": 25}
    assert_each_delivered_once(sandbox.stats(), ids)
    with open_journal(journal_path) as journal:
        for invoice_id in ids:
            row = journal.invoice(invoice_id)
            assert row.state == "accepted"
            assert row.idempotency_key == f"invoice-{invoice_id}"
            assert sandbox.transaction(row.transaction_id) is not None
            (attempt,) = journal.attempts(invoice_id)
            assert attempt.outcome == "accepted" and attempt.started_at


def test_a_second_run_sends_nothing_again(outbox: Path, journal_path: Path):
    ids = outbox_of(outbox, 5)
    sandbox = emulator()
    send(settings_for(journal_path), outbox, sandbox.transport())

    _, summary = send(settings_for(journal_path), outbox, sandbox.transport())

    assert summary.planned == 0 and summary.exit_code == ExitCode.OK
    assert sandbox.stats()["sends_received"] == 5
    assert_each_delivered_once(sandbox.stats(), ids)


def test_a_file_changed_while_its_send_is_unanswered_is_not_resent(
    outbox: Path, journal_path: Path
):
    """The key carried the old bytes; the new content must never go out under it."""
    (invoice_id,) = outbox_of(outbox, 1)
    sandbox = emulator(drop_rate=1.0)  # recorded, never answered
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), policy=attempts_policy(1))
    assert states(journal_path) == {invoice_id: "unknown"}
    write_invoice(outbox, invoice_id, amount="9.99")  # the file changes meanwhile

    sandbox.set_faults(drop_rate=0.0)
    _, summary = send(settings, outbox, sandbox.transport())

    assert states(journal_path) == {invoice_id: "amended"}
    assert summary.planned == 0  # amended is never sent under the old key
    assert sandbox.stats()["key_reused"] == 0


def attempts_policy(max_attempts: int):
    return type(FAST_RETRY)(max_attempts=max_attempts, backoff_initial=0.01, backoff_max=0.02)


def test_lost_answers_are_replayed_under_the_same_key(outbox: Path, journal_path: Path):
    ids = outbox_of(outbox, 40)
    sandbox = emulator(drop_rate=0.2)
    settings = settings_for(journal_path)

    for _ in range(5):
        _, summary = send(settings, outbox, sandbox.transport())
        if summary.exit_code == ExitCode.OK:
            break

    assert set(states(journal_path).values()) == {"accepted"}
    stats = sandbox.stats()
    assert stats["drops"] > 0 and stats["replays"] > 0
    assert stats["key_reused"] == 0, "the tool caused a 422 itself"
    assert_each_delivered_once(stats, ids)


def test_server_errors_at_30_percent_all_end_sent_once(outbox: Path, journal_path: Path):
    ids = outbox_of(outbox, 40)
    sandbox = emulator(error_rate=0.3)
    settings = settings_for(journal_path)

    for _ in range(5):
        _, summary = send(settings, outbox, sandbox.transport())
        if summary.exit_code == ExitCode.OK:
            break

    assert set(states(journal_path).values()) == {"accepted"}
    assert sandbox.stats()["server_errors"] > 0
    assert_each_delivered_once(sandbox.stats(), ids)


def test_retries_exhausted_leave_unknown_and_exit_75(outbox: Path, journal_path: Path):
    outbox_of(outbox, 2)
    sandbox = emulator(error_rate=1.0)

    _, summary = send(
        settings_for(journal_path), outbox, sandbox.transport(), policy=attempts_policy(3)
    )

    assert summary.exit_code == ExitCode.INCOMPLETE
    assert set(states(journal_path).values()) == {"unknown"}
    assert sandbox.stats()["server_errors"] == 6


def test_429_storm_is_waited_out_for_the_whole_run(outbox: Path, journal_path: Path):
    ids = outbox_of(outbox, 12)
    # The server allows 2 at once and answers Retry-After: 1 beyond; the client sends 10.
    sandbox = emulator(max_concurrent=2, latency_ms=150)
    # The storm lasts about 5 s, as long as the tests' usual --max-wait (5 s): an unlucky
    # request then gave up on a loaded machine and the run stopped, as it should, with exit
    # 75. Waited out is what this test shows, with room to wait as the default's 300 s gives.
    patient = replace(FAST_RETRY, max_wait=60.0)

    _, summary = send(
        settings_for(journal_path),
        outbox,
        sandbox.transport(),
        concurrency=10,
        rate_per_minute=6000,
        policy=patient,
    )

    assert summary.exit_code == ExitCode.OK
    assert summary.rate_limited_answers > 0
    assert summary.waited_for_retry_after >= 1.0
    assert_each_delivered_once(sandbox.stats(), ids)


def test_rejections_are_permanent_and_exit_3(outbox: Path, journal_path: Path):
    write_invoice(outbox, "GOOD-1")
    write_invoice(outbox, "NOWHERE-1", receiver="9915:not-registered")
    sandbox = emulator()

    # Without the receiver check, which would hold NOWHERE-1 before spending a send on it.
    _, summary = send(
        settings_for(journal_path), outbox, sandbox.transport(), check_receivers=False
    )

    assert summary.exit_code == ExitCode.NEEDS_FIX
    with open_journal(journal_path) as journal:
        row = journal.invoice("NOWHERE-1")
        assert row.state == "rejected"
        assert row.reason.startswith("HTTP 404")
        assert len(journal.attempts("NOWHERE-1")) == 1  # never retried


def test_key_reused_is_recorded_never_retried_and_exit_4(outbox: Path, journal_path: Path):
    write_invoice(outbox, "INV-1")
    sandbox = emulator()
    sandbox.preload_key("invoice-INV-1", transaction_id="txn_elsewhere")

    _, summary = send(settings_for(journal_path), outbox, sandbox.transport())

    assert summary.exit_code == ExitCode.NEEDS_RECONCILE
    with open_journal(journal_path) as journal:
        row = journal.invoice("INV-1")
        assert (row.state, row.existing_transaction_id) == ("key_reused", "txn_elsewhere")
        assert len(journal.attempts("INV-1")) == 1


def test_refused_credentials_stop_the_run_and_change_no_state(outbox: Path, journal_path: Path):
    outbox_of(outbox, 20)
    sandbox = emulator()
    settings = settings_for(journal_path, environ={"GOROUTE_API_KEY": "sk_test_wrong"})

    # The sender's own stop: a journal's history check would meet the 401 first.
    _, summary = send(
        settings, outbox, sandbox.transport(), rate_per_minute=600, trust_new_journal=True
    )

    assert summary.exit_code == ExitCode.AUTH_REFUSED
    assert set(states(journal_path).values()) == {"pending"}
    assert summary.requests == 1, "the run goes on after a 401"
    with open_journal(journal_path) as journal:
        assert all(row.idempotency_key is None for row in journal.invoices())


def test_amended_invoice_is_not_resent_until_a_new_version_is_chosen(
    outbox: Path, journal_path: Path
):
    write_invoice(outbox, "INV-1", amount="100.00")
    sandbox = emulator()
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport())
    write_invoice(outbox, "INV-1", amount="120.00")

    _, summary = send(settings, outbox, sandbox.transport())
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE
    assert states(journal_path) == {"INV-1": "amended"}
    assert sandbox.stats()["sends_received"] == 1
    # Amended over accepted: a new version only once GoRoute says that delivery failed.
    with pytest.raises(UsageError, match="amended over accepted"):
        send(settings, outbox, sandbox.transport(), new_versions=("INV-1",))
    with open_journal(journal_path) as journal:
        force(journal, "INV-1", remote_status="failed")

    _, summary = send(settings, outbox, sandbox.transport(), new_versions=("INV-1",))

    assert summary.exit_code == ExitCode.OK
    with open_journal(journal_path) as journal:
        row = journal.invoice("INV-1")
        assert (row.state, row.idempotency_key) == ("accepted", "invoice-INV-1-v2")
        assert any(event.kind == "new_version" for event in journal.events("INV-1"))
    assert sandbox.stats()["per_key"]["invoice-INV-1-v2"]["transactions"] == 1


def test_no_new_version_while_two_files_disagree_on_its_number(
    outbox: Path, journal_path: Path, tmp_path: Path
):
    """An accepted invoice whose delivery failed, a second file with its number: the journal's
    content may be neither file's, so the invoice is held until one file is left, whichever
    outbox a later send scans, and --new-version is refused meanwhile."""
    write_invoice(outbox, "INV-1", amount="100.00", name="a.xml")
    sandbox = emulator()
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport())
    write_invoice(outbox, "INV-1", amount="120.00", name="b.xml")

    _, summary = send(settings, outbox, sandbox.transport())
    assert summary.exit_code == ExitCode.NEEDS_FIX
    assert summary.exit_cause == "1 sent, in several files with different content"
    _, planned = runner.dry_run(
        replace(settings, base_url="https://sandbox.test"), scanning(outbox)
    )
    assert (planned.exit_code, planned.would_send) == (ExitCode.NEEDS_FIX, ())
    with open_journal(journal_path) as journal:
        force(journal, "INV-1", remote_status="failed")
        assert (journal.invoice("INV-1").state, journal.invoice("INV-1").hold) == (
            "accepted",
            "held",
        )
    with pytest.raises(UsageError, match="in 2 files with different content"):
        send(settings, outbox, sandbox.transport(), new_versions=("INV-1",))
    other = tmp_path / "other"
    other.mkdir()
    write_invoice(other, "OTHER-1")
    with pytest.raises(UsageError, match="in 2 files with different content"):
        send(settings, other, sandbox.transport(), new_versions=("INV-1",))
    assert sandbox.stats()["per_invoice"]["INV-1"] == 1
    (outbox / "b.xml").unlink()

    _, summary = send(settings, outbox, sandbox.transport(), new_versions=("INV-1",))

    assert summary.exit_code == ExitCode.OK
    assert states(journal_path) == {"INV-1": "accepted", "OTHER-1": "accepted"}
    assert sandbox.stats()["per_key"]["invoice-INV-1-v2"]["transactions"] == 1


def test_a_delivered_invoice_held_for_a_clash_of_archived_files_asks_nothing_more(
    outbox: Path, journal_path: Path
):
    """Accepted and delivered, a second file with its number came and both were archived:
    no scan lifts the hold, which keeps only a new version from it (refused anyway while its
    delivery did not fail), and every cron run exited 4 "1 on hold". Once its delivery
    fails, it asks a person again."""
    write_invoice(outbox, "INV-1", amount="100.00", name="a.xml")
    sandbox = emulator()
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport())
    write_invoice(outbox, "INV-1", amount="120.00", name="b.xml")
    send(settings, outbox, sandbox.transport())
    for name in ("a.xml", "b.xml"):
        (outbox / name).unlink()
    write_invoice(outbox, "INV-2")

    _, summary = send(settings, outbox, sandbox.transport())

    assert summary.exit_code == ExitCode.OK, summary.exit_causes
    with open_journal(journal_path) as journal:
        assert journal.invoice("INV-1").held_by == "duplicate check"
        force(journal, "INV-1", remote_status="failed")
    _, summary = send(settings, outbox, sandbox.transport())
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE


def test_an_unanswered_invoice_is_not_replayed_while_two_files_disagree_on_its_number(
    outbox: Path, journal_path: Path
):
    """Its send got a 5xx (unknown), then two files hold its number in other content: the
    stored bytes are neither file's, so nothing is replayed until one file is left."""
    write_invoice(outbox, "INV-1", amount="100.00", name="a.xml")
    sandbox = emulator(error_rate=1.0)
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), policy=attempts_policy(1))
    assert states(journal_path) == {"INV-1": "unknown"}
    write_invoice(outbox, "INV-1", amount="130.00", name="a.xml")
    write_invoice(outbox, "INV-1", amount="120.00", name="b.xml")
    sandbox.set_faults(error_rate=0.0)

    send(settings, outbox, sandbox.transport())

    assert "INV-1" not in sandbox.stats()["per_invoice"]
    (outbox / "b.xml").unlink()  # a.xml's 130.00 is left: amended, as for one edited file
    send(settings, outbox, sandbox.transport())
    assert states(journal_path) == {"INV-1": "amended"}
    assert "INV-1" not in sandbox.stats()["per_invoice"]


def _unknown_and_held_for_a_clash(outbox: Path, journal_path: Path) -> tuple[Any, Settings]:
    """INV-1's send unanswered (a 5xx), then a second file with its number in other content:
    held by the duplicate check. The emulator, answering again, and the settings."""
    write_invoice(outbox, "INV-1", amount="100.00", name="a.xml")
    sandbox = emulator(error_rate=1.0)
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), policy=attempts_policy(1))
    write_invoice(outbox, "INV-1", amount="120.00", name="b.xml")
    sandbox.set_faults(error_rate=0.0)
    send(settings, outbox, sandbox.transport())
    return sandbox, settings


def test_an_operators_hold_over_a_clash_outlasts_the_clash(outbox: Path, journal_path: Path):
    """An unanswered invoice held while two files disagree on its number, then frozen by the
    operator: the scan that finds one file left lifts the duplicate check's hold, never the
    operator's. Released, it is replayed under its key, once."""
    sandbox, settings = _unknown_and_held_for_a_clash(outbox, journal_path)
    with open_journal(journal_path) as journal:
        assert journal.invoice("INV-1").held_by == "duplicate check"
        frozen = decide(journal, "hold", "INV-1", "ops", reason="month-end freeze")
        assert frozen.done and "was held by duplicate check" in frozen.message

    (outbox / "b.xml").unlink()
    send(settings, outbox, sandbox.transport())

    with open_journal(journal_path) as journal:
        row = journal.invoice("INV-1")
        assert (row.state, row.held_by) == ("unknown", "ops")
        assert "INV-1" not in sandbox.stats()["per_invoice"]
        released = decide(journal, "release", "INV-1", "ops")
        assert released.done and "the duplicate check held it for" in released.message
    send(settings, outbox, sandbox.transport())
    assert states(journal_path) == {"INV-1": "accepted"}
    assert_each_delivered_once(sandbox.stats(), ["INV-1"])


def test_an_operators_hold_over_a_clash_is_refused_when_released_meanwhile(
    outbox: Path, journal_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """helper-85: operator B released the duplicate check's hold between operator A's read
    and write of a takeover. A's write, which changed only who held it and why, was not
    checked against the hold A read: A was told "held" over a row left unheld, and the next
    send replayed it. A is refused now, as any decision on a row that changed meanwhile."""
    sandbox, settings = _unknown_and_held_for_a_clash(outbox, journal_path)
    real = holds._known

    def released_meanwhile(journal: Any, invoice_id: str) -> Any:
        read = real(journal, invoice_id)
        monkeypatch.setattr(holds, "_known", real)
        assert holds.decide(journal, "release", invoice_id, "opsB").done  # operator B
        return read

    with open_journal(journal_path) as journal:
        monkeypatch.setattr(holds, "_known", released_meanwhile)
        frozen = holds.decide(journal, "hold", "INV-1", "opsA", reason="month-end freeze")
        row = journal.invoice("INV-1")

    assert not frozen.done and "changed by another command" in frozen.message
    assert (row.hold, row.held_by) == (None, None)  # B's release stands, and says so


def test_a_408_to_a_document_post_is_replayed_under_its_key(outbox: Path, journal_path: Path):
    """A 408 (a proxy that stopped waiting) spends the key as any unanswered request: the
    invoice is unknown, and the next run replays the same key, delivered once."""
    write_invoice(outbox, "INV-1")
    sandbox = emulator()
    keys: list[str] = []

    class Answering408(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            if request.method == "POST" and request.url.path.endswith("/documents"):
                keys.append(request.headers["Idempotency-Key"])
                if len(keys) <= 2:
                    await request.aread()
                    return httpx.Response(408, json={"message": "proxy stopped waiting"})
            return await sandbox.transport().handle_async_request(request)

    settings = settings_for(journal_path)
    send(settings, outbox, Answering408(), policy=attempts_policy(2))
    with open_journal(journal_path) as journal:
        row = journal.invoice("INV-1")
        assert (row.state, row.idempotency_key) == ("unknown", "invoice-INV-1")
    send(settings, outbox, Answering408())

    assert states(journal_path) == {"INV-1": "accepted"}
    assert keys == ["invoice-INV-1"] * 3
    assert_each_delivered_once(sandbox.stats(), ["INV-1"])


def test_new_version_of_a_pending_invoice_is_refused(outbox: Path, journal_path: Path):
    write_invoice(outbox, "INV-1")
    with pytest.raises(UsageError, match="--new-version is for"):
        send(settings_for(journal_path), outbox, emulator().transport(), new_versions=("INV-1",))


def test_an_attempt_left_without_answer_is_replayed_inside_the_window(
    outbox: Path, journal_path: Path
):
    (invoice_id,) = outbox_of(outbox, 1)
    sandbox = emulator()
    settings = settings_for(journal_path)
    _stage_crash_after_request(settings, outbox, sandbox, invoice_id, hours_ago=1)

    _, summary = send(settings, outbox, sandbox.transport())

    assert summary.replays == 1 and summary.exit_code == ExitCode.OK
    assert states(journal_path) == {invoice_id: "accepted"}
    stats = sandbox.stats()
    assert stats["replays"] == 1 and stats["key_reused"] == 0
    assert_each_delivered_once(stats, [invoice_id])


def test_an_unknown_send_older_than_24_hours_is_not_replayed(outbox: Path, journal_path: Path):
    (invoice_id,) = outbox_of(outbox, 1)
    sandbox = emulator()
    settings = settings_for(journal_path)
    _stage_crash_after_request(settings, outbox, sandbox, invoice_id, hours_ago=25)
    before = sandbox.stats()["sends_received"]

    _, summary = send(settings, outbox, sandbox.transport())

    assert summary.held == (invoice_id,)
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE
    assert sandbox.stats()["sends_received"] == before
    assert states(journal_path) == {invoice_id: "unknown"}


@pytest.mark.parametrize("first_use", ["NULL", "'2099-01-01T00:00:00+00:00'", "'yesterday'"])
def test_an_unanswered_send_whose_first_use_cannot_be_dated_is_not_replayed(
    outbox: Path, journal_path: Path, first_use: str
):
    """Its key's first use lost, later than now (the clock went back since), or no time:
    how long ago the key left cannot be told, so its window counts as closed: held for
    reconcile, never replayed (GoRoute's own window may be over), no new key either."""
    (invoice_id,) = outbox_of(outbox, 1)
    sandbox = emulator()
    settings = settings_for(journal_path)
    _stage_crash_after_request(settings, outbox, sandbox, invoice_id, hours_ago=25)
    witness_execute(journal_path, f"UPDATE invoices SET key_first_used_at = {first_use}")

    _, summary = send(settings, outbox, sandbox.transport())

    assert summary.held == (invoice_id,) and summary.replays == 0
    assert sandbox.stats()["sends_received"] == 1
    with pytest.raises(UsageError, match="could deliver it twice"):
        send(settings, outbox, sandbox.transport(), new_versions=(invoice_id,))
    # The way on: reconcile dates the key by its attempt, finds the send and adopts it.
    report = reconcile(settings, apply=True, transport=sandbox.transport())
    assert report.applied == (invoice_id,)
    assert states(journal_path) == {invoice_id: "accepted"}
    assert sandbox.stats()["sends_received"] == 1


def test_a_new_key_waits_while_no_record_dates_the_old_one(outbox: Path, journal_path: Path):
    """The key's first use and its attempts all later than now (a clock far ahead when it
    sent, set right since): GoRoute's window may be open, so no new key, and the refusal
    says why and what can be done, not that a send would replay it (it would not)."""
    (invoice_id,) = outbox_of(outbox, 1)
    sandbox = emulator()
    settings = settings_for(journal_path)
    _stage_crash_after_request(settings, outbox, sandbox, invoice_id, hours_ago=25)
    ahead = "'2099-01-01T00:00:00+00:00'"
    witness_execute(journal_path, f"UPDATE invoices SET key_first_used_at = {ahead}")
    witness_execute(journal_path, f"UPDATE attempts SET started_at = {ahead}")
    send(settings, outbox, sandbox.transport())

    with pytest.raises(UsageError, match="whose first use the journal cannot date"):
        send(settings, outbox, sandbox.transport(), new_versions=(invoice_id,))
    assert sandbox.stats()["sends_received"] == 1


def test_reconcile_takes_no_time_before_2000_for_a_request(outbox: Path, journal_path: Path):
    """An attempt's start changed by hand to the year 1: taken as the key's first use, the
    search's look-back overflowed, a traceback; it is no time a request could have left."""
    (invoice_id,) = outbox_of(outbox, 1)
    sandbox = emulator()
    settings = settings_for(journal_path)
    _stage_crash_after_request(settings, outbox, sandbox, invoice_id, hours_ago=25)
    witness_execute(journal_path, "UPDATE attempts SET started_at = '0001-01-01T00:00:00+00:00'")
    send(settings, outbox, sandbox.transport())  # unknown, past its window: held

    report = reconcile(settings, apply=True, transport=sandbox.transport())

    assert report.applied == (invoice_id,)


class ClockStepsBack(httpx.AsyncBaseTransport):
    """The emulator; after the first send, the host's clock steps back five minutes (NTP)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner, self.offset = inner, timedelta(0)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.method == "POST":
            self.offset = timedelta(minutes=-5)
        return response


def test_a_send_whose_retry_meets_a_clock_gone_back_is_counted_unanswered(
    outbox: Path, journal_path: Path
):
    """A 5xx, then the clock steps back: its first use is now in the future, so no retry
    goes out (the window cannot be reckoned); it is unknown, and the run's results say so
    (they left it out: 0 unanswered, as if nothing had left)."""
    (invoice_id,) = outbox_of(outbox, 1)
    transport = ClockStepsBack(emulator(error_rate=1.0).transport())
    clocks = Clocks(wall=lambda: datetime.now(UTC) + transport.offset)

    _, summary = send(settings_for(journal_path), outbox, transport, clocks=clocks)

    assert states(journal_path) == {invoice_id: "unknown"}
    assert summary.unanswered == 1 and summary.requests == 1
    # The retry that never left is no request (it was counted as one).
    assert [result.requests for result in summary.results] == [1]


def _stage_crash_after_request(settings, outbox, sandbox, invoice_id, hours_ago):
    """A run that sent the request and died before recording the answer, hours ago."""
    sandbox.set_faults(drop_rate=1.0)
    then = datetime.now(UTC) - timedelta(hours=hours_ago)
    send(settings, outbox, sandbox.transport(), policy=attempts_policy(1), clocks=at(then))
    sandbox.set_faults(drop_rate=0.0)
    # what a crash leaves behind
    witness_execute(settings.journal, "UPDATE attempts SET outcome = NULL, finished_at = NULL")
    witness_execute(settings.journal, "UPDATE invoices SET state = 'pending'")
    if hours_ago >= 24:
        sandbox.advance_clock(hours_ago * 3600)


def test_journal_refuses_another_environment_unless_told(outbox: Path, journal_path: Path):
    outbox_of(outbox, 1)
    sandbox = emulator()
    send(settings_for(journal_path), outbox, sandbox.transport())
    other = settings_for(journal_path, base_url="http://other.test")

    with pytest.raises(EnvironmentMismatch, match="bound to http://sandbox.test"):
        send(other, outbox, sandbox.transport())
    _, summary = send(other, outbox, sandbox.transport(), allow_environment_change=True)
    assert summary.exit_code == ExitCode.OK


def test_a_lost_binding_is_no_way_to_another_environment(outbox: Path, journal_path: Path):
    """The binding row deleted by hand: the journal's runs still say where it sent."""
    outbox_of(outbox, 1)
    sandbox = emulator()
    send(settings_for(journal_path), outbox, sandbox.transport())
    witness_execute(journal_path, "DELETE FROM environment")
    other = settings_for(journal_path, base_url="http://other.test")

    with pytest.raises(EnvironmentMismatch, match="its binding was lost"):
        send(other, outbox, sandbox.transport())
    _, summary = send(settings_for(journal_path), outbox, sandbox.transport())
    assert summary.exit_code == ExitCode.OK  # the same environment binds again


def test_a_rotated_key_is_not_a_new_environment(outbox: Path, journal_path: Path):
    outbox_of(outbox, 1)
    sandbox = emulator(api_keys=frozenset({"sk_test_old", "sk_test_new"}))
    send(
        settings_for(journal_path, environ={"GOROUTE_API_KEY": "sk_test_old"}),
        outbox,
        sandbox.transport(),
    )
    write_invoice(outbox, "INV-2")

    _, summary = send(
        settings_for(journal_path, environ={"GOROUTE_API_KEY": "sk_test_new"}),
        outbox,
        sandbox.transport(),
    )

    assert summary.exit_code == ExitCode.OK
    with open_journal(journal_path) as journal:
        prints = [row[0] for row in journal.db.execute("SELECT key_fingerprint FROM runs")]
    assert len(set(prints)) == 2
    assert "sk_test" not in "".join(prints)


def test_deadline_stops_taking_work_and_exits_75(outbox: Path, journal_path: Path):
    outbox_of(outbox, 30)
    sandbox = emulator()

    # 30 take 3 s at this rate; the deadline counts from the start, the scan and a new
    # journal's history check included (0.5 s left none on a busy machine, with PostgreSQL).
    _, summary = send(
        settings_for(journal_path), outbox, sandbox.transport(), rate_per_minute=600, deadline=1.5
    )

    assert summary.stopped_by == "deadline"
    assert summary.exit_code == ExitCode.INCOMPLETE
    assert 0 < len(summary.results) < 30
    assert list(states(journal_path).values()).count("pending") == 30 - len(summary.results)


def test_pacing_keeps_the_server_free_of_429(outbox: Path, journal_path: Path):
    ids = outbox_of(outbox, 30)
    sandbox = emulator(rate_per_minute=1200, max_concurrent=10)

    _, summary = send(
        settings_for(journal_path),
        outbox,
        sandbox.transport(),
        rate_per_minute=1200,
        concurrency=10,
    )

    assert sandbox.stats()["rate_limited"] == 0
    assert summary.elapsed >= 29 * 61 / 1200 * 0.99  # evenly paced, no burst
    assert_each_delivered_once(sandbox.stats(), ids)


def test_a_used_key_left_pending_is_held_after_24_hours_not_sent_again(
    outbox: Path, journal_path: Path
):
    """A 5xx may have been processed: whatever comes after, the send is unknown, and after
    24 hours it is held for reconcile, not sent again as if it were new."""
    (invoice_id,) = outbox_of(outbox, 1)
    sandbox = emulator(drop_rate=1.0)  # the first request is recorded and its answer lost
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), policy=attempts_policy(1))
    assert states(journal_path) == {invoice_id: "unknown"}

    witness_execute(settings.journal, "UPDATE invoices SET state = 'pending'")  # key left pending
    sandbox.set_faults(drop_rate=0.0)
    sandbox.advance_clock(25 * 3600)
    later = datetime.now(UTC) + timedelta(hours=25)
    _, summary = send(settings, outbox, sandbox.transport(), clocks=at(later))

    assert summary.held == (invoice_id,) and summary.planned == 0
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE
    assert sandbox.stats()["per_invoice"] == {invoice_id: 1}


def test_stopped_during_backoff_after_a_lost_answer_is_unknown_not_pending(
    outbox: Path, journal_path: Path
):
    (invoice_id,) = outbox_of(outbox, 1)
    sandbox = emulator(drop_rate=1.0)
    slow_retry = attempts_policy(5)
    slow_retry = type(slow_retry)(max_attempts=5, backoff_initial=30.0, backoff_max=30.0)

    # The deadline falls in the 30 s wait after the first, lost, answer: 0.3 s sometimes fell
    # before that first request (the scan and a new journal's history check come first).
    _, summary = send(
        settings_for(journal_path), outbox, sandbox.transport(), policy=slow_retry, deadline=2.0
    )

    assert summary.stopped_by == "deadline"
    assert states(journal_path) == {invoice_id: "unknown"}


def test_new_version_of_an_unknown_invoice_inside_its_window_is_refused(
    outbox: Path, journal_path: Path
):
    (invoice_id,) = outbox_of(outbox, 1)
    sandbox = emulator(drop_rate=1.0)
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), policy=attempts_policy(1))

    with pytest.raises(UsageError, match="replays it safely under the same key"):
        send(settings, outbox, sandbox.transport(), new_versions=(invoice_id,))
    with open_journal(journal_path) as journal:
        unfinished = journal.db.execute(
            "SELECT count(*) FROM runs WHERE finished_at IS NULL"
        ).fetchone()[0]
    assert unfinished == 0
    assert sandbox.stats()["per_invoice"] == {invoice_id: 1}


def test_a_file_edited_after_a_crash_is_amended_and_keeps_its_unknown_send(
    outbox: Path, journal_path: Path
):
    (invoice_id,) = outbox_of(outbox, 1)
    sandbox = emulator()
    settings = settings_for(journal_path)
    _stage_crash_after_request(settings, outbox, sandbox, invoice_id, hours_ago=1)
    original = (outbox / f"{invoice_id}.xml").read_bytes()
    write_invoice(outbox, invoice_id, amount="7.00")

    _, summary = send(settings, outbox, sandbox.transport())
    with open_journal(journal_path) as journal:
        row = journal.invoice(invoice_id)
        assert (row.state, row.state_before_amend) == ("amended", "unknown")

    (outbox / f"{invoice_id}.xml").write_bytes(original)  # put back: replayed, same key
    _, summary = send(settings, outbox, sandbox.transport())
    assert summary.replays == 1
    assert states(journal_path) == {invoice_id: "accepted"}
    assert_each_delivered_once(sandbox.stats(), [invoice_id])


def test_an_unreachable_api_stops_the_run_and_leaves_everything_pending(
    outbox: Path, journal_path: Path
):
    """Connection refused proves nothing left: no key is spent, nothing becomes unknown, and
    the run stops after a few invoices instead of marching through all of them."""
    import socket

    ids = outbox_of(outbox, 20)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    settings = settings_for(journal_path, base_url=f"http://127.0.0.1:{closed_port}")

    # The sender's own stop: a journal's history check would meet the outage first.
    _, summary = send(
        settings, outbox, None, policy=attempts_policy(2), concurrency=1, trust_new_journal=True
    )

    assert summary.stopped_by == "outage"
    assert "connection refused" in summary.outage_reason
    assert summary.exit_code == ExitCode.INCOMPLETE
    assert set(states(journal_path).values()) == {"pending"}
    with open_journal(journal_path) as journal:
        assert all(row.idempotency_key is None for row in journal.invoices())
        outcomes = {row[0] for row in journal.db.execute("SELECT outcome FROM attempts")}
    assert outcomes == {"not_sent"}
    assert len(summary.results) == 3 < len(ids)


def test_a_number_with_an_invisible_mark_is_not_a_second_invoice(outbox: Path, journal_path: Path):
    """helper-48: "INV-2026-0042" and the same followed by a left-to-right mark (U+200E),
    or "Faktura-Öl-7" composed and decomposed, were two invoices, both delivered."""
    write_invoice(outbox, "INV-2026-0042", name="a.xml")
    write_invoice(outbox, "INV-2026-0042\u200e", name="b.xml")
    write_invoice(outbox, "Faktura-\u00d6l-7", name="c.xml")
    write_invoice(outbox, "Faktura-O\u0308l-7", name="d.xml")
    sandbox = emulator()

    report, _ = send(settings_for(journal_path), outbox, sandbox.transport())

    assert sandbox.stats()["per_invoice"] == {"INV-2026-0042": 1, "Faktura-\u00d6l-7": 1}
    assert states(journal_path) == {
        "INV-2026-0042": "accepted",
        "INV-2026-0042\u200e": "invalid",
        "Faktura-\u00d6l-7": "accepted",
        "Faktura-O\u0308l-7": "invalid",
    }
    invalid = {problem.subject for problem in report.invalid}
    assert invalid == {"INV-2026-0042\u200e", "Faktura-O\u0308l-7"}  # so send exits 3

"""A journal rolled back together with its outbox (a VM snapshot restored, a whole disk's
backup): the outbox's marker agrees with the journal, so nothing local tells that invoices it
now holds as never sent went out after the snapshot. Sent again once GoRoute's 24 hours are
over, they would be delivered twice. A journal silent for longer than that window first reads
GoRoute's transactions created since its last request, newest first; one naming an invoice it
never sent makes it check its history in full."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from backends import restore, snapshot
from sendkit import assert_each_delivered_once, at, emulator, send, settings_for, states
from test_history import (
    Counting,
    a_failed_delivery,
    assert_held_as_found,
    day_later,
    journal_path,
    new_version_a_day_later,
    outbox_of,
)
from ublfactory import write_invoice

from invoicectl.errors import ExitCode
from invoicectl.journal import open_journal
from invoicectl.lifecycle.holds import hold, release
from invoicectl.locations import Location
from invoicectl.sandbox import Sandbox
from invoicectl.scan.ingest import scan_directory
from invoicectl.send.history_texts import HistoryUnchecked
from invoicectl.send.marker import MARKER_NAME, journal_marker
from invoicectl.settings import Settings

__all__ = ["journal_path"]  # the fixture, shared with test_history


class VmSnapshot:
    """The machine as it is now, to roll back to: the journal, the outbox's marker, and the
    journal's own marker beside it (a SQLite journal's)."""

    def __init__(self, journal_path: Location, outbox: Path) -> None:
        self.journal_path = journal_path
        self.copy = snapshot(journal_path, "vm")
        markers = (outbox / MARKER_NAME, *journal_marker(journal_path))
        self.files = {path: path.read_bytes() for path in markers}

    def restore(self) -> None:
        restore(self.journal_path, self.copy)
        for path, data in self.files.items():
            path.write_bytes(data)


def quiet(line: str) -> None:
    return None


def hours(n: float):
    return at(datetime.now(UTC) + timedelta(hours=n))


def a_journal_that_sent(
    outbox: Path, journal_path: Location, prefix: str, count: int
) -> tuple[Sandbox, Settings, list[str]]:
    """An emulator, the journal's settings, and the ids of the invoices it has sent there."""
    ids = outbox_of(outbox, prefix, count)
    sandbox = emulator()
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), warn=quiet)
    return sandbox, settings, ids


def test_a_vm_snapshot_restored_holds_what_was_sent_after_it(outbox: Path, journal_path: Location):
    sandbox, settings, first = a_journal_that_sent(outbox, journal_path, "V", 5)
    vm = VmSnapshot(journal_path, outbox)  # the snapshot holds the outbox too
    second = outbox_of(outbox, "W", 7)
    send(settings, outbox, sandbox.transport(), warn=quiet)

    vm.restore()
    sandbox.advance_clock(25 * 3600)
    warnings: list[str] = []
    _, summary = send(
        settings, outbox, sandbox.transport(), warn=warnings.append, clocks=day_later()
    )

    assert_each_delivered_once(sandbox.stats(), first + second)
    assert_held_as_found(journal_path, second, sandbox)
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE
    (line,) = warnings
    assert "has made no request since" in line
    assert "include 7 invoice(s) it never sent (W-000, W-001, W-002, W-003, W-004, ...)" in line
    assert "7 already there, held for `invoicectl reconcile`" in line


def test_a_restored_outbox_whose_files_come_back_after_a_send_holds_them(
    outbox: Path, journal_path: Location
):
    """Found by a review: the snapshot holds the outbox too (that is why its marker agrees), so
    the files sent after it are gone with it and come back when the ERP exports them again. A
    new invoice sent first ends the silence, and the probe had only asked about that one."""
    sandbox, settings, first = a_journal_that_sent(outbox, journal_path, "V", 3)
    vm = VmSnapshot(journal_path, outbox)
    second = outbox_of(outbox, "W", 4)
    send(settings, outbox, sandbox.transport(), warn=quiet)  # the sends the restore loses
    saved = {path.name: path.read_bytes() for path in outbox.glob("W-*.xml")}

    vm.restore()  # journal, marker and outbox as they were
    for name in saved:
        (outbox / name).unlink()
    sandbox.advance_clock(25 * 3600)
    new = outbox_of(outbox, "Z", 1)
    send(settings, outbox, sandbox.transport(), warn=quiet, clocks=day_later())
    for name, data in saved.items():  # exported again: the ERP saw no answer for them
        (outbox / name).write_bytes(data)
    sandbox.advance_clock(3600)
    warnings: list[str] = []
    a_day_on = at(datetime.now(UTC) + timedelta(hours=26))
    _, summary = send(settings, outbox, sandbox.transport(), warn=warnings.append, clocks=a_day_on)

    assert_each_delivered_once(sandbox.stats(), first + second + new)
    assert_held_as_found(journal_path, second, sandbox)
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE
    assert any("4 invoice(s) GoRoute already holds, seen by a send" in line for line in warnings)


def test_a_long_silence_with_nothing_of_its_own_at_goroute_costs_one_request(
    outbox: Path, journal_path: Location
):
    sandbox, settings, first = a_journal_that_sent(outbox, journal_path, "Q", 3)
    later = outbox_of(outbox, "R", 2)

    counting = Counting(sandbox.transport())
    warnings: list[str] = []
    send(settings, outbox, counting, warn=warnings.append, clocks=day_later())

    assert counting.lists() == 1  # the newest page, nothing in it of this journal's to send
    assert warnings == []
    assert set(states(journal_path).values()) == {"accepted"}
    assert_each_delivered_once(sandbox.stats(), first + later)


def test_a_journal_that_sent_within_the_window_asks_nothing(outbox: Path, journal_path: Location):
    sandbox, settings, _ = a_journal_that_sent(outbox, journal_path, "S", 2)
    outbox_of(outbox, "T", 2)

    counting = Counting(sandbox.transport())
    send(settings, outbox, counting, warn=quiet, clocks=hours(23))

    assert counting.lists() == 0
    assert set(states(journal_path).values()) == {"accepted"}


class SlowList(httpx.AsyncBaseTransport):
    """The emulator, but its transactions list never answers in time."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path == "/api/v1/transactions":
            await asyncio.sleep(60)
        return await self.inner.handle_async_request(request)


class ListStatus(httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.AsyncBaseTransport, status: int) -> None:
        self.inner, self.status = inner, status
        self.posts = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path == "/api/v1/transactions":
            return httpx.Response(
                self.status, json={"error": {"code": "FORBIDDEN", "message": "no permission"}}
            )
        if request.method == "POST":
            self.posts += 1
        return await self.inner.handle_async_request(request)


def test_the_silence_probe_keeps_to_the_deadline(outbox: Path, journal_path: Location):
    """Found by a review: the probe's time was not taken from the run's --deadline."""
    sandbox, settings, _ = a_journal_that_sent(outbox, journal_path, "D", 2)
    outbox_of(outbox, "E", 2)
    warnings: list[str] = []
    started = time.monotonic()
    _, summary = send(
        settings, outbox, SlowList(sandbox.transport()), warn=warnings.append,
        clocks=day_later(), deadline=3.0,
    )  # fmt: skip
    assert time.monotonic() - started < 3.0 + 2.0
    assert summary.exit_code == ExitCode.INCOMPLETE  # the deadline, spent on the probe
    assert any("could not be read" in line for line in warnings), warnings


def test_a_list_the_key_may_not_read_does_not_stop_a_journal_with_history(
    outbox: Path, journal_path: Location
):
    """Found by a review: a key allowed to send but not to list (403 on the list alone) had
    every send after a quiet day stopped, for ever; the probe is a warning there."""
    sandbox, settings, _ = a_journal_that_sent(outbox, journal_path, "F", 2)
    outbox_of(outbox, "G", 2)
    transport = ListStatus(sandbox.transport(), 403)
    warnings: list[str] = []
    send(settings, outbox, transport, warn=warnings.append, clocks=day_later())
    assert transport.posts == 2
    assert any("could not be read" in line for line in warnings), warnings


def _silent_journal_probes(outbox: Path, journal_path: Location, sandbox, transport=None):
    """Journal A sends V-000, falls silent 25 h; another system on the account sends Q-7
    meanwhile (to another receiver); A's next send (a new invoice) probes and keeps Q-7."""
    settings = settings_for(journal_path)
    write_invoice(outbox, "V-000")
    send(settings, outbox, sandbox.transport(), warn=quiet)
    sandbox.advance_clock(25 * 3600)
    sandbox.add_transaction("Q-7", receiver="0088:5798000000001", status="delivered")
    write_invoice(outbox, "N-1")
    send(settings, outbox, transport or sandbox.transport(), warn=quiet, clocks=hours(25))
    assert states(journal_path)["N-1"] == "accepted"
    return settings


def test_release_force_of_a_seen_elsewhere_hold_is_honoured(outbox: Path, journal_path: Location):
    """Found by a review: the operator's word was overruled at every send for 30 days."""
    sandbox = emulator()
    settings = _silent_journal_probes(outbox, journal_path, sandbox)
    # A's own Q-7, another receiver's invoice: held (fair: same number at GoRoute)
    write_invoice(outbox, "Q-7")
    _, summary = send(settings, outbox, sandbox.transport(), warn=quiet, clocks=hours(26))
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE
    # the operator checks: not this invoice's; their word
    with open_journal(journal_path) as journal:
        assert release(journal, "Q-7", "clerk", force=True).done
    warnings: list[str] = []
    _, summary = send(settings, outbox, sandbox.transport(), warn=warnings.append, clocks=hours(27))
    assert states(journal_path)["Q-7"] == "accepted", warnings
    assert summary.exit_code == ExitCode.OK


class Inbound(httpx.AsyncBaseTransport):
    """The account also receives: Q-7 in the list is a supplier's invoice TO us."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.method != "GET" or request.url.path != "/api/v1/transactions":
            return response
        await response.aread()
        body = json.loads(response.content)
        for row in body.get("transactions", []):
            if row.get("invoice_number") == "Q-7":
                row["direction"] = "inbound"
                row["sender_id"], row["receiver_id"] = row["receiver_id"], "0088:7300010000001"
        return httpx.Response(response.status_code, json=body)


def test_an_inbound_invoice_with_our_number_holds_no_send(outbox: Path, journal_path: Location):
    """Found by a review: a supplier's invoice to this account is no send of ours."""
    sandbox = emulator()
    settings = _silent_journal_probes(
        outbox, journal_path, sandbox, transport=Inbound(sandbox.transport())
    )
    write_invoice(outbox, "Q-7")
    warnings: list[str] = []
    _, summary = send(settings, outbox, sandbox.transport(), warn=warnings.append, clocks=hours(26))
    assert states(journal_path)["Q-7"] == "accepted", warnings


def test_a_held_invoice_released_and_sent_after_the_snapshot_is_not_sent_again(
    outbox: Path, journal_path: Location
):
    """Found by a review: at the snapshot W-000 was held by the operator; after it, released
    and sent. The restore brings the hold back; the probe did not ask about W-000 (held) nor
    keep it (the journal had its row)."""
    sandbox = emulator()
    settings = settings_for(journal_path)
    write_invoice(outbox, "V-000")
    write_invoice(outbox, "W-000")
    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
        hold(journal, "W-000", "checking with the customer", "clerk")
    send(settings, outbox, sandbox.transport(), warn=quiet)
    vm = VmSnapshot(journal_path, outbox)
    with open_journal(journal_path) as journal:
        assert release(journal, "W-000", "clerk").done
    send(settings, outbox, sandbox.transport(), warn=quiet)  # W-000 delivered
    assert sandbox.stats()["per_invoice"]["W-000"] == 1

    vm.restore()  # journal (W-000 held), marker and outbox as they were
    sandbox.advance_clock(25 * 3600)
    write_invoice(outbox, "Z-000")
    warnings: list[str] = []
    send(settings, outbox, sandbox.transport(), warn=warnings.append, clocks=hours(25))
    with open_journal(journal_path) as journal:  # the operator releases it, as they did
        release(journal, "W-000", "clerk")
    send(settings, outbox, sandbox.transport(), warn=warnings.append, clocks=hours(26))
    assert sandbox.stats()["per_invoice"]["W-000"] == 1, warnings


def test_a_new_journals_check_holds_nothing_for_an_invoice_the_account_received(
    outbox: Path, journal_path: Location
):
    """The same for the check before a journal's first send: a supplier's invoice to this
    account, under one of its numbers, is no send of it."""
    sandbox = emulator()
    sandbox.add_transaction("Q-7", receiver="0088:5798000000001", status="delivered")
    write_invoice(outbox, "Q-7")
    warnings: list[str] = []
    send(settings_for(journal_path), outbox, Inbound(sandbox.transport()), warn=warnings.append)
    assert states(journal_path) == {"Q-7": "accepted"}, warnings


def _others_send(sandbox: Sandbox, count: int) -> None:
    """Another system on the account sends ``count`` invoices, a minute after the last send."""
    sandbox.advance_clock(60)
    for number in range(count):
        sandbox.add_transaction(
            f"O-{number:03d}", receiver="0088:5798000000001", status="delivered"
        )


def test_a_rollback_behind_more_than_a_page_of_other_sends_is_found(
    outbox: Path, journal_path: Location
):
    """The account's newest page holds only another system's sends: the probe reads on, back
    to the journal's last request, and finds the lost sends on the second page."""
    sandbox, settings, first = a_journal_that_sent(outbox, journal_path, "V", 3)
    vm = VmSnapshot(journal_path, outbox)
    second = outbox_of(outbox, "W", 4)
    send(settings, outbox, sandbox.transport(), warn=quiet)  # the sends the restore loses
    _others_send(sandbox, 150)

    vm.restore()
    sandbox.advance_clock(25 * 3600)
    warnings: list[str] = []
    _, summary = send(
        settings, outbox, sandbox.transport(), warn=warnings.append, clocks=day_later()
    )

    assert_each_delivered_once(sandbox.stats(), first + second)
    assert_held_as_found(journal_path, second, sandbox)
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE
    assert "include 4 invoice(s) it never sent (W-000, W-001, W-002, W-003)" in warnings[0]


def test_a_probe_that_cannot_reach_back_to_the_last_request_says_so(
    outbox: Path, journal_path: Location
):
    """A list that says nothing of paging answers one page, of another system's sends: what
    lies behind it, since the journal's last request, was not looked at, and the run says so."""
    sandbox = emulator(list_paging=False)
    settings = settings_for(journal_path)
    write_invoice(outbox, "V-000")
    send(settings, outbox, sandbox.transport(), warn=quiet)
    _others_send(sandbox, 120)
    sandbox.advance_clock(25 * 3600)
    write_invoice(outbox, "N-1")

    warnings: list[str] = []
    send(settings, outbox, sandbox.transport(), warn=warnings.append, clocks=day_later())

    assert states(journal_path)["N-1"] == "accepted"
    (line,) = warnings
    assert "has made no request since" in line
    assert "100 newest transactions name none of its invoices" in line
    assert "says nothing of paging" in line


class FirstPageOnly(httpx.AsyncBaseTransport):
    """The emulator, but the transactions list refuses every page after the first."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/transactions" and "cursor" in request.url.params:
            return httpx.Response(400, json={"error": {"code": "BAD_CURSOR", "message": "no"}})
        return await self.inner.handle_async_request(request)


def test_what_the_pages_read_found_counts_when_a_later_page_fails(
    outbox: Path, journal_path: Location
):
    """The lost sends are on the first page; the second is refused. What was read stands: the
    run checks its history (which fails on the same page, so nothing is sent)."""
    sandbox, settings, first = a_journal_that_sent(outbox, journal_path, "V", 2)
    vm = VmSnapshot(journal_path, outbox)
    _others_send(sandbox, 150)
    sandbox.advance_clock(60)
    second = outbox_of(outbox, "W", 3)
    send(settings, outbox, sandbox.transport(), warn=quiet)  # the sends the restore loses

    vm.restore()
    sandbox.advance_clock(25 * 3600)
    transport = FirstPageOnly(sandbox.transport())
    with pytest.raises(HistoryUnchecked) as stopped:
        send(settings, outbox, transport, warn=quiet, clocks=day_later())

    assert_each_delivered_once(sandbox.stats(), first + second)
    assert "include 3 invoice(s) it never sent (W-000, W-001, W-002)" in str(stopped.value)
    assert "refused the transactions list (HTTP 400 BAD_CURSOR)" in str(stopped.value)


def test_a_daily_cron_after_a_large_run_reads_one_page(outbox: Path, journal_path: Location):
    """Its last run sent 250 invoices, all within minutes of its last request: the newest page
    holds sends of its own, so nothing older can be a send it lost (no clock needed)."""
    sandbox, settings, first = a_journal_that_sent(outbox, journal_path, "D", 250)
    sandbox.advance_clock(24 * 3600)
    later = outbox_of(outbox, "E", 2)

    counting = Counting(sandbox.transport())
    warnings: list[str] = []
    send(settings, outbox, counting, warn=warnings.append, clocks=day_later())

    assert counting.lists() == 1
    assert warnings == []
    assert_each_delivered_once(sandbox.stats(), first + later)


def test_an_oldest_first_list_is_read_past_the_journals_own_sends(
    outbox: Path, journal_path: Location
):
    """Oldest first, the journal's own sends come before what it lost: they prove nothing of
    the pages after them, and the probe reads on."""
    sandbox = emulator(list_order="oldest_first")
    settings = settings_for(journal_path)
    first = outbox_of(outbox, "V", 3)
    send(settings, outbox, sandbox.transport(), warn=quiet)
    vm = VmSnapshot(journal_path, outbox)
    _others_send(sandbox, 150)
    sandbox.advance_clock(60)
    second = outbox_of(outbox, "W", 2)
    send(settings, outbox, sandbox.transport(), warn=quiet)  # the sends the restore loses

    vm.restore()
    sandbox.advance_clock(25 * 3600)
    warnings: list[str] = []
    send(settings, outbox, sandbox.transport(), warn=warnings.append, clocks=day_later())

    assert_each_delivered_once(sandbox.stats(), first + second)
    assert_held_as_found(journal_path, second, sandbox)


def test_a_new_version_after_a_silence_is_no_sign_of_a_rollback(
    outbox: Path, journal_path: Location
):
    """helper-50: asked about the --new-version invoice too, the probe found its own
    earlier, failed send and took it for one a rollback lost; against a list that says
    nothing of paging the full check then held it and the day's new invoice, exit 4."""
    sandbox, settings = a_failed_delivery(outbox, journal_path, list_paging=False)
    write_invoice(outbox, "G-001")  # exported today
    warnings: list[str] = []

    summary = new_version_a_day_later(settings, outbox, sandbox, warnings.append)

    assert warnings == []
    assert sandbox.stats()["per_invoice"] == {"F-000": 2, "G-001": 1}
    assert summary.exit_code == ExitCode.OK

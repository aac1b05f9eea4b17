"""The probe a send makes after a long silence (``history_loss.silence_lost``) against lists
that page, date and fail in other ways than the emulator's own. Found by a review of the probe
that reads back to the journal's last request: each of these sent a restored outbox's
invoices twice."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from sendkit import assert_each_delivered_once, at, emulator, send, settings_for
from test_history import day_later, journal_path, outbox_of
from test_rolled_back import VmSnapshot, _others_send, a_journal_that_sent, quiet

from invoicectl.locations import Location
from invoicectl.sandbox import Sandbox
from invoicectl.send.history_texts import HistoryUnchecked

__all__ = ["journal_path"]  # the fixture, shared with test_history


class NoSuchPageAfterFirst(httpx.AsyncBaseTransport):
    """The emulator, but a cursor page of the list is a JSON 404 (an expired cursor)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/transactions" and "cursor" in request.url.params:
            return httpx.Response(
                404, json={"error": {"code": "NOT_FOUND", "message": "cursor expired"}}
            )
        return await self.inner.handle_async_request(request)


class EpochTimes(httpx.AsyncBaseTransport):
    """The emulator, but the list writes ``created_at`` as Unix seconds."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.method != "GET" or request.url.path != "/api/v1/transactions":
            return response
        await response.aread()
        body = json.loads(response.content)
        for row in body.get("transactions", []):
            if row.get("created_at"):
                when = datetime.fromisoformat(row["created_at"].replace("Z", "+00:00"))
                row["created_at"] = int(when.timestamp())
        return httpx.Response(response.status_code, json=body)


def test_a_404_on_page_two_keeps_what_page_one_showed(outbox: Path, journal_path: Location):
    """The lost sends are on the first page; the second is a JSON 404, which on a first page
    means "no transactions list here". Here it is a list that stopped answering: the first
    page's finding stands, the full check fails on the same page, and nothing is sent."""
    sandbox, settings, first = a_journal_that_sent(outbox, journal_path, "V", 2)
    vm = VmSnapshot(journal_path, outbox)
    _others_send(sandbox, 150)
    sandbox.advance_clock(60)
    second = outbox_of(outbox, "W", 3)
    send(settings, outbox, sandbox.transport(), warn=quiet)  # the sends the restore loses

    vm.restore()
    sandbox.advance_clock(25 * 3600)
    with pytest.raises(HistoryUnchecked) as stopped:
        send(settings, outbox, NoSuchPageAfterFirst(sandbox.transport()), warn=quiet,
             clocks=day_later())  # fmt: skip

    assert_each_delivered_once(sandbox.stats(), first + second)
    assert "include 3 invoice(s) it never sent (W-000, W-001, W-002)" in str(stopped.value)


def _restored_outbox_comes_back(
    outbox: Path, journal_path: Location, clock, probe_transport=None
) -> tuple[Sandbox, list[str]]:
    """A journal sends V, then W (lost by a restore of journal, marker and outbox), falls
    silent, sends Z (the probe, through ``probe_transport``), then the ERP exports W again
    and a send follows. ``clock(hours)``: this machine's time then."""
    sandbox = emulator()
    settings = settings_for(journal_path)
    first = outbox_of(outbox, "V", 3)
    send(settings, outbox, sandbox.transport(), warn=quiet, clocks=clock(0))
    vm = VmSnapshot(journal_path, outbox)
    sandbox.advance_clock(5)
    second = outbox_of(outbox, "W", 4)
    send(settings, outbox, sandbox.transport(), warn=quiet, clocks=clock(0))
    saved = {path.name: path.read_bytes() for path in outbox.glob("W-*.xml")}

    vm.restore()
    for name in saved:
        (outbox / name).unlink()
    sandbox.advance_clock(25 * 3600)
    new = outbox_of(outbox, "Z", 1)
    transport = probe_transport(sandbox.transport()) if probe_transport else sandbox.transport()
    send(settings, outbox, transport, warn=quiet, clocks=clock(25))
    for name, data in saved.items():  # exported again: the ERP saw no answer for them
        (outbox / name).write_bytes(data)
    sandbox.advance_clock(3600)
    send(settings, outbox, sandbox.transport(), warn=quiet, clocks=clock(26))
    return sandbox, first + second + new


def test_lost_sends_are_kept_with_this_machine_minutes_ahead_of_goroute(
    outbox: Path, journal_path: Location
):
    """Ten minutes ahead, inside the margin the probe grants the two clocks: the lost sends
    are dated before the journal's last request by GoRoute's clock, and are kept all the same."""

    def ahead(hours: float):
        return at(datetime.now(UTC) + timedelta(minutes=10, hours=hours))

    sandbox, ids = _restored_outbox_comes_back(outbox, journal_path, ahead)
    assert_each_delivered_once(sandbox.stats(), ids)


def test_lost_sends_are_kept_when_the_list_dates_in_unix_seconds(
    outbox: Path, journal_path: Location
):
    def now_plus(hours: float):
        return at(datetime.now(UTC) + timedelta(hours=hours))

    sandbox, ids = _restored_outbox_comes_back(outbox, journal_path, now_plus, EpochTimes)
    assert_each_delivered_once(sandbox.stats(), ids)

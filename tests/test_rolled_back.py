"""A journal rolled back together with its outbox (a VM snapshot restored, a whole disk's
backup): the outbox's marker agrees with the journal, so nothing local tells that invoices it
now holds as never sent went out after the snapshot. Sent again once GoRoute's 24 hours are
over, they would be delivered twice. A journal silent for longer than that window first reads
one page of GoRoute's newest transactions; one naming an invoice it never sent makes it check
its history in full."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from backends import restore, snapshot
from sendkit import assert_each_delivered_once, at, emulator, send, settings_for, states
from test_history import Counting, assert_held_as_found, day_later, journal_path, outbox_of

from invoicectl.errors import ExitCode
from invoicectl.locations import Location
from invoicectl.send.marker import MARKER_NAME

__all__ = ["journal_path"]  # the fixture, shared with test_history


def quiet(line: str) -> None:
    return None


def test_a_vm_snapshot_restored_holds_what_was_sent_after_it(outbox: Path, journal_path: Location):
    first = outbox_of(outbox, "V", 5)
    sandbox = emulator()
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), warn=quiet)
    journal_copy = snapshot(journal_path, "vm")
    marker = (outbox / MARKER_NAME).read_bytes()  # the snapshot holds the outbox too
    second = outbox_of(outbox, "W", 7)
    send(settings, outbox, sandbox.transport(), warn=quiet)

    restore(journal_path, journal_copy)
    (outbox / MARKER_NAME).write_bytes(marker)
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
    first = outbox_of(outbox, "V", 3)
    sandbox = emulator()
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), warn=quiet)
    journal_copy = snapshot(journal_path, "vm")
    marker = (outbox / MARKER_NAME).read_bytes()
    second = outbox_of(outbox, "W", 4)
    send(settings, outbox, sandbox.transport(), warn=quiet)  # the sends the restore loses
    saved = {path.name: path.read_bytes() for path in outbox.glob("W-*.xml")}

    restore(journal_path, journal_copy)  # journal, marker and outbox as they were
    (outbox / MARKER_NAME).write_bytes(marker)
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
    first = outbox_of(outbox, "Q", 3)
    sandbox = emulator()
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), warn=quiet)
    later = outbox_of(outbox, "R", 2)

    counting = Counting(sandbox.transport())
    warnings: list[str] = []
    send(settings, outbox, counting, warn=warnings.append, clocks=day_later())

    assert counting.lists() == 1  # the newest page, nothing in it of this journal's to send
    assert warnings == []
    assert set(states(journal_path).values()) == {"accepted"}
    assert_each_delivered_once(sandbox.stats(), first + later)


def test_a_journal_that_sent_within_the_window_asks_nothing(outbox: Path, journal_path: Location):
    outbox_of(outbox, "S", 2)
    sandbox = emulator()
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), warn=quiet)
    outbox_of(outbox, "T", 2)

    counting = Counting(sandbox.transport())
    hours_later = at(datetime.now(UTC) + timedelta(hours=23))
    send(settings, outbox, counting, warn=quiet, clocks=hours_later)

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
    outbox_of(outbox, "D", 2)
    sandbox = emulator()
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), warn=quiet)
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
    outbox_of(outbox, "F", 2)
    sandbox = emulator()
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), warn=quiet)
    outbox_of(outbox, "G", 2)
    transport = ListStatus(sandbox.transport(), 403)
    warnings: list[str] = []
    send(settings, outbox, transport, warn=warnings.append, clocks=day_later())
    assert transport.posts == 2
    assert any("could not be read" in line for line in warnings), warnings

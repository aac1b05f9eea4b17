"""What helper-76 found around ``journal.CheckTurn``: a host waiting for another host's check
turn, and the invoices a check that did not finish leaves behind.

Real PostgreSQL, the real CLI in subprocesses, the emulator over real HTTP.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from processkit import run_send, send_process, wait_for
from sendkit import emulator
from test_pg_check_turn import CHECK_LOCK, _known, _turn_held, lost_beside_shared
from test_pg_workers import _outbox, _scanned, _worker
from ublfactory import write_invoice

from invoicectl.interrupts import Interrupted
from invoicectl.journal import CheckTurn, CheckTurnBusy, open_journal
from invoicectl.locations import JournalURL
from invoicectl.sandbox import BackgroundServer


def _waiting_for_turn(url: str) -> bool:
    return _turn_held(url, granted=False)


@contextmanager
def _send_waiting_for_turn(pg_url: str, tmp_path: Path) -> Iterator[Any]:
    """A send of one scanned invoice, waiting for the check turn another session holds:
    (the holder's connection, the send's process, the emulator, the invoice IDs)."""
    outbox, ids = _outbox(tmp_path, 1)
    _scanned(pg_url, outbox)
    sandbox = emulator()
    with psycopg.connect(pg_url, autocommit=True) as holder, BackgroundServer(sandbox) as server:
        holder.execute("SELECT pg_advisory_lock(%s)", (CHECK_LOCK,))
        process = send_process(outbox, JournalURL(pg_url), server.base_url)
        wait_for(lambda: _waiting_for_turn(pg_url), timeout=30)
        yield holder, process, sandbox, ids


@pytest.mark.parametrize("ending", ["SIGTERM", "deadline"])
def test_a_check_that_did_not_finish_leaves_no_invoice_to_another_host(
    pg_url, tmp_path: Path, ending: str
):
    """Host A's outbox was sent from a journal since lost; A's check of it is stopped (an
    operator's Ctrl-C, a service stop) or runs out of --deadline: exit 130 or 75, "nothing
    was sent". Host B sends from the same journal, from its own outbox, and its plan takes
    every pending invoice of the journal: the one delivered before the loss must not go out
    again, unchecked."""
    sandbox = emulator()
    url = JournalURL(pg_url)
    with BackgroundServer(sandbox) as server:
        outbox_a, outbox_b, _ = lost_beside_shared(tmp_path, sandbox, server.base_url, url, 1)
        # A's search takes a while; past --deadline 2 and its 3 s of grace, with "deadline"
        sandbox.set_faults(latency_ms=8000 if ending == "deadline" else 3000)
        args = ("--deadline", "2") if ending == "deadline" else ()
        host_a = _worker(outbox_a, pg_url, server.base_url, *args, lease=30.0)
        wait_for(lambda: _known(pg_url, "DELIVERED-1") and _turn_held(pg_url))
        if ending == "SIGTERM":
            time.sleep(1.0)  # inside the search
            host_a.send_signal(signal.SIGTERM)
        _, err_a = host_a.communicate(timeout=120)
        assert host_a.returncode == (130 if ending == "SIGTERM" else 75), err_a
        sandbox.set_faults(latency_ms=0)
        write_invoice(outbox_b, "B-NEW")
        code, output = run_send(outbox_b, url, server.base_url)
        stats = sandbox.stats()
    assert stats["per_invoice"]["DELIVERED-1"] == 1, output  # before the loss only


def test_a_host_waiting_for_the_turn_keeps_its_deadline(pg_url, tmp_path: Path):
    """Another host's check holds the turn (up to 180 s of search and 30 s of grace, after
    its scan); a cron send with --deadline 3, whose own check is certain, waits for it. It
    must end near its deadline, exit 75 (a later run does it), and say why: not 60 s later
    with "the journal cannot be reached"."""
    outbox, _ids = _outbox(tmp_path, 1)
    _scanned(pg_url, outbox)
    sandbox = emulator()
    with psycopg.connect(pg_url, autocommit=True) as holder, BackgroundServer(sandbox) as server:
        holder.execute("SELECT pg_advisory_lock(%s)", (CHECK_LOCK,))
        started = time.monotonic()
        process = send_process(outbox, JournalURL(pg_url), server.base_url, "--deadline", "3")
        _, err = process.communicate(timeout=120)
        took = time.monotonic() - started
    assert process.returncode == 75, err
    assert took < 20, f"{took:.0f} s: {err}"
    assert "cannot be reached" not in err and "history check" in err, err
    assert sandbox.stats()["per_invoice"] == {}


def test_a_host_waits_for_a_check_longer_than_the_lock_timeout(pg_url, tmp_path: Path):
    """A check may hold the turn longer than the session's 60 s lock_timeout (its search
    alone may take 180 s and 30 s of grace): a host that waits for it, with no deadline,
    sends once it ends, instead of failing after 60 s as if the server could not be reached."""
    with _send_waiting_for_turn(pg_url, tmp_path) as (holder, process, sandbox, ids):
        time.sleep(65)
        holder.execute("SELECT pg_advisory_unlock(%s)", (CHECK_LOCK,))
        _, err = process.communicate(timeout=120)
        stats = sandbox.stats()
    assert process.returncode == 0, err
    assert stats["per_invoice"] == {ids[0]: 1}


def test_a_stop_the_run_holds_ends_the_wait_for_the_turn(pg_url):
    """Inside ``check_history`` the run holds its stop signals: the wait for the turn asks
    between two tries whether to stop (``CheckTurn(stop=...)``), and stops within one."""
    stop = threading.Event()

    def stopped() -> None:
        if stop.is_set():
            raise Interrupted("SIGTERM")

    with (
        psycopg.connect(pg_url, autocommit=True) as holder,
        open_journal(JournalURL(pg_url)) as journal,
    ):
        holder.execute("SELECT pg_advisory_lock(%s)", (CHECK_LOCK,))
        threading.Timer(1.0, stop.set).start()
        started = time.monotonic()
        with pytest.raises(Interrupted):
            CheckTurn(journal, stop=stopped).take()
        assert time.monotonic() - started < 10
        (timeout,) = journal.db.execute("SHOW lock_timeout").fetchone()
        assert timeout == "1min"  # the session's own, given back
        holder.execute("SELECT pg_advisory_unlock(%s)", (CHECK_LOCK,))
        turn = CheckTurn(journal, left=lambda: 0.0)  # free: taken, whatever the deadline
        turn.take()
        assert _turn_held(pg_url)
        turn.give_back()
        assert not _turn_held(pg_url)


def test_the_wait_for_the_turn_ends_with_the_deadline_and_names_the_holder(pg_url):
    with (
        psycopg.connect(pg_url, autocommit=True, application_name="host-a") as holder,
        open_journal(JournalURL(pg_url)) as journal,
    ):
        holder.execute("SELECT pg_advisory_lock(%s)", (CHECK_LOCK,))
        ends = time.monotonic() + 3
        started = time.monotonic()
        with pytest.raises(CheckTurnBusy, match=r"host-a \(server pid \d+\).*--deadline") as busy:
            CheckTurn(journal, left=lambda: ends - time.monotonic()).take()
        assert 2 < time.monotonic() - started < 10
        assert busy.value.exit_code == 75


def test_a_stop_signal_ends_the_wait_for_the_turn_before_the_scan(pg_url, tmp_path: Path):
    with _send_waiting_for_turn(pg_url, tmp_path) as (_holder, process, _sandbox, _ids):
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
        assert time.monotonic() - started < 10
    assert process.returncode == 130, err
    assert "interrupted by SIGTERM" in err and "Traceback" not in err, err


def test_a_worker_waiting_for_another_hosts_check_spends_none_of_the_accounts_budget(
    pg_url, tmp_path: Path
):
    """A worker whose first sends meet another host's check asks again every second. Each
    ask took a start slot of the account's shared budget (a write of ``rate_starts``), which
    the replays of every host on the account share, and its summary called the wait "waited
    N s on the rate limit". It asks the turn first, as cheaply as a read."""
    outbox, _ids = _outbox(tmp_path, 1)
    sandbox = emulator()
    with BackgroundServer(sandbox) as server:
        code, output = run_send(outbox, JournalURL(pg_url), server.base_url, "--trust-new-journal")
        assert code == 0, output
        for n in range(3):
            write_invoice(outbox, f"N-{n}")
        with psycopg.connect(pg_url, autocommit=True) as holder:
            holder.execute("SELECT pg_advisory_lock(%s)", (CHECK_LOCK,))
            slots = _slots(pg_url)
            code, output = run_send(
                outbox, JournalURL(pg_url), server.base_url, "--deadline", "5", "--rate", "60"
            )
            assert code == 75, output
            assert _slots(pg_url) == slots, output  # no request went out, no slot was spent
            assert "s on the rate limit" not in output or "0.0 s on the rate limit" in output
        assert sandbox.stats()["per_invoice"].keys() == {"INV-0000"}


def _slots(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM rate_starts").fetchone()
    return int(row[0]) if row else 0

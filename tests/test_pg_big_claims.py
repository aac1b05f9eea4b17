"""helper-74: a claim of a sixteenth of the plan (24bd1af) held for long, on real processes."""

from __future__ import annotations

import json
import signal
import time
from typing import Any

import psycopg
import pytest
from sendkit import assert_each_delivered_once, emulator
from test_pg_workers import _drain, _outbox, _scanned, _states, _worker

from invoicectl.sandbox import BackgroundServer


def _claims(url: str) -> dict[int, int]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT worker_id, count(*) FROM claims GROUP BY worker_id").fetchall()
    return {int(w): int(n) for w, n in rows}


def _wait_for_sends(sandbox: Any, count: int) -> None:
    """Until the emulator has had ``count`` sends (a minute at most)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and sandbox.stats()["sends_received"] < count:
        time.sleep(0.02)


@pytest.mark.slow
def test_a_worker_paused_past_its_lease_with_a_big_claim_loses_it_to_the_other(pg_url, tmp_path):
    outbox, ids = _outbox(tmp_path, 400)
    _scanned(pg_url, outbox)
    sandbox = emulator(latency_ms=40.0)
    with BackgroundServer(sandbox) as server:
        args = ("--concurrency", "2", "--json")
        paused = _worker(outbox, pg_url, server.base_url, *args, lease=2.0)
        _wait_for_sends(sandbox, 5)
        paused.send_signal(signal.SIGSTOP)
        held = _claims(pg_url)
        assert max(held.values()) >= 20  # a big claim (400 // 16)
        other = _worker(outbox, pg_url, server.base_url, *args, lease=30.0)
        out, err = other.communicate(timeout=180)
        paused.send_signal(signal.SIGCONT)
        p_out, p_err = paused.communicate(timeout=60)
        stats = sandbox.stats()
        states = _states(pg_url)
    assert_each_delivered_once(stats, ids)
    # the other took the paused one's claims over once its lease ran out: all sent
    assert set(states.values()) == {"accepted"}, err
    assert other.returncode == 0, (out[-2000:], err)
    # lease_lost, or (paused inside a transaction) its session ended by the server: 75
    assert paused.returncode == 75, (p_out[-2000:], p_err)


@pytest.mark.slow
def test_a_deadline_with_a_big_claim_queued_gives_it_back_and_reports_it(pg_url, tmp_path):
    outbox, ids = _outbox(tmp_path, 400)
    _scanned(pg_url, outbox)
    sandbox = emulator(latency_ms=100.0)
    with BackgroundServer(sandbox) as server:
        first = _worker(
            outbox, pg_url, server.base_url, "--concurrency", "2", "--deadline", "3", "--json"
        )
        out, err = first.communicate(timeout=120)
        assert first.returncode == 75, (out[-3000:], err)
        summary = json.loads(out)
        left = sum(1 for s in _states(pg_url).values() if s == "pending")
        assert left > 0
        assert _claims(pg_url) == {}  # its claims went back when it stopped
        sandbox.set_faults(latency_ms=0.0)
        _drain(outbox, pg_url, server.base_url, ids)
        stats = sandbox.stats()
    assert_each_delivered_once(stats, ids)
    assert summary["stops"] == ["deadline"]
    assert summary["not_started"] == summary["journal"]["pending"] > 0


@pytest.mark.slow
def test_sigterm_with_a_big_claim_queued_gives_it_back(pg_url, tmp_path):
    outbox, ids = _outbox(tmp_path, 400)
    _scanned(pg_url, outbox)
    sandbox = emulator(latency_ms=100.0)
    with BackgroundServer(sandbox) as server:
        first = _worker(outbox, pg_url, server.base_url, "--concurrency", "2", "--json")
        _wait_for_sends(sandbox, 6)
        first.send_signal(signal.SIGTERM)
        out, err = first.communicate(timeout=120)
        assert first.returncode not in (0, 1), (out[-3000:], err)
        assert _claims(pg_url) == {}
        sandbox.set_faults(latency_ms=0.0)
        _drain(outbox, pg_url, server.base_url, ids)
        stats = sandbox.stats()
    assert_each_delivered_once(stats, ids)

"""send as a real process against the emulator over loopback HTTP: kill -9, overlap, signals."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from processkit import run_send, send_process, wait_for
from sendkit import assert_each_delivered_once, emulator, states
from ublfactory import write_invoice

from invoicectl.journal import Journal
from invoicectl.sandbox import BackgroundServer

pytestmark = pytest.mark.slow


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    return tmp_path / "journal.db"


def make_outbox(outbox: Path, count: int) -> list[str]:
    ids = [f"K-{number:04d}" for number in range(count)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    return ids


def test_kill_9_at_several_points_then_resume_delivers_each_once(outbox: Path, journal: Path):
    ids = make_outbox(outbox, 300)
    sandbox = emulator(latency_ms=30)
    fast = ("--rate", "30000", "--concurrency", "10")
    with BackgroundServer(sandbox) as server:
        for kill_after in (40, 150, 260):
            process = send_process(outbox, journal, server.base_url, *fast)
            wait_for(lambda n=kill_after: sandbox.stats()["sends_received"] >= n)
            process.send_signal(signal.SIGKILL)
            process.communicate(timeout=30)
            assert process.returncode == -signal.SIGKILL
        for _ in range(3):
            code, output = run_send(outbox, journal, server.base_url, *fast)
            if code == 0:
                break
        assert code == 0, output

    assert set(states(journal).values()) == {"accepted"}
    stats = sandbox.stats()
    assert stats["key_reused"] == 0
    assert_each_delivered_once(stats, ids)
    with Journal(journal) as opened:
        open_attempts = opened.db.execute(
            "SELECT count(*) FROM attempts WHERE outcome IS NULL"
        ).fetchone()[0]
        assert open_attempts == 0
        for row in opened.invoices():
            assert sandbox.transaction(row.transaction_id) is not None


def test_two_runs_started_together_one_sends_the_other_exits_6(outbox: Path, journal: Path):
    ids = make_outbox(outbox, 60)
    sandbox = emulator(latency_ms=20)
    with BackgroundServer(sandbox) as server:
        first = send_process(outbox, journal, server.base_url, "--rate", "3000")
        second = send_process(outbox, journal, server.base_url, "--rate", "3000")
        results = [process.communicate(timeout=120) for process in (first, second)]
        codes = sorted([first.returncode, second.returncode])

    assert codes == [0, 6], results
    loser = results[[first.returncode, second.returncode].index(6)]
    assert "another invoicectl send holds the journal" in loser[1]
    assert "pid" in loser[1]
    assert_each_delivered_once(sandbox.stats(), ids)


def test_sigterm_stops_taking_work_saves_state_and_exits_130(outbox: Path, journal: Path):
    ids = make_outbox(outbox, 100)
    sandbox = emulator(latency_ms=20)
    with BackgroundServer(sandbox) as server:
        process = send_process(outbox, journal, server.base_url, "--rate", "600")
        wait_for(lambda: sandbox.stats()["sends_received"] >= 3)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 130, stderr
        sent = sandbox.stats()["accepted"]
        assert 3 <= sent < 100

        with Journal(journal) as opened:
            counts = opened.state_counts()
            assert counts["accepted"] == sent and counts["pending"] == 100 - sent
            assert (
                opened.db.execute("SELECT count(*) FROM attempts WHERE outcome IS NULL").fetchone()[
                    0
                ]
                == 0
            )

        code, output = run_send(outbox, journal, server.base_url, "--rate", "30000")
    assert code == 0, output
    assert_each_delivered_once(sandbox.stats(), ids)


def test_refused_key_exits_5_after_the_first_answer(outbox: Path, journal: Path):
    make_outbox(outbox, 10)
    sandbox = emulator()
    with BackgroundServer(sandbox) as server:
        code, output = run_send(outbox, journal, server.base_url, api_key="sk_test_bad")

    assert code == 5, output
    assert "the API refused the credentials" in output
    assert sandbox.stats()["sends_received"] == 0  # refused before a send was recorded
    assert set(states(journal).values()) == {"pending"}


def test_json_summary_parses_and_matches_the_journal(outbox: Path, journal: Path):
    make_outbox(outbox, 8)
    write_invoice(outbox, "REJ-1", receiver="9915:not-registered")
    (outbox / "broken.xml").write_text("<nope")
    sandbox = emulator()
    with BackgroundServer(sandbox) as server:
        # Without the receiver check, which would hold REJ-1 before spending a send on it.
        args = ("--json", "--rate", "30000", "--no-receiver-check")
        code, _ = run_send(outbox, journal, server.base_url, *args)
        process = send_process(outbox, journal, server.base_url, "--json")
        stdout, _ = process.communicate(timeout=60)

    assert code == 3
    summary = json.loads(stdout)  # the second run: nothing to send, still one JSON document
    assert summary["exit_code"] == 3 == process.returncode
    assert summary["journal"]["accepted"] == 8
    assert summary["journal"]["rejected"] == 1
    assert summary["journal"]["invalid"] == 1
    assert summary["scan"]["files"] == 10


def test_json_errors_are_json_too(outbox: Path, journal: Path):
    make_outbox(outbox, 1)
    code, output = run_send(
        outbox, journal, "http://127.0.0.1:9", "--json", "--api-key-file", "/nonexistent"
    )
    assert code == 1
    document = json.loads(output)
    assert document["exit_code"] == 1
    # The path given is not repeated: it may be the key typed in the wrong place.
    assert document["error"].startswith("the API key file given by --api-key-file does not exist")
    assert "/nonexistent" not in document["error"]

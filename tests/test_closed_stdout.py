"""A closed stdout stops the output, never the work (issue 11, item 13).

``invoicectl send | head -1`` used to send nothing and exit 1 without a word: rich raised
SystemExit inside the send loop at the first line after ``head`` had gone; with ``head -5``
it stopped midway, leaving invoices unknown.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from processkit import cli_process, journal_states, run_cli
from sendkit import assert_each_delivered_once, emulator
from ublfactory import write_invoice

from invoicectl.sandbox import BackgroundServer

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("lines", "args"), [(1, ()), (5, ()), (1, ("--json",))])
def test_send_finishes_its_work_when_stdout_is_closed(
    outbox: Path, tmp_path: Path, lines: int, args: tuple[str, ...]
):
    ids = [f"P-{number:03d}" for number in range(30)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    journal = tmp_path / "journal.db"
    sandbox = emulator(latency_ms=10)
    with BackgroundServer(sandbox) as server:
        process = cli_process(
            journal, server.base_url, "send", str(outbox), "--rate", "60000", "--batch-size",
            "1", *args, stdout=subprocess.PIPE,
        )  # fmt: skip
        assert process.stdout is not None and process.stderr is not None
        read = [process.stdout.readline() for _ in range(lines)]
        process.stdout.close()  # as `head` does when it has its lines
        stderr = process.stderr.read()
        process.stderr.close()
        process.wait(timeout=120)

    assert all(read), read
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr
    assert set(journal_states(journal).values()) == {"accepted"}
    assert_each_delivered_once(sandbox.stats(), ids)


def _outbox_of(outbox: Path, count: int) -> list[str]:
    ids = [f"S-{number:03d}" for number in range(count)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    return ids


def test_send_finishes_its_work_when_stderr_is_closed_midway(outbox: Path, tmp_path: Path):
    """``send ... 2>&1 | head -1`` with the progress on stderr: the run used to end in exit 1
    at the next line it said, its end ping never sent."""
    ids = _outbox_of(outbox, 20)
    journal = tmp_path / "journal.db"
    sandbox = emulator(latency_ms=10)
    with BackgroundServer(sandbox) as server:
        process = cli_process(
            journal, server.base_url, "send", str(outbox), "--rate", "60000", "--batch-size",
            "1", stdout=subprocess.DEVNULL,
        )  # fmt: skip
        assert process.stderr is not None
        assert process.stderr.readline()
        process.stderr.close()  # the reader has gone
        process.wait(timeout=120)

    assert process.returncode == 0
    assert set(journal_states(journal).values()) == {"accepted"}
    assert_each_delivered_once(sandbox.stats(), ids)


@pytest.mark.parametrize("closed", [1, 2], ids=["stdout", "stderr"])
def test_a_stream_closed_before_the_start_costs_nothing_but_its_output(
    outbox: Path, tmp_path: Path, closed: int
):
    """``>&-`` or ``2>&-`` in a crontab: Python starts with no stream at all; the CLI ended
    in a traceback before it scanned anything."""
    ids = _outbox_of(outbox, 3)
    journal = tmp_path / "journal.db"
    sandbox = emulator()

    def close_it() -> None:
        import os
        import signal

        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.close(closed)

    with BackgroundServer(sandbox) as server:
        process = cli_process(
            journal, server.base_url, "send", str(outbox), "--rate", "60000",
            preexec_fn=close_it,
            stdout=subprocess.DEVNULL if closed == 2 else None,
            stderr=subprocess.DEVNULL if closed == 1 else None,
        )  # fmt: skip
        process.wait(timeout=120)

    assert process.returncode == 0
    assert_each_delivered_once(sandbox.stats(), ids)


def test_a_stop_signal_during_the_end_ping_changes_no_exit_code(outbox: Path, tmp_path: Path):
    """The exit code is chosen before the end ping: SIGTERM while a slow monitor takes it
    made a run that logged 'exit 0' exit 130 without a word."""
    import signal
    import time

    from hostile import HostileServer, answer, hang, routes

    ids = _outbox_of(outbox, 2)
    journal = tmp_path / "journal.db"
    sandbox = emulator()
    monitor = routes({("POST", "/job/start"): answer(200, b"OK")}, otherwise=hang(3))
    with BackgroundServer(sandbox) as server, HostileServer(monitor) as pinged:
        process = cli_process(
            journal, server.base_url, "send", str(outbox), "--rate", "60000",
            "--ping-url", f"{pinged.base_url}/job", stdout=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while len(pinged.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [request.path for request in pinged.requests] == ["/job/start", "/job/0"]
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)

    assert process.returncode == 0, stderr
    assert_each_delivered_once(sandbox.stats(), ids)


def test_a_full_log_disk_stops_only_the_output(
    outbox: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The README's crontab line (``>> send.log 2>&1``) on a full file system, stdout
    block-buffered as under cron (no PYTHONUNBUFFERED): the run sent nothing, blamed the
    journal ("No space left on device") in a traceback and exited 120."""
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    ids = _outbox_of(outbox, 5)
    journal = tmp_path / "journal.db"
    sandbox = emulator()
    with BackgroundServer(sandbox) as server, open("/dev/full", "w") as full:
        process = cli_process(
            journal, server.base_url, "send", str(outbox), "--rate", "60000",
            stdout=full, stderr=full,
        )  # fmt: skip
        process.wait(timeout=120)

    assert process.returncode == 0
    assert set(journal_states(journal).values()) == {"accepted"}
    assert_each_delivered_once(sandbox.stats(), ids)


@pytest.mark.parametrize("args", [("status", "--json"), ("status", "--format", "csv")])
def test_a_document_cut_short_by_a_full_disk_is_an_error(
    outbox: Path, tmp_path: Path, args: tuple[str, ...]
):
    """``status --json > /dev/full`` exited 0 with nothing written: a script took the empty
    document for the journal's state. Its reader leaving (``| head``) is still no error."""
    _outbox_of(outbox, 3)
    journal = tmp_path / "journal.db"
    with BackgroundServer(emulator()) as server:
        assert run_cli(journal, server.base_url, "scan", str(outbox))[0] == 0
        with open("/dev/full", "w") as full:
            process = cli_process(journal, server.base_url, *args, stdout=full)
            _, stderr = process.communicate(timeout=60)
        left = cli_process(journal, server.base_url, *args, stderr=subprocess.DEVNULL)
        assert left.stdout is not None
        first = left.stdout.read(1)
        left.stdout.close()  # as `head -c 1` does
        left.wait(timeout=60)

    assert process.returncode == 1, stderr
    assert "could not be written whole to stdout (No space left on device)" in stderr
    assert "Traceback" not in stderr
    assert first and left.returncode == 75  # status's own: 3 waiting to be sent


def test_a_send_whose_report_is_cut_short_keeps_its_code(outbox: Path, tmp_path: Path):
    """The send's exit code is the one its journal recorded (the runs row, the metrics'
    last success): the line says where its outcome is read."""
    ids = _outbox_of(outbox, 3)
    journal = tmp_path / "journal.db"
    sandbox = emulator()
    with BackgroundServer(sandbox) as server, open("/dev/full", "w") as full:
        process = cli_process(journal, server.base_url, "send", str(outbox), "--json", stdout=full)
        _, stderr = process.communicate(timeout=120)

    assert process.returncode == 0, stderr
    assert "this run's outcome is in the journal (invoicectl status)" in stderr
    assert_each_delivered_once(sandbox.stats(), ids)

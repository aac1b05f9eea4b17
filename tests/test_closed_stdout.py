"""A closed stdout stops the output, never the work (issue 11, item 13).

``invoicectl send | head -1`` used to send nothing and exit 1 without a word: rich raised
SystemExit inside the send loop at the first line after ``head`` had gone; with ``head -5``
it stopped midway, leaving invoices unknown.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from processkit import cli_process, journal_states
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

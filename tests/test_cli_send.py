"""send, reconcile and sandbox from the command line, with --sandbox (no account, no network)."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from conftest import REPO
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.cli import app

runner = CliRunner()
FAST = ["--rate", "60000"]


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_quick_start_sends_the_samples_and_ends_well(tmp_path: Path):
    # A copy: a send leaves its history marker in the outbox, never in the repository.
    samples = shutil.copytree(REPO / "sample_invoices", tmp_path / "sample_invoices")
    result = invoke("send", str(samples), "--sandbox", *FAST)

    assert result.exit_code == 0, result.output
    assert "accepted 13" in result.output
    status = json.loads(invoke("status", "--sandbox", "--format", "json").output)
    assert {record["state"] for record in status} == {"accepted"}


def test_sandbox_uses_a_journal_of_its_own(outbox: Path, isolated_environment: Path):
    write_invoice(outbox, "INV-1")
    invoke("send", str(outbox), "--sandbox", *FAST)

    assert (isolated_environment.parent / "sandbox.db").exists()
    assert not isolated_environment.exists()


def test_send_without_a_key_says_how_to_get_going(outbox: Path):
    write_invoice(outbox, "INV-1")

    result = invoke("send", str(outbox))

    assert result.exit_code == 1
    assert "no API key: set GOROUTE_API_KEY or pass --api-key-file" in result.output
    assert "--sandbox" in result.output


def test_dry_run_sends_nothing_and_says_how_long(outbox: Path):
    for number in range(3):
        write_invoice(outbox, f"INV-{number}")

    result = invoke("send", str(outbox), "--dry-run", "--rate", "60")

    assert result.exit_code == 0, result.output
    assert "dry run: would send 3, replay 0" in result.output
    assert "about 3 s at 60/min" in result.output


def test_a_dry_run_refuses_the_plain_http_base_url_the_send_refuses(
    outbox: Path, monkeypatch: pytest.MonkeyPatch
):
    """helper-57: it planned "would send 1" for a send that cannot start."""
    write_invoice(outbox, "INV-1")
    monkeypatch.setenv("GOROUTE_BASE_URL", "http://goroute.example.invalid")

    result = invoke("send", str(outbox), "--dry-run")

    assert result.exit_code == 1, result.output
    assert "plain http to a remote host" in result.output
    assert "would send" not in result.output


def test_send_json_answers_a_usage_error_in_json(outbox: Path):
    result = invoke("send", str(outbox), "--sandbox", "--rate", "0", "--json")

    assert result.exit_code == 2
    assert json.loads(result.stdout) == {
        "error": "Invalid value for '--rate': 0 is not in the range x>=1.",
        "exit_code": 2,
    }


def test_dry_run_json(outbox: Path):
    write_invoice(outbox, "INV-1")

    result = invoke("send", str(outbox), "--dry-run", "--json")

    document = json.loads(result.output)
    assert document["dry_run"] is True and document["would_send"] == ["INV-1"]


def test_reconcile_formats_agree_and_the_output_file_is_written(outbox: Path, tmp_path: Path):
    write_invoice(outbox, "INV-1")
    invoke("send", str(outbox), "--sandbox", *FAST)

    table = invoke("reconcile", "--sandbox")
    as_json = invoke("reconcile", "--sandbox", "--format", "json")
    as_csv = invoke("reconcile", "--sandbox", "--format", "csv")
    report_file = tmp_path / "report.json"
    written = invoke("reconcile", "--sandbox", "--format", "json", "--output", str(report_file))

    assert table.exit_code in (0, 75), table.output
    document = json.loads(as_json.output)
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert [row["invoice_id"] for row in rows] == ["INV-1"]
    assert json.loads(report_file.read_text())["summary"] == document["summary"]
    assert written.exit_code == as_json.exit_code


def test_sandbox_command_serves_over_loopback():
    process = subprocess.Popen(
        [sys.executable, "-m", "invoicectl", "sandbox", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        base_url = process.stdout.readline().strip().split("=", 1)[1]
        key = process.stdout.readline().strip().split("=", 1)[1]
        assert banner.startswith("GoRoute sandbox on http://127.0.0.1:")
        deadline = time.monotonic() + 10
        while True:
            try:
                answer = httpx.get(f"{base_url}/peppol/version", timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        assert answer.json()["environment"] == "sandbox"
        stats = httpx.get(f"{base_url}/_sandbox/stats", headers={"X-API-Key": key})
        assert stats.status_code == 200
    finally:
        process.terminate()
        process.communicate(timeout=10)

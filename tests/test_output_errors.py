"""Errors under the output contract (issue 12, item 5): with ``--json`` every command answers
every error (a usage error, a bad setting, a journal it cannot use, a held lock) with one JSON
document on stdout, ``{"error": ..., "exit_code": ...}``, and that exit code; nothing on
stderr. And ``--quiet``: only errors and the data asked for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.cli import app
from invoicectl.journal.runlock import RunLock

runner = CliRunner()

# Each command with the arguments it needs (paths filled in per test).
COMMANDS: dict[str, list[str]] = {
    "scan": ["{outbox}"],
    "status": [],
    "show": ["INV-1"],
    "receivers": [],
    "backup": ["{tmp}/copy.db"],
    "send": ["{outbox}"],
    "reconcile": [],
    "validate": ["{outbox}"],
    "hold": ["INV-1", "--reason", "why"],
    "release": ["INV-1"],
    "abandon": ["INV-1", "--reason", "why"],
    "verify": [],
    "export": ["{tmp}/audit"],
    "verify-export": ["{tmp}/audit"],
    "doctor": [],
    "sandbox": ["--port", "0"],
}
JOURNAL_COMMANDS = [name for name in COMMANDS if name not in ("verify-export", "sandbox")]
# Those whose own document reports what a journal they cannot open or a bad config is:
# verify's findings, doctor's checks.
REPORTING = {"verify", "doctor"}
LOCKING = ["scan", "send", "reconcile", "validate", "hold", "release", "abandon"]


def args_for(name: str, outbox: Path, tmp: Path) -> list[str]:
    return [name, *(arg.format(outbox=outbox, tmp=tmp) for arg in COMMANDS[name])]


def error_document(result: Any) -> dict[str, Any]:
    assert result.stderr == "", result.stderr  # one document, nothing else
    document = json.loads(result.stdout)
    assert set(document) == {"error", "exit_code"}, document
    assert document["exit_code"] == result.exit_code
    assert "\n" not in document["error"]
    return document


@pytest.fixture
def ready(outbox: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A journal with INV-1 scanned; an API key and an unreachable base URL, so that the
    commands that talk to GoRoute get past their settings."""
    write_invoice(outbox, "INV-1")
    monkeypatch.setenv("GOROUTE_API_KEY", "k" * 32)
    monkeypatch.setenv("GOROUTE_BASE_URL", "http://127.0.0.1:9")
    assert runner.invoke(app, ["scan", str(outbox)]).exit_code == 0
    return outbox


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_usage_error_is_json_from_the_real_cli(name: str, outbox: Path, tmp_path: Path):
    result = subprocess.run(
        [sys.executable, "-m", "invoicectl", *args_for(name, outbox, tmp_path), "--json", "-x"],
        capture_output=True,
        text=True,
        env={**os.environ, "GOROUTE_API_KEY": "k" * 32},
        timeout=60,
    )

    assert result.returncode == 2, result.stderr
    assert result.stderr == ""
    assert json.loads(result.stdout) == {"error": "No such option: -x", "exit_code": 2}


@pytest.mark.parametrize("name", JOURNAL_COMMANDS)
def test_a_journal_that_cannot_be_used_is_json(name: str, ready: Path, tmp_path: Path):
    (tmp_path / "a-file").write_text("not a directory")
    journal = tmp_path / "a-file" / "state" / "journal.db"

    args = [*args_for(name, ready, tmp_path), "--journal", str(journal), "--json"]
    result = runner.invoke(app, args)

    assert result.exit_code == 1, result.stdout
    if name in REPORTING:
        assert json.loads(result.stdout)["ok"] is False
        return
    assert str(tmp_path / "a-file") in error_document(result)["error"]


@pytest.mark.parametrize("name", JOURNAL_COMMANDS)
def test_a_bad_setting_is_json(
    name: str, ready: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    config = tmp_path / "bad.toml"
    config.write_text("rate = [")
    monkeypatch.setenv("INVOICECTL_CONFIG", str(config))

    result = runner.invoke(app, [*args_for(name, ready, tmp_path), "--json"])

    assert result.exit_code == 1, result.stdout
    if name == "doctor":
        assert json.loads(result.stdout)["checks"][0]["status"] == "fail"
        return
    assert error_document(result)["error"].startswith(f"cannot read the config file {config}")


@pytest.mark.parametrize("name", LOCKING)
def test_a_held_lock_is_json(name: str, ready: Path, tmp_path: Path, isolated_environment: Path):
    with RunLock(isolated_environment, "send"):
        result = runner.invoke(app, [*args_for(name, ready, tmp_path), "--json"])

    assert result.exit_code == 6, result.stdout
    assert error_document(result)["error"].startswith("another invoicectl send holds the journal")


@pytest.mark.parametrize("name", ["status", "receivers", "reconcile"])
def test_json_and_another_format_is_one_usage_error(name: str, ready: Path, tmp_path: Path):
    result = runner.invoke(app, [*args_for(name, ready, tmp_path), "--json", "--format", "csv"])

    assert result.exit_code == 2
    assert error_document(result)["error"] == (
        "--json and --format csv ask for two outputs; give one of them"
    )


@pytest.mark.parametrize("name", ["status", "receivers"])
def test_json_is_format_json(name: str, ready: Path, tmp_path: Path):
    spellings = [
        runner.invoke(app, [*args_for(name, ready, tmp_path), *extra])
        for extra in (["--json"], ["--format", "json"], ["--format=json", "--json"])
    ]

    assert {result.exit_code for result in spellings} == {spellings[0].exit_code}
    assert {result.stdout for result in spellings} == {spellings[0].stdout}
    json.loads(spellings[0].stdout)


def test_receivers_writes_csv(ready: Path, tmp_path: Path):
    result = runner.invoke(app, ["receivers", "--format", "csv"])

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["receiver,registered,takes,document_types,checked_at"]


# What each command says on success, gone under --quiet; the exit code stays.
QUIET = [
    (["scan", "{outbox}"], 0),
    (["status"], 75),  # INV-1 waits for a send
    (["show", "INV-1"], 0),
    (["receivers"], 0),
    (["backup", "{tmp}/copy.db"], 0),
    (["hold", "INV-1", "--reason", "why", "--dry-run"], 0),
    (["verify"], 0),
    (["export", "{tmp}/audit"], 0),
    (["send", "{outbox}", "--dry-run"], 0),
]


@pytest.mark.parametrize(("args", "exit_code"), QUIET)
def test_quiet_says_nothing_on_success(
    args: list[str], exit_code: int, ready: Path, tmp_path: Path
):
    filled = [arg.format(outbox=ready, tmp=tmp_path) for arg in args]
    plain = runner.invoke(app, filled)
    quiet = runner.invoke(app, [*filled, "--quiet"])

    assert plain.exit_code == quiet.exit_code == exit_code, quiet.output
    assert plain.stdout != ""
    assert quiet.stdout == ""


def test_quiet_keeps_the_data_asked_for(ready: Path):
    result = runner.invoke(app, ["status", "-q", "--format", "csv"])

    assert result.exit_code == 75
    assert result.stdout.splitlines()[1].startswith("INV-1,")


def test_quiet_says_what_was_refused_on_stderr(ready: Path):
    result = runner.invoke(app, ["release", "INV-1", "-q"])

    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == "invoicectl: error: INV-1: not held\n"


def test_quiet_sends_and_reconciles_in_silence_and_json_still_answers(outbox: Path):
    write_invoice(outbox, "INV-1")
    fast = ["--sandbox", "--rate", "60000"]

    sent = runner.invoke(app, ["send", str(outbox), *fast, "-q"])
    reconciled = runner.invoke(app, ["reconcile", *fast, "--quiet"])
    checked = runner.invoke(app, ["doctor", "--sandbox", "-q"])
    as_json = runner.invoke(app, ["show", "INV-1", "--sandbox", "-q", "--json"])

    assert (sent.exit_code, sent.stdout) == (0, "")
    assert (reconciled.exit_code, reconciled.stdout) == (0, "")
    assert (checked.exit_code, checked.stdout) == (0, "")
    assert json.loads(as_json.stdout)["invoice"]["state"] == "accepted"  # the data asked for


def test_quiet_doctor_prints_only_the_checks_that_fail(tmp_path: Path):
    (tmp_path / "a-file").write_text("not a directory")
    journal = tmp_path / "a-file" / "journal.db"

    result = runner.invoke(app, ["doctor", "--sandbox", "--journal", str(journal), "-q"])

    assert result.exit_code == 1
    assert result.stdout.splitlines()
    assert all(line.startswith("fail") for line in result.stdout.splitlines()), result.stdout


@pytest.mark.parametrize("spelling", [["--format", "jsonl"], ["--format=jsonl"]])
def test_status_jsonl_answers_errors_in_json_too(spelling: list[str]):
    result = runner.invoke(app, ["status", *spelling, "--state", "lost"])

    assert result.exit_code == 2
    assert error_document(result)["error"].startswith("unknown state 'lost'")

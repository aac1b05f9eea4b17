"""``invoicectl validate DIR``: GoRoute's validation of each pending invoice, nothing sent; the
invalid held, each content validated once; with a real journal and the emulator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hostile import HostileServer, answer, answer_json, routes
from sendkit import emulator, send, settings_for
from test_send_validate import FailingValidate, write_invalid
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.cli import app
from invoicectl.errors import ExitCode
from invoicectl.journal import Journal
from invoicectl.sandbox import DEFAULT_API_KEY
from invoicectl.scan.ingest import scanning
from invoicectl.send.validate_run import validate


def test_validate_holds_the_invalid_and_sends_nothing(tmp_path: Path, outbox: Path):
    journal_path = tmp_path / "v.db"
    write_invoice(outbox, "GOOD-1")
    write_invalid(outbox, "BAD-1")
    sandbox = emulator()
    settings = settings_for(journal_path)

    _, summary = validate(settings, scanning(outbox), transport=sandbox.transport())

    assert summary.exit_code == ExitCode.NEEDS_FIX
    assert summary.requests == 2
    lines = sorted(checked.line() for checked in summary.checked)
    assert lines == [
        "BAD-1: invalid, held: PEPPOL-EN16931-R001 at /cbc:ProfileID: "
        "Business process MUST be provided",
        "GOOD-1: valid",
    ]
    assert sandbox.stats()["sends_received"] == 0
    with Journal(journal_path) as journal:
        bad = journal.invoice("BAD-1")
        assert bad is not None and bad.hold == "held" and bad.held_by == "validation"

    # Again: nothing new to ask; the held one is not pending any more.
    _, again = validate(settings, scanning(outbox), transport=sandbox.transport())
    assert [checked.line() for checked in again.checked] == ["GOOD-1: valid (validated before)"]
    assert again.requests == 0 and again.exit_code == ExitCode.OK
    assert sandbox.stats()["validations"] == 2

    # A send --validate afterwards asks nothing again either.
    _, sent = send(settings, outbox, sandbox.transport(), validate=True)
    assert sent.validations == 0 and sandbox.stats()["validations"] == 2
    assert set(sandbox.stats()["per_invoice"]) == {"GOOD-1"}


def test_a_failed_validation_holds_nothing_and_says_why(tmp_path: Path, outbox: Path):
    write_invalid(outbox, "BAD-1")
    failing = FailingValidate(emulator().transport())
    settings = settings_for(tmp_path / "v.db", max_attempts=1)

    report, summary = validate(settings, scanning(outbox), transport=failing)

    # Nothing was judged: not "done; nothing needs attention" (0), which cron reads as
    # validated, but incomplete for a transient reason; the next run asks again.
    assert summary.exit_code == ExitCode.INCOMPLETE
    assert summary.exit_cause(report) == "1 not validated"
    (checked,) = summary.checked
    assert checked.verdict == "unvalidated" and "503" in (checked.reason or "")
    with Journal(tmp_path / "v.db") as journal:
        bad = journal.invoice("BAD-1")
        assert bad is not None and bad.hold is None


def test_the_command_exits_75_when_goroute_validated_nothing(
    outbox: Path, isolated_environment: Path, monkeypatch: pytest.MonkeyPatch
):
    write_invoice(outbox, "A-1")
    write_invoice(outbox, "A-2")
    down = answer_json(503, {"error": {"code": "DOWN", "message": "validator down"}})
    with HostileServer(routes({("POST", "/api/v1/validate"): down})) as server:
        monkeypatch.setenv("GOROUTE_BASE_URL", server.base_url)
        monkeypatch.setenv("GOROUTE_API_KEY", DEFAULT_API_KEY)
        result = CliRunner().invoke(app, ["validate", str(outbox), "--max-attempts", "1"])

    assert result.exit_code == ExitCode.INCOMPLETE, result.output
    assert "A-1: not validated (" in result.stdout and "A-2: not validated (" in result.stdout
    assert "exit 75: 2 not validated" in result.stderr


def test_a_redirect_stops_the_command_with_exit_1_not_75(
    outbox: Path, isolated_environment: Path, monkeypatch: pytest.MonkeyPatch
):
    """Waiting fixes no wrong base URL: exit 75 at every cron run would hide it."""
    for number in range(3):
        write_invoice(outbox, f"A-{number}")
    moved = answer(301, headers={"Location": "https://api.goroute.example/peppol-api"})
    with HostileServer(moved) as server:
        monkeypatch.setenv("GOROUTE_BASE_URL", server.base_url)
        monkeypatch.setenv("GOROUTE_API_KEY", DEFAULT_API_KEY)
        result = CliRunner().invoke(app, ["validate", str(outbox), "--concurrency", "1"])
        asked = len(server.requests)

    assert result.exit_code == ExitCode.COULD_NOT_RUN, result.output
    assert asked == 1  # neither retried nor asked again for the other invoices
    assert "A-0: not validated (GoRoute answered 301, a redirect to https://" in result.stdout
    assert "exit 1: the base URL answered with a redirect" in result.stderr


def test_the_command_prints_a_line_each_and_exits_3(outbox: Path):
    write_invoice(outbox, "GOOD-1")
    write_invalid(outbox, "BAD-1")

    result = CliRunner().invoke(app, ["validate", str(outbox), "--sandbox", "--rate", "60000"])

    assert result.exit_code == ExitCode.NEEDS_FIX, result.output
    assert "BAD-1: invalid, held: PEPPOL-EN16931-R001" in result.output
    assert "GOOD-1: valid" in result.output
    as_json = CliRunner().invoke(app, ["validate", str(outbox), "--sandbox", "--json"])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.output)["validations"] == 0

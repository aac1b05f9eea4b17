"""The ``continue with:`` line of a stopped send names the journal the run used, whatever
named it: a person runs that line from a login shell, without cron's ``INVOICECTL_JOURNAL`` or
the unit's config file, and it used the default journal instead (helper-104: that journal
sent what cron's had not, and both then held the other's invoices for reconcile, exit 4 at
every cron run). No request leaves: the deadline (0 s) stops the run before its first."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.cli import app

runner = CliRunner()
NOWHERE = "http://127.0.0.1:9"  # never asked: the run stops before its first request


def _stopped_line(stderr: str) -> str:
    return next(line for line in stderr.splitlines() if "stopped at the deadline" in line)


def _stopped_send(outbox: Path, *args: str) -> str:
    write_invoice(outbox, "INV-1")
    result = runner.invoke(
        app,
        ["send", str(outbox), "--deadline", "0", "--trust-new-journal", "--no-receiver-check"]
        + list(args),
        env={"GOROUTE_BASE_URL": NOWHERE, "GOROUTE_API_KEY": "sk_test_continue_line_key"},
    )
    assert result.exit_code == 75, result.output
    return _stopped_line(result.stderr)


def test_a_journal_named_by_the_environment_is_named_in_the_continue_line(
    outbox: Path, isolated_environment: Path
) -> None:
    line = _stopped_send(outbox)  # INVOICECTL_JOURNAL: the autouse fixture's

    assert line.endswith(
        f"continue with: invoicectl send {outbox} --journal {isolated_environment}"
    )


def test_a_journal_named_by_the_config_file_is_named_in_the_continue_line(
    outbox: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("INVOICECTL_JOURNAL")
    journal = tmp_path / "var" / "journal.db"
    config = tmp_path / "config.toml"
    config.write_text(f'journal = "{journal}"\n')
    monkeypatch.setenv("INVOICECTL_CONFIG", str(config))

    line = _stopped_send(outbox)

    assert line.endswith(f"continue with: invoicectl send {outbox} --journal {journal}")


def test_the_default_journal_is_not_named(outbox: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INVOICECTL_JOURNAL")  # XDG_STATE_HOME: the fixture's temporary one

    line = _stopped_send(outbox)

    assert line.endswith(f"continue with: invoicectl send {outbox}")

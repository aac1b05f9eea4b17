"""A scan that finds no ``*.xml`` warns in one line and exits 66 (issue 12, item 3).

An empty or mistyped outbox was ``scanned 0 files``, exit 0, no warning: a cron job pointed
at an unmounted share looked like a quiet day. 66 is sysexits' EX_NOINPUT (as 75 is its
EX_TEMPFAIL); it ranks below 3 and 4, so invoices that need a person still say so first.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.cli import app
from invoicectl.errors import ExitCode, worst
from invoicectl.journal import Journal

runner = CliRunner()
WARNING = "invoicectl: warning: no *.xml file in "


def invoke(*args: str):
    return runner.invoke(app, list(args))


def warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(WARNING)]


def test_the_code_has_its_own_number_and_rank() -> None:
    assert int(ExitCode.NO_INPUT) == 66
    assert worst(ExitCode.NO_INPUT, ExitCode.INCOMPLETE) is ExitCode.NO_INPUT
    assert worst(ExitCode.NO_INPUT, ExitCode.NEEDS_FIX) is ExitCode.NEEDS_FIX


def test_a_scan_of_an_empty_outbox_warns_once_and_exits_66(outbox: Path) -> None:
    result = invoke("scan", str(outbox))

    assert result.exit_code == 66, result.output
    assert "scanned 0 files" in result.stdout
    assert warnings(result.stderr) == [
        f"{WARNING}{outbox} (its subdirectories only with --recursive); is the path right?"
    ]


def test_files_only_in_a_subdirectory_point_at_recursive(outbox: Path) -> None:
    (outbox / "2026").mkdir()
    write_invoice(outbox / "2026", "INV-1")

    flat = invoke("scan", str(outbox))
    deep = invoke("scan", str(outbox), "--recursive")

    assert flat.exit_code == 66 and "--recursive" in warnings(flat.stderr)[0]
    assert deep.exit_code == 0, deep.output
    assert warnings(deep.stderr) == []


def test_a_recursive_scan_of_empty_directories_says_or_below_it(outbox: Path) -> None:
    (outbox / "empty").mkdir()

    result = invoke("scan", str(outbox), "--recursive", "--json")

    assert result.exit_code == 66
    assert json.loads(result.stdout)["files"] == 0
    assert warnings(result.stderr) == [f"{WARNING}{outbox} or below it; is the path right?"]


def test_send_and_its_dry_run_of_an_empty_outbox_exit_66_and_record_it(
    outbox: Path, tmp_path: Path
) -> None:
    journal = tmp_path / "sandbox.db"
    dry = invoke("send", str(outbox), "--sandbox", "--journal", str(journal), "--dry-run")
    sent = invoke("send", str(outbox), "--sandbox", "--journal", str(journal), "--json")

    assert dry.exit_code == 66, dry.output
    assert sent.exit_code == 66, sent.output
    assert json.loads(sent.stdout)["exit_code"] == 66
    assert len(warnings(sent.stderr)) == 1
    with Journal(journal) as opened:
        (recorded,) = opened.db.execute("SELECT exit_code FROM runs").fetchone()
    assert recorded == 66


def test_an_invalid_invoice_in_the_journal_outranks_the_empty_outbox(
    outbox: Path, tmp_path: Path
) -> None:
    journal = tmp_path / "sandbox.db"
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "broken.xml").write_bytes(b"<Invoice")
    invoke("scan", str(earlier), "--sandbox", "--journal", str(journal))

    result = invoke("send", str(outbox), "--sandbox", "--journal", str(journal))

    assert result.exit_code == 3, result.output
    assert len(warnings(result.stderr)) == 1


def test_validate_of_an_empty_outbox_exits_66(outbox: Path, tmp_path: Path) -> None:
    result = invoke("validate", str(outbox), "--sandbox", "--journal", str(tmp_path / "s.db"))

    assert result.exit_code == 66, result.output
    assert len(warnings(result.stderr)) == 1

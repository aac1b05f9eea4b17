"""Rows a journal must hold, deleted by hand (its identity; an invoice's rows while its file's
stats remain): one line naming the damage, exit 1, and never a request sent."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.cli import app
from invoicectl.sandbox import DEFAULT_API_KEY, BackgroundServer, Sandbox

runner = CliRunner()


def edit(journal: Path, *statements: str) -> None:
    conn = sqlite3.connect(journal, isolation_level=None)
    try:
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()


def attempts(journal: Path) -> int:
    conn = sqlite3.connect(journal)
    try:
        return int(conn.execute("SELECT count(*) FROM attempts").fetchone()[0])
    finally:
        conn.close()


@pytest.fixture(autouse=True)
def emulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with BackgroundServer(Sandbox()) as server:
        monkeypatch.setenv("GOROUTE_BASE_URL", server.base_url)
        monkeypatch.setenv("GOROUTE_API_KEY", DEFAULT_API_KEY)
        yield


def send(outbox: Path, journal: Path, *args: str):
    return runner.invoke(app, ["send", str(outbox), "--journal", str(journal), *args])


def one_error(result) -> str:
    """The one error line (before the run's ``exit 1: ...``), with no traceback."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if not line.startswith("exit 1: ")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_journal_without_its_identity_row_sends_nothing(tmp_path: Path, outbox: Path) -> None:
    journal = tmp_path / "j.db"
    write_invoice(outbox, "INV-1")
    assert runner.invoke(app, ["scan", str(outbox), "--journal", str(journal)]).exit_code == 0
    edit(journal, "DELETE FROM identity")

    line = one_error(send(outbox, journal))

    assert line == (
        f"invoicectl: error: the journal {journal} is damaged: its identity (table identity) "
        "is gone (deleted by hand, or the file pieced together); invoicectl stops and sends "
        "nothing more from it, and everything committed before is kept (any send before "
        "this included). Restore the journal from a backup"
    )
    assert attempts(journal) == 0


@pytest.mark.parametrize("command", ["scan", "send"])
def test_an_invoice_deleted_while_its_file_stats_remain_is_one_line(
    tmp_path: Path, outbox: Path, command: str
) -> None:
    journal = tmp_path / "j.db"
    write_invoice(outbox, "INV-1")
    write_invoice(outbox, "INV-2")
    assert send(outbox, journal).exit_code == 0
    sent = attempts(journal)
    edit(
        journal,
        "DELETE FROM invoices WHERE invoice_id = 'INV-1'",
        "DELETE FROM revisions WHERE invoice_id = 'INV-1'",
        # As if checked an hour later: the stats then decide, the file is not read again
        # (a file whose change time is within 2 s of its check is read again, scan.RACY_NS).
        "UPDATE file_stats SET checked_at_ns = checked_at_ns + 3600 * 1000000000",
    )

    if command == "scan":
        result = runner.invoke(app, ["scan", str(outbox), "--journal", str(journal)])
    else:
        result = send(outbox, journal)
    line = one_error(result)

    assert line.startswith(f"invoicectl: error: the journal {journal} is damaged: the revision ")
    assert "of invoice INV-1 (table revisions) is gone" in line
    assert attempts(journal) == sent


def test_a_revision_lost_midway_through_a_send_does_not_unsay_the_sends_before_it(
    tmp_path: Path, outbox: Path
) -> None:
    """The line said "nothing was sent" after the run had sent the invoices before it."""
    journal = tmp_path / "j.db"
    write_invoice(outbox, "INV-0")
    assert send(outbox, journal).exit_code == 0  # the journal has sent: no first-run check
    write_invoice(outbox, "INV-1")
    write_invoice(outbox, "INV-2")
    assert runner.invoke(app, ["scan", str(outbox), "--journal", str(journal)]).exit_code == 0
    edit(
        journal,
        "DELETE FROM revisions WHERE invoice_id = 'INV-2'",
        "UPDATE file_stats SET checked_at_ns = checked_at_ns + 3600 * 1000000000",
    )

    # One at a time: INV-1 goes before INV-2 is taken up (a failure stops the others at once).
    line = one_error(send(outbox, journal, "--concurrency", "1"))

    assert attempts(journal) == 2  # INV-1 went out before INV-2's revision was found gone
    assert "of invoice INV-2 (table revisions) is gone" in line
    assert "nothing was sent" not in line
    assert "sends nothing more from it" in line

"""Text from a server or a file name never reaches a screen or a log as it came.

An escape sequence in a server's message (``\\x1b[2J`` clears a terminal), a carriage return,
or a line break in a file name used to be printed raw by ``status``, ``show`` and ``scan``: a
monitor reading the lines could be shown a fake "scanned ... 0 invalid". Each is written as an
escape, one line per record.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from journalkit import force
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.cli import app
from invoicectl.journal import open_journal
from invoicectl.scan.ingest import scan_directory
from invoicectl.scan.report import ScanReport

HOSTILE = "\x1b[2J\x1b[31mPWNED\x1b]0;title\x07\x1b[0m\r\rfake line"


def run(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.stdout


@pytest.fixture
def journal(tmp_path: Path, outbox: Path) -> Path:
    path = tmp_path / "journal.db"
    write_invoice(outbox, "INV-1")
    (outbox / "x\nscanned 1 files: 1 new, 0 invalid\n.xml").write_bytes(b"not xml")
    with open_journal(path) as opened:
        scan_directory(opened, outbox)
        force(opened, "INV-1", state="rejected", reason=f"HTTP 409 CONFLICT: {HOSTILE}")
        opened.add_event("INV-1", "note", HOSTILE)
    return path


def test_status_writes_one_plain_line_per_record(journal: Path):
    lines = run("status", "--journal", str(journal), "--all").splitlines()
    records = [line for line in lines if "\t" in line]
    assert len(records) == 2
    assert all(field.isprintable() for line in records for field in line.split("\t"))
    assert not any("\x1b" in line or "\r" in line or "\x07" in line for line in lines)
    assert any("\\x1b[2J\\x1b[31mPWNED" in line for line in records)
    assert any("/x\\nscanned 1 files" in line for line in records)


def test_show_escapes_what_the_server_and_the_files_wrote(journal: Path):
    shown = run("show", "INV-1", "--journal", str(journal))
    assert "\x1b" not in shown and "\x07" not in shown and "\r" not in shown
    assert "\\x1b[2J" in shown


def test_scan_names_a_file_with_a_line_break_on_one_line(journal: Path, outbox: Path):
    out = run("scan", str(outbox), "--journal", str(journal))
    problems = [line for line in out.splitlines() if "invalid  " in line]
    assert len(problems) == 1 and "x\\nscanned 1 files" in problems[0]
    assert sum(line.startswith("scanned") for line in out.splitlines()) == 1, out


TURNED = "INV-\u202eABC-1"  # a mark that turns the rest of a terminal's line around


@pytest.mark.parametrize(
    "command",
    [
        ["show", TURNED],
        ["hold", TURNED, "--reason", "checking"],
        ["release", TURNED],
        ["abandon", TURNED, "--reason", "settled by phone"],
    ],
)
def test_an_id_with_a_direction_mark_is_shown_escaped(
    tmp_path: Path, outbox: Path, command: list[str]
):
    """`show`'s title and the operator commands' lines printed it raw; the README says such
    an ID is shown with ``\\uNNNN`` escapes wherever it is printed."""
    path = tmp_path / "journal.db"
    write_invoice(outbox, TURNED)
    with open_journal(path) as opened:
        scan_directory(opened, outbox)
    if command[0] == "release":
        run("hold", TURNED, "--reason", "x", "--journal", str(path))

    result = CliRunner().invoke(app, [*command, "--journal", str(path)])

    said = result.stdout + result.stderr
    assert result.exit_code == 0, said
    assert "\u202e" not in said
    assert "INV-\\u202eABC-1" in said


def test_scan_lines_of_an_amended_and_a_held_invoice_escape_its_id(tmp_path: Path, outbox: Path):
    """The amended, held, repaired and busy lines printed the ID raw, the invalid lines
    escaped (helper-97: a U+202E reached the terminal from `scan`)."""
    path = tmp_path / "journal.db"
    write_invoice(outbox, TURNED, name="sent.xml", amount="100.00")
    write_invoice(outbox, f"{TURNED}-2", name="renumbered.xml")
    with open_journal(path) as opened:
        scan_directory(opened, outbox)
        sent = opened.invoice(TURNED).current_sha256
        force(opened, TURNED, state="accepted", idempotency_key="invoice-x", key_sha256=sent)
        # Pending, as an invoicectl before the lookalike check inside numbers journalled it.
        force(opened, f"{TURNED}-2", state="pending")
    write_invoice(outbox, TURNED, name="sent.xml", amount="999.00")  # amended
    write_invoice(outbox, "INV-3", name="renumbered.xml")  # its pending invoice held

    said = run("scan", str(outbox), "--journal", str(path))

    assert "\u202e" not in said
    escaped = "INV-\\u202eABC-1"
    assert (
        f"  amended  {escaped}: changed after it was sent; see `invoicectl show {escaped}`" in said
    )
    assert f"  held     {escaped}-2: its file renumbered.xml now holds invoice INV-3" in said


def test_scan_lines_of_a_repaired_or_busy_invoice_escape_its_id():
    report = ScanReport(repaired=[TURNED], busy=[TURNED])
    repaired, busy = report.summary_lines()[1:]
    assert repaired.startswith("  repaired INV-\\u202eABC-1: its damaged stored copy")
    assert busy.startswith("  busy     INV-\\u202eABC-1: its file changed while")

"""scan, status and show from the command line: exit codes, output formats, error text."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from logkit import said, without_exit_line
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.cli import app
from invoicectl.journal import Journal

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_scan_of_valid_files_exits_0_and_summarises(outbox: Path):
    write_invoice(outbox, "INV-1")
    write_invoice(outbox, "CN-1", document_type="CreditNote")

    result = invoke("scan", str(outbox))

    assert result.exit_code == 0, result.output
    assert "scanned 2 files: 2 new, 0 unchanged, 0 changed, 0 amended, 0 invalid" in result.output


def test_scan_with_an_invalid_file_exits_3_and_names_it(outbox: Path):
    write_invoice(outbox, "INV-1")
    (outbox / "empty.xml").write_bytes(b"")

    result = invoke("scan", str(outbox))

    assert result.exit_code == 3, result.output
    assert "invalid  empty.xml: " in result.output


@pytest.mark.parametrize("invoice_id", ["[/b]INV-1", "[red]INV-2", "INV:joy:3"])
def test_invoice_ids_that_look_like_markup_are_shown_as_they_are(outbox: Path, invoice_id):
    no_scheme = write_invoice(outbox, invoice_id, name="a.xml")
    no_scheme.write_bytes(no_scheme.read_bytes().replace(b'schemeID="9915"', b""))

    scanned = invoke("scan", str(outbox))
    shown = invoke("show", invoice_id)
    status = invoke("status")

    assert scanned.exit_code == 3, scanned.output  # invalid, not a crash
    assert f"  invalid  {invoice_id}: the customer EndpointID" in scanned.output
    assert shown.exit_code == 0 and shown.output.startswith(f"{invoice_id}  Invoice")
    assert invoice_id in status.output


def test_scan_of_a_missing_directory_exits_1_with_a_reason(tmp_path: Path):
    result = invoke("scan", str(tmp_path / "nope"))

    assert result.exit_code == 1
    assert "invoicectl: error: the outbox" in result.output
    assert "is not a directory" in result.output


def test_scan_json_summary_parses(outbox: Path):
    write_invoice(outbox, "INV-1")

    result = invoke("scan", str(outbox), "--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["new"] == ["INV-1"]


def test_status_json_has_the_documented_fields(outbox: Path):
    write_invoice(outbox, "INV-1")
    (outbox / "junk.xml").write_bytes(b"<<<")
    invoke("scan", str(outbox))

    result = invoke("status", "--format", "json")

    assert result.exit_code == 3, result.output  # one file is invalid
    records = json.loads(result.output)
    assert {record["state"] for record in records} == {"pending", "invalid"}
    (invoice,) = [record for record in records if record["invoice_id"] == "INV-1"]
    for field in (
        "invoice_id",
        "document_type",
        "state",
        "reason",
        "sha256",
        "receiver",
        "idempotency_key",
        "transaction_id",
        "existing_transaction_id",
        "updated_at",
    ):
        assert field in invoice
    assert invoice["receiver"] == "9915:phase4-test-receiver"
    (junk,) = [record for record in records if record["invoice_id"] is None]
    assert junk["path"].endswith("junk.xml") and junk["reason"]


def test_status_csv_and_state_filter(outbox: Path):
    write_invoice(outbox, "INV-1")
    write_invoice(outbox, "INV-2")
    invoke("scan", str(outbox))

    result = invoke("status", "--format", "csv", "--state", "pending")

    assert result.exit_code == 75, result.output  # pending: the next send continues
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [row["invoice_id"] for row in rows] == ["INV-1", "INV-2"]


def test_status_table_shows_counts(outbox: Path):
    write_invoice(outbox, "INV-1")
    invoke("scan", str(outbox))

    result = invoke("status")

    assert result.exit_code == 75, result.output
    assert "1 invoices: pending 1, invalid 0" in result.output
    assert "INV-1\tpending\t9915:phase4-test-receiver\t-\t" in result.output  # not a TTY


def test_status_with_an_unknown_state_is_a_usage_error():
    result = invoke("status", "--state", "lost")

    assert result.exit_code == 2
    assert "unknown state 'lost'" in result.output


@pytest.mark.parametrize(
    ("args", "error", "exit_code"),
    [
        (["--json", "--bogus"], "No such option: --bogus", 2),
        (["--json", "--journal"], "Option '--journal' requires an argument.", 2),
        (["--json", "does-not-exist"], "the outbox does-not-exist is not a directory", 1),
    ],
)
def test_scan_json_answers_every_error_in_json(args: list[str], error: str, exit_code: int):
    result = invoke("scan", *args)

    assert result.exit_code == exit_code
    assert json.loads(result.stdout) == {"error": error, "exit_code": exit_code}
    assert result.stderr == ""  # one document, nothing else


def test_without_json_a_usage_error_prints_nothing_on_stdout():
    result = invoke("scan", "--bogus")

    assert result.exit_code == 2
    assert result.stdout == "" and "No such option: --bogus" in result.stderr


def test_show_prints_revisions_and_state(outbox: Path):
    write_invoice(outbox, "INV-1", amount="1.00")
    invoke("scan", str(outbox))
    write_invoice(outbox, "INV-1", amount="2.00")
    invoke("scan", str(outbox))

    result = invoke("show", "INV-1")

    assert result.exit_code == 0, result.output
    assert "pending" in result.output
    assert "(current)" in result.output and "no attempts yet" in result.output


def test_show_of_an_unknown_invoice_exits_2(isolated_environment: Path):
    Journal(isolated_environment).close()  # show reads a journal; it makes none

    result = invoke("show", "NOPE")

    assert result.exit_code == 2
    assert "no invoice 'NOPE' in the journal" in result.output


def test_a_write_that_fails_mid_scan_is_a_clear_error_and_loses_nothing(
    outbox: Path, tmp_path: Path
):
    """A journal that cannot grow (here a file-size limit, which SQLite reports as a disk
    I/O error; a full disk reads "database or disk is full") ends the scan with one line
    and exit 1, not a traceback, and the next scan goes on."""
    for number in range(30):
        write_invoice(outbox, f"INV-{number:02}", padding=4000)
    journal = tmp_path / "journal.db"
    Journal(journal).close()  # created and migrated; from here on it cannot grow
    full_disk = (
        "import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN);"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536));"
        "from invoicectl.cli import main; main()"
    )
    scan = [str(outbox), "--journal", str(journal)]

    failed = subprocess.run(
        [sys.executable, "-c", full_disk, "scan", *scan], capture_output=True, text=True
    )

    assert failed.returncode == 1, failed.stderr
    assert " ".join(said(failed.stderr, 1).split()) == (
        f"invoicectl: error: the journal {journal} could not be used (disk I/O error): the "
        "system refused a read or write (a full disk, a file-size limit such as `ulimit -f`, "
        "or a failing disk: see `dmesg`); fix that and run again; everything committed "
        "before is kept"
    )
    again = subprocess.run(
        [sys.executable, "-m", "invoicectl", "scan", *scan], capture_output=True, text=True
    )
    assert again.returncode == 0, again.stderr
    assert "scanned 30 files: 30 new" in again.stdout


def test_a_journal_directory_that_cannot_be_made_is_one_line_not_a_traceback(
    tmp_path: Path, outbox: Path
):
    (tmp_path / "a-file").write_text("not a directory")
    journal = tmp_path / "a-file" / "state" / "journal.db"
    write_invoice(outbox, "INV-1")

    # scan: the commands that read a journal make none (tests/test_missing_journal.py)
    result = invoke("scan", str(outbox), "--journal", str(journal))

    assert result.exit_code == 1
    expected = f"invoicectl: error: cannot use {tmp_path / 'a-file' / 'state'}: Not a directory"
    stderr = without_exit_line(result.stderr, 1)
    assert "".join(stderr.split()) == "".join(expected.split())  # however it wraps


def test_journal_option_overrides_the_environment(
    outbox: Path, tmp_path: Path, isolated_environment: Path
):
    write_invoice(outbox, "INV-1")
    elsewhere = tmp_path / "elsewhere.db"

    invoke("scan", str(outbox), "--journal", str(elsewhere))

    assert elsewhere.exists()
    assert not isolated_environment.exists()


def test_module_entry_point_and_version():
    result = subprocess.run(
        [sys.executable, "-m", "invoicectl", "--version"], capture_output=True, text=True
    )
    assert result.returncode == 0
    assert result.stdout.startswith("invoicectl ")


def test_help_documents_exit_codes():
    result = invoke("--help")

    assert result.exit_code == 0
    assert "75  incomplete" in result.output and "130  interrupted" in result.output


def test_scan_while_another_run_holds_the_journal_exits_6(outbox: Path, isolated_environment):
    from invoicectl.journal.runlock import RunLock

    write_invoice(outbox, "INV-1")
    with RunLock(isolated_environment, command="send"):
        result = invoke("scan", str(outbox))

    assert result.exit_code == 6
    assert "another invoicectl send holds the journal" in result.output


def test_a_journal_reached_through_a_symlink_has_the_same_lock(tmp_path: Path):
    from invoicectl.errors import JournalLocked
    from invoicectl.journal.runlock import RunLock

    real = tmp_path / "journal.db"
    real.touch()
    alias = tmp_path / "current.db"
    alias.symlink_to(real)
    with RunLock(real), pytest.raises(JournalLocked):
        RunLock(alias).__enter__()


def test_a_journal_with_two_hard_links_is_refused_through_either(tmp_path: Path, outbox: Path):
    """SQLite keeps a -wal per name, invoicectl a lock per name: two sends through two names
    both ran, and one's records were lost when the other's log was checkpointed."""
    write_invoice(outbox, "INV-1")
    real = tmp_path / "journal.db"
    assert invoke("scan", str(outbox), "--journal", str(real)).exit_code == 0
    alias = tmp_path / "etc-journal.db"
    alias.hardlink_to(real)
    before = real.read_bytes()

    for name in (real, alias):
        for command in (["scan", str(outbox)], ["status"]):
            result = invoke(*command, "--journal", str(name))
            assert result.exit_code == 1, result.output
            assert f"the journal {name} is one of 2 names (hard links)" in result.output
    assert real.read_bytes() == before


def test_doctor_fails_a_journal_with_two_hard_links(tmp_path: Path, outbox: Path):
    """It said "ok journal" where every other command refuses it (helper-50)."""
    write_invoice(outbox, "INV-1")
    real = tmp_path / "journal.db"
    assert invoke("scan", str(outbox), "--journal", str(real)).exit_code == 0
    (tmp_path / "other.db").hardlink_to(real)

    result = invoke("doctor", "--journal", str(real))

    assert result.exit_code == 1, result.output
    assert "one of 2 names (hard links) of the same file" in result.output

"""``invoicectl backup DEST``: one line, a whole copy or none, DEST never half written.

The copy beside a running send is in ``test_history_processes.py``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from logkit import without_exit_line
from sendkit import emulator, send, settings_for
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.cli import app
from invoicectl.journal import Journal


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def sent_journal(outbox: Path, tmp_path: Path) -> Path:
    journal = tmp_path / "journal.db"
    for number in range(3):
        write_invoice(outbox, f"BK-{number}")
    send(settings_for(journal), outbox, emulator().transport(), warn=lambda line: None)
    return journal


def test_backup_writes_a_checked_copy_and_says_so_in_one_line(outbox: Path, tmp_path: Path):
    journal = sent_journal(outbox, tmp_path)
    copy = tmp_path / "copy.db"
    copy.write_bytes(b"an older copy")  # replaced whole

    result = invoke("backup", str(copy), "--journal", str(journal))

    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"backed up the journal {journal} to {copy}: {copy.stat().st_size} bytes, 3 invoices, "
        "1 runs, integrity ok\n"
    )
    with Journal(copy) as restored, Journal(journal) as original:
        assert restored.identity() == original.identity()
        assert [i.state for i in restored.invoices()] == [i.state for i in original.invoices()]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_a_killed_backups_temporary_copy_is_removed_by_the_next(outbox: Path, tmp_path: Path):
    """A backup killed half way leaves its temporary copy (a journal's size); the next backup
    to the same destination removes it, but never that of a backup still running."""
    import os
    import subprocess
    import sys

    journal = sent_journal(outbox, tmp_path)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    killed = tmp_path / f".copy.db.{dead}.tmp"
    killed.write_bytes(b"half a journal")
    running = tmp_path / f".copy.db.{os.getppid()}.tmp"
    running.write_bytes(b"a backup still running (a live process)")

    result = invoke("backup", str(tmp_path / "copy.db"), "--journal", str(journal))

    assert result.exit_code == 0, result.output
    assert not killed.exists()
    assert running.exists()


def test_backup_refuses_what_it_cannot_do_in_one_line_and_leaves_dest_as_it_was(
    outbox: Path, tmp_path: Path
):
    journal = sent_journal(outbox, tmp_path)
    missing = tmp_path / "nowhere" / "copy.db"
    not_sqlite = tmp_path / "not-a-journal.db"
    not_sqlite.write_text("plain text")
    cases = [
        ((str(tmp_path), "--journal", str(journal)), f"{tmp_path} is a directory; name a file"),
        ((str(missing), "--journal", str(journal)), f"directory {missing.parent} does not exist"),
        ((str(tmp_path / "c.db"), "--journal", str(tmp_path / "no.db")), "no journal at"),
        ((str(journal), "--journal", str(journal)), "is the journal itself"),
        ((str(tmp_path / "d.db"), "--journal", str(not_sqlite)), "file is not a database"),
    ]
    for args, wanted in cases:
        result = invoke("backup", *args)

        assert result.exit_code == 1, (args, result.output)
        (line,) = without_exit_line(result.stderr, 1).splitlines()
        assert line.startswith("invoicectl: error: ") and wanted in line, line
    assert not (tmp_path / "c.db").exists() and not (tmp_path / "d.db").exists()
    with sqlite3.connect(journal) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_journal_lacking_part_of_its_schema_does_not_replace_the_last_good_backup(
    outbox: Path, tmp_path: Path
):
    """It passed SQLite's integrity check and was renamed over the backup, exit 0."""
    journal = sent_journal(outbox, tmp_path)
    copy = tmp_path / "copy.db"
    assert invoke("backup", str(copy), "--journal", str(journal)).exit_code == 0
    good = copy.read_bytes()
    with sqlite3.connect(journal) as conn:
        conn.execute("DROP TABLE events")

    result = invoke("backup", str(copy), "--journal", str(journal))

    assert result.exit_code == 1, result.output
    (line,) = without_exit_line(result.stderr, 1).splitlines()
    assert "the journal is damaged: its schema lacks events; the backup there was left" in line
    assert copy.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []

"""``invoicectl backup DEST``: one line, a whole copy or none, DEST never half written.

The copy beside a running send is in ``test_history_processes.py``.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from logkit import said, without_exit_line
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


def _private_mounts() -> list[str] | None:
    """``unshare`` arguments for a mount namespace of our own (root, or a user namespace),
    where a read-only tmpfs can be mounted for one command; None where it cannot."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return None
    prefix = ["unshare", "--mount"] if os.geteuid() == 0 else ["unshare", "--mount", "-r"]
    probe = [*prefix, "sh", "-c", "mount -t tmpfs -o ro tmpfs /mnt 2>/dev/null || exit 1"]
    if subprocess.run(probe, capture_output=True, check=False).returncode != 0:
        return None
    return prefix


def test_a_read_only_destination_is_named_with_advice_about_it_not_the_journal(
    outbox: Path, tmp_path: Path
):
    """helper-61: a backup onto a read-only file system said "use --journal on a writable
    one": advice about the journal, when DEST is what cannot be written. A real read-only
    file system (a tmpfs, holding last night's copy, remounted read-only) in a private mount
    namespace: read-only for root too."""
    prefix = _private_mounts()
    if prefix is None:
        pytest.skip("cannot mount a tmpfs in a private mount namespace here")
    journal = sent_journal(outbox, tmp_path)
    mountpoint = tmp_path / "readonly"
    mountpoint.mkdir()
    script = (
        'mount -t tmpfs tmpfs "$1" && echo "an older copy" >"$1/copy.db" || exit 99\n'
        'mount -o remount,ro "$1" || exit 99\n'
        '"$2" -m invoicectl backup "$1/copy.db" --journal "$3" 2>"$4"\n'
        "code=$?\n"
        'ls -A "$1"; cat "$1/copy.db"\n'
        "exit $code\n"
    )
    out = tmp_path / "backup-stderr.txt"
    done = subprocess.run(
        [*prefix, "sh", "-c", script, "sh", str(mountpoint), sys.executable, str(journal),
         str(out)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode != 99, done.stderr

    assert done.returncode == 1, out.read_text()
    dest = mountpoint / "copy.db"
    assert said(out.read_text(), 1).splitlines() == [
        f"invoicectl: error: cannot write the backup to {dest}: Read-only file system; back up"
        " to a file on a writable file system, or remount this one read-write; no backup was"
        " made (what was there is as it was); the journal is untouched"
    ]
    assert done.stdout == "copy.db\nan older copy\n"  # no temporary copy, the old one whole


def test_an_unwritable_destination_directory_is_named_with_advice_about_it(
    outbox: Path, tmp_path: Path
):
    """The same without a mount: a directory this user may not write in (mode 0555). Root
    writes there regardless; the read-only file system above covers root."""
    if os.geteuid() == 0:
        pytest.skip("root writes into a directory of mode 0555 (the read-only tmpfs covers it)")
    journal = sent_journal(outbox, tmp_path)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        result = invoke("backup", str(locked / "copy.db"), "--journal", str(journal))
    finally:
        locked.chmod(0o755)

    assert result.exit_code == 1, result.output
    (line,) = without_exit_line(result.stderr, 1).splitlines()
    assert line == (
        f"invoicectl: error: cannot write the backup to {locked / 'copy.db'}: Permission denied;"
        f" this user may not write in {locked}: back up to a directory it can write to, or"
        " change that one's owner or mode; no backup was made (what was there is as it was);"
        " the journal is untouched"
    )
    assert list(locked.iterdir()) == []

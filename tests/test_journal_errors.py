"""Errors under cron: one line each, naming the file and the cause (issue 11, item 14).

Each cause is produced for real where this machine allows it: a file that is not SQLite, a
journal made read-only (``chattr +i`` when the tests run as root, who ignores modes; ``chmod``
otherwise), a file-size limit (``RLIMIT_FSIZE``), a full disk (a tiny tmpfs in a mount
namespace of the CLI's own, root only), a lock held by another connection.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from logkit import said
from ublfactory import write_invoice

from invoicectl.journal import Journal
from invoicectl.journal.failures import explain_os, explain_sqlite
from invoicectl.locations import Location

ROOT = os.geteuid() == 0


def cli(*args: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, sys.executable, "-m", "invoicectl", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "1000"},
        timeout=120,
    )


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result.stderr
    (line,) = said(result.stderr, 1).splitlines()
    assert line.startswith("invoicectl: error: ")
    return line


@pytest.fixture
def read_only() -> Iterator[object]:
    """Makes a path read-only for this user, and writable again at the end."""
    made: list[Path] = []

    def make(path: Path) -> None:
        if ROOT:
            if shutil.which("chattr") is None:
                pytest.skip("root ignores file modes, and chattr is not here")
            done = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
            if done.returncode != 0:
                pytest.skip(f"chattr +i is not supported here: {done.stderr!r}")
        else:
            path.chmod(0o500 if path.is_dir() else 0o400)
        made.append(path)

    yield make
    for path in made:
        if ROOT:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        else:
            path.chmod(0o700 if path.is_dir() else 0o600)


def test_a_file_that_is_not_sqlite_is_named_and_not_mistaken_for_a_full_disk(tmp_path: Path):
    journal = tmp_path / "journal.db"
    journal.write_text("these are not the invoices you are looking for\n" * 10)

    line = one_line(cli("status", "--journal", str(journal)))

    assert f"the journal {journal} could not be used (file is not a database)" in line
    assert "it is not an invoicectl journal" in line and "free space" not in line


def test_a_read_only_journal_is_told_to_be_made_writable_not_to_free_disk_space(
    outbox: Path, tmp_path: Path, read_only
):
    journal = tmp_path / "journal.db"
    write_invoice(outbox, "RO-1")
    assert cli("scan", str(outbox), "--journal", str(journal)).returncode == 0
    write_invoice(outbox, "RO-2")  # the next scan has something to write
    read_only(journal)

    line = one_line(cli("scan", str(outbox), "--journal", str(journal)))

    assert f"the journal {journal} could not be used (attempt to write a readonly" in line
    assert "it is read-only to this process" in line
    assert "free space" not in line and "free disk space" not in line


@pytest.mark.parametrize("suffix", ["-shm", "-wal"])
def test_a_directory_where_the_wal_or_shm_goes_is_named_not_taken_for_a_read_only_journal(
    outbox: Path, tmp_path: Path, suffix: str
):
    """helper-83: a directory named like the journal's -shm made SQLite call the journal
    read-only, and the advice sent a person to chmod the journal; doctor passed it."""
    journal = tmp_path / "journal.db"
    write_invoice(outbox, "SHM-1")
    assert cli("scan", str(outbox), "--journal", str(journal)).returncode == 0
    write_invoice(outbox, "SHM-2")
    sidecar = Path(f"{journal}{suffix}")
    sidecar.unlink(missing_ok=True)
    sidecar.mkdir()

    line = one_line(cli("scan", str(outbox), "--journal", str(journal)))
    doctor = cli("doctor", "--journal", str(journal))

    assert f"{sidecar} beside it is a directory" in line and "move it aside" in line
    assert "chmod" not in line
    assert f"journal      {journal} cannot be used: {sidecar} beside it" in doctor.stdout, (
        doctor.stdout
    )


def test_a_journal_in_a_read_only_directory_names_the_directory_and_the_cause(
    tmp_path: Path, read_only, outbox: Path
):
    directory = tmp_path / "state"
    directory.mkdir()
    read_only(directory)
    journal = directory / "journal.db"
    write_invoice(outbox, "INV-1")

    # A scan makes the journal; status would only say there is none (test_missing_journal).
    line = one_line(cli("scan", str(outbox), "--journal", str(journal)))

    assert f"cannot use {journal}.lock: " in line  # a scan takes the lock beside it first
    cause = "Operation not permitted" if ROOT else "Permission denied"
    assert cause in line and "free space" not in line
    assert ("chattr -i" if ROOT else "owner and mode") in line


def in_own_tmpfs(mount_point: Path, size: str, script: str) -> subprocess.CompletedProcess[str]:
    """``script`` (sh) in a mount namespace of its own, over a tmpfs of ``size`` at
    ``mount_point``; skips where that cannot be done (not root, no namespaces)."""
    if not ROOT or shutil.which("unshare") is None:
        pytest.skip("a tmpfs of our own needs root and unshare")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no mount namespaces here: {probe.stderr!r}")
    mounted = f"mount -t tmpfs -o size={size} tmpfs {mount_point} && {script}"
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", mounted],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "1000"},
        timeout=120,
    )


INVOICECTL = f"{sys.executable} -m invoicectl"


def test_a_full_disk_names_the_journal_and_says_to_free_space(outbox: Path, tmp_path: Path):
    for number in range(30):
        write_invoice(outbox, f"FULL-{number:02}", padding=4000)
    small = tmp_path / "small"
    small.mkdir()
    journal = small / "journal.db"

    done = in_own_tmpfs(small, "300k", f"exec {INVOICECTL} scan {outbox} --journal {journal}")

    line = one_line(done)
    assert f"the journal {journal} could not be used (database or disk is full)" in line
    assert "the disk is full: free space on its file system" in line


def test_no_space_for_the_run_lock_names_the_journal(outbox: Path, tmp_path: Path):
    """The run lock's own write names no file: it was "cannot use: No space left on device"."""
    write_invoice(outbox, "FULL-1")
    small = tmp_path / "small"
    small.mkdir()
    journal = small / "journal.db"
    script = (
        f"{INVOICECTL} status --journal {journal} >/dev/null 2>&1; "
        f"dd if=/dev/zero of={small}/filler bs=1k 2>/dev/null; "
        f"exec {INVOICECTL} scan {outbox} --journal {journal}"
    )

    line = one_line(in_own_tmpfs(small, "64k", script))

    assert line == (
        f"invoicectl: error: cannot use the journal {journal} (or a file beside it): No space "
        "left on device: free space on its file system and run again; everything committed "
        "before is kept"
    )


def test_a_file_size_limit_names_the_journal_and_the_limit(outbox: Path, tmp_path: Path):
    for number in range(30):
        write_invoice(outbox, f"BIG-{number:02}", padding=4000)
    journal = tmp_path / "journal.db"
    Journal(journal).close()
    limited = (
        "import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN);"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536));"
        "from invoicectl.cli import main; main()"
    )

    done = subprocess.run(
        [sys.executable, "-c", limited, "scan", str(outbox), "--journal", str(journal)],
        capture_output=True,
        text=True,
    )

    line = one_line(done)
    assert f"the journal {journal} could not be used (disk I/O error)" in line
    assert "a file-size limit such as `ulimit -f`" in line


def test_a_journal_locked_by_another_connection_says_who_to_look_for(tmp_path: Path):
    path = tmp_path / "locked.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(sqlite3.OperationalError) as locked:
            sqlite3.connect(path, timeout=0).execute("SELECT * FROM t")
    finally:
        holder.execute("ROLLBACK")
        holder.close()

    line = explain_sqlite(locked.value, path)

    assert line.startswith(f"the journal {path} could not be used (database is locked): ")
    assert "another process holds it locked" in line


def test_a_system_error_naming_no_file_names_the_journal(tmp_path: Path):
    journal = tmp_path / "journal.db"
    error = OSError(28, "No space left on device")

    assert explain_os(error, journal) == (
        f"cannot use the journal {journal} (or a file beside it): No space left on device: "
        "free space on its file system and run again; everything committed before is kept"
    )


@pytest.mark.parametrize(
    "table", ["events", "receivers", "claims", "invoices.verdict_at", "attempts.request_id"]
)
@pytest.mark.parametrize("command", ["send", "status"])
def test_a_journal_with_a_table_or_column_dropped_is_refused_in_one_line(
    outbox: Path, tmp_path: Path, table: str, command: str
):
    """A journal whose ``events`` table was dropped by hand sent as if whole, until the first
    hold or decision it had to record failed half way through the run."""
    journal = tmp_path / "journal.db"
    write_invoice(outbox, "INV-1")
    Journal(journal).close()
    with sqlite3.connect(journal) as conn:
        name, _, column = table.partition(".")
        conn.execute(f"ALTER TABLE {name} DROP COLUMN {column}" if column else f"DROP TABLE {name}")
    conn.close()
    before = journal.read_bytes()
    args = ["send", str(outbox), "--sandbox"] if command == "send" else ["status"]

    line = one_line(cli(*args, "--journal", str(journal)))

    assert line == (
        f"invoicectl: error: the journal {journal} is damaged: its schema lacks {table} "
        "(dropped outside invoicectl?); nothing was changed. `invoicectl doctor` names all it "
        "lacks; restore the journal from a backup"
    )
    assert journal.read_bytes() == before


def test_the_tables_a_journal_must_have_are_those_the_migrations_make(tmp_path: Path):
    from invoicectl.journal.migrations import user_tables
    from invoicectl.journal.shape import TABLES

    Journal(tmp_path / "journal.db").close()
    with sqlite3.connect(tmp_path / "journal.db") as conn:
        made = set(user_tables(conn)) - {"_sqlite_migrations"}
    conn.close()
    assert made == TABLES


def test_either_backend_refuses_a_journal_with_a_table_dropped(journal_at: Location):
    from backends import witness_execute

    from invoicectl.errors import JournalError
    from invoicectl.journal import open_journal

    open_journal(journal_at).close()
    witness_execute(journal_at, "DROP TABLE events")

    with pytest.raises(JournalError) as refused:
        open_journal(journal_at).close()

    assert "is damaged: its schema lacks events (dropped outside invoicectl?)" in str(refused.value)


def test_the_shape_a_journal_is_checked_against_is_the_one_the_migrations_make():
    """``SHAPE_DIGEST`` follows the schema: a migration that adds a table or a column must
    change it (to what this test prints), or every journal it migrates would be compared
    column by column at every open."""
    from invoicectl.journal.shape import SHAPE_DIGEST, shape_digest
    from invoicectl.journal.sqlite_open import reference_schema

    assert shape_digest(reference_schema()) == SHAPE_DIGEST


def test_a_journal_with_a_table_of_its_own_added_is_opened(tmp_path: Path):
    """Only what the journal lacks is refused: a table or column someone added is theirs."""
    journal = tmp_path / "journal.db"
    Journal(journal).close()
    with sqlite3.connect(journal) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
        conn.execute("ALTER TABLE invoices ADD COLUMN note TEXT")
    conn.close()

    Journal(journal).close()


def test_a_write_that_fails_mid_send_stops_new_work_and_counts_what_went_out(
    outbox: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """helper-92: a journal locked by another process for 15 s mid-send: one write failed, the
    run took new work and sent seven more invoices, then ended with "the journal could not be
    used (database is locked) ... run again", no word of the eleven requests made."""
    from sendkit import assert_each_delivered_once, emulator, send, settings_for

    from invoicectl.errors import JournalError
    from invoicectl.send import sender

    ids = [f"LK-{n:02d}" for n in range(12)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    real = sender.begin_attempt
    calls = 0

    def locked_at_the_fourth(*args: object, **kwargs: object) -> object:
        nonlocal calls
        calls += 1
        if calls == 4:
            raise sqlite3.OperationalError("database is locked")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sender, "begin_attempt", locked_at_the_fourth)
    goroute = emulator()
    journal = tmp_path / "journal.db"
    with pytest.raises(JournalError) as failed:
        send(settings_for(journal), outbox, goroute.transport(), concurrency=3)

    assert calls <= 6  # after the failed write, those in flight finish; nothing new starts
    assert "database is locked" in str(failed.value)
    assert re.search(r"this run made [3-5] request\(s\) before it", str(failed.value))
    monkeypatch.setattr(sender, "begin_attempt", real)
    send(settings_for(journal), outbox, goroute.transport())
    assert_each_delivered_once(goroute.stats(), ids)

"""A journal that is not there: the commands that read it or decide on what it holds refuse
in one line and create nothing; only those that take an outbox (scan, send, validate) make
one. A new, empty journal would report a mistyped or unmounted path as healthy."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from logkit import unstamped
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.cli import app
from invoicectl.sandbox import BackgroundServer, Sandbox

runner = CliRunner()

REFUSING = [
    ["status"],
    ["status", "--format", "json"],
    ["show", "INV-1"],
    ["receivers"],
    ["hold", "INV-1", "--reason", "checking"],
    ["release", "INV-1"],
    ["abandon", "INV-1", "--reason", "paid by hand"],
    ["reconcile", "--sandbox"],
    ["doctor", "--sandbox"],
]


def refusal(journal: Path) -> str:
    return (
        f"invoicectl: error: no journal at {journal}: nothing was ever scanned or sent with "
        "it here, or it was lost or not mounted; `invoicectl scan` or `send` creates one"
    )


@pytest.mark.parametrize("args", REFUSING, ids=lambda args: " ".join(args))
def test_a_command_that_reads_or_decides_refuses_a_missing_journal_and_creates_nothing(
    tmp_path: Path, args: list[str]
) -> None:
    journal = tmp_path / "typo" / "j.db"

    result = runner.invoke(app, [*args, "--journal", str(journal)])

    assert result.exit_code == 1, result.output
    if args[0] == "doctor" or "json" in args:  # a check's line; a JSON document's error
        words = " ".join(refusal(journal).split()).removeprefix("invoicectl: error: ")
        assert words in " ".join(result.stdout.split()), result.output
    else:
        # One line, and the run commands' last line (``exit 1: ...``).
        said = [line for line in result.stderr.splitlines() if not line.startswith("exit 1: ")]
        assert " ".join(" ".join(said).split()) == " ".join(refusal(journal).split())
    assert not (tmp_path / "typo").exists()


def test_status_metrics_of_a_missing_journal_say_exit_1(tmp_path: Path, monkeypatch) -> None:
    journal = tmp_path / "typo" / "j.db"
    monkeypatch.setenv("INVOICECTL_JOURNAL", str(journal))
    metrics = tmp_path / "status.prom"

    result = runner.invoke(app, ["status", "--metrics-file", str(metrics)])

    assert result.exit_code == 1, result.output
    assert 'invoicectl_run_exit_code{profile="",writer="status"} 1.0' in metrics.read_text()
    assert not (tmp_path / "typo").exists()


def test_scan_creates_the_journal_and_status_then_reads_it(tmp_path: Path, outbox: Path) -> None:
    journal = tmp_path / "new" / "j.db"
    write_invoice(outbox, "INV-1")

    scanned = runner.invoke(app, ["scan", str(outbox), "--journal", str(journal)])
    status = runner.invoke(app, ["status", "--journal", str(journal)])

    assert scanned.exit_code == 0, scanned.output
    assert journal.is_file()
    assert status.exit_code == 75, status.output  # INV-1 waits to be sent


def test_send_creates_the_journal(tmp_path: Path, outbox: Path, monkeypatch) -> None:
    journal = tmp_path / "new" / "j.db"
    write_invoice(outbox, "INV-1")
    with BackgroundServer(Sandbox()) as server:
        monkeypatch.setenv("GOROUTE_BASE_URL", server.base_url)
        monkeypatch.setenv("GOROUTE_API_KEY", "sk_test_invoicectl_sandbox")

        sent = runner.invoke(app, ["send", str(outbox), "--journal", str(journal)])

    assert sent.exit_code == 0, sent.output
    assert journal.is_file()


# ---- a journal path that is not a regular file -------------------------------------------

NOT_REGULAR = {
    "directory": (lambda path: path.mkdir(), "a directory"),
    "fifo": (lambda path: os.mkfifo(path), "a FIFO (named pipe)"),
}


@pytest.mark.parametrize("kind", list(NOT_REGULAR))
@pytest.mark.parametrize(
    "args",
    [["status"], ["doctor", "--sandbox"], ["scan", "OUTBOX"], ["hold", "INV-1", "--reason", "x"]],
    ids=lambda args: args[0],
)
def test_a_journal_path_that_is_not_a_regular_file_is_one_line(
    tmp_path: Path, outbox: Path, kind: str, args: list[str]
) -> None:
    """A FIFO made doctor block forever (SQLite opening it waits for a writer); the others
    said "disk I/O error ... a full disk", the wrong advice. A subprocess: a hang must end."""
    make, what = NOT_REGULAR[kind]
    journal = tmp_path / "j.db"
    make(journal)
    write_invoice(outbox, "INV-1")
    argv = [str(outbox) if arg == "OUTBOX" else arg for arg in args]

    done = subprocess.run(
        [sys.executable, "-m", "invoicectl", *argv, "--journal", str(journal)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "1000"},
        timeout=60,
    )

    assert done.returncode == 1, done.stdout + done.stderr
    words = f"the journal {journal} is not a regular file but {what}"
    if args[0] == "doctor":
        assert f"{journal} cannot be read as a journal: not a regular file but {what}" in (
            done.stdout
        )
    else:
        assert unstamped(done.stderr).splitlines()[0] == (
            f"invoicectl: error: {words}: nothing was read or changed; name the journal's "
            "file with --journal or INVOICECTL_JOURNAL"
        )
    assert "disk I/O" not in done.stdout + done.stderr
    assert not (tmp_path / "j.db.lock").exists()


# ---- an empty file, links that loop -------------------------------------------------------

EMPTY_REFUSING = [
    *REFUSING,
    ["status", "--since", "2026-01-01"],
    ["backup", "BACKUP"],
    ["export", "EXPORT"],
]


@pytest.mark.parametrize("args", EMPTY_REFUSING, ids=lambda args: " ".join(args))
def test_an_empty_journal_file_is_refused_and_left_as_it_is(
    tmp_path: Path, args: list[str]
) -> None:
    """Set up by a reading command, a 0-byte journal (cut to nothing) became a new one that
    reported nothing to attend to, and doctor passed it."""
    journal = tmp_path / "j.db"
    journal.touch()
    argv = [_placed(arg, tmp_path) for arg in args]

    result = runner.invoke(app, [*argv, "--journal", str(journal)])

    assert result.exit_code == 1, result.output
    said = " ".join(result.output.split())
    assert f"the journal {journal} is empty (0 bytes)" in said, result.output
    assert "restore it from a backup" in said
    assert journal.stat().st_size == 0
    assert not Path(f"{journal}-wal").exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["j.db"]


def _placed(arg: str, tmp_path: Path) -> str:
    """BACKUP, EXPORT: paths under ``tmp_path``."""
    return {"BACKUP": str(tmp_path / "backup.db"), "EXPORT": str(tmp_path / "export")}.get(arg, arg)


@pytest.mark.parametrize(
    "args",
    [
        ["status"],
        ["scan", "OUTBOX"],
        ["send", "OUTBOX", "--sandbox"],
        ["doctor", "--sandbox"],
        ["verify"],
        ["backup", "BACKUP"],
    ],
    ids=lambda args: args[0],
)
def test_journal_links_that_loop_are_one_line(
    tmp_path: Path, outbox: Path, args: list[str]
) -> None:
    """``Path.resolve()`` of the lock's path raised RuntimeError: a traceback for send,
    scan and doctor; verify said there was no journal."""
    journal = tmp_path / "a.db"
    journal.symlink_to(tmp_path / "b.db")
    (tmp_path / "b.db").symlink_to(journal)
    write_invoice(outbox, "INV-1")
    argv = [str(outbox) if arg == "OUTBOX" else _placed(arg, tmp_path) for arg in args]

    done = subprocess.run(
        [sys.executable, "-m", "invoicectl", *argv, "--journal", str(journal)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "1000"},
        timeout=60,
    )

    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert "Traceback" not in said
    assert "no journal" not in said
    assert re.search(r"symbolic links|Symlink loop", said), said
    assert not (tmp_path / "a.db.lock").exists()

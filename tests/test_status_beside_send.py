"""``status`` while a send runs in another process on a SQLite journal (an operator's look, or
a cron'd ``status --metrics-file``, beside cron's send): the invoices that send holds, one of
them in flight, are its own, not "waiting to be sent" nor "unanswered, replayed by the next
send" (helper-104: said so while the send had the request in flight). Real files, a real
lock held by a real second process."""

from __future__ import annotations

import fcntl
import os
import socket
import subprocess
from pathlib import Path

from journalkit import force
from test_runlock import answer, holder_process, say_go
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.cli import app
from invoicectl.journal import Journal
from invoicectl.journal.runlock import LockHolder, RunLock, lock_path_for

runner = CliRunner()


def _three_to_send_one_in_flight(outbox: Path, journal: Path) -> None:
    """Three invoices scanned; INV-1's key carried a request with no answer yet (as a send
    has it while the request is in flight)."""
    for invoice_id in ("INV-1", "INV-2", "INV-3"):
        write_invoice(outbox, invoice_id)
    scanned = runner.invoke(app, ["scan", str(outbox)])
    assert scanned.exit_code == 0, scanned.output
    with Journal(journal) as opened:
        force(opened, "INV-1", idempotency_key="invoice-INV-1", key_first_used_at=opened.now())


def _last_line(stderr: str) -> str:
    return stderr.splitlines()[-1]


def test_status_beside_a_running_send_says_that_send_holds_its_invoices(
    outbox: Path, isolated_environment: Path
) -> None:
    journal = isolated_environment
    _three_to_send_one_in_flight(outbox, journal)
    alone = runner.invoke(app, ["status", "--limit", "0"])

    with holder_process(journal, "send") as send:
        say_go(send)
        assert answer(send) == "locked"
        beside = runner.invoke(app, ["status", "--limit", "0"])

    assert alone.exit_code == 75, alone.output  # no send runs: the next one sends them
    assert _last_line(alone.stderr) == (
        "exit 75: 2 waiting to be sent, 1 unanswered, replayed by the next send"
    )
    assert beside.exit_code == 75, beside.output  # exit codes unchanged
    assert "unanswered" not in beside.output, beside.output
    assert "waiting" not in beside.output, beside.output
    last = _last_line(beside.stderr)
    holder = f"pid {send.pid} on host {socket.gethostname()}, since "
    assert last.startswith(f"exit 75: 3 in the hands of the send running now ({holder}"), last
    assert last.endswith("), or of the next send if it stops first"), last


def test_a_lock_held_by_another_command_or_by_this_process_holds_no_invoice(
    outbox: Path, isolated_environment: Path
) -> None:
    journal = isolated_environment
    _three_to_send_one_in_flight(outbox, journal)

    with holder_process(journal, "reconcile") as reconcile:  # sends nothing
        say_go(reconcile)
        assert answer(reconcile) == "locked"
        beside_reconcile = runner.invoke(app, ["status", "--limit", "0"])
    with RunLock(journal, "send"), Journal(journal) as opened:  # a send's own end of run
        own = opened.claimed_elsewhere()

    assert _last_line(beside_reconcile.stderr) == (
        "exit 75: 2 waiting to be sent, 1 unanswered, replayed by the next send"
    )
    assert own is None


def test_a_send_s_description_left_in_the_lock_file_by_a_send_gone_holds_no_invoice(
    outbox: Path, isolated_environment: Path
) -> None:
    """helper-105: the lock held by something that wrote no description of its own (another
    command a moment before it writes one, a backup tool) read as the last send's, long
    gone: "in the hands of the send running now (pid 1 ...)"."""
    journal = isolated_environment
    _three_to_send_one_in_flight(outbox, journal)
    dead = LockHolder(_pid_of_exited(), socket.gethostname(), "2026-01-01T00:00:00Z", "send")
    lock = lock_path_for(journal)
    lock.write_text(dead.to_json(), encoding="utf-8")
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # held, by no send
        with Journal(journal) as opened:
            claims = opened.claimed_elsewhere()
    finally:
        os.close(fd)
    assert claims is None


def _pid_of_exited() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid

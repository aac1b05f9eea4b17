"""Losing the -wal after a kill -9, and backing up while a send runs: real processes.

The send runs as the real CLI against the emulator over loopback HTTP; the journal's -wal is
deleted after SIGKILL (what an operator "cleaning up" does), and the next send runs 25 hours
later, when a resend would deliver a second copy. The backup runs as its own process beside a
send that keeps committing.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from logkit import said, unstamped
from processkit import wait_for
from sendkit import assert_each_delivered_once, emulator, settings_for, states
from test_history import assert_held_as_found, day_later, outbox_of

from invoicectl.journal import open_journal
from invoicectl.sandbox import DEFAULT_API_KEY, BackgroundServer
from invoicectl.send.marker import MARKER_NAME

pytestmark = pytest.mark.slow


def cli(journal: Path, base_url: str, *args: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "GOROUTE_BASE_URL": base_url,
        "GOROUTE_API_KEY": DEFAULT_API_KEY,
        "INVOICECTL_JOURNAL": str(journal),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "invoicectl", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def accepted_in(path: Path) -> int:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return int(
            conn.execute("SELECT count(*) FROM invoices WHERE state = 'accepted'").fetchone()[0]
        )
    finally:
        conn.close()


def test_the_wal_deleted_after_a_kill_9_is_detected_and_nothing_is_sent_twice(
    outbox: Path, tmp_path: Path
):
    journal = tmp_path / "journal.db"
    first = outbox_of(outbox, "F", 5)
    sandbox = emulator()
    with BackgroundServer(sandbox) as server:
        done = cli(journal, server.base_url, "send", str(outbox), "--rate", "30000")
        _, stderr = done.communicate(timeout=120)
        assert done.returncode == 0, stderr
        second = outbox_of(outbox, "S", 40)
        running = cli(journal, server.base_url, "send", str(outbox), "--rate", "300")
        wait_for(lambda: sandbox.stats()["accepted"] >= len(first) + 15)
        running.send_signal(signal.SIGKILL)
        running.communicate(timeout=30)
        delivered = [i for i in second if sandbox.stats()["per_invoice"].get(i)]
        assert 15 <= len(delivered) < 40

        Path(f"{journal}-wal").unlink()  # the killed run's commits, all of them
        assert set(states(journal)) == set(first), "the journal forgot the killed run"
        sandbox.advance_clock(25 * 3600)
        later = day_later()
        settings = settings_for(journal, base_url=server.base_url)
        warnings: list[str] = []
        from sendkit import send

        send(settings, outbox, None, clocks=later, warn=warnings.append)

    assert_each_delivered_once(sandbox.stats(), first + second)
    assert_held_as_found(journal, delivered, sandbox)
    (line,) = warnings
    assert "has lost history" in line and "-wal" in line
    assert f"{len(delivered)} already there" in line


def marked_attempts(outbox: Path, base_url: str) -> int:
    import json

    try:
        entry = json.loads((outbox / MARKER_NAME).read_text())["sends"][base_url]
    except (OSError, ValueError, KeyError):
        return 0
    return int(entry.get("attempts_through") or 0)


def test_a_journal_rolled_back_to_inside_a_killed_run_is_detected_by_the_marker(
    outbox: Path, tmp_path: Path
):
    """A copy taken while the run sent, put back after a kill -9 (or a -wal lost after a
    checkpoint had written part of the run): the journal holds the marker's run, so only the
    marker's count of that run's durable attempts, kept up to date as it sends, tells."""
    journal = tmp_path / "journal.db"
    ids = outbox_of(outbox, "R", 40)
    sandbox = emulator()
    with BackgroundServer(sandbox) as server:
        running = cli(journal, server.base_url, "send", str(outbox), "--rate", "300")
        wait_for(lambda: sandbox.stats()["accepted"] >= 8)
        copy = tmp_path / "mid-run.db"
        from invoicectl.journal.backup import backup

        backup(journal, copy)
        with open_journal(copy) as rolled_back:
            (run,) = [r for r in (1, 2) if rolled_back.run_started_at(r)]
            in_copy = rolled_back.last_attempt_of(run) or 0
        wait_for(lambda: marked_attempts(outbox, server.base_url) > in_copy + 3)
        running.send_signal(signal.SIGKILL)
        running.communicate(timeout=30)
        with open_journal(journal) as killed:  # the marker never says more than is durable
            assert (killed.last_attempt_of(run) or 0) >= marked_attempts(outbox, server.base_url)
        delivered = [i for i in ids if sandbox.stats()["per_invoice"].get(i)]
        assert len(delivered) < len(ids), "killed while it sent, not after"

        for path in tmp_path.glob("journal.db-*"):
            path.unlink()
        copy.replace(journal)
        sandbox.advance_clock(25 * 3600)
        settings = settings_for(journal, base_url=server.base_url)
        warnings: list[str] = []
        from sendkit import send

        send(settings, outbox, None, clocks=day_later(), warn=warnings.append)

    assert_each_delivered_once(sandbox.stats(), ids)
    (line,) = warnings
    assert "has lost history" in line and "whose requests it holds only up to attempt" in line
    with open_journal(journal) as checked:
        held = [i for i in delivered if checked.invoice(i).hold is not None]
    assert len(held) >= 3  # sent after the copy: pending in it, found at GoRoute and held


def test_the_cli_says_the_journal_is_new_and_the_override_is_a_flag(outbox: Path, tmp_path: Path):
    journal = tmp_path / "journal.db"
    ids = outbox_of(outbox, "C", 3)
    sandbox = emulator()
    with BackgroundServer(sandbox) as server:
        first = cli(journal, server.base_url, "send", str(outbox), "--rate", "30000")
        _, stderr = first.communicate(timeout=120)
        assert first.returncode == 0, stderr
        stderr = said(stderr, 0)
        assert stderr.startswith("invoicectl: WARNING: the journal ")
        assert "3 to send" in stderr and len(stderr.splitlines()) == 1
        assert (outbox / MARKER_NAME).exists()

        journal.write_bytes(b"")
        trusted = cli(journal, server.base_url, "send", str(outbox), "--trust-new-journal")
        _, stderr = trusted.communicate(timeout=120)

    assert trusted.returncode == 0, stderr
    assert "is not the one" in stderr and "--trust-new-journal: sending 3 invoices" in stderr
    # Inside the key's 24 hours the resend is a replay: still one transaction each.
    assert_each_delivered_once(sandbox.stats(), ids)


def test_a_backup_beside_a_running_send_is_whole_and_holds_what_was_committed(
    outbox: Path, tmp_path: Path
):
    journal = tmp_path / "journal.db"
    outbox_of(outbox, "P", 120)
    sandbox = emulator(latency_ms=5)
    copy = tmp_path / "backups" / "journal-copy.db"
    copy.parent.mkdir()
    with BackgroundServer(sandbox) as server:
        running = cli(journal, server.base_url, "send", str(outbox), "--rate", "1200")
        wait_for(lambda: sandbox.stats()["accepted"] >= 10)
        committed = accepted_in(journal)
        backed = cli(journal, server.base_url, "backup", str(copy))
        stdout, stderr = backed.communicate(timeout=60)
        still_running = running.poll() is None
        running.send_signal(signal.SIGTERM)
        running.communicate(timeout=60)

    assert backed.returncode == 0, stderr
    assert still_running, "the send ended before the backup: nothing was tested"
    (line,) = unstamped(stdout).splitlines()
    assert line.startswith(f"backed up the journal {journal} to {copy}: ")
    assert line.endswith(" integrity ok")
    assert said(stderr, 0) == ""
    conn = sqlite3.connect(f"{copy.as_uri()}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        in_copy = conn.execute("SELECT count(*) FROM invoices WHERE state = 'accepted'")
        assert in_copy.fetchone()[0] >= committed
    finally:
        conn.close()
    assert not Path(f"{copy}-wal").exists()
    assert [p.name for p in copy.parent.iterdir()] == [copy.name]  # no temporary left
    assert copy.stat().st_mode & 0o777 == 0o600

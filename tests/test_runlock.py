"""RunLock with real files and real processes: one holder, named when refused, gone when dead."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from invoicectl.errors import ExitCode, JournalLocked
from invoicectl.journal import Journal
from invoicectl.journal.runlock import LockHolder, RunLock, lock_path_for

START = datetime(2026, 11, 29, 9, 40, 12, 345678, tzinfo=UTC)

# A process that takes the lock, says so on stdout, then waits for a line on stdin.
HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from invoicectl.errors import JournalLocked
    from invoicectl.journal.runlock import RunLock

    sys.stdin.readline()  # "go": lets two of these race from the same moment
    try:
        lock = RunLock(Path(sys.argv[1]), sys.argv[2]).__enter__()
    except JournalLocked as refused:
        print("refused", refused, flush=True)
        sys.exit(6)
    print("locked", flush=True)
    sys.stdin.readline()
    """
)


@contextmanager
def holder_process(journal: Path, command: str = "send") -> Iterator[subprocess.Popen[str]]:
    """A process running HOLDER; killed (SIGKILL) and reaped when the block ends."""
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(journal), command],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parent.parent,
    ) as process:
        try:
            yield process
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=10)


def say_go(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.write("go\n")
    process.stdin.flush()


def answer(process: subprocess.Popen[str]) -> str:
    """The first word the process printed: "locked" or "refused"."""
    assert process.stdout is not None
    return process.stdout.readline().split(" ")[0].strip()


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    return tmp_path / "state" / "journal.db"


def test_a_second_lock_is_refused_naming_the_holder(journal: Path) -> None:
    with RunLock(journal, "send", now=lambda: START), pytest.raises(JournalLocked) as refused:
        RunLock(journal, "reconcile").acquire()
    assert str(refused.value) == (
        f"another invoicectl send holds the journal {journal} "
        f"(pid {os.getpid()} on host {socket.gethostname()}, since 2026-11-29T09:40:12Z); "
        "reconcile did nothing: run it again once that run has finished"
    )
    assert refused.value.exit_code == ExitCode.LOCKED


def test_the_lock_file_describes_the_holder_and_is_private(journal: Path) -> None:
    with RunLock(journal, "send", now=lambda: START) as lock:
        path = lock_path_for(journal)
        assert path == journal.parent / "journal.db.lock"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert json.loads(path.read_text()) == {
            "command": "send",
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started_at": "2026-11-29T09:40:12Z",
        }
        assert lock.holder == LockHolder(
            os.getpid(), socket.gethostname(), "2026-11-29T09:40:12Z", "send"
        )
    assert path.read_text() == ""  # a clean exit leaves no description behind


def test_the_lock_is_released_on_exit_even_after_an_error(journal: Path) -> None:
    with pytest.raises(ValueError), RunLock(journal):
        raise ValueError("the run failed")
    with RunLock(journal) as again:
        assert again.holder is not None


def test_a_stale_description_without_a_lock_does_not_matter(journal: Path) -> None:
    journal.parent.mkdir()
    stale = LockHolder(pid=4242, host="fin01", started_at="2026-11-28T01:00:00Z", command="send")
    lock_path_for(journal).write_text(stale.to_json())
    with RunLock(journal) as lock:
        assert lock.holder is not None and lock.holder.pid == os.getpid()


def test_a_garbled_description_still_refuses_clearly(journal: Path) -> None:
    journal.parent.mkdir()
    with RunLock(journal):
        lock_path_for(journal).write_text("{not json")
        refused = r"^another invoicectl run holds the journal .*db; send did nothing: run it again"
        with pytest.raises(JournalLocked, match=refused + r" once that run has finished$"):
            RunLock(journal).acquire()


def test_a_lock_held_by_another_process_is_refused_and_dies_with_it(journal: Path) -> None:
    with holder_process(journal, "send") as holder:
        say_go(holder)
        assert answer(holder) == "locked"
        with pytest.raises(JournalLocked, match=rf"\(pid {holder.pid} on host "):
            RunLock(journal).acquire()
    # The holder was killed with SIGKILL: no cleanup ran, its description is still there...
    assert json.loads(lock_path_for(journal).read_text())["pid"] == holder.pid
    with RunLock(journal) as lock:  # ... and does not matter
        assert lock.holder is not None and lock.holder.pid == os.getpid()


def test_of_two_racing_processes_exactly_one_wins(journal: Path) -> None:
    for _ in range(5):
        with holder_process(journal) as first, holder_process(journal) as second:
            say_go(first)
            say_go(second)
            assert sorted([answer(first), answer(second)]) == ["locked", "refused"]


def test_a_lock_file_that_is_a_fifo_is_one_line_not_a_hang(tmp_path: Path) -> None:
    """doctor's look at the lock opened it read-only and waited on the FIFO for ever."""
    journal = tmp_path / "journal.db"
    Journal(journal).close()
    os.mkfifo(lock_path_for(journal))
    for command in ("doctor", "hold"):
        arguments = ["INV-1", "--reason", "x"] if command == "hold" else []
        done = subprocess.run(
            [sys.executable, "-m", "invoicectl", command, *arguments, "--journal", str(journal)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=Path(__file__).parent.parent,
        )
        assert "Traceback" not in done.stderr
        assert (
            f"lock file {lock_path_for(journal)} is not a regular file" in done.stdout + done.stderr
        )
        assert done.returncode != 0


def test_a_lock_file_replaced_as_it_is_locked_is_locked_again(
    journal: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Locked after its name was given to another file, the lock would keep no run out."""
    import fcntl

    real_flock = fcntl.flock
    calls = []

    def flock_after_a_replacement(fd: int, operation: int) -> None:
        calls.append(operation)
        if len(calls) == 1:  # between the open and the lock, the file is replaced
            path = lock_path_for(journal)
            path.unlink()
            path.touch()
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock_after_a_replacement)
    with RunLock(journal):
        assert len(calls) == 2
        monkeypatch.setattr(fcntl, "flock", real_flock)
        with pytest.raises(JournalLocked):
            RunLock(journal).acquire()


def test_a_lock_file_that_is_a_link_is_refused_not_followed(journal: Path, tmp_path: Path) -> None:
    """Followed, a run would truncate and describe itself in whatever the link names."""
    from invoicectl.errors import JournalError

    journal.parent.mkdir(parents=True)
    elsewhere = tmp_path / "precious.txt"
    elsewhere.write_text("keep me\n")
    lock_path_for(journal).symlink_to(elsewhere)

    with pytest.raises(JournalError, match="lock file .* is not a regular file"):
        RunLock(journal).acquire()
    assert elsewhere.read_text() == "keep me\n"


def test_a_send_whose_lock_file_was_removed_stops_and_the_next_sends_nothing_twice(
    tmp_path: Path, outbox: Path
):
    """helper-83: a clean-up removed the lock file while a send ran; a second send locked a
    new one and ran beside the first (18 of 40 requests sent again, under the same keys), and
    one of them ended in "changed while record_answer was being written", exit 1. Now the
    first notices before its next invoice and takes no more work (exit 6, one line); each
    invoice is delivered once, and a send after both finds nothing left to do."""
    from processkit import run_send, send_process, wait_for
    from sendkit import assert_each_delivered_once, emulator
    from ublfactory import write_invoice

    from invoicectl.sandbox import BackgroundServer

    ids = [f"L-{n:03d}" for n in range(40)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    journal = tmp_path / "journal.db"
    sandbox = emulator()
    with BackgroundServer(sandbox) as server:
        first = send_process(outbox, journal, server.base_url, "--rate", "240")
        try:
            wait_for(lambda: sandbox.stats()["accepted"] >= 3, 60)
            lock_path_for(journal).unlink()  # a clean-up of "stale" files
            code, output = run_send(outbox, journal, server.base_url, "--rate", "6000")
        finally:
            first_out, first_err = first.communicate(timeout=120)
        last_code, last_output = run_send(outbox, journal, server.base_url)

    assert first.returncode == ExitCode.LOCKED, first_out + first_err
    assert "its run lock file was removed or replaced during the run" in first_err
    assert "Traceback" not in first_err + output + last_output
    assert code in (ExitCode.OK, ExitCode.INCOMPLETE), output  # the other's in flight: replays
    assert last_code == ExitCode.OK, last_output
    assert_each_delivered_once(sandbox.stats(), ids)


def test_a_send_whose_journal_directory_is_renamed_does_not_stop_as_if_its_lock_were_lost(
    tmp_path: Path, outbox: Path
):
    """helper-84: the journal's directory renamed while a send runs (the journal, its lock file
    and its lock the same files; a run through the new name meets the same lock). The lock
    check looked the old path up, found nothing, and the send stopped as if its lock were lost
    (exit 6). The name is now looked up in the lock's directory, held open."""
    from processkit import run_send, send_process, wait_for
    from sendkit import assert_each_delivered_once, emulator
    from ublfactory import write_invoice

    from invoicectl.sandbox import BackgroundServer

    ids = [f"R-{n:03d}" for n in range(20)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    (tmp_path / "state-a").mkdir()
    journal = tmp_path / "state-a" / "journal.db"
    sandbox = emulator()
    with BackgroundServer(sandbox) as server:
        first = send_process(outbox, journal, server.base_url, "--rate", "240")
        try:
            wait_for(lambda: sandbox.stats()["accepted"] >= 3, 60)
            (tmp_path / "state-a").rename(tmp_path / "state-b")
        finally:
            out, err = first.communicate(timeout=120)
        moved = tmp_path / "state-b" / "journal.db"
        last_code, last_output = run_send(outbox, moved, server.base_url)

    assert "lock file was removed or replaced" not in err, err
    assert first.returncode == ExitCode.OK, out + err
    assert last_code == ExitCode.OK, last_output
    assert_each_delivered_once(sandbox.stats(), ids)

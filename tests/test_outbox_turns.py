"""Two journals never send from one outbox at once (``send/outbox_turns.py``): real flocks,
real processes, and the send of two accounts started in the same minute."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sendkit import FAST_RETRY, emulator, send, settings_for, states
from ublfactory import write_invoice

from invoicectl.errors import ExitCode, JournalLocked
from invoicectl.scan.ingest import scanning
from invoicectl.send import runner
from invoicectl.send.marker import MARKER_NAME
from invoicectl.send.options import SendOptions
from invoicectl.send.outbox_turns import TURNS, marked_below, outbox_turn

BASE = "https://api.goroute.example"
A, B = "a" * 32, "b" * 32
ACME, BETA = "0088:5790000435951", "0192:987654321"


def turn(
    outbox: Path,
    journal_id: str,
    supplier: str | None = None,
    base_url: str = BASE,
    below: bool = False,
) -> Any:
    journal = Path(f"/srv/{journal_id[0]}.db")
    return outbox_turn(outbox, base_url, journal_id, supplier, journal, below)


def test_a_second_journal_sending_every_file_is_refused_naming_the_first(outbox: Path):
    with turn(outbox, A):
        with pytest.raises(JournalLocked) as refused, turn(outbox, B):
            pass  # pragma: no cover - refused before
        message = str(refused.value)
        assert str(outbox) in message and "/srv/a.db" in message and f"pid {os.getpid()}" in message
        assert refused.value.exit_code == ExitCode.LOCKED
    with turn(outbox, B):  # the first has ended: the turn is free
        pass


def test_the_workers_of_one_journal_share_its_turn(outbox: Path):
    with turn(outbox, A), turn(outbox, A), turn(outbox, A, supplier=ACME):
        pass


def test_sends_of_two_suppliers_share_the_outbox_but_not_with_one_of_every_file_or_the_same(
    outbox: Path,
):
    """``--all-profiles`` runs one send per supplier at once: they take different files."""
    with turn(outbox, A, supplier=ACME), turn(outbox, B, supplier=BETA):
        for refused in ({}, {"supplier": ACME}):
            with pytest.raises(JournalLocked), turn(outbox, "c" * 32, **refused):
                pass  # pragma: no cover - refused before
    with turn(outbox, A), pytest.raises(JournalLocked), turn(outbox, B, supplier=BETA):
        pass  # pragma: no cover - refused before


def test_another_base_url_is_another_goroute_and_no_conflict(outbox: Path):
    with turn(outbox, A), turn(outbox, B, base_url="http://127.0.0.1:8080"):
        pass


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_a_read_only_outbox_has_no_turns_and_refuses_nothing(outbox: Path):
    outbox.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        with turn(outbox, A), turn(outbox, B):
            pass
    finally:
        outbox.chmod(stat.S_IRWXU)
    assert not (outbox / TURNS).exists()


def test_an_outbox_where_the_turns_cannot_be_made_refuses_nothing(outbox: Path):
    (outbox / TURNS).write_text("not a directory")  # as any file the run cannot replace
    with turn(outbox, A), turn(outbox, B):
        pass


HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from invoicectl.send.outbox_turns import outbox_turn

    with outbox_turn(Path(sys.argv[1]), sys.argv[2], sys.argv[3], None, Path("/srv/x.db")):
        print("holding", flush=True)
        sys.stdin.readline()
    """
)


def test_a_turn_held_by_another_process_refuses_and_goes_with_its_kill_9(outbox: Path):
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(outbox), BASE, A],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    ) as holder:  # fmt: skip
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
            with pytest.raises(JournalLocked, match=f"pid {holder.pid}"), turn(outbox, B):
                pass  # pragma: no cover - refused before
        finally:
            holder.send_signal(signal.SIGKILL)
            holder.wait(30)
    with turn(outbox, B):  # a dead run holds nothing, whatever its file still says
        pass


def test_two_accounts_sending_at_once_never_both_send_a_new_invoice(tmp_path: Path, outbox: Path):
    """Two profiles without a sender on one outbox, run by two cron lines in the same minute:
    the second is refused before its first request, and its next run holds what the first
    sent (``other_accounts``). Before turns, both looked before either sent, and both sent."""
    write_invoice(outbox, "S-1")
    accounts = {"a": emulator(), "b": emulator()}
    first = replace(settings_for(tmp_path / "a.db"), profile="a")
    second = replace(settings_for(tmp_path / "b.db"), profile="b")
    send(first, outbox, accounts["a"].transport())
    send(second, outbox, accounts["b"].transport(), trust_new_journal=True)  # S-1 held there
    write_invoice(outbox, "S-2")  # new: both runs of the next minute find it
    checked, go_on = threading.Event(), threading.Event()
    results: list[Any] = []

    @contextmanager
    def session() -> Any:  # the first run, after its checks, before its first request
        checked.set()
        go_on.wait(30)
        yield accounts["a"].transport()

    def run_first() -> None:
        options = SendOptions(rate_per_minute=60_000, concurrency=10, policy=FAST_RETRY,
                              outbox=outbox)  # fmt: skip
        results.append(runner.send(first, scanning(outbox), options, session=session))

    running = threading.Thread(target=run_first)
    running.start()
    try:
        assert checked.wait(30)
        with pytest.raises(JournalLocked, match="a send through another journal is sending from"):
            send(second, outbox, accounts["b"].transport())
    finally:
        go_on.set()
        running.join(60)
    assert len(results) == 1 and results[0][1].exit_code == ExitCode.OK
    _, summary = send(second, outbox, accounts["b"].transport())  # the next minute's run
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE
    received = [account.stats()["per_invoice"].get("S-2", 0) for account in accounts.values()]
    assert received == [1, 0]
    assert states(tmp_path / "b.db")["S-2"] == "pending"


@pytest.mark.parametrize("sent_on_its_own", ["marker", "turn only"])
def test_a_recursive_send_meets_the_turn_of_a_marked_subdirectorys_own_send(
    tmp_path: Path, outbox: Path, sent_on_its_own: str
):
    """A subdirectory holding a marker of its own is an outbox another journal sends on its
    own: a recursive send of its parent takes a turn there too, and meets that send's, as a
    send of the subdirectory itself would. So does one whose first send has its turn but no
    marker yet (written after its scan and history check; helper-79). A subdirectory with
    neither is walked past."""
    marked, plain = outbox / "a", outbox / "b"
    for directory, invoice_id in ((marked, "S-1"), (plain, "S-2")):
        directory.mkdir()
        write_invoice(directory, invoice_id)
    if sent_on_its_own == "marker":
        (marked / MARKER_NAME).write_text('{"sends": {}}\n')
    settings = settings_for(tmp_path / "j.db", base_url=BASE)
    with turn(marked, B):
        assert marked_below(outbox) == (marked,)
        options = SendOptions(policy=FAST_RETRY, outbox=outbox, marked_below=marked_below(outbox))
        with pytest.raises(JournalLocked, match=str(marked)):
            runner.send(settings, scanning(outbox, recursive=True), options,
                        transport=emulator().transport())  # fmt: skip
    assert states(tmp_path / "j.db") == {}  # refused before its scan


def test_a_send_of_a_subdirectory_meets_a_recursive_send_of_a_directory_above_it(outbox: Path):
    """The recursive send takes the files of every directory under its outbox: another
    journal's send of one of them, however deep, is refused while it runs (helper-79)."""
    deep = outbox / "a" / "b"
    deep.mkdir(parents=True)
    with turn(outbox, A, below=True):
        for directory in (outbox / "a", deep):
            refused = pytest.raises(JournalLocked, match=f"from {outbox} and every directory")
            with refused, turn(directory, B):
                pass  # pragma: no cover - refused before
        with pytest.raises(JournalLocked), turn(deep, B, below=True):
            pass  # pragma: no cover - refused before
        # The same journal's workers, another GoRoute, another supplier's files: no conflict.
        with turn(deep, A), turn(deep, B, base_url="http://127.0.0.1:8080"):
            pass
    with turn(outbox, A, supplier=ACME, below=True), turn(deep, B, supplier=BETA):
        pass
    with turn(outbox, A), turn(deep, B):  # a send of the top directory's own files only
        pass
    with turn(deep, B):  # the recursive send has ended
        pass


def test_a_send_of_a_subdirectory_is_refused_while_a_recursive_send_of_its_parent_runs(
    tmp_path: Path, outbox: Path
):
    sub = outbox / "a"
    sub.mkdir()
    write_invoice(sub, "S-1")
    settings = settings_for(tmp_path / "j.db", base_url=BASE)
    with turn(outbox, B, below=True), pytest.raises(JournalLocked, match=f"from {outbox} and"):
        runner.send(settings, scanning(sub), SendOptions(policy=FAST_RETRY, outbox=sub),
                    transport=emulator().transport())  # fmt: skip
    assert states(tmp_path / "j.db") == {}  # refused before its scan


def test_a_subdirectory_where_no_turn_can_be_made_still_meets_a_recursive_send_above(
    tmp_path: Path, outbox: Path
):
    """An ERP user's drop directory the sender cannot write (here: turns cannot be made
    in it) holds no turn of its own, but the recursive send above it still counts
    (helper-80)."""
    sub = outbox / "a"
    sub.mkdir()
    write_invoice(sub, "S-1")
    (sub / TURNS).write_text("not a directory")  # no turn can be made in sub
    settings = settings_for(tmp_path / "j.db", base_url=BASE)
    with turn(outbox, A, below=True), pytest.raises(JournalLocked, match=f"from {outbox} and"):
        runner.send(settings, scanning(sub), SendOptions(policy=FAST_RETRY, outbox=sub),
                    transport=emulator().transport())  # fmt: skip
    assert states(tmp_path / "j.db") == {}


def test_a_recursive_send_walks_for_subdirectories_again_once_it_holds_its_turn(
    tmp_path: Path, outbox: Path
):
    """A subdirectory another journal began sending after the command walked the tree (the
    options made with no ``marked_below``) is met all the same."""
    sub = outbox / "a"
    sub.mkdir()
    write_invoice(sub, "S-1")
    settings = settings_for(tmp_path / "j.db", base_url=BASE)
    options = SendOptions(policy=FAST_RETRY, outbox=outbox, recursive=True)
    with turn(sub, B), pytest.raises(JournalLocked, match=str(sub)):
        runner.send(settings, scanning(outbox, recursive=True), options,
                    transport=emulator().transport())  # fmt: skip
    assert states(tmp_path / "j.db") == {}

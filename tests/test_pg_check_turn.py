"""No host first-sends while another host's history check runs (``journal.CheckTurn``).

helper-74/75: on a PostgreSQL journal, host A's history check (its journal lost history,
say) reads the invoices it will look for, then searches GoRoute for a while. Host B, sending
from the same journal, could claim and send one of them during that search: an invoice
GoRoute already held (delivered before the loss) went out again. Now a check holds a turn
from before its scan to its end, and a first send's write transaction refuses while another
session holds it; a check starting waits for first sends already in their transactions.

Real PostgreSQL, the real CLI in subprocesses, the emulator over real HTTP.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from processkit import cli_process, run_cli, run_send, send_process, wait_for
from sendkit import assert_each_delivered_once, emulator
from test_pg_workers import _outbox, _scanned, _states, _worker
from ublfactory import write_invoice

from invoicectl.journal import CheckTurn, open_journal
from invoicectl.journal.records import SendOrder
from invoicectl.lifecycle.evidence import CheckUnderway, standing_evidence
from invoicectl.lifecycle.sending import begin_attempt, claim_key
from invoicectl.locations import JournalURL
from invoicectl.sandbox import BackgroundServer
from invoicectl.send import workers


def _worker_journal(url: str) -> Any:
    journal: Any = open_journal(JournalURL(url))
    journal.run_id = journal.begin_run("send", {})
    journal.become_worker(journal.run_id, 30.0)
    return journal


def test_a_first_send_is_refused_while_another_host_checks_and_goes_out_after(
    pg_url, tmp_path: Path
):
    outbox, ids = _outbox(tmp_path, 2)
    _scanned(pg_url, outbox)
    worker = _worker_journal(pg_url)
    with open_journal(JournalURL(pg_url)) as checking:
        turn = CheckTurn(checking)
        turn.take()
        with worker.transaction():
            worker.claim_invoices(ids, 2)
        with pytest.raises(CheckUnderway):
            begin_attempt(worker, worker.run_id, claim_key(worker, ids[0], replay=False), "b")
        assert worker.attempts(ids[0]) == [] and worker.invoice(ids[0]).key_first_used_at is None

        turn.give_back()
        begin_attempt(worker, worker.run_id, claim_key(worker, ids[0], replay=False), "b")
        assert len(worker.attempts(ids[0])) == 1
    worker.close()


def test_a_check_waits_for_a_first_send_already_in_its_write_transaction(pg_url, tmp_path: Path):
    """Else the check could read the invoice as never sent while its request leaves."""
    outbox, ids = _outbox(tmp_path, 1)
    _scanned(pg_url, outbox)
    worker = _worker_journal(pg_url)
    taken = threading.Event()
    with open_journal(JournalURL(pg_url)) as checking:
        turn = CheckTurn(checking)
        with worker.transaction():
            assert not worker.check_underway()  # the first send's shared hold, to its commit
            waiting = threading.Thread(target=lambda: (turn.take(), taken.set()))
            waiting.start()
            assert not taken.wait(1.0)
        assert taken.wait(30)
        waiting.join()
        assert worker.check_underway()  # and the next first send is refused
        turn.give_back()
        assert not worker.check_underway()
    worker.close()


def test_a_check_that_died_lets_the_others_send(pg_url, tmp_path: Path):
    """The server lets the turn go with the session, however the process ended."""
    outbox, ids = _outbox(tmp_path, 1)
    _scanned(pg_url, outbox)
    worker = _worker_journal(pg_url)
    checking: Any = open_journal(JournalURL(pg_url))
    CheckTurn(checking).take()
    with worker.transaction():
        assert worker.check_underway()
    checking.close()  # its session gone, as with the process
    wait_for(lambda: not _turn_held(pg_url), timeout=30)
    with worker.transaction():
        assert not worker.check_underway()
    worker.close()


# The check turn's advisory lock (``pg_journal._CHECK_LOCK``).
CHECK_LOCK = 0x1A7C_0004


def _turn_held(url: str, granted: bool = True) -> bool:
    """Whether a session holds the check turn (or, ``granted`` False, waits for it)."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s"
            " AND granted = %s",
            (CHECK_LOCK, granted),
        ).fetchone()
    return bool(row and row[0])


def lost_beside_shared(
    tmp_path: Path, sandbox: Any, base_url: str, journal: Any, b_count: int
) -> tuple[Path, Path, list[str]]:
    """Outbox A, holding DELIVERED-1, sent from a journal since lost (its key's window over:
    a send of it now delivers again); outbox B, of ``b_count`` invoices, sent from ``journal``
    (which trusts it new): a check of A beside B's sends."""
    outbox_a, outbox_b = tmp_path / "a", tmp_path / "b"
    outbox_a.mkdir()
    write_invoice(outbox_a, "DELIVERED-1")
    _, ids_b = _outbox(tmp_path, b_count, prefix="B")
    (tmp_path / "outbox").rename(outbox_b)
    code, out, err = run_cli(tmp_path / "lost.db", base_url, "send", str(outbox_a))
    assert code == 0, out + err
    sandbox.advance_clock(2 * 86400)
    code, output = run_send(outbox_b, journal, base_url, "--trust-new-journal")
    assert code == 0, output
    return outbox_a, outbox_b, ids_b


def test_no_host_sends_what_another_hosts_check_is_finding(pg_url, tmp_path: Path):
    """Host A's outbox was sent from a journal since lost: its check looks for each of its
    invoices at GoRoute, slowly. Host B sends from the same journal meanwhile, and its plan
    takes A's invoices too; the one delivered before the loss must not go out again."""
    sandbox = emulator()
    url = JournalURL(pg_url)
    with BackgroundServer(sandbox) as server:
        outbox_a, outbox_b, ids_b = lost_beside_shared(tmp_path, sandbox, server.base_url, url, 2)
        new_a = ["A-0", "A-1"]
        for invoice_id in new_a:
            write_invoice(outbox_a, invoice_id)
        write_invoice(outbox_b, "B-NEW")
        sandbox.set_faults(latency_ms=3000)  # A's search takes a while

        host_a = _worker(outbox_a, pg_url, server.base_url, lease=30.0)
        wait_for(lambda: _known(pg_url, "DELIVERED-1") and _turn_held(pg_url))
        host_b = _worker(outbox_b, pg_url, server.base_url, "--concurrency", "4", lease=30.0)
        out_a, err_a = host_a.communicate(timeout=120)
        out_b, err_b = host_b.communicate(timeout=120)
        stats = sandbox.stats()

    assert stats["per_invoice"]["DELIVERED-1"] == 1, err_a + err_b  # before the loss only
    assert_each_delivered_once(stats, [*ids_b, *new_a, "B-NEW"])
    with open_journal(url) as journal:
        held = journal.invoice("DELIVERED-1")
        assert held.hold is not None and journal.attempts("DELIVERED-1") == []
        assert standing_evidence(journal, held) is not None
    # Held for reconcile (4); a host whose plan the other holds finds pending work left (75).
    codes = {host_a.returncode, host_b.returncode}
    assert 4 in codes and codes <= {4, 75}, err_a + err_b


def _known(url: str, invoice_id: str) -> bool:
    with open_journal(JournalURL(url)) as journal:
        return any(invoice.invoice_id == invoice_id for invoice in journal.invoices())


def test_a_check_begun_and_never_ended_refuses_first_sends_until_one_ends(pg_url, tmp_path: Path):
    """helper-76: a check whose host died mid-search leaves no turn held, but its invoices
    unchecked: a worker that outlived it waits (a send since checks again), then sends."""
    outbox, ids = _outbox(tmp_path, 1)
    _scanned(pg_url, outbox)
    worker = _worker_journal(pg_url)
    base_url = "http://sandbox.test"
    with worker.transaction():
        worker.claim_invoices(ids, 1)
    with open_journal(JournalURL(pg_url)) as other:
        other.record_history_check(base_url, None, "lost", {"begun": True})  # then it died
        assert not other.history_checked(base_url)  # a check only begun is none
        other.record_history_check(base_url, None, "silence", {"seen_elsewhere": []})
        assert other.unfinished_history_check() is not None  # a silence probe ends none
        with pytest.raises(CheckUnderway):
            begin_attempt(worker, worker.run_id, claim_key(worker, ids[0], replay=False), "b")

        other.record_history_check(base_url, None, "lost", {"found": [], "to_send": 1})
        assert other.unfinished_history_check() is None and other.history_checked(base_url)
    begin_attempt(worker, worker.run_id, claim_key(worker, ids[0], replay=False), "b")
    worker.close()


def test_a_check_that_did_not_finish_leaves_no_invoice_to_another_outbox(tmp_path: Path):
    """One SQLite journal, two outboxes: outbox A's marker names a journal since lost, and its
    check runs out of --deadline; a send of outbox B, whose marker is fine, planned every
    pending invoice of the journal, A's too, and sent the one delivered before the loss."""
    sandbox = emulator()
    journal = tmp_path / "shared.db"
    with BackgroundServer(sandbox) as server:
        args = (tmp_path, sandbox, server.base_url, journal, 1)
        outbox_a, outbox_b, ids_b = lost_beside_shared(*args)
        sandbox.set_faults(latency_ms=8000)
        code, output = run_send(outbox_a, journal, server.base_url, "--deadline", "2")
        assert code == 75, output
        sandbox.set_faults(latency_ms=0)
        write_invoice(outbox_b, "B-NEW")
        code, output = run_send(outbox_b, journal, server.base_url)
        stats = sandbox.stats()
    assert code == 4, output  # held for reconcile: GoRoute holds it
    assert "did not finish" in output
    assert stats["per_invoice"]["DELIVERED-1"] == 1, output  # before the loss only
    assert_each_delivered_once(stats, [*ids_b, "B-NEW"])


def test_a_send_killed_between_its_scan_and_its_check_leaves_its_invoices_to_a_check(
    tmp_path: Path,
):
    """Outbox A's send is killed (-9) once its scan has put A's invoices in the shared
    journal, before its check began: a send of outbox B must check them, not send them."""
    sandbox = emulator()
    journal = tmp_path / "shared.db"
    with BackgroundServer(sandbox) as server:
        args = (tmp_path, sandbox, server.base_url, journal, 1)
        outbox_a, outbox_b, ids_b = lost_beside_shared(*args)
        sandbox.set_faults(latency_ms=8000)  # were the check reached, it would still search
        host_a = cli_process(journal, server.base_url, "send", str(outbox_a))
        wait_for(lambda: _scanned_in(journal, "DELIVERED-1"), timeout=60)
        host_a.kill()
        host_a.communicate(timeout=60)
        sandbox.set_faults(latency_ms=0)
        code, output = run_send(outbox_b, journal, server.base_url)
        stats = sandbox.stats()
    assert code == 4, output  # held for reconcile: GoRoute holds it
    assert stats["per_invoice"]["DELIVERED-1"] == 1, output  # before the loss only
    assert_each_delivered_once(stats, ids_b)


def _scanned_in(journal: Path, invoice_id: str) -> bool:
    with contextlib.closing(sqlite3.connect(f"file:{journal}?mode=ro", uri=True)) as conn:
        try:
            row = conn.execute(
                "SELECT 1 FROM invoices WHERE invoice_id = ?", (invoice_id,)
            ).fetchone()
        except sqlite3.OperationalError:  # not made yet, or locked a moment
            return False
    return row is not None


def test_a_worker_whose_first_sends_wait_for_an_unfinished_check_says_so(pg_url, tmp_path: Path):
    """helper-77: a worker waiting on another send's check that never ended ended "2 not
    started", exit 75, nothing naming the cause."""
    outbox, ids = _outbox(tmp_path, 20)
    sandbox = emulator()
    url = JournalURL(pg_url)
    with BackgroundServer(sandbox) as server:
        worker = send_process(
            outbox, url, server.base_url, "--trust-new-journal", "--rate", "60", "--deadline", "8"
        )
        wait_for(lambda: "accepted" in _states(pg_url).values(), timeout=60)
        with open_journal(url) as other:  # another host's check begins, and its host dies
            other.record_history_check(server.base_url, None, "lost", {"begun": True})
        _, err = worker.communicate(timeout=120)
    assert worker.returncode == 75, err
    assert "exit 75: first sends wait for the history check begun in a send at" in err, err
    assert "accepted" in _states(pg_url).values() and "pending" in _states(pg_url).values()


def test_a_long_run_waits_for_each_check_it_meets_not_only_the_first(
    pg_url, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The wait for another host's check counts from the first refusal since a claim found
    no check underway: a check met an hour into a run is waited for as the first was (it was
    never waited for at all, and the run's first sends were left for the next run)."""
    outbox, _ids = _outbox(tmp_path, 2)
    _scanned(pg_url, outbox)
    monkeypatch.setattr(workers, "TURN_WAIT", 0.3)  # the heartbeat's clock left alone
    journal: Any = open_journal(JournalURL(pg_url))
    run_id = journal.begin_run("send", {})
    with (
        open_journal(JournalURL(pg_url)) as checking,
        workers.Workers(
            journal, run_id, order=SendOrder.due, account="acct", lease=30.0, most=10
        ) as work,
    ):
        turn = CheckTurn(checking)
        turn.take()
        assert work.may_wait_for_check()
        time.sleep(0.4)
        assert not work.may_wait_for_check()  # the first check waited for long enough
        work.next_batch(1)  # a claim while the check is underway: the wait goes on counting
        assert not work.may_wait_for_check()
        turn.give_back()
        work.next_batch(1)  # a claim with no check underway: a next one is waited for anew
        turn.take()
        assert work.may_wait_for_check()
        turn.give_back()
    journal.close()

"""Several send workers on one PostgreSQL journal: claims, leases, the guard, the shared budget.

Real PostgreSQL (the ``pg_server`` fixtures), the real CLI in subprocesses where processes
matter (kills, pauses), the emulator over real HTTP (``BackgroundServer``).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest
from processkit import run_cli, run_send, send_process
from sendkit import assert_each_delivered_once, emulator, send, settings_for
from ublfactory import write_invoice

from invoicectl.errors import InvoiceBusy, JournalLocked
from invoicectl.goroute.transactions import Transaction
from invoicectl.journal import locked_journal, open_journal
from invoicectl.journal.pg_workers import ClaimLost, Heartbeat
from invoicectl.journal.records import InvoiceState, SendOrder
from invoicectl.lifecycle.evidence import FoundMeanwhile, note_evidence, standing_evidence
from invoicectl.lifecycle.holds import hold, hold_with_evidence
from invoicectl.lifecycle.sending import begin_attempt, claim_key
from invoicectl.locations import JournalURL
from invoicectl.sandbox import BackgroundServer
from invoicectl.scan.ingest import scanning
from invoicectl.send.history import HELD_BY
from invoicectl.send.history_loss import still_as_read
from invoicectl.send.history_texts import found_reason
from invoicectl.send.workers import Workers, as_worker

# ---- helpers -----------------------------------------------------------------------------


def _outbox(tmp_path: Path, count: int, prefix: str = "INV") -> tuple[Path, list[str]]:
    outbox = tmp_path / "outbox"
    outbox.mkdir(exist_ok=True)
    ids = [f"{prefix}-{n:04d}" for n in range(count)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    return outbox, ids


def _scanned(url: str, outbox: Path) -> None:
    with open_journal(JournalURL(url)) as journal:
        scanning(outbox)(journal)


def _worker(
    outbox: Path, url: str, base_url: str, *args: str, lease: float = 1.5
) -> subprocess.Popen[str]:
    """``invoicectl send`` as a worker with a short lease (a dead one is taken over soon)."""
    os.environ["INVOICECTL_WORKER_LEASE"] = str(lease)
    try:
        if "--rate" not in args:
            args = ("--rate", "6000", *args)
        return send_process(outbox, url, base_url, "--quiet", *args)  # type: ignore[arg-type]
    finally:
        del os.environ["INVOICECTL_WORKER_LEASE"]


def _states(url: str) -> dict[str, str]:
    with open_journal(JournalURL(url)) as journal:
        return {invoice.invoice_id: str(invoice.state) for invoice in journal.invoices()}


def _keys_per_invoice(url: str) -> dict[str, set[str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT invoice_id, idempotency_key FROM attempts WHERE outcome IS DISTINCT FROM"
            " 'not_sent'"
        ).fetchall()
    keys: dict[str, set[str]] = {}
    for invoice_id, key in rows:
        keys.setdefault(invoice_id, set()).add(key)
    return keys


def _runs_that_overlapped(url: str) -> int:
    """How many send runs made requests while another run was making them (from the attempt
    rows: each run's first and last request start)."""
    with psycopg.connect(url) as conn:
        spans = conn.execute(
            "SELECT run_id, min(started_at), max(started_at) FROM attempts GROUP BY run_id"
        ).fetchall()
    return sum(
        any(b != run and b_first <= last and first <= b_last for b, b_first, b_last in spans)
        for run, first, last in spans
    )


def _drain(outbox: Path, url: str, base_url: str, ids: list[str], rounds: int = 8) -> None:
    """Plain sends, one after another, until every invoice is accepted (a lost answer is
    replayed by the next run, as on SQLite)."""
    for _ in range(rounds):
        if all(state == "accepted" for state in _states(url).values()) and len(_states(url)) == len(
            ids
        ):
            return
        process = _worker(outbox, url, base_url)
        process.communicate(timeout=120)
    raise AssertionError(f"not all accepted: {_states(url)}")


# ---- the locks ---------------------------------------------------------------------------


def _refused(location: Any, command: str, *, shared: bool = False) -> str:
    """The refusal ``locked_journal`` gives ``command`` now (it fails if there is none)."""
    with pytest.raises(JournalLocked) as refusal:
        locked_journal(location, command, shared=shared).__enter__()
    return str(refusal.value)


def test_sqlite_keeps_one_run_at_a_time_even_for_send(tmp_path):
    path = tmp_path / "journal.db"
    with locked_journal(path, "send", shared=True, create=True):
        assert "another invoicectl send holds the journal" in _refused(path, "send", shared=True)


def test_postgresql_send_workers_share_the_journal_and_other_commands_wait(pg_url):
    url = JournalURL(pg_url)
    with locked_journal(url, "send", shared=True), locked_journal(url, "send", shared=True):
        assert "send workers, which share it" in _refused(url, "scan")
    with locked_journal(url, "scan"):
        assert "in use" in _refused(url, "send", shared=True)


# ---- claims and the guard (in process: two journals, two "workers") ---------------------


@pytest.fixture
def two_workers(pg_url: str, tmp_path: Path) -> Iterator[Callable[[float], Any]]:
    """Two journals on one database, each registered as a worker: ``a`` with the lease asked
    for and no heartbeat (it is "paused" once the lease has passed), ``b`` with 30 s."""
    opened: list[Any] = []

    def make(lease: float) -> tuple[Any, Any, list[str]]:
        outbox, ids = _outbox(tmp_path, 4)
        _scanned(pg_url, outbox)
        a: Any = open_journal(JournalURL(pg_url))
        b: Any = open_journal(JournalURL(pg_url))
        opened.extend((a, b))
        a.run_id = a.begin_run("send", {})
        a.become_worker(a.run_id, lease)
        b.run_id = b.begin_run("send", {})
        b.become_worker(b.run_id, 30.0)
        return a, b, ids

    yield make
    for journal in opened:
        journal.close()


def test_claims_never_overlap_and_a_dead_workers_claims_are_taken_over(two_workers):
    a, b, ids = two_workers(0.6)
    with a.transaction():
        assert a.claim_invoices(ids, 2) == ids[:2]
    with b.transaction():
        assert b.claim_invoices(ids, 10) == ids[2:]  # what a live worker holds is skipped
    time.sleep(0.8)  # a's lease runs out (no heartbeat)
    with b.transaction():
        assert b.claim_invoices(ids, 10) == ids[:2]  # a dead worker's claims are taken over


def test_the_guard_refuses_an_attempt_once_another_worker_took_the_invoice_over(two_workers):
    """The replay case: the key is in use, so only the attempt row's own check (not the
    invoice's write) stands between a lost worker and a second request."""
    a, b, ids = two_workers(0.6)
    invoice_id = ids[0]
    with a.transaction():
        a.claim_invoices([invoice_id], 1)
    item = claim_key(a, invoice_id, replay=False)
    begin_attempt(a, a.run_id, item, "body")  # the key is now in use
    time.sleep(0.8)  # a is paused past its lease
    with b.transaction():
        assert b.claim_invoices([invoice_id], 1) == [invoice_id]
    replay = claim_key(a, invoice_id, replay=True)
    with pytest.raises(ClaimLost):
        begin_attempt(a, a.run_id, replay, "body")
    assert len(a.attempts(invoice_id)) == 1  # none more


def test_the_guard_refuses_a_worker_whose_lease_ran_out_even_before_a_takeover(two_workers):
    a, _b, ids = two_workers(0.6)
    with a.transaction():
        a.claim_invoices([ids[1]], 1)
    time.sleep(0.8)
    with pytest.raises(ClaimLost):
        begin_attempt(a, a.run_id, claim_key(a, ids[1], replay=False), "body")
    assert a.attempts(ids[1]) == []


def test_an_operator_cannot_change_an_invoice_a_live_worker_holds(two_workers):
    _a, b, ids = two_workers(30.0)
    with b.transaction():
        b.claim_invoices([ids[0]], 1)
    with open_journal(b.path) as operator:
        with pytest.raises(InvoiceBusy, match="being sent by a worker"):
            hold(operator, ids[0], "checking", by="clerk")
        assert hold(operator, ids[1], "checking", by="clerk").done  # not held by a worker


def test_a_bulk_hold_meeting_an_invoice_a_worker_holds_says_what_it_held(two_workers):
    """helper-81: `hold --state pending --yes` held three invoices, committed one by one,
    then met the one a worker held: exit 1, "nothing was changed", and not a word of the three
    it had held (a bulk release the same: released invoices going out, the operator told
    nothing happened). Now the busy one is refused in its own line (exit 2), the rest said."""
    _a, b, ids = two_workers(30.0)
    with b.transaction():
        b.claim_invoices([ids[-1]], 1)

    code, stdout, stderr = run_cli(
        b.path, "http://127.0.0.1:9", "hold", "--state", "pending", "--reason", "freeze", "--yes"
    )

    assert code == 2, (stdout, stderr)
    with open_journal(b.path) as journal:
        held = sorted(invoice.invoice_id for invoice in journal.invoices() if invoice.hold)
    assert held == ids[:-1]
    said = [line.split(" ", 1)[1].split(":")[0] for line in stdout.splitlines() if line.strip()]
    assert said == ids, stdout  # each line stamped with its time: not a terminal
    assert f"{ids[-1]}: it is being sent by a worker on" in stdout


def test_unanswered_attempts_of_a_live_worker_are_in_flight_not_abandoned(two_workers):
    a, b, ids = two_workers(0.6)
    with a.transaction():
        a.claim_invoices([ids[0]], 1)
    begin_attempt(a, a.run_id, claim_key(a, ids[0], replay=False), "body")
    assert b.unanswered_attempts() == []
    time.sleep(0.8)  # now a is dead: its request is unknown, to be replayed
    assert [attempt.invoice_id for attempt in b.unanswered_attempts()] == [ids[0]]


def test_a_heartbeat_keeps_the_lease_and_a_stopped_one_loses_it(two_workers):
    a, b, ids = two_workers(0.6)
    beat = Heartbeat(a.path.connection_url(), a.worker_id, 0.6).start()
    with a.transaction():
        a.claim_invoices([ids[0]], 1)
    time.sleep(1.5)  # more than two leases: renewed meanwhile
    with b.transaction():
        assert b.claim_invoices([ids[0]], 1) == []
    assert beat.alive
    beat.stop()
    time.sleep(0.8)
    assert not beat.alive
    with b.transaction():
        assert b.claim_invoices([ids[0]], 1) == [ids[0]]


# ---- the shared budget -------------------------------------------------------------------


def test_slots_from_several_processes_keep_the_spacing_and_the_window(pg_url):
    """Three connections reserving at once: slots one interval apart on the server's clock,
    and any rate + 1 of them at least the span apart (no 60 s window over the limit)."""
    rate, span = 20, 6.1  # a short span: the arithmetic is the same as 61 s
    interval = span / rate
    open_journal(JournalURL(pg_url)).close()
    slots: list[float] = []
    lock = threading.Lock()

    def reserve() -> None:
        with open_journal(JournalURL(pg_url)) as journal:
            for _ in range(15):
                wait = journal.reserve_slot("acct", interval, span, rate)
                with lock:
                    slots.append(wait + time.time())
                with journal.db.conn.raw.cursor() as cursor:
                    cursor.execute("SELECT 1")

    threads = [threading.Thread(target=reserve) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with psycopg.connect(pg_url) as conn:
        stored = sorted(s for (s,) in conn.execute("SELECT slot FROM rate_starts").fetchall())
    assert len(stored) == 45
    gaps = [later - earlier for earlier, later in zip(stored, stored[1:], strict=False)]
    assert min(gaps) >= interval - 1e-6
    assert all(stored[n + rate] - stored[n] >= span - 1e-6 for n in range(len(stored) - rate))


# ---- processes: kills, pauses, faults ----------------------------------------------------


@pytest.mark.slow
def test_a_worker_killed_while_holding_claims_its_invoices_finish_through_the_others(
    pg_url, tmp_path
):
    outbox, ids = _outbox(tmp_path, 30)
    _scanned(pg_url, outbox)
    sandbox = emulator(latency_ms=800.0)
    with BackgroundServer(sandbox) as server:
        doomed = _worker(outbox, pg_url, server.base_url, "--concurrency", "5", lease=1.5)
        # Wait until it has requests in flight (attempt rows without an answer).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with psycopg.connect(pg_url) as conn:
                (open_rows,) = conn.execute(
                    "SELECT count(*) FROM attempts WHERE outcome IS NULL"
                ).fetchone()
            if open_rows >= 3:
                break
            time.sleep(0.05)
        doomed.send_signal(signal.SIGKILL)
        doomed.communicate(timeout=30)
        with psycopg.connect(pg_url) as conn:
            in_flight = {
                row[0]: row[1]
                for row in conn.execute(
                    "SELECT invoice_id, idempotency_key FROM attempts WHERE outcome IS NULL"
                )
            }
        assert in_flight
        sandbox.set_faults(latency_ms=0.0)
        others = [_worker(outbox, pg_url, server.base_url, "--concurrency", "4") for _ in range(2)]
        for process in others:
            process.communicate(timeout=120)
        _drain(outbox, pg_url, server.base_url, ids)
        stats = sandbox.stats()
    assert_each_delivered_once(stats, ids)
    keys = _keys_per_invoice(pg_url)
    for invoice_id, key in in_flight.items():
        assert keys[invoice_id] == {key}  # replayed under the same key, never a new one


@pytest.mark.slow
def test_three_workers_with_kill_storms_lost_answers_and_5xx_deliver_each_once(pg_url, tmp_path):
    limit = 3000
    outbox, ids = _outbox(tmp_path, 240)
    _scanned(pg_url, outbox)
    sandbox = emulator(
        rate_per_minute=limit, error_rate=0.05, drop_rate=0.05, latency_ms=20.0, seed=11
    )
    rng = random.Random(5)
    args = ("--rate", str(limit), "--concurrency", "6")
    with BackgroundServer(sandbox) as server:
        workers = [_worker(outbox, pg_url, server.base_url, *args) for _ in range(3)]
        kills = 0
        storm_until = time.monotonic() + 6
        while time.monotonic() < storm_until:
            time.sleep(rng.uniform(0.2, 0.7))
            victim = rng.randrange(3)
            workers[victim].send_signal(signal.SIGKILL)
            workers[victim].communicate(timeout=30)
            kills += 1
            workers[victim] = _worker(outbox, pg_url, server.base_url, *args)
        for process in workers:
            process.communicate(timeout=180)
        sandbox.set_faults(error_rate=0.0, drop_rate=0.0)
        _drain(outbox, pg_url, server.base_url, ids)
        stats = sandbox.stats()
    assert kills >= 5
    assert _runs_that_overlapped(pg_url) >= 2  # they really ran at once (not one at a time)
    assert_each_delivered_once(stats, ids)
    assert stats["max_in_60s"] <= limit
    assert stats["rate_limited"] == 0
    for invoice_id, keys in _keys_per_invoice(pg_url).items():
        assert len(keys) == 1, (invoice_id, keys)  # every resend under the one key
    assert set(_states(pg_url).values()) == {str(InvoiceState.accepted)}


@pytest.mark.slow
def test_a_paused_worker_sends_nothing_more_for_what_another_took_over(pg_url, tmp_path):
    """SIGSTOP past the lease, another worker finishes the lot, SIGCONT: the paused one's
    requests after waking are refused by the guard; nothing is delivered twice and no
    invoice gets a second key."""
    outbox, ids = _outbox(tmp_path, 40)
    _scanned(pg_url, outbox)
    sandbox = emulator(latency_ms=300.0)
    with BackgroundServer(sandbox) as server:
        paused = _worker(outbox, pg_url, server.base_url, "--concurrency", "2", lease=2.0)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sandbox.stats()["sends_received"] < 2:
            time.sleep(0.02)
        paused.send_signal(signal.SIGSTOP)
        with psycopg.connect(pg_url) as conn:
            (before,) = conn.execute("SELECT count(*) FROM attempts").fetchone()
        time.sleep(2.5)  # past its lease
        sandbox.set_faults(latency_ms=0.0)
        other = _worker(outbox, pg_url, server.base_url, "--concurrency", "8", lease=30.0)
        other.communicate(timeout=120)
        paused.send_signal(signal.SIGCONT)
        paused.communicate(timeout=60)
        _drain(outbox, pg_url, server.base_url, ids)
        stats = sandbox.stats()
        with psycopg.connect(pg_url) as conn:
            run_of_paused = conn.execute("SELECT min(run_id) FROM attempts").fetchone()[0]
            (after_pause,) = conn.execute(
                "SELECT count(*) FROM attempts WHERE run_id = %s", (run_of_paused,)
            ).fetchone()
    assert after_pause <= before  # not one attempt row from the paused worker after waking
    assert_each_delivered_once(stats, ids)


def test_a_scan_leaves_a_changed_invoice_a_live_worker_holds_for_the_next_scan(
    two_workers, tmp_path: Path
):
    """Its file edited while another worker held it: every other worker's cron run failed at
    its scan, exit 1, for as long as that run lasted (found by a review of several workers)."""
    _a, b, ids = two_workers(30.0)
    with b.transaction():
        b.claim_invoices([ids[0]], 1)
    write_invoice(tmp_path / "outbox", ids[0], amount="999.00")
    write_invoice(tmp_path / "outbox", ids[1], amount="999.00")
    with open_journal(b.path) as other:
        report = scanning(tmp_path / "outbox")(other)
        assert report.busy == [ids[0]]
        assert ids[1] in report.changed  # the rest is settled as ever
        assert "the next scan settles it" in "\n".join(report.summary_lines())


def test_every_session_is_ended_when_it_sits_idle_in_a_transaction(pg_url: str):
    """A scan frozen inside its transaction before it became a worker held the write lock
    as long as it stayed frozen, and every worker with it (found by a review): each session
    now has the limit a worker has, from its first statement."""
    with open_journal(JournalURL(pg_url)) as journal:
        (limit,) = journal.db.execute("SHOW idle_in_transaction_session_timeout").fetchone()
    assert limit == "15s"


def test_a_scan_leaves_a_renumbered_file_a_live_worker_holds_for_the_next_scan(
    two_workers, tmp_path: Path
):
    """helper-65: the file of an invoice another host was sending now held another number:
    holding the invoice it used to hold met that host's claim, and the whole scan failed,
    exit 1, nothing of the outbox recorded."""
    _a, b, ids = two_workers(30.0)
    with b.transaction():
        b.claim_invoices([ids[0]], 1)
    write_invoice(tmp_path / "outbox", "RENUMBERED-1", name=f"{ids[0]}.xml")
    write_invoice(tmp_path / "outbox", "NEW-1")
    with open_journal(b.path) as other:
        report = scanning(tmp_path / "outbox")(other)
        assert report.busy == [ids[0]]
        assert sorted(report.new) == ["NEW-1", "RENUMBERED-1"]  # the rest is settled as ever
        # helper-66: the invoice the file held goes out now; its new number waits for a person
        renumbered, new = other.invoice("RENUMBERED-1"), other.invoice("NEW-1")
        assert (renumbered.hold, new.hold) == ("held", None)
        assert f"held invoice {ids[0]}, sent (being sent)" in renumbered.hold_reason


def test_a_history_check_leaves_what_another_hosts_send_took_up_since_it_read(
    two_workers, tmp_path: Path
):
    """helper-65: two hosts' first sends on one new journal. Host A read its invoices before
    its search; host B claimed and sent them meanwhile, and A took B's transactions for
    deliveries made elsewhere: its hold met B's claim (exit 1), or it noted false evidence
    against an invoice B had sent."""
    _a, b, ids = two_workers(30.0)
    with open_journal(b.path) as checking:  # A's check, before its run becomes a worker
        read_before = checking.invoice(ids[0])
        with b.transaction():
            b.claim_invoices([ids[0]], 1)
        begin_attempt(b, b.run_id, claim_key(b, ids[0], replay=False), "body")  # B's request

        hold_with_evidence(checking, read_before, "GoRoute holds it", HELD_BY)  # B holds it

        now = checking.invoice(ids[0])
        assert now.hold is None and standing_evidence(checking, now) is None  # nothing false
        assert still_as_read(checking, read_before) is None  # no finding of A's any more
        assert still_as_read(checking, checking.invoice(ids[1])) == checking.invoice(ids[1])


def test_what_another_hosts_check_finds_in_a_workers_claim_is_held_not_sent(
    two_workers, tmp_path: Path
):
    """helper-74: host B claimed an invoice before host A's history check found it at
    GoRoute (delivered before the journal was lost, say); A cannot hold what B holds, and B,
    whose own check came before the invoice was scanned, sent it: delivered twice. Now A
    notes the evidence, and B's first request meets it in its write transaction."""
    _a, b, ids = two_workers(30.0)
    with open_journal(b.path) as checking:
        with b.transaction():
            b.claim_invoices([ids[0]], 1)
        found = "GoRoute holds it: txn-elsewhere"
        hold_with_evidence(checking, checking.invoice(ids[0]), found, HELD_BY)  # B holds it

        with pytest.raises(FoundMeanwhile) as refused:
            begin_attempt(b, b.run_id, claim_key(b, ids[0], replay=False), "body")
        assert refused.value.evidence == found
        assert b.attempts(ids[0]) == [] and b.invoice(ids[0]).key_first_used_at is None


def test_a_send_of_several_hosts_holds_a_claimed_invoice_found_meanwhile(pg_url, tmp_path):
    """The worker that meets evidence at its first request holds the invoice for a person
    and sends the rest; nothing is sent for it."""
    outbox, ids = _outbox(tmp_path, 3)
    _scanned(pg_url, outbox)
    with open_journal(JournalURL(pg_url)) as journal:
        note_evidence(journal, journal.invoice(ids[1]), "GoRoute holds it: txn-elsewhere")
    sandbox = emulator()
    with BackgroundServer(sandbox) as server:
        finished = _worker(outbox, pg_url, server.base_url, "--trust-new-journal", "--json")
        out, _err = finished.communicate(timeout=60)
        stats = sandbox.stats()
    summary = json.loads(out)
    assert summary["held_for_reconcile"] == [ids[1]] and summary["held_at_replay"] == []
    assert summary["not_started"] == 0 and summary["exit_code"] == finished.returncode == 4
    with open_journal(JournalURL(pg_url)) as journal:
        held = journal.invoice(ids[1])
        assert held.hold is not None and "txn-elsewhere" in (held.hold_reason or "")
        assert journal.attempts(ids[1]) == []
        assert [journal.invoice(i).state for i in (ids[0], ids[2])] == [InvoiceState.accepted] * 2
    assert_each_delivered_once(stats, [ids[0], ids[2]])
    assert ids[1] not in stats["per_invoice"]


def test_what_a_worker_holds_as_found_meanwhile_reconcile_judges_and_adopts(pg_url, tmp_path):
    """helper-75: the hold a worker places for what another host's check found keeps the
    transaction found, as the check's own hold does: its reason sends the operator to
    `reconcile`, which judges only a held never-sent invoice with that transaction."""
    outbox, ids = _outbox(tmp_path, 3)
    sandbox = emulator()
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / f"{ids[1]}.xml").write_bytes((outbox / f"{ids[1]}.xml").read_bytes())
    send(settings_for(tmp_path / "earlier.db"), earlier, sandbox.transport())  # before the loss
    (txn,) = [t for t in sandbox.state.book.all() if t.document_id == ids[1]]
    _scanned(pg_url, outbox)
    with open_journal(JournalURL(pg_url)) as journal:
        invoice = journal.invoice(ids[1])
        seen = Transaction(
            transaction_id=txn.id,
            invoice_number=ids[1],
            document_type=invoice.document_type,
            receiver=invoice.receiver or invoice.receiver_id,
            status="delivered",
        )
        reason, existing = found_reason(invoice, (seen,))
        assert existing == txn.id  # what the check's own hold would keep
        note_evidence(journal, invoice, reason)  # what the check notes when a worker holds it
    with BackgroundServer(sandbox) as server:
        finished = _worker(outbox, pg_url, server.base_url, "--trust-new-journal")
        finished.communicate(timeout=60)
        with open_journal(JournalURL(pg_url)) as journal:
            held = journal.invoice(ids[1])
            assert held.hold is not None and held.existing_transaction_id == txn.id
        sandbox.advance_clock(3600)  # every delivery final
        code, out, err = run_cli(JournalURL(pg_url), server.base_url, "reconcile", "--apply")
    assert code == 0, out + err
    assert _states(pg_url) == dict.fromkeys(ids, "accepted")
    assert_each_delivered_once(sandbox.stats(), ids)


def test_a_renumbered_files_new_number_a_live_worker_holds_is_busy_not_a_failed_scan(
    two_workers, tmp_path: Path
):
    """helper-66: holding the new number of a file whose invoice went out unanswered met
    another host's claim on that number, and the whole scan failed, nothing recorded."""
    _a, b, ids = two_workers(30.0)
    outbox = tmp_path / "outbox"
    with b.transaction():
        b.claim_invoices([ids[0]], 1)
    begin_attempt(b, b.run_id, claim_key(b, ids[0], replay=False), "body")  # out, unanswered
    write_invoice(outbox, "RENUM-0", name="elsewhere.xml")
    with open_journal(b.path) as other:
        scanning(outbox)(other)
    with b.transaction():
        b.claim_invoices(["RENUM-0"], 1)  # another host sends it now
    (outbox / "elsewhere.xml").unlink()
    write_invoice(outbox, "RENUM-0", name=f"{ids[0]}.xml")  # the file's number corrected

    with open_journal(b.path) as other:
        report = scanning(outbox)(other)

    assert "RENUM-0" in report.busy


def test_a_claim_takes_a_share_of_the_plan_but_no_more_than_10_s_of_its_rate(pg_url, tmp_path):
    """A sixteenth of the plan, so that a send does not plan again for every few invoices;
    never more than its rate limit sends in 10 s, so that an operator's hold waits no longer
    (helper-74: 625 invoices a claim, 12 minutes at 100 a minute); its concurrency if more."""
    outbox, _ids = _outbox(tmp_path, 400)
    _scanned(pg_url, outbox)
    with open_journal(JournalURL(pg_url)) as journal:
        run_id = journal.begin_run("send", {}, base_url="http://sandbox.test")

        def claimed(most: int, concurrency: int) -> int:
            with Workers(
                journal, run_id, order=SendOrder.due, account="a", lease=30.0, most=most
            ) as work:
                return len(work.next_batch(concurrency))

        assert claimed(10**9, 2) == 25
        assert claimed(10, 2) == 10
        assert claimed(10, 40) == 40
    settings = SimpleNamespace(api_key=None)
    options = SimpleNamespace(order=SendOrder.due, rate_per_minute=60)
    with (
        open_journal(JournalURL(pg_url)) as journal,
        as_worker(journal, settings, options, run_id=1) as work,
    ):
        assert work is not None and work.most == 10  # 60 a minute: 10 in 10 s


def test_a_send_that_finds_its_invoices_claimed_says_by_whom_and_until_when(pg_url, tmp_path: Path):
    """A worker killed a moment ago holds its claims until its lease runs out: the next send
    sends none of them, and its exit line says who holds them and for how long, not only
    "3 not started" (an operator rerunning a send after a crash saw no reason). Once the
    lease has run out, the next send takes them over."""
    outbox, ids = _outbox(tmp_path, 3)
    _scanned(pg_url, outbox)
    url = JournalURL(pg_url)
    sandbox = emulator()
    with open_journal(url) as stalled, BackgroundServer(sandbox) as server:
        stalled.become_worker(stalled.begin_run("send", {}), 30.0)
        assert stalled.claim_invoices(ids, len(ids)) == ids
        code, output = run_send(outbox, url, server.base_url, "--trust-new-journal")
        assert code == 75, output
        holder = f"pid {os.getpid()} on {socket.gethostname()}"
        assert f"3 claimed by another worker, which sends them ({holder})" in output
        left = re.search(r"its lease has run out \(in (\d+) s at most\)", output)
        assert left is not None and 20 <= int(left[1]) <= 30, output
        assert sandbox.stats()["per_invoice"] == {}
        with psycopg.connect(pg_url) as conn:
            conn.execute("UPDATE workers SET lease_until = 0")  # its lease has run out
        code, output = run_send(outbox, url, server.base_url)
        stats = sandbox.stats()
    assert code == 0, output
    assert "claimed by" not in output
    assert_each_delivered_once(stats, ids)


def test_what_a_live_worker_sends_is_claimed_not_waiting_nor_unanswered(pg_url, tmp_path: Path):
    """helper-98: a worker that finished its share while a live peer still sent said the
    peer's invoices were "waiting to be sent" and its request in flight "unanswered, replayed
    by the next send"; so did ``status``, right after a worker's ``kill -9``, until its lease
    ran out. They are claimed by a live worker, which sends them: said so, whoever holds them."""
    outbox, ids = _outbox(tmp_path, 4)
    _scanned(pg_url, outbox)
    url = JournalURL(pg_url)
    sandbox = emulator()
    with open_journal(url) as peer, BackgroundServer(sandbox) as server:
        run_id = peer.begin_run("send", {})
        peer.become_worker(run_id, 30.0)
        assert peer.claim_invoices(ids[:2], 2) == ids[:2]
        begin_attempt(peer, run_id, claim_key(peer, ids[0], replay=False), "body")
        code, output = run_send(outbox, url, server.base_url, "--trust-new-journal")
        status_code, status, status_err = run_cli(url, server.base_url, "status")
        sent = sandbox.stats()["per_invoice"]
    assert sorted(sent) == ids[2:], output  # the rest, once each
    for said, exit_code in ((output, code), (status + status_err, status_code)):
        assert exit_code == 75, said  # the journal's work is not done: the peer still sends
        assert "2 claimed by another worker, which sends them" in said, said
        assert "unanswered" not in said and "waiting to be sent" not in said, said


def test_invoices_two_stalled_workers_hold_are_named_with_both(pg_url, tmp_path: Path):
    """Several holders: each named, and the longest lease left; an accepted invoice one of
    them still holds a claim on is nothing left to send, so not counted."""
    outbox, ids = _outbox(tmp_path, 4)
    _scanned(pg_url, outbox)
    url = JournalURL(pg_url)
    with open_journal(url) as first, open_journal(url) as second, open_journal(url) as third:
        first.become_worker(first.begin_run("send", {}), 20.0)
        second.become_worker(second.begin_run("send", {}), 40.0)
        assert first.claim_invoices(ids[:2], 2) == ids[:2]
        assert second.claim_invoices(ids[2:], 2) == ids[2:]
        with psycopg.connect(pg_url) as conn:
            conn.execute("UPDATE invoices SET state = 'accepted' WHERE invoice_id = %s", (ids[3],))
        claims = third.claimed_elsewhere()
    assert claims is not None and claims.invoice_ids == {*ids[:3]}
    said = claims.who
    holder = f"pid {os.getpid()} on {socket.gethostname()}"
    assert said.startswith(
        f"3 claimed by 2 other workers, which send them ({holder}, {holder}); if one has "
        "stopped, the next send takes its claims over once its lease has run out (in "
    ), said
    assert 30 < int(said.rsplit("(in ", 1)[1].split()[0]) <= 40, said

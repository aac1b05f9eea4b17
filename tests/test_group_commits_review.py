"""The grouped commits meeting the stop machinery, whole-number REALs and odd failures.

Found by an independent review of send/commits.py; each of these but the ones that pin sound
behaviour failed on the first version of the grouped commits.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest
from backends import chain_findings, witness_rows
from sendkit import emulator, send, settings_for
from ublfactory import write_invoice

from invoicectl.errors import JournalError
from invoicectl.goroute.outcomes import RateLimited, Transient
from invoicectl.journal import open_journal
from invoicectl.lifecycle.sending import answer_of
from invoicectl.locations import Location
from invoicectl.runs import make_client
from invoicectl.scan.ingest import scan_directory
from invoicectl.send.options import SendOptions
from invoicectl.send.sender import Sender
from invoicectl.send.stopping import Stopping


def test_a_429_with_whole_seconds_retry_after_keeps_the_chain_verifiable(
    outbox: Path, journal_at: Location
):
    """Retry-After: 1 (the usual form) on a 429: the attempt row's event must be the row."""
    journal_path = journal_at
    for number in range(12):
        write_invoice(outbox, f"INV-{number:04d}")
    sandbox = emulator(max_concurrent=2, latency_ms=150)  # answers 429, Retry-After: 1

    _report, summary = send(
        settings_for(journal_path),
        outbox,
        sandbox.transport(),
        concurrency=10,
        rate_per_minute=6000,
    )

    assert summary.rate_limited_answers > 0
    ((rows,),) = witness_rows(
        journal_path, "SELECT count(*) FROM attempts WHERE retry_after IS NOT NULL"
    )
    assert rows > 0
    assert chain_findings(journal_path) == []


def test_finish_attempt_event_is_the_row_for_whole_number_reals(
    tmp_path: Path, journal_at: Location
):
    """The same at the journal level: duration 0.0 (``Transient(sent=False)``'s default, the
    request that could not even be built) and a Retry-After of 30 s: the chain's event must
    hold 0.0 / 30.0, as SELECT reads them. Only the row-against-event findings are asked."""
    path = journal_at
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    write_invoice(outbox, "INV-1")
    with open_journal(path) as journal:
        scan_directory(journal, outbox)
        sha256 = journal.invoice("INV-1").current_sha256
        run_id = journal.begin_run("send", {})
        for answer in (
            answer_of(Transient(reason="refused", sent=False)),
            answer_of(RateLimited(retry_after=30.0, duration=2.0)),
        ):
            attempt = journal.begin_attempt(
                run_id, "INV-1", sha256, "invoice-INV-1", "b" * 64, started_at=journal.now()
            )
            journal.finish_attempt(attempt, answer)
        stored = witness_rows(path, "SELECT duration, retry_after FROM attempts ORDER BY id")
    assert stored == [(0.0, None), (2.0, 30.0)]
    assert all(isinstance(value, float) for value in (stored[0][0], *stored[1]))
    row_findings = [
        line
        for line in chain_findings(path)
        if "changed outside" in line or "its last event" in line or "not as its last" in line
    ]
    assert row_findings == []


# ---- the stop machinery meeting a group commit ------------------------------------------


def _drive(journal_path: Location, outbox: Path, transport, on_batch, concurrency: int):
    """A Sender on a real journal; ``on_batch(n, loop, stopping, main_task)`` runs inside
    each ``write_batch`` (n = 1, 2, ...), before its writes."""
    stopping = Stopping(grace=30.0)
    calls = {"n": 0}
    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
        run_id = journal.begin_run("send", {})
        original = journal.write_batch

        def write_batch(writes):
            calls["n"] += 1
            on_batch(calls["n"], asyncio.get_running_loop(), stopping, main_task[0])
            return original(writes)

        journal.write_batch = write_batch  # type: ignore[method-assign]
        main_task: list[asyncio.Task] = []

        async def main():
            main_task.append(asyncio.current_task())
            async with make_client(settings_for(journal_path), transport) as client:
                sender = Sender(
                    journal, client,
                    SendOptions(rate_per_minute=100_000_000, check_receivers=False,
                                concurrency=concurrency),
                    run_id, stopping=stopping,
                )  # fmt: skip
                return await sender.run()

        try:
            summary = asyncio.run(asyncio.wait_for(main(), timeout=30))
        except asyncio.CancelledError:
            summary = None
        states = {row.invoice_id: row.state for row in journal.invoices()}
        attempts = {
            i: [(a.outcome, a.idempotency_key) for a in journal.attempts(i)] for i in states
        }
        keys = {row.invoice_id: row.idempotency_key for row in journal.invoices()}
    return summary, states, attempts, keys


def test_abandoned_while_attempt_rows_commit_nothing_leaves_and_keys_come_back(
    outbox: Path, journal_at: Location
):
    """(sound) Abandon (a second signal) lands in the pass that commits 3 attempt rows."""
    ids = [f"A-{n}" for n in range(3)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    sandbox = emulator()

    def on_batch(n, loop, stopping, main):
        if n == 1:  # the first group: the three attempt rows
            loop.call_soon(stopping.stop, "SIGINT")
            loop.call_soon(stopping.stop, "SIGINT")

    summary, states, attempts, keys = _drive(
        journal_at, outbox, sandbox.transport(), on_batch, concurrency=3
    )
    assert sandbox.stats()["sends_received"] == 0
    assert states == dict.fromkeys(ids, "pending")
    assert keys == dict.fromkeys(ids)  # given back: no request carried them
    assert all(rows == [("not_sent", f"invoice-{i}")] for i, rows in attempts.items())
    assert chain_findings(journal_at) == []
    # cosmetic: the summary says these never-sent requests were "abandoned in flight"
    assert summary.abandoned == 0, f"{summary.abandoned} requests reported abandoned in flight"


def test_abandoned_while_answers_commit_the_answers_stand(outbox: Path, journal_at: Location):
    """(sound) Abandon lands in the pass that commits 3 answers: each is recorded."""
    ids = [f"B-{n}" for n in range(3)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    sandbox = emulator()

    def on_batch(n, loop, stopping, main):
        if n == 2:  # the second group: the three answers (emulator answers at once)
            loop.call_soon(stopping.stop, "SIGINT")
            loop.call_soon(stopping.stop, "SIGINT")

    summary, states, attempts, keys = _drive(
        journal_at, outbox, sandbox.transport(), on_batch, concurrency=3
    )
    assert states == dict.fromkeys(ids, "accepted")
    assert sandbox.stats()["sends_received"] == 3
    assert chain_findings(journal_at) == []


def test_a_cancel_from_outside_the_stop_machinery_is_not_swallowed(
    outbox: Path, journal_at: Location
):
    """The run's task is cancelled (asyncio.wait_for, a Runner's SIGINT, a caller's timeout)
    while a worker's answer is being committed: ``task.uncancel()`` takes that cancel for an
    abandon already dealt with, and the worker goes on through the whole queue.
    (Before the change: the worker stops at its next wait, after one or two sends.)"""
    journal_path = journal_at
    for n in range(8):
        write_invoice(outbox, f"C-{n:02d}")
    sent: list[str] = []

    async def accept(request):  # a plain server: 10 ms, then 202
        sent.append(request.headers["Idempotency-Key"])
        await asyncio.sleep(0.01)
        return httpx.Response(202, json={"transaction_id": f"tx_{len(sent)}"})

    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
        run_id = journal.begin_run("send", {})
        finish = journal.finish_attempt
        main_task: list[asyncio.Task] = []

        def finish_attempt(*args, **kwargs):  # the first answer: cancel the run from outside
            if len(main_task) == 1:
                asyncio.get_running_loop().call_soon(main_task[0].cancel)
                main_task.append(None)
            return finish(*args, **kwargs)

        journal.finish_attempt = finish_attempt  # type: ignore[method-assign]

        async def main():
            main_task.append(asyncio.current_task())
            transport = httpx.MockTransport(accept)
            async with make_client(settings_for(journal_path), transport) as client:
                sender = Sender(
                    journal, client,
                    SendOptions(rate_per_minute=100_000_000, check_receivers=False, concurrency=1),
                    run_id, stopping=Stopping(grace=30.0),
                )  # fmt: skip
                return await sender.run()

        async def outer():
            return await asyncio.wait_for(main(), timeout=30)

        with contextlib.suppress(asyncio.CancelledError):
            asyncio.run(outer())
    assert len(sent) <= 2, f"{len(sent)} sends after the run was cancelled at the first answer"


def test_a_stop_heard_while_attempt_rows_commit_sends_nothing_new(
    outbox: Path, journal_at: Location
):
    """A first SIGTERM (or the deadline, refused credentials, an outage) is heard in the pass
    that commits three attempt rows: "stop taking new work". The original change counts a
    request as in flight from before its row is committed, so the stop does not cancel it,
    and all three leave after the stop (before the change no request could start after it)."""
    ids = [f"D-{n}" for n in range(3)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    sandbox = emulator()

    def on_batch(n, loop, stopping, main):
        if n == 1:
            loop.call_soon(stopping.stop, "SIGTERM")

    summary, states, attempts, keys = _drive(
        journal_at, outbox, sandbox.transport(), on_batch, concurrency=3
    )
    assert sandbox.stats()["sends_received"] == 0, "requests started after the stop"
    assert states == dict.fromkeys(ids, "pending") and keys == dict.fromkeys(ids)


def test_write_batch_is_never_a_savepoint_of_a_transaction_left_open(journal_at: Location):
    """Hardening (pre-existing shape, made central by the change): write_batch is the only
    thing that makes an attempt row durable before its request leaves. Inside a transaction
    left open (a ROLLBACK that failed after a failed COMMIT, say) it is a savepoint: it
    reports every write done, nothing is on disk, and the sender lets the requests leave."""
    with open_journal(journal_at) as journal:
        journal.db.conn.execute("BEGIN")  # the leftover
        with pytest.raises(JournalError):
            journal.write_batch([lambda: journal.add_event(None, "note", "x")])


def test_a_write_raising_a_base_exception_still_resolves_every_writer(tmp_path: Path):
    """Hardening (hang): ``_commit`` settles the futures for ``Exception`` only. A write that
    raises a BaseException (KeyboardInterrupt where SIGINT is Python's default, i.e. any use
    of Sender without RunSignals) escapes the loop callback with no future resolved; at
    shutdown asyncio.run cancels the writers, which ``durable`` ignores while they wait:
    the process never ends."""
    script = textwrap.dedent(f"""
        import asyncio
        from invoicectl.journal import Journal
        from invoicectl.send.commits import GroupCommits
        from pathlib import Path

        def interrupted():
            raise KeyboardInterrupt

        async def main(journal):
            commits = GroupCommits(journal)
            await asyncio.gather(
                commits.durable(lambda: journal.add_event(None, "note", "a")),
                commits.durable(interrupted),
            )

        with Journal(Path({str(tmp_path / "j.db")!r})) as journal:
            try:
                asyncio.run(main(journal))
            except KeyboardInterrupt:
                pass
        print("ended")
    """)
    try:
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=15,
            cwd=Path(__file__).resolve().parents[1],
        )
    except subprocess.TimeoutExpired:
        raise AssertionError("hung: a writer's future was never resolved") from None
    assert "ended" in done.stdout, done.stderr[-2000:]

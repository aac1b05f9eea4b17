"""Durable writes grouped into shared commits (send/commits.py, ``Journal.write_batch``).

The write-ahead rule must hold per request however the commits are grouped: a second
connection to the journal file is the witness, and it must find each request's attempt row
committed when the request reaches the server.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from backends import chain_findings, is_postgresql, witness_rows
from sendkit import assert_each_delivered_once, committed_events, emulator, note, send, settings_for
from ublfactory import write_invoice

from invoicectl.errors import ExitCode, JournalError
from invoicectl.journal import Journal, open_journal
from invoicectl.journal.database import JournalBase
from invoicectl.locations import Location
from invoicectl.send.commits import GroupCommits


def test_a_batch_commits_its_writes_together_and_a_failing_one_alone_is_undone(
    journal_at: Location,
):
    path = journal_at

    def failing() -> None:
        note(journal, "undone")
        raise ValueError("this write only")

    with open_journal(path) as journal:
        results = journal.write_batch(
            [lambda: note(journal, "first"), failing, lambda: note(journal, "third")]
        )
        assert not journal.db.conn.in_transaction
    assert [result.value for result in results] == ["first", None, "third"]
    assert isinstance(results[1].error, ValueError)
    assert committed_events(path) == ["first", "third"]
    assert chain_findings(path) == []  # the undone write left no event in the chain either


def test_writers_of_one_pass_of_the_loop_share_one_commit(journal_at: Location):
    path = journal_at

    async def writers(journal: Journal) -> list[tuple[str, bool]]:
        commits = GroupCommits(journal)
        return await asyncio.gather(
            *(commits.durable(lambda n=n: note(journal, f"w{n}")) for n in range(5))
        ), commits

    with open_journal(path) as journal:
        done, commits = asyncio.run(writers(journal))
    assert done == [(f"w{n}", False) for n in range(5)]
    assert (commits.commits, commits.writes) == (1, 5)
    assert committed_events(path) == [f"w{n}" for n in range(5)]


def test_writers_arriving_apart_share_one_commit_until_every_writer_is_in(
    journal_at: Location,
):
    """The limiter starts requests an interval apart and answers come as they come: writers
    that arrive apart still share a commit. (The window is an hour here: the group commits
    when the last counted writer has joined it, and not before.)"""
    path = journal_at

    async def spread(journal: Journal) -> GroupCommits:
        commits = GroupCommits(journal, window=3600.0)
        joined: list[int] = []

        async def write(n: int) -> None:
            for _ in range(n):
                await asyncio.sleep(0)  # each a pass of the loop after the one before
            joined.append(n)
            await commits.durable(lambda: note(journal, f"w{n}"))

        writers = [commits.writer(write(n)) for n in range(4)]
        await asyncio.wait_for(asyncio.gather(*writers), 10)
        assert joined == [0, 1, 2, 3]
        return commits

    with open_journal(path) as journal:
        commits = asyncio.run(spread(journal))
    assert (commits.commits, commits.writes) == (1, 4)
    assert committed_events(path) == [f"w{n}" for n in range(4)]


def test_a_lone_write_commits_when_the_window_ends(journal_at: Location):
    path = journal_at

    async def lone(journal: Journal) -> GroupCommits:
        commits = GroupCommits(journal, window=0.05)  # no counted writers: the window decides
        assert await asyncio.wait_for(commits.durable(lambda: note(journal, "w")), 10) == (
            "w",
            False,
        )
        return commits

    with open_journal(path) as journal:
        commits = asyncio.run(lone(journal))
    assert (commits.commits, commits.writes) == (1, 1)
    assert committed_events(path) == ["w"]


def test_a_group_holding_every_writer_commits_without_waiting_the_window(journal_at: Location):
    """No other writer can join it, so waiting would only slow the send (one worker: every
    write would wait the whole window)."""
    path = journal_at

    async def alone(journal: Journal) -> tuple[GroupCommits, GroupCommits]:
        commits = GroupCommits(journal, window=3600.0)

        async def three_in_turn() -> None:
            for n in range(3):
                await commits.durable(lambda n=n: note(journal, f"w{n}"))

        await asyncio.wait_for(commits.writer(three_in_turn()), 10)
        pair = GroupCommits(journal, window=3600.0)
        together = [pair.writer(pair.durable(lambda: note(journal, "pair"))) for _ in range(2)]
        await asyncio.wait_for(asyncio.gather(*together), 10)
        return commits, pair

    with open_journal(path) as journal:
        commits, pair = asyncio.run(alone(journal))
    assert (commits.commits, commits.writes) == (3, 3)
    assert (pair.commits, pair.writes) == (1, 2)
    assert (commits.writers, pair.writers) == (0, 0)
    assert committed_events(path) == ["w0", "w1", "w2", "pair", "pair"]


def test_a_send_counts_its_workers_so_no_commit_waits_for_a_worker_that_cannot_come(
    outbox: Path, journal_at: Location, monkeypatch: pytest.MonkeyPatch
):
    """A send with one worker never waits out the window: its every group is full, since
    the send counts its worker (a write of an uncounted one would wait the window)."""
    groups: list[GroupCommits] = []
    made = GroupCommits.__init__

    def kept(self: GroupCommits, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        groups.append(self)

    monkeypatch.setattr(GroupCommits, "__init__", kept)
    ids = [f"INV-{number:04d}" for number in range(4)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    sandbox = emulator()
    _report, summary = send(settings_for(journal_at), outbox, sandbox.transport(), concurrency=1)
    assert summary.exit_code == ExitCode.OK
    assert summary.counts() == {"accepted": 4}
    [commits] = groups
    assert (commits.commits, commits.writes, commits.waited, commits.writers) == (8, 8, 0, 0)
    assert_each_delivered_once(sandbox.stats(), ids)


def test_once_the_other_writers_have_ended_a_waiting_group_commits(journal_at: Location):
    """At the end of a send the workers run out of work one by one: the last ones' writes
    do not wait out the window for writers that are gone."""
    path = journal_at

    async def last_ones(journal: Journal) -> GroupCommits:
        commits = GroupCommits(journal, window=3600.0)

        async def writes() -> None:
            await commits.durable(lambda: note(journal, "last"))

        async def ends_soon() -> None:
            await asyncio.sleep(0.05)

        tasks = [commits.writer(writes()), commits.writer(ends_soon())]
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
        assert commits.writers == 0
        return commits

    with open_journal(path) as journal:
        commits = asyncio.run(last_ones(journal))
    assert (commits.commits, commits.writes) == (1, 1)
    assert committed_events(path) == ["last"]


def test_a_writer_cancelled_while_waiting_still_sees_its_write_durable(journal_at: Location):
    path = journal_at

    async def cancelled_writer(journal: Journal) -> tuple[str, bool]:
        commits = GroupCommits(journal)
        task = asyncio.ensure_future(commits.durable(lambda: note(journal, "kept")))
        await asyncio.sleep(0)  # the writer is waiting for the commit
        task.cancel()
        return await task

    with open_journal(path) as journal:
        value, cancelled = asyncio.run(cancelled_writer(journal))
    assert (value, cancelled) == ("kept", True)
    assert committed_events(path) == ["kept"]


def test_a_failing_write_raises_in_its_own_writer_only(journal_at: Location):
    path = journal_at

    def failing() -> str:
        raise ValueError("mine")

    async def writers(journal: Journal) -> list[object]:
        commits = GroupCommits(journal)
        return await asyncio.gather(
            commits.durable(lambda: note(journal, "a")),
            commits.durable(failing),
            commits.durable(lambda: note(journal, "b")),
            return_exceptions=True,
        )

    with open_journal(path) as journal:
        first, second, third = asyncio.run(writers(journal))
    assert (first, third) == (("a", False), ("b", False))
    assert isinstance(second, ValueError)
    assert committed_events(path) == ["a", "b"]


class Witness(httpx.AsyncBaseTransport):
    """The emulator, behind a second connection that checks, as each send arrives, that the
    journal file already holds the request's attempt row, committed and unanswered."""

    def __init__(self, inner: httpx.AsyncBaseTransport, journal_path: Location) -> None:
        self.inner = inner
        self.journal_path = journal_path
        self.checked: list[str] = []
        self.missing: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path == "/api/v1/documents":
            key = request.headers["Idempotency-Key"]
            (rows,) = witness_rows(
                self.journal_path,
                "SELECT count(*) FROM attempts WHERE idempotency_key = ? AND outcome IS NULL",
                (key,),
            )
            (self.checked if rows[0] == 1 else self.missing).append(key)
        return await self.inner.handle_async_request(request)


def test_each_request_leaves_after_its_attempt_row_is_committed(outbox: Path, journal_at: Location):
    journal_path = journal_at
    ids = [f"INV-{number:04d}" for number in range(40)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    sandbox = emulator()
    witness = Witness(sandbox.transport(), journal_path)

    _report, summary = send(settings_for(journal_path), outbox, witness, concurrency=10)

    assert summary.exit_code == ExitCode.OK
    assert summary.counts() == {"accepted": 40}
    assert witness.missing == []
    assert sorted(witness.checked) == sorted(f"invoice-{invoice_id}" for invoice_id in ids)
    assert_each_delivered_once(sandbox.stats(), ids)
    # Grouped: ten workers start together, so their attempt rows share commits.
    assert summary.durable_writes == 80
    assert summary.durable_commits < summary.durable_writes
    # every answer durable at the end, as a witness reads it
    states = dict(witness_rows(journal_path, "SELECT invoice_id, state FROM invoices"))
    assert states == dict.fromkeys(ids, "accepted")


@pytest.mark.parametrize("when", ["attempt", "answer"])
def test_a_commit_that_fails_stops_the_run_with_nothing_sent_twice(
    outbox: Path, journal_at: Location, when: str
):
    """A failed commit of an attempt row stops that request before it leaves; of an answer,
    leaves the request unanswered (unknown, replayed under its key by the next run)."""
    journal_path = journal_at
    ids = [f"INV-{number:04d}" for number in range(6)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    sandbox = emulator()
    original = JournalBase.write_batch
    calls = {"n": 0}
    failure = psycopg.errors.DiskFull if is_postgresql(journal_path) else sqlite3.OperationalError

    def failing_batch(self, writes):
        calls["n"] += 1
        if calls["n"] == {"attempt": 1, "answer": 2}[when]:  # one worker: attempt, answer, ...
            raise failure("disk I/O error")
        return original(self, writes)

    JournalBase.write_batch = failing_batch  # type: ignore[method-assign]
    try:
        with pytest.raises(JournalError, match="disk I/O error"):
            send(settings_for(journal_path), outbox, sandbox.transport(), concurrency=1)
    finally:
        JournalBase.write_batch = original  # type: ignore[method-assign]
    # Not committed, the attempt row never let its request leave; the answer's request did.
    assert sandbox.stats()["sends_received"] == {"attempt": 0, "answer": 1}[when]

    _report, summary = send(settings_for(journal_path), outbox, sandbox.transport())
    assert summary.exit_code == ExitCode.OK
    assert_each_delivered_once(sandbox.stats(), ids)
    assert sandbox.stats()["replays"] == {"attempt": 0, "answer": 1}[when]  # same key, bytes

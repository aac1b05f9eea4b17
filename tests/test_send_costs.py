"""What a send's journal work costs, by construction rather than by the clock (issue 13).

Speed lives in ``benchmarks/``; these tests hold the changes that bought it in place: the
grouped commits' savepoints keep their undo pages in memory (no temporary file per
transaction), and doing so loses neither a savepoint's undo nor a later scan's tables; a
send reads each invoice's row twice (its claim, and its write-ahead row's check); a grouped
commit waits a pass of the event loop more, so writers woken together share it.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from sendkit import committed_events, emulator, note, send, settings_for
from ublfactory import write_invoice

from invoicectl.journal import Journal
from invoicectl.scan.ingest import scan_directory
from invoicectl.send.commits import GroupCommits
from invoicectl.send.sender import Sender

_MEMORY = 2  # PRAGMA temp_store: 0 default (a file), 1 file, 2 memory


def temp_store(journal: Journal) -> int:
    return int(journal.db.execute("PRAGMA temp_store").fetchone()[0])


def test_every_grouped_commit_of_a_send_keeps_its_savepoints_in_memory(
    outbox: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    for n in range(6):
        write_invoice(outbox, f"COST-{n}")
    seen: list[int] = []
    write_batch = Journal.write_batch

    def watched(journal: Journal, writes):  # type: ignore[no-untyped-def]
        seen.append(temp_store(journal))
        return write_batch(journal, writes)

    monkeypatch.setattr(Journal, "write_batch", watched)
    _report, summary = send(settings_for(tmp_path / "j.db"), outbox, emulator().transport())
    assert summary.counts().get("accepted") == 6
    assert seen and set(seen) == {_MEMORY}


def test_a_failing_write_is_still_undone_alone_with_savepoints_in_memory(tmp_path: Path):
    path = tmp_path / "journal.db"
    with Journal(path) as journal:
        journal.savepoints_in_memory()

        def failing() -> None:
            journal.add_event(None, "note", "undone")
            raise ValueError("this write only")

        results = journal.write_batch([lambda: journal.add_event(None, "note", "kept"), failing])
    assert isinstance(results[1].error, ValueError)
    with sqlite3.connect(path) as witness:
        details = [row[0] for row in witness.execute("SELECT detail FROM events ORDER BY id")]
    assert details == ["kept"]


def test_a_scan_after_the_switch_builds_its_temporary_tables_again(outbox: Path, tmp_path: Path):
    write_invoice(outbox, "AFTER-1")
    with Journal(tmp_path / "journal.db") as journal:
        scan_directory(journal, outbox, workers=1)
        journal.savepoints_in_memory()
        write_invoice(outbox, "AFTER-2")
        scan_directory(journal, outbox, workers=1)
        assert {invoice.invoice_id for invoice in journal.invoices()} == {"AFTER-1", "AFTER-2"}
        assert temp_store(journal) == _MEMORY


def test_a_send_reads_each_invoice_row_twice(
    outbox: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Once to claim its key, once inside the write-ahead row's transaction (the key and
    bytes about to leave checked against the journal itself); the receiver check, the key's
    window, the answer's write and the result use the record those left (six reads before)."""
    for n in range(6):
        write_invoice(outbox, f"READ-{n}")
    reads: list[str] = []
    sending = False
    invoice, run = Journal.invoice, Sender.run

    def counted(journal: Journal, invoice_id: str):  # type: ignore[no-untyped-def]
        if sending:
            reads.append(invoice_id)
        return invoice(journal, invoice_id)

    async def watched(sender: Sender):  # type: ignore[no-untyped-def]
        nonlocal sending
        sending = True
        try:
            return await run(sender)
        finally:
            sending = False

    monkeypatch.setattr(Journal, "invoice", counted)
    monkeypatch.setattr(Sender, "run", watched)
    _report, summary = send(settings_for(tmp_path / "j.db"), outbox, emulator().transport())
    assert summary.counts().get("accepted") == 6
    assert sorted(reads) == sorted(f"READ-{n}" for n in range(6) for _ in range(2))


def test_a_writer_one_pass_of_the_loop_later_shares_the_commit(tmp_path: Path):
    """Writers woken together reach their write a pass apart (an answer's read takes two):
    the commit waits for others (the window), so they share it (they had a sync each)."""
    path = tmp_path / "journal.db"

    async def writers(journal: Journal) -> tuple[list[tuple[str, bool]], GroupCommits]:
        commits = GroupCommits(journal)

        async def a_pass_later() -> tuple[str, bool]:
            await asyncio.sleep(0)
            return await commits.durable(lambda: note(journal, "late"))

        done = await asyncio.gather(commits.durable(lambda: note(journal, "first")), a_pass_later())
        return list(done), commits

    with Journal(path) as journal:
        done, commits = asyncio.run(writers(journal))
    assert done == [("first", False), ("late", False)]
    assert (commits.commits, commits.writes) == (1, 2)
    assert committed_events(path) == ["first", "late"]

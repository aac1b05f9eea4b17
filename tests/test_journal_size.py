"""A command costs what its own work costs, not what the journal has seen (issue 13).

No timing: each test counts the SQLite steps a command's reads cost with 300 invoices of
history and again with 1,500 (``historykit``), and a read of the whole history costs five
times as many; or asks SQLite's plan which index a query uses; or measures memory with
tracemalloc, which the machine's load does not move.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from backends import cli_journal
from historykit import (
    add_history,
    cheap,
    flat,
    history_invoice,
    query_plan,
    read_cost,
    steps_at_two_sizes,
)
from sendkit import emulator, send, settings_for
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.cli import app
from invoicectl.journal import Journal, open_journal
from invoicectl.journal.records import Hold, InvoiceState
from invoicectl.lifecycle.bulk import candidates
from invoicectl.lifecycle.holds import damaged_content
from invoicectl.lifecycle.plan import attention, plan
from invoicectl.locations import JournalURL, Location
from invoicectl.reconcile.subjects import find_subjects
from invoicectl.render.formats import to_csv, write_csv, write_json_array, write_json_lines
from invoicectl.render.listing import STATUS_FIELDS, attention_first, status_records, write_tsv
from invoicectl.render.status import invoice_record
from invoicectl.scan.ingest import scan_directory

NOW = datetime(2026, 6, 1, tzinfo=UTC)


@pytest.fixture
def journal(journal_at: Location):
    with open_journal(journal_at, clock=lambda: NOW) as opened:
        yield opened


def _work(journal: Journal) -> None:
    """What needs doing beside the history: two rejected, one on hold, three in delivery."""
    for number, changes in enumerate(
        [
            {"state": InvoiceState.rejected, "reason": "400"},
            {"state": InvoiceState.rejected, "reason": "400"},
            {"state": InvoiceState.pending, "hold": Hold.held, "held_by": "ops"},
            {"remote_status": "pending"},
            {"remote_status": None},
            {"remote_status": "failed"},
        ]
    ):
        journal.insert_invoice(history_invoice(f"NOW-{number}", f"{number:064x}", **changes))


# ---- item 1: every read in proportion to its work ----------------------------------------


def test_a_scan_looks_up_only_the_hashes_it_read(journal: Journal, tmp_path: Path):
    """Before: ``known_sha256()`` loaded every content hash the journal held."""
    outboxes = iter(range(10))

    def scan_three_new() -> None:
        outbox = tmp_path / f"outbox-{next(outboxes)}"
        outbox.mkdir()
        for n in range(3):
            write_invoice(outbox, f"{outbox.name}-{n}")
        report = scan_directory(journal, outbox)
        assert len(report.new) == 3

    assert flat(steps_at_two_sizes(journal, scan_three_new))


def test_a_scan_checks_for_renumbered_files_in_proportion_to_its_files(
    journal: Journal, tmp_path: Path
):
    """Before: the check for a number corrected after a send of unknown fate read every sent
    or pending invoice for each new one (a first scan of 10,000 new files spent 18 s in it)."""

    def scans_of(count: int) -> int:
        """What a first scan of ``count`` new files costs, then a scan of them renumbered
        after a send of unknown fate."""
        outbox = tmp_path / f"outbox-{count}"
        outbox.mkdir()
        for n in range(count):
            write_invoice(outbox, f"SENT-{count}-{n}", name=f"{n}.xml")
        first, _ = read_cost(journal, lambda: scan_directory(journal, outbox))
        journal.db.execute(
            "UPDATE invoices SET state = ?, key_first_used_at = ? WHERE invoice_id LIKE ?",
            (InvoiceState.unknown, NOW.isoformat(), f"SENT-{count}-%"),
        )
        for n in range(count):
            write_invoice(outbox, f"RENUMBERED-{count}-{n}", name=f"{n}.xml")
        reports = []
        again, _ = read_cost(journal, lambda: reports.append(scan_directory(journal, outbox)))
        assert len(reports[0].replaced) == count  # each held
        return first + again

    small, large = scans_of(100), scans_of(500)
    assert large <= small * 5 * 1.2, (small, large)


def test_a_scan_checks_for_pending_files_renumbered_in_proportion_to_its_files(
    journal: Journal, tmp_path: Path
):
    """Before: the check for a pending invoice whose file now holds another number read
    every file of the scan for each pending invoice the scan did not find: a scan of 500 new
    files beside 500 pending from another outbox, or of 500 files renumbered before their
    send, read 2.3 million steps in it (100 files: 92,000)."""

    def scans_of(count: int) -> int:
        """What a scan of ``count`` new files costs beside ``count`` pending invoices it does
        not find, then a scan of those invoices' files, each now holding another number."""
        pending, elsewhere = tmp_path / f"pending-{count}", tmp_path / f"elsewhere-{count}"
        for outbox, prefix in ((pending, "PENDING"), (elsewhere, "ELSEWHERE")):
            outbox.mkdir()
            for n in range(count):
                write_invoice(outbox, f"{prefix}-{count}-{n}", name=f"{n}.xml")
        scan_directory(journal, pending)
        beside, _ = read_cost(journal, lambda: scan_directory(journal, elsewhere))
        for n in range(count):
            write_invoice(pending, f"RENUMBERED-{count}-{n}", name=f"{n}.xml")
        reports = []
        again, _ = read_cost(journal, lambda: reports.append(scan_directory(journal, pending)))
        assert len(reports[0].replaced) == count  # each pending one held
        return beside + again

    small, large = scans_of(100), scans_of(500)
    assert large <= small * 5 * 1.2, (small, large)


def test_a_postgresql_send_reads_in_proportion_to_its_invoices(pg_server: Any, tmp_path: Path):
    """Before: each claim of ``concurrency`` invoices planned again from every pending one,
    so a send's reads grew with the square of its work (at a concurrency of 2, 100 invoices:
    15,528 rows read; 500: 208,734)."""

    def rows_read(count: int) -> int:
        url = pg_server.new_database()
        outbox = tmp_path / f"outbox-{count}"
        outbox.mkdir()
        for n in range(count):
            write_invoice(outbox, f"W-{n:05d}", name=f"{n}.xml")
        _counting_every_row_fetched(url)
        settings = settings_for(JournalURL(url))
        transport = emulator().transport()
        _report, summary = send(
            settings, outbox, transport, rate_per_minute=1_000_000, concurrency=2
        )
        assert summary.counts() == {"accepted": count}
        return _pg_rows_read_in(url)

    small, large = rows_read(100), rows_read(500)
    assert large <= small * 5 * 1.5, (small, large)


def _counting_every_row_fetched(url: str) -> None:
    """An index-only scan fetches no row: turned off for the database's sessions. And the
    plans a large journal gets: on tables of a few hundred rows the planner may take a
    sequential scan over an index once autovacuum has analysed them mid-run, which it did or
    not by the time the server had been up (the same 500-invoice send read 51,876 rows, or
    138,775 on a server a minute older), so a scan is taken only where no index serves."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        (name,) = conn.execute("SELECT current_database()").fetchone()
        conn.execute(f'ALTER DATABASE "{name}" SET enable_indexonlyscan = off')
        conn.execute(f'ALTER DATABASE "{name}" SET enable_seqscan = off')


def _pg_rows_read_in(url: str) -> int:
    """The rows every session read from a database's tables, once the server has counted
    those of the sessions just ended (each reports when it ends; read until it stands).
    Not the account's rate budget: each request reads up to the limit's number of its
    entries, and at the tests' limit of 1,000,000 a minute every earlier request is one."""
    import psycopg

    query = "SELECT coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0)), 0)"
    query += " FROM pg_stat_user_tables WHERE relname <> 'rate_starts'"
    counted = -1
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(40):
            conn.execute("SELECT pg_stat_clear_snapshot()")
            (now,) = conn.execute(query).fetchone()
            if now == counted:
                return int(now)
            counted = now
            time.sleep(0.25)
    raise AssertionError(f"the server's counts kept moving: {counted}")


def test_the_content_check_answers_for_stored_content_only(journal: Journal, tmp_path: Path):
    add_history(journal, 3)
    (stored,) = journal.db.execute("SELECT sha256 FROM revisions LIMIT 1").fetchone()
    contents = journal.stored_contents()
    assert stored in contents and "0" * 64 not in contents
    assert stored not in journal.stored_contents(unless={stored})  # a damaged copy: read again


def test_the_content_check_asks_its_own_connection_in_a_forked_worker(journal: Journal):
    add_history(journal, 2)
    (stored,) = journal.db.execute("SELECT sha256 FROM revisions LIMIT 1").fetchone()
    contents = journal.stored_contents()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker: the journal's connection is the parent's, never used here
        os.close(read)
        answer = b"1" if stored in contents and "f" * 64 not in contents else b"0"
        os.write(write, answer + (b"1" if contents._conn is not journal.db.conn else b"0"))
        os._exit(0)
    os.close(write)
    answer = os.read(read, 2)
    os.waitpid(pid, 0)
    assert answer == b"11"


def test_a_send_plans_from_the_pending_and_replayable_alone(journal: Journal):
    _work(journal)
    assert flat(steps_at_two_sizes(journal, lambda: plan(journal, NOW)))


def test_the_exit_policy_and_the_counts_cost_what_is_unsettled(journal: Journal):
    """Before: counts grouped every invoice; holds were counted by reading every row."""
    _work(journal)

    def counts() -> None:
        journal.state_counts()
        journal.state_counts(on_hold=False)
        journal.hold_counts()
        attention(journal, NOW)

    assert flat(steps_at_two_sizes(journal, counts))
    counts_now = journal.state_counts()
    assert counts_now[InvoiceState.accepted] == 1500 + 3
    assert counts_now[InvoiceState.rejected] == 2 and counts_now[InvoiceState.pending] == 1
    unheld = journal.state_counts(on_hold=False)
    assert unheld[InvoiceState.pending] == 0 and unheld[InvoiceState.accepted] == 1503
    assert journal.hold_counts()[Hold.held] == 1


@pytest.mark.parametrize("action", ["hold", "release", "abandon"])
def test_a_bulk_action_reads_only_what_it_can_change(journal: Journal, action: str):
    """Before: every invoice matching the filters was read whole, then filtered in Python:
    ``hold --state accepted --dry-run`` read a million rows (1 GB) to hold none."""
    _work(journal)
    chosen: dict[str, list[str]] = {}

    def choose() -> None:
        chosen["all"] = candidates(journal, action)
        chosen["accepted"] = candidates(journal, action, (InvoiceState.accepted,))

    assert flat(steps_at_two_sizes(journal, choose))
    if action == "release":
        assert chosen == {"all": ["NOW-2"], "accepted": []}
    elif action == "hold":  # never an accepted invoice, nor one already held
        assert chosen == {"all": ["NOW-0", "NOW-1"], "accepted": []}
    else:  # the held too, and of the accepted only the failed delivery (by its index)
        assert chosen == {"all": ["NOW-0", "NOW-1", "NOW-2", "NOW-5"], "accepted": ["NOW-5"]}


def test_reconcile_reads_only_what_needs_a_lookup_or_a_verdict(journal: Journal):
    """Before: every accepted invoice was read, delivered or not."""
    _work(journal)
    assert flat(steps_at_two_sizes(journal, lambda: find_subjects(journal)))
    subjects = {subject.invoice_id: subject for subject in find_subjects(journal)}
    assert set(subjects) == {"NOW-3", "NOW-4", "NOW-5"}  # rejected without a 409: none
    assert subjects["NOW-3"].get_id == "txn-NOW-3" and subjects["NOW-5"].get_id is None


def test_a_scan_finds_damaged_copies_without_reading_every_invoice(journal: Journal):
    """Before: ``held_by`` read every row (no index on the hold)."""
    _work(journal)
    assert flat(steps_at_two_sizes(journal, lambda: damaged_content(journal)))


def test_the_limiter_and_the_history_check_read_by_index(journal: Journal):
    """Before: the last minute's requests and "ever sent to this URL" read every attempt."""

    def reads() -> None:
        journal.attempt_starts_since("2026-05-31T23:59:00+00:00")
        assert not journal.has_sent_to("https://never.example")
        assert journal.has_sent_to("https://old.example")

    assert flat(steps_at_two_sizes(journal, reads))


def test_reconciles_query_of_accepted_invoices_uses_its_partial_index(tmp_path: Path):
    """SQLite picks invoices_in_delivery over invoices_state_id without ANALYZE's figures.
    (SQLite's planner only: PostgreSQL's has its figures, and reads 50 rows in a scan.)"""
    journal = Journal(tmp_path / "journal.db")
    add_history(journal, 50)
    from invoicectl.journal.invoices import IN_DELIVERY

    details, sorts = query_plan(
        journal, f"SELECT * FROM invoices WHERE {IN_DELIVERY} ORDER BY invoice_id"
    )
    assert "invoices_in_delivery" in details and not sorts, details
    journal.close()


# ---- item 2: output that streams ------------------------------------------------------------


def _old_records(journal: Journal) -> list[dict]:
    """What status listed before it streamed: every Invoice record, then the files."""
    records = [invoice_record(invoice) for invoice in journal.invoices()]
    for file in journal.unidentified_files():
        record = dict.fromkeys(STATUS_FIELDS)
        record.update(
            state="invalid",
            reason=file.reason,
            sha256=file.sha256,
            path=file.path,
            updated_at=file.updated_at,
        )
        records.append(record)
    return records


def test_status_json_and_csv_are_what_they_were(journal: Journal, tmp_path: Path):
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    write_invoice(outbox, "NEW-1")
    (outbox / "broken.xml").write_text("<not closed")
    scan_directory(journal, outbox)
    add_history(journal, 3)
    _work(journal)
    old = _old_records(journal)

    written = io.StringIO()
    assert write_json_array(written, status_records(journal)) == len(old) == 11
    assert json.loads(written.getvalue()) == json.loads(json.dumps(old))
    lines = io.StringIO()
    write_json_lines(lines, status_records(journal))
    assert [json.loads(line) for line in lines.getvalue().splitlines()] == json.loads(
        json.dumps(old)
    )
    table = io.StringIO(newline="")
    write_csv(table, status_records(journal), STATUS_FIELDS)
    assert table.getvalue() == to_csv(old, STATUS_FIELDS)
    assert list(csv.DictReader(io.StringIO(table.getvalue())))[0]["state"] == "pending"

    empty = io.StringIO()
    write_json_array(empty, iter(()))
    assert empty.getvalue() == "[]\n"  # as print(to_json([])) wrote


_PEAK_OF_EXPORT = """
import os, sys, tracemalloc
from invoicectl.cli import app
sink = open(os.devnull, "w")
real, sys.stdout = sys.stdout, sink
tracemalloc.start()
try:
    app(["status", "--format", sys.argv[2], "--journal", sys.argv[1]], standalone_mode=False)
except SystemExit:
    pass
peak = tracemalloc.get_traced_memory()[1]
sys.stdout = real
print(peak)
"""


@pytest.mark.parametrize("output_format", ["json", "csv"])
def test_status_export_keeps_memory_flat(tmp_path: Path, output_format: str):
    """Before: the whole list was built, then encoded in one string (tracemalloc's peak in a
    process of its own, the real command writing to /dev/null)."""
    path = tmp_path / "journal.db"

    def peak_of_export() -> int:
        result = subprocess.run(
            [sys.executable, "-c", _PEAK_OF_EXPORT, str(path), output_format],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        return int(result.stdout.split()[-1])

    with Journal(path) as opened:  # both sizes above the 1,000 records written at once
        add_history(opened, 1500)
    at_1500 = peak_of_export()
    with Journal(path) as opened:
        add_history(opened, 6000, start=1500)
    at_7500 = peak_of_export()
    assert at_7500 < at_1500 * 1.2 + 200_000, (at_1500, at_7500)


def test_a_terminal_page_shows_what_needs_a_person_first(journal: Journal):
    _work(journal)
    # A page of the accepted reads the page, not the 1,500 behind it.
    assert flat(steps_at_two_sizes(journal, lambda: attention_first(journal, 20), 300, 1500))
    page = [record["invoice_id"] for record in attention_first(journal, 4)]
    # A delivery failure (NOW-5) first, then rejected, pending, then accepted.
    assert page == ["NOW-5", "NOW-0", "NOW-1", "NOW-2"]
    page = [record["invoice_id"] for record in attention_first(journal, 6)]
    assert page == ["NOW-5", "NOW-0", "NOW-1", "NOW-2", "NOW-3", "NOW-4"]  # each once
    assert [r["invoice_id"] for r in attention_first(journal, 2, state="accepted")] == [
        "NOW-3",
        "NOW-4",
    ]


def test_status_limit_bounds_the_listing_and_zero_gives_the_counts(journal_at: Location):
    path = cli_journal(journal_at)
    with open_journal(journal_at) as opened:
        add_history(opened, 30)
    runner = CliRunner()
    counts = runner.invoke(app, ["status", "--journal", path, "--limit", "0"])
    assert counts.exit_code == 0, counts.output
    first, head = counts.stdout.splitlines()
    assert first == (
        "30 invoices: pending 0, invalid 0, accepted 30, rejected 0, key_reused 0, unknown 0,"
        " amended 0"
    )
    assert head.startswith("chain head ")
    three = runner.invoke(app, ["status", "--journal", path, "--limit", "3"])
    assert [line.split("\t")[0] for line in three.stdout.splitlines()[2:]] == [
        "OLD-0000000",
        "OLD-0000001",
        "OLD-0000002",
    ]
    every = runner.invoke(app, ["status", "--journal", path])  # a pipe: every one
    assert len(every.stdout.splitlines()) == 32  # the counts, the chain head, 30 invoices
    lines = runner.invoke(app, ["status", "--journal", path, "--format", "jsonl"])
    assert [json.loads(line)["invoice_id"] for line in lines.stdout.splitlines()][-1] == (
        "OLD-0000029"
    )
    both = runner.invoke(app, ["status", "--journal", path, "--all", "--limit", "3"])
    assert both.exit_code == 2 and "give it or --limit, not both" in both.output


def on_a_terminal(
    path: Path, pager: str, *args: str, size: tuple[int, int] = (80, 24), exit_code: int = 0
) -> bytes:
    """``invoicectl status ARGS`` on a terminal of 80 x 24 (``size``) with ``$PAGER``: what
    it showed."""
    import pty

    pid, terminal = pty.fork()
    if pid == 0:
        os.environ.update(PAGER=pager, COLUMNS=str(size[0]), LINES=str(size[1]))
        command = ["status", *args, "--journal", str(path)]
        os.execv(sys.executable, [sys.executable, "-m", "invoicectl", *command])
    shown = b""
    with contextlib.suppress(OSError):  # EIO: the terminal's other end closed
        while chunk := os.read(terminal, 65536):
            shown += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == exit_code, shown
    return shown


def test_a_limit_beyond_a_screenful_on_a_terminal_is_paged_not_drawn(tmp_path: Path):
    """``--limit 1000000000`` on a terminal drew one table of every invoice, built whole in
    memory first: 253 s and 1.75 GB for a journal of 300,000, and no pager."""
    path = tmp_path / "journal.db"
    with Journal(path) as opened:
        add_history(opened, 40)
    paged = tmp_path / "paged.tsv"  # what the pager got

    shown = on_a_terminal(path, f"sh -c 'cat > {paged}'", "--limit", "30")

    assert [line.split("\t")[0] for line in paged.read_text().splitlines()] == [
        f"OLD-{number:07d}" for number in range(30)
    ]
    assert b"OLD-0000000" not in shown  # the counts and the chain head alone on the screen


@pytest.mark.parametrize(("size", "left_out"), [
    ((80, 24), "receiver, transaction left out for the width"),
    ((60, 30), "type, receiver, amount, transaction left out for the width"),
    ((220, 40), None),
])  # fmt: skip
def test_the_default_page_on_a_terminal_fits_the_screen(
    tmp_path: Path, size: tuple[int, int], left_out: str | None
):
    """25 invoices to decide, with long reasons and transaction ids, on 80 x 24: the page of
    16 wrapped to 133 lines. Now one line an invoice, as many as fit, the prompt included."""
    path = tmp_path / "journal.db"
    reason = "422 IDEMPOTENCY_KEY_REUSED: the key was used with other content; reconcile"
    with Journal(path) as opened:
        add_history(opened, 30)
        for number in range(25):
            opened.insert_invoice(history_invoice(
                f"NEED-{number:04d}", f"{number:064x}", state=InvoiceState.key_reused,
                reason=reason, transaction_id=None, existing_transaction_id=str(uuid.uuid4()),
            ))  # fmt: skip

    shown = re.sub(
        r"\x1b\[[0-9;]*m", "", on_a_terminal(path, "cat", size=size, exit_code=4).decode()
    )

    lines = shown.replace("\r\n", "\n").splitlines()
    width, height = size
    assert len(lines) < height and max(map(len, lines)) <= width, shown  # the prompt's line
    rows = [line for line in lines if "NEED-" in line]
    assert rows and rows[0].startswith("│ NEED-0000 "), shown
    assert all(line.count("│") == rows[0].count("│") for line in rows)  # one line each
    if left_out:
        assert left_out in " ".join(line.strip() for line in lines) and "the first " in shown, shown
    else:
        assert "transaction" in shown and "left out" not in shown, shown


@pytest.mark.parametrize("pager", ["no-such-pager", "less 'unclosed"])
def test_a_pager_that_cannot_start_is_named_and_the_listing_shown(tmp_path: Path, pager: str):
    """It listed every row unpaged, saying nothing; a quote left open was a traceback."""
    path = tmp_path / "journal.db"
    with Journal(path) as opened:
        add_history(opened, 3)

    shown = on_a_terminal(path, pager, "--all").decode()

    assert f"invoicectl: warning: no pager: {pager!r} ($PAGER): " in shown
    assert "OLD-0000002" in shown and "Traceback" not in shown


@pytest.mark.parametrize("write", [write_tsv, write_json_lines, write_json_array])
def test_a_listing_stops_reading_once_its_reader_has_gone(write: Any):
    """``status | head -1`` read the whole journal (3 s at 300,000 invoices) after ``head``
    had gone, every line dropped by stdout's guard."""
    from invoicectl.cli.consoles import ClosedPipeGuard

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader, gone
    pulled = 0

    def records() -> Iterator[dict[str, Any]]:
        nonlocal pulled
        for number in range(100_000):
            pulled += 1
            yield {"invoice_id": f"INV-{number}", "path": "/outbox/x.xml", "state": "accepted",
                   "receiver": "0088:1", "transaction_id": "t", "existing_transaction_id": None,
                   "remote_status": "delivered", "reason": None}  # fmt: skip

    with os.fdopen(write_end, "w") as pipe:
        write(ClosedPipeGuard(pipe), records())
    assert pulled <= 3000  # a batch or two: what the pipe's first refusal takes to be seen


def test_counting_steps_sees_a_full_read(journal: Journal):
    """The yardstick itself: a read of every invoice does follow the history."""
    steps = steps_at_two_sizes(journal, lambda: journal.invoices())
    assert not flat(steps), steps
    assert cheap(read_cost(journal, lambda: journal.invoice("OLD-0000001")))

"""Due dates first: what the reader takes as an invoice's due date, and the order of a send."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sendkit import emulator, send, settings_for
from ublfactory import invoice_xml, write_invoice

from invoicectl.cli.send_commands import SendOrderChoice
from invoicectl.journal import Journal
from invoicectl.journal.records import InvoiceState, SendOrder
from invoicectl.lifecycle.plan import plan
from invoicectl.scan.ingest import scan_directory
from invoicectl.ubl import parse_document


def test_the_due_date_is_cbc_due_date_else_the_payment_due_date() -> None:
    assert parse_document(invoice_xml("A", due_date="2026-12-10")).due_date == "2026-12-10"
    both = invoice_xml("B", due_date="2026-12-10", payment_due_date="2026-12-20")
    assert parse_document(both).due_date == "2026-12-10"
    means = invoice_xml("C", payment_due_date="2026-12-20")
    assert parse_document(means).due_date == "2026-12-20"
    assert parse_document(invoice_xml("D")).due_date is None


def test_a_due_date_after_a_large_invoices_lines_is_still_read() -> None:
    """The reader cuts a large invoice at its totals; the due date comes before them."""
    large = invoice_xml("L", due_date="2026-12-10", lines=200)
    assert len(large) > 20_000
    assert parse_document(large).due_date == "2026-12-10"


@pytest.mark.parametrize(
    ("written", "day"),
    [
        ("2026-12-10Z", "2026-12-10"),  # xsd:date's time zones say where, not which day
        ("2026-12-10+01:00", "2026-12-10"),
        ("2026-12-10-14:00", "2026-12-10"),
        (" 2026-12-10\n ", "2026-12-10"),
        ("2026-1-5", None),  # not an xsd:date: undated, not sorted as text
        ("05.01.2026", None),
        ("2026-02-30", None),
        ("2026-12-10T09:00:00", None),
        ("2026-12-10+15:00", None),
        ("\uff12\uff10\uff12\uff16-12-10", None),  # full-width digits
        ("next Friday", None),
    ],
)
def test_a_due_date_is_the_day_it_names_else_none(written: str, day: str | None) -> None:
    """Sent all the same: a due date naming no day is no reason to refuse an invoice, any
    more than an issue date is (both are kept as the document has them for GoRoute)."""
    facts = parse_document(invoice_xml("A", due_date=written))
    assert (facts.due_date, facts.problem) == (day, None)
    means = parse_document(invoice_xml("B", payment_due_date=written))
    assert means.due_date == day


def test_a_due_date_naming_no_day_gives_way_to_the_payment_due_date() -> None:
    both = invoice_xml("B", due_date="05.01.2026", payment_due_date="2026-01-05Z")
    assert parse_document(both).due_date == "2026-01-05"


def test_due_dates_written_otherwise_are_sent_in_the_order_of_their_days(
    tmp_path: Path, outbox: Path
) -> None:
    """As text, 05.01.2026 went ahead of every date of this century and 2026-1-5 after
    2026-12-31. Each now goes by the day it names, or by its issue date when it names none."""
    write_invoice(outbox, "DOTTED", due_date="05.01.2026", issue_date="2026-12-20")
    write_invoice(outbox, "SHORT", due_date="2026-1-5", issue_date="2026-11-20")
    write_invoice(outbox, "ZULU", due_date="2026-12-05Z", issue_date="2026-11-01")
    write_invoice(outbox, "OFFSET", due_date="2026-12-03+01:00", issue_date="2026-11-01")
    write_invoice(outbox, "PLAIN", due_date="2026-12-04", issue_date="2026-11-01")
    with Journal(tmp_path / "journal.db") as journal:
        report = scan_directory(journal, outbox)
        order = plan(journal, datetime.now(UTC)).pending
        due = {i: journal.invoice(i).due_date for i in order}  # type: ignore[union-attr]

    assert sorted(report.new) == ["DOTTED", "OFFSET", "PLAIN", "SHORT", "ZULU"]
    assert order == ("SHORT", "OFFSET", "PLAIN", "ZULU", "DOTTED")
    assert due == {
        "SHORT": None,
        "OFFSET": "2026-12-03",
        "PLAIN": "2026-12-04",
        "ZULU": "2026-12-05",
        "DOTTED": None,
    }

    sandbox = emulator()
    _, summary = send(
        settings_for(tmp_path / "send.db"), outbox, sandbox.transport(), concurrency=1
    )
    assert [result.invoice_id for result in summary.results] == list(order)


@pytest.fixture
def journal(tmp_path: Path, outbox: Path):
    write_invoice(outbox, "LATE-DUE", due_date="2026-12-30", issue_date="2026-11-01")
    write_invoice(outbox, "SOON-DUE", due_date="2026-12-05", issue_date="2026-11-20")
    write_invoice(outbox, "UNDATED", issue_date="2026-11-10")
    write_invoice(outbox, "MEANS-DUE", payment_due_date="2026-12-07", issue_date="2026-11-15")
    write_invoice(outbox, "CREDIT", document_type="CreditNote", issue_date="2026-12-01")
    with Journal(tmp_path / "journal.db") as opened:
        scan_directory(opened, outbox)
        yield opened


def test_new_sends_go_soonest_due_first(journal: Journal) -> None:
    now = datetime.now(UTC)
    # An undated invoice goes by its issue date (2026-11-10): ahead of everything due later.
    assert plan(journal, now).pending == ("UNDATED", "CREDIT", "SOON-DUE", "MEANS-DUE", "LATE-DUE")
    issued = ("LATE-DUE", "UNDATED", "MEANS-DUE", "SOON-DUE", "CREDIT")
    assert plan(journal, now, SendOrder.issue).pending == issued
    # As they arrived: one scan, so by ID.
    scanned = ("CREDIT", "LATE-DUE", "MEANS-DUE", "SOON-DUE", "UNDATED")
    assert plan(journal, now, SendOrder.scan).pending == scanned


def test_the_cli_offers_exactly_the_orders() -> None:
    assert [str(choice) for choice in SendOrderChoice] == [str(order) for order in SendOrder]


def test_a_send_takes_them_in_that_order(tmp_path: Path, outbox: Path) -> None:
    for invoice_id, due in (("C", "2026-12-30"), ("A", "2026-12-03"), ("B", "2026-12-10")):
        write_invoice(outbox, invoice_id, due_date=due)
    sandbox = emulator()
    journal_path = tmp_path / "send.db"

    _, summary = send(settings_for(journal_path), outbox, sandbox.transport(), concurrency=1)

    assert [result.invoice_id for result in summary.results] == ["A", "B", "C"]


def test_the_dry_run_shows_the_order_and_what_would_miss_its_due_date(
    tmp_path: Path, outbox: Path
) -> None:
    today = datetime.now(UTC).date()
    write_invoice(outbox, "DUE-TODAY", due_date=today.isoformat())
    write_invoice(outbox, "DUE-LATER", due_date=(today + timedelta(days=30)).isoformat())
    write_invoice(outbox, "DUE-PAST", due_date=(today - timedelta(days=1)).isoformat())
    journal_path = tmp_path / "dry.db"

    done = subprocess.run(
        [sys.executable, "-m", "invoicectl", "send", str(outbox), "--dry-run", "--json"]
        + ["--journal", str(journal_path), "--rate", "100"],
        capture_output=True,
        text=True,
    )

    document = json.loads(done.stdout)
    assert document["order"] == "due"
    assert document["would_send"] == ["DUE-PAST", "DUE-TODAY", "DUE-LATER"]
    late = [entry["invoice_id"] for entry in document["would_miss_due_date"]]
    assert late == ["DUE-PAST"]  # today's still goes out today at 100/min

    text = subprocess.run(
        [sys.executable, "-m", "invoicectl", "send", str(outbox), "--dry-run"]
        + ["--journal", str(journal_path), "--order", "scan"],
        capture_output=True,
        text=True,
    ).stdout
    assert "  order (scan): DUE-LATER, DUE-PAST, DUE-TODAY" in text
    assert f"  late     DUE-PAST: due {today - timedelta(days=1)}" in text


def test_invoices_read_before_due_dates_were_get_theirs_at_the_next_scan(
    tmp_path: Path, outbox: Path
) -> None:
    """A journal from before due dates: the next scan reads the stored bytes of its pending
    invoices once, so the send after it goes soonest due first."""
    write_invoice(outbox, "LATER", due_date="2026-12-30", issue_date="2026-11-01")
    write_invoice(outbox, "SOONER", due_date="2026-12-05", issue_date="2026-11-20")
    path = tmp_path / "old.db"
    with Journal(path) as journal:
        scan_directory(journal, outbox)
    with sqlite3.connect(path) as conn:  # what the previous version wrote: no due date read
        conn.execute("UPDATE revisions SET facts = json_remove(facts, '$.due_date')")
        conn.execute("UPDATE invoices SET due_date = NULL")
        conn.execute("INSERT INTO unfinished (name) VALUES ('due_dates')")  # as m005 leaves it

    with Journal(path) as journal:
        assert plan(journal, datetime.now(UTC)).pending == ("LATER", "SOONER")  # issue dates
        report = scan_directory(journal, outbox)
        assert report.unchanged == 2  # nothing else changed
        assert plan(journal, datetime.now(UTC)).pending == ("SOONER", "LATER")
        assert journal.undated(InvoiceState.pending) == []  # read once, not at every scan
        assert journal.facts("SOONER", journal.invoice("SOONER").current_sha256)["due_date"] == (  # type: ignore[union-attr]
            "2026-12-05"
        )


def test_the_dry_run_escapes_a_mark_that_turns_a_line_around(tmp_path: Path, outbox: Path) -> None:
    """An ID may hold U+202E (right-to-left override) inside it: printed raw, it reversed
    the rest of the terminal's line, and `status` escaped the same ID. (Such an ID is never
    sent now, a lookalike of the number without it: its invalid line shows it escaped.)"""
    yesterday = (datetime.now(UTC).date() - timedelta(days=1)).isoformat()
    write_invoice(outbox, "INV-\u202e1", due_date=yesterday)
    done = subprocess.run(
        [sys.executable, "-m", "invoicectl", "send", str(outbox), "--dry-run"]
        + ["--journal", str(tmp_path / "dry.db"), "--rate", "1"],
        capture_output=True,
        text=True,
    )
    assert "\u202e" not in done.stdout + done.stderr
    assert "holds an invisible character (U+202E)" in done.stdout
    assert "'INV-\\u202e1'" in done.stdout

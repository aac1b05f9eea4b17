"""The history check's horizon and a pre-dated invoice.

The search stops at the oldest issue date less a week, on the rule that an invoice is not sent
before it is issued. A pre-dated invoice (dated the end of next month, sent today) breaks the
rule: GoRoute's transaction for it is older than its issue date, so a search that stops there
misses it, says it searched "back to the horizon" (complete), and the invoice is sent twice.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sendkit import assert_each_delivered_once, emulator, send, settings_for
from test_history import day_later
from ublfactory import write_invoice

from invoicectl.journal import Journal
from invoicectl.journal.records import Hold, InvoiceState
from invoicectl.reconcile.search_result import SearchSummary
from invoicectl.send.history import HELD_BY
from invoicectl.send.history_loss import covered, horizon_of, issued_on


def test_a_pre_dated_invoice_sent_before_its_issue_date_is_not_sent_twice(
    outbox: Path, tmp_path: Path
):
    journal_path = tmp_path / "journal.db"
    issued = (datetime.now(UTC) + timedelta(days=40)).date().isoformat()
    write_invoice(outbox, "PRE-1", issue_date=issued)
    sandbox = emulator()
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), warn=lambda line: None)
    # More than a page of later sends from elsewhere (another outbox, the same account).
    archive = tmp_path / "archive"
    archive.mkdir()
    for number in range(130):
        write_invoice(archive, f"LATER-{number:03d}")
    send(settings, archive, sandbox.transport(), warn=lambda line: None)
    assert sandbox.stats()["per_invoice"].get("PRE-1") == 1

    for path in tmp_path.glob("journal.db*"):
        path.unlink()  # the journal lost; the outbox and its marker stay
    sandbox.advance_clock(25 * 3600)
    send(settings, outbox, sandbox.transport(), warn=lambda line: None, clocks=day_later())

    assert sandbox.stats()["per_invoice"].get("PRE-1") == 1, "PRE-1 was sent twice"
    with Journal(journal_path) as journal:
        invoice = journal.invoice("PRE-1")
        assert invoice is not None
        assert (invoice.state, invoice.hold, invoice.held_by) == (
            InvoiceState.pending,
            Hold.held,
            HELD_BY,
        )
    shutil.rmtree(archive)


def test_an_issue_date_in_the_first_week_of_year_1_sends(outbox: Path, tmp_path: Path):
    """0001-01-01 (.NET's DateTime.MinValue, an ERP's "no date"): reckoning a week back from
    it overflowed, and every send that checks its history stopped with OverflowError, the
    invoices beside it never sent. Such a date bounds nothing, as no date does."""
    journal_path = tmp_path / "journal.db"
    write_invoice(outbox, "D1", issue_date="0001-01-01")
    write_invoice(outbox, "D2")
    sandbox = emulator()
    send(settings_for(journal_path), outbox, sandbox.transport(), warn=lambda line: None)
    assert_each_delivered_once(sandbox.stats(), ["D1", "D2"])

    with Journal(journal_path) as journal:
        invoice = journal.invoice("D1")
    assert invoice is not None
    now = datetime.now(UTC)
    assert issued_on(invoice, now) is None and horizon_of([invoice], now) is None
    summary = SearchSummary(complete=False, reached="2026-11-01T00:00:00Z")
    assert not covered(invoice, summary, now)

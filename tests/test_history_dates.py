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

from sendkit import emulator, send, settings_for
from test_history import day_later
from ublfactory import write_invoice

from invoicectl.journal import Journal
from invoicectl.journal.records import Hold, InvoiceState
from invoicectl.send.history import HELD_BY


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

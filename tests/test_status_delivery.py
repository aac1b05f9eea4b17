"""status shows delivery: an accepted invoice whose delivery failed (the emulator's
``9915:reject-all`` receiver, read back by a real reconcile) is in the counts, first among the
accepted in the table, in a pipe's lines, and makes the exit code 4 (it needs a person)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from backends import cli_journal
from reconcile_staging import add_invoice, run_reconcile, sent
from rich.console import Console
from typer.testing import CliRunner

from invoicectl.cli import app
from invoicectl.errors import ExitCode
from invoicectl.journal import Journal, open_journal
from invoicectl.lifecycle.plan import attention
from invoicectl.locations import Location
from invoicectl.reconcile import Verdict
from invoicectl.render.listing import attention_first
from invoicectl.render.page import print_page
from invoicectl.sandbox import Sandbox, SandboxConfig

RECEIVER = "9915:phase4-test-receiver"


@pytest.fixture
def sandbox() -> Sandbox:
    return Sandbox(SandboxConfig(rate_per_minute=100_000, max_concurrent=100, seed=7))


@pytest.fixture
def journal(journal_at: Location, monkeypatch: pytest.MonkeyPatch) -> Iterator[Journal]:
    monkeypatch.setenv("INVOICECTL_JOURNAL", cli_journal(journal_at))
    with open_journal(journal_at) as opened:
        yield opened


def stage(journal: Journal, outbox: Path, sandbox: Sandbox) -> None:
    """Three accepted invoices: two delivered, one whose receiver rejects everything."""
    for invoice_id in ("INV-A1", "INV-A2", "INV-Z9"):
        receiver = "9915:reject-all" if invoice_id == "INV-Z9" else RECEIVER
        add_invoice(journal, outbox, invoice_id, receiver=receiver)
        status = "failed" if invoice_id == "INV-Z9" else "delivered"
        txn = sandbox.add_transaction(invoice_id, receiver=receiver, status=status).id
        sent(journal, invoice_id, "accepted", http_status=202, outcome="accepted",
             transaction_id=txn, remote_status="sending")  # fmt: skip
    report = run_reconcile(journal, sandbox.transport())
    verdicts = {case.invoice_id: case.verdict for case in report.cases}
    assert verdicts["INV-Z9"] is Verdict.delivery_failed, verdicts


def test_a_delivery_failure_is_counted_listed_first_and_exits_4(
    journal: Journal, outbox: Path, sandbox: Sandbox
) -> None:
    assert attention(journal, journal.clock()) == ExitCode.OK  # nothing yet
    stage(journal, outbox, sandbox)

    assert journal.delivery_failure_count() == 1
    assert attention(journal, journal.clock()) == ExitCode.NEEDS_RECONCILE
    page = [record["invoice_id"] for record in attention_first(journal, 10)]
    assert page == ["INV-Z9", "INV-A1", "INV-A2"]  # the failure first, each once
    assert [r["invoice_id"] for r in attention_first(journal, 1)] == ["INV-Z9"]
    assert [r["invoice_id"] for r in attention_first(journal, 2)] == ["INV-Z9", "INV-A1"]
    console = Console(width=200, record=True, no_color=True)
    print_page(console, list(attention_first(journal, 10)), lines=50)
    assert "accepted, delivery failed" in console.export_text()

    result = CliRunner().invoke(app, ["status"])
    assert result.exit_code == 4, result.output
    assert "accepted 3 (1 delivery failed: a person must decide)" in result.output
    line = next(line for line in result.output.splitlines() if line.startswith("INV-Z9\t"))
    assert line.split("\t")[1] == "accepted" and "delivery failed" in line


def test_delivery_failures_are_counted_and_listed_from_their_own_index(journal: Journal) -> None:
    """In a journal of years (all delivered) the count and the page read only the failures."""
    from historykit import flat, history_invoice, query_plan, steps_at_two_sizes

    from invoicectl.journal.invoices import DELIVERY_FAILED

    for number, status in enumerate(("failed", "failed", "pending")):
        journal.insert_invoice(
            history_invoice(f"NOW-{number}", f"{number:064x}", remote_status=status)
        )

    def reads() -> None:
        assert journal.delivery_failure_count() == 2
        assert journal.delivery_failure_count(on_hold=False) == 2
        assert [listed.invoice_id for listed in journal.delivery_failures(5)] == [
            "NOW-0",
            "NOW-1",
        ]

    assert flat(steps_at_two_sizes(journal, reads, 300, 1500))
    for sql in (f"SELECT count(*) FROM invoices WHERE {DELIVERY_FAILED} AND hold IS NULL",
                f"SELECT * FROM invoices WHERE {DELIVERY_FAILED} ORDER BY invoice_id"):  # fmt: skip
        details, sorts = query_plan(journal, sql)
        assert "invoices_delivery_failed" in details and not sorts, details

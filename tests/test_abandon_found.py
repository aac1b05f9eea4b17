"""helper-106: ``abandon`` of an invoice reconcile had just found at GoRoute (its answer lost,
the transaction there) said only "abandoned (unknown)": a clerk who then posts it, as the
reason says, delivers it twice. The abandon stands (the operator's call); its line says what
reconcile found."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from reconcile_staging import NOW, add_invoice, run_reconcile, sent

from invoicectl.journal import Journal, open_journal
from invoicectl.lifecycle.holds import abandon
from invoicectl.reconcile import Verdict
from invoicectl.sandbox import Sandbox, SandboxConfig


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    with open_journal(tmp_path / "journal.db") as opened:
        yield opened


def test_abandoning_an_invoice_reconcile_found_says_it_may_be_delivered(
    journal: Journal, outbox: Path
) -> None:
    sandbox = Sandbox(SandboxConfig(rate_per_minute=100_000, max_concurrent=100, seed=3))
    add_invoice(journal, outbox, "INV-1")
    add_invoice(journal, outbox, "INV-2")
    sent(journal, "INV-1", "unknown", hours_ago=30)
    sent(journal, "INV-2", "unknown", hours_ago=30)
    first = NOW.timestamp() - 30 * 3600
    sandbox.add_transaction("INV-1", status="delivered", created_at=first + 600)
    report = run_reconcile(journal, sandbox.transport())
    verdicts = {case.invoice_id: case.verdict for case in report.cases}
    assert verdicts["INV-1"] is Verdict.unknown_found, verdicts

    found = abandon(journal, "INV-1", "sent by post", "clerk")
    not_found = abandon(journal, "INV-2", "sent by post", "clerk")

    assert found.done and not_found.done
    assert found.message.startswith("abandoned (unknown): sent by post; but reconcile found")
    assert "do not send it another way" in found.message
    assert not_found.message == "abandoned (unknown): sent by post"

"""helper-106: ``abandon`` of an invoice reconcile had just found at GoRoute (its answer lost,
the transaction there) said only "abandoned (unknown)": a clerk who then posts it, as the
reason says, delivers it twice. The abandon stands (the operator's call); its line says what
reconcile found."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from reconcile_staging import NOW, add_invoice, run_reconcile, sent

from invoicectl.errors import UsageError
from invoicectl.journal import Journal, open_journal
from invoicectl.lifecycle.decisions import check_new_version
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


def test_a_new_version_of_an_edited_invoice_reconcile_found_delivered_says_what_to_do(
    journal: Journal, outbox: Path
) -> None:
    """helper-106: the refusal advised `release --force`; done, the next --new-version met
    the same refusal and the same advice, round and round. GoRoute holds the version sent:
    restore the file, or a credit note; never a second delivery."""
    sandbox = Sandbox(SandboxConfig(rate_per_minute=100_000, max_concurrent=100, seed=5))
    add_invoice(journal, outbox, "INV-1")
    sent(journal, "INV-1", "unknown", hours_ago=30)
    sandbox.add_transaction("INV-1", status="delivered", created_at=NOW.timestamp() - 29 * 3600)
    add_invoice(journal, outbox, "INV-1", note="corrected")  # the file edited after its send
    assert journal.invoice("INV-1").state == "amended"
    run_reconcile(journal, sandbox.transport())
    assert journal.invoice("INV-1").verdict == "unknown_found"

    with pytest.raises(UsageError) as refused:
        check_new_version(journal, "INV-1", NOW + timedelta(hours=1))

    said = str(refused.value)
    assert "reconcile found the content its key invoice-INV-1 carried at GoRoute" in said
    assert "Restore the file to it" in said and "credit note" in said
    assert "--force" not in said

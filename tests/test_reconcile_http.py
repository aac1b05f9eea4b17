"""reconcile over real loopback HTTP: uvicorn serving the emulator, started and stopped here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from reconcile_staging import add_invoice, run_reconcile, sent, snapshot

from invoicectl.errors import ExitCode
from invoicectl.journal import Journal
from invoicectl.reconcile import Verdict
from invoicectl.sandbox import BackgroundServer, Sandbox, SandboxConfig

pytestmark = pytest.mark.slow


@pytest.fixture
def sandbox() -> Sandbox:
    return Sandbox(SandboxConfig(rate_per_minute=10_000, max_concurrent=20, seed=11))


@pytest.fixture
def server(sandbox: Sandbox) -> Iterator[BackgroundServer]:
    with BackgroundServer(sandbox) as running:
        yield running


def test_reconcile_and_apply_over_loopback(
    tmp_path: Path, outbox: Path, sandbox: Sandbox, server: BackgroundServer
) -> None:
    with Journal(tmp_path / "journal.db") as journal:
        for invoice_id in ("INV-1", "INV-2", "INV-3", "INV-4", "INV-5"):
            add_invoice(journal, outbox, invoice_id)
        sent_content = {"sha256": journal.invoice("INV-1").current_sha256}
        adopt = sandbox.add_transaction("INV-1", status="delivered", metadata=sent_content).id
        other = sandbox.add_transaction("INV-99", status="delivered").id
        sandbox.add_transaction("INV-3", status="sending")
        sent(journal, "INV-1", "key_reused", http_status=422, existing_transaction_id=adopt)
        sent(journal, "INV-2", "key_reused", http_status=422, existing_transaction_id=other)
        sent(journal, "INV-3", "unknown", hours_ago=3)
        sent(journal, "INV-4", "unknown", hours_ago=30)
        sent(journal, "INV-5", "key_reused", http_status=422, existing_transaction_id="tx_nope")
        before = snapshot(journal)

        base_url = server.base_url + "/peppol-api"
        report = run_reconcile(journal, base_url=base_url, apply=True)
        again = run_reconcile(journal, base_url=base_url, apply=True)
        after = snapshot(journal)

    assert {c.invoice_id: c.verdict for c in report.cases} == {
        "INV-1": Verdict.already_sent,
        "INV-2": Verdict.different_document,
        "INV-3": Verdict.unknown_found,
        "INV-4": Verdict.unknown_not_found_window_closed,
        "INV-5": Verdict.not_found,
    }
    assert sorted(report.applied) == ["INV-1", "INV-3"]
    assert report.exit_code == ExitCode.NEEDS_RECONCILE
    assert (after["INV-1"].state, after["INV-1"].transaction_id) == ("accepted", adopt)
    assert (after["INV-3"].state, after["INV-3"].remote_status) == ("accepted", "sending")
    # Not adopted: as they were, but for the verdict now recorded, and INV-2 held (a key that
    # carried another document must not be sent again on its own).
    verdict_columns = {"verdict", "verdict_at"}
    hold_columns = {"hold", "hold_reason", "held_at", "held_by", "updated_at"}
    for invoice_id, moved in (
        ("INV-2", verdict_columns | hold_columns),
        ("INV-4", verdict_columns),
    ):
        was, now = vars(before[invoice_id]), vars(after[invoice_id])
        assert {k for k in was if was[k] != now[k]} == moved, invoice_id
    assert report.held == ("INV-2",) and after["INV-2"].hold == "held"
    was, now = vars(before["INV-5"]), vars(after["INV-5"])
    assert {k for k in was if was[k] != now[k]} == verdict_columns
    # The second run: nothing left to apply; INV-3's delivery is now followed instead.
    assert again.applied == ()
    assert {c.invoice_id: c.verdict for c in again.cases} == {
        "INV-2": Verdict.different_document,
        "INV-3": Verdict.delivery_pending,
        "INV-4": Verdict.unknown_not_found_window_closed,
        "INV-5": Verdict.not_found,
    }
    assert sandbox.stats()["accepted"] == 0  # reconcile never sends

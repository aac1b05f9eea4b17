"""An unanswered send that reconcile's search did not reach back to is no proof of none.

helper-106: a send whose answer was lost (the emulator delivered it), its key's window closed,
and 5,200 newer transactions in the account: reconcile's list search stopped after 50 pages,
short of the key's first use (``unknown_search_incomplete``), and ``send --new-version`` took
that verdict as proof that nothing was delivered: the emulator then held the invoice twice.
It now waits for the operator's word (``release --force``), as a 409 and a history check's
short search do.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from reconcile_staging import NOW, add_invoice, run_reconcile, sent

from invoicectl.errors import UsageError
from invoicectl.journal import Journal, open_journal
from invoicectl.lifecycle.decisions import check_new_version
from invoicectl.lifecycle.holds import release
from invoicectl.reconcile import GUIDANCE, Verdict
from invoicectl.sandbox import Sandbox, SandboxConfig


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    with open_journal(tmp_path / "journal.db") as opened:
        yield opened


def _delivered_beyond_the_search(journal: Journal, outbox: Path) -> Sandbox:
    """INV-1 sent 30 hours ago, its answer lost, and delivered; 150 newer transactions in a
    list that says nothing of paging, so a search of 100 stops short of INV-1's."""
    config = SandboxConfig(rate_per_minute=100_000, max_concurrent=100, seed=7, list_paging=False)
    sandbox = Sandbox(config)
    add_invoice(journal, outbox, "INV-1")
    sent(journal, "INV-1", "unknown", hours_ago=30)
    first = NOW.timestamp() - 30 * 3600
    sandbox.add_transaction("INV-1", status="delivered", created_at=first + 600)
    for number in range(150):
        sandbox.add_transaction(f"OTHER-{number}", created_at=NOW.timestamp() - 3000 + number)
    return sandbox


def test_a_search_cut_short_gets_no_new_key_without_the_operators_word(
    journal: Journal, outbox: Path
) -> None:
    sandbox = _delivered_beyond_the_search(journal, outbox)
    report = run_reconcile(journal, sandbox.transport(), list_limit=100, apply=True)
    (case,) = report.cases
    assert case.verdict is Verdict.unknown_search_incomplete
    later = NOW + timedelta(hours=1)

    with pytest.raises(UsageError) as refused:
        check_new_version(journal, "INV-1", later)
    assert "stopped before key invoice-INV-1 was first used" in str(refused.value)
    assert "`invoicectl release INV-1 --force`, then --new-version" in str(refused.value)

    word = release(journal, "INV-1", "clerk", force=True)
    assert word.done and word.message.startswith("not held; the evidence dismissed (reconcile's")
    assert check_new_version(journal, "INV-1", later).invoice_id == "INV-1"


def test_a_plain_release_gives_no_word_and_the_guidance_names_the_force(
    journal: Journal, outbox: Path
) -> None:
    sandbox = _delivered_beyond_the_search(journal, outbox)
    run_reconcile(journal, sandbox.transport(), list_limit=100)

    assert release(journal, "INV-1", "clerk").message == "not held"
    with pytest.raises(UsageError, match="stopped before key invoice-INV-1 was first used"):
        check_new_version(journal, "INV-1", NOW + timedelta(hours=1))
    guidance = GUIDANCE[Verdict.unknown_search_incomplete]
    assert "`invoicectl release ID --force`, then" in guidance.next_step

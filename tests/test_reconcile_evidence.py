"""Verdicts that say "no delivery" clear the evidence that GoRoute may hold one; they must be
reached only on what shows it (helper-86).

Each case below once ended in a verdict of no delivery (``different_document``,
``sent_then_failed``) or noted no evidence, where GoRoute did hold a delivery: the evidence
was cleared, a plain ``release`` or ``--new-version`` was then allowed, and the invoice went
out a second time.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from journalkit import force
from reconcile_staging import NOW, add_invoice, run_reconcile, sent
from sendkit import emulator, send, settings_for
from ublfactory import write_invoice

from invoicectl.errors import UsageError
from invoicectl.journal import open_journal
from invoicectl.lifecycle.decisions import check_new_version
from invoicectl.lifecycle.evidence import standing_evidence
from invoicectl.lifecycle.holds import release
from invoicectl.reconcile.runner import reconcile
from invoicectl.reconcile.verdicts import Verdict
from invoicectl.scan.ingest import scan_directory


class EditedGet(httpx.AsyncBaseTransport):
    """The emulator, with each transaction's own GET edited by ``edit`` (its list row not)."""

    def __init__(self, inner: httpx.AsyncBaseTransport, edit: Any) -> None:
        self.inner, self.edit = inner, edit

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.method == "GET" and "/api/v1/transactions/" in request.url.path:
            await response.aread()
            body = json.loads(response.content)
            self.edit(body)
            return httpx.Response(response.status_code, json=body)
        return response


def _another_receiver(body: dict[str, Any]) -> None:
    body["receiver"] = {"scheme": "9915", "identifier": "someone-else"}


def _no_number(body: dict[str, Any]) -> None:
    body.pop("document_id", None)


@pytest.mark.parametrize("edit", [_another_receiver, _no_number])
def test_a_history_checks_find_whose_get_disagrees_is_not_cleared(tmp_path: Path, edit: Any):
    """GoRoute holds INV-1, delivered; a new journal's history check held it with that
    transaction. Its GET naming another receiver than its list row, or no number at all,
    was `different_document`: evidence cleared, and `release` sent INV-1 again."""
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    write_invoice(outbox, "INV-1")
    goroute = emulator()
    goroute.add_transaction("INV-1", status="delivered")
    settings = settings_for(tmp_path / "j.db")
    send(settings, outbox, goroute.transport(), warn=lambda line: None)

    report = reconcile(settings, apply=True, transport=EditedGet(goroute.transport(), edit))

    assert [case.verdict for case in report.cases] == [Verdict.content_unconfirmed]
    with open_journal(tmp_path / "j.db") as journal:
        refused = release(journal, "INV-1", by="clerk")  # the evidence stands
        assert not refused.done and "it could be delivered twice" in refused.message
    send(settings, outbox, goroute.transport(), warn=lambda line: None)
    assert goroute.stats()["sends_received"] == 0


def test_a_key_reused_get_without_a_number_keeps_the_evidence(tmp_path: Path):
    """The first reconcile found another version delivered under the 422's transaction; a
    second, whose GET carried no number, cleared that as `different_document`."""
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    goroute = emulator()
    with open_journal(tmp_path / "j.db") as journal:
        _refused_naming_another_version(journal, outbox, goroute)
        first = run_reconcile(journal, goroute.transport(), apply=True)
        second = run_reconcile(journal, EditedGet(goroute.transport(), _no_number), apply=True)

        assert [case.verdict for case in first.cases] == [Verdict.other_version]
        assert [case.verdict for case in second.cases] == [Verdict.content_unconfirmed]
        assert "carries no invoice number" in second.cases[0].detail
        refused = release(journal, "INV-1", by="clerk")  # the evidence stands
        assert not refused.done and "it could be delivered twice" in refused.message


def _refused_naming_another_version(journal: Any, outbox: Path, goroute: Any) -> None:
    """INV-1's send refused as used (``_refused_as_used``), its window closed, naming a
    transaction GoRoute delivered in other content."""
    add_invoice(journal, outbox, "INV-1")
    existing = goroute.add_transaction("INV-1", status="delivered", metadata={"sha256": "c" * 64})
    _refused_as_used(journal, existing.id)


def _refused_as_used(journal: Any, existing: str) -> None:
    """INV-1's send 30 hours ago answered 422, its key used, naming ``existing``."""
    sent(
        journal,
        "INV-1",
        "key_reused",
        http_status=422,
        existing_transaction_id=existing,
        hours_ago=30,
    )


def _delivered_before_a_failed_send(
    journal: Any, outbox: Path, goroute: Any, hours_ago: float = 30
) -> None:
    """INV-1 delivered two days before this journal's unanswered send (``hours_ago``), whose
    own transaction failed."""
    add_invoice(journal, outbox, "INV-1")
    sent(journal, "INV-1", "unknown", hours_ago=hours_ago)
    first_attempt = (NOW - timedelta(hours=hours_ago)).timestamp()
    goroute.add_transaction("INV-1", status="delivered", created_at=first_attempt - 2 * 86400)
    goroute.add_transaction("INV-1", status="failed", created_at=first_attempt + 5)


def _traffic_since(goroute: Any) -> None:
    """The account's other traffic since: two pages of five no longer reach back."""
    for n in range(9):
        goroute.add_transaction(f"OTHER-{n}", created_at=NOW.timestamp() - 600 + n)


def test_one_failed_match_in_a_search_cut_short_keeps_evidence_of_an_earlier_delivery(
    tmp_path: Path,
):
    """INV-1 was delivered two days before this journal's unanswered send, whose own
    transaction failed. A second reconcile, its search cut at two pages of a busy list, saw
    only the failed one: `sent_then_failed` cleared the evidence of the delivery."""
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    goroute = emulator()
    with open_journal(tmp_path / "j.db") as journal:
        _delivered_before_a_failed_send(journal, outbox, goroute)
        first = run_reconcile(journal, goroute.transport(), apply=True)
        _traffic_since(goroute)
        second = run_reconcile(
            journal, goroute.transport(), apply=True, list_limit=5, max_list_pages=2
        )

        assert [case.verdict for case in first.cases] == [Verdict.unknown_ambiguous]
        (case,) = second.cases
        assert case.verdict is Verdict.sent_then_failed  # the failed one is this key's
        assert "the search stopped short" in case.detail
        refused = release(journal, "INV-1", by="clerk")  # the evidence stands
        assert not refused.done and "it could be delivered twice" in refused.message


def test_a_404_for_the_transaction_a_422_named_is_evidence_beneath_an_edit(tmp_path: Path):
    """Amended over key_reused, the 404 for the 422's transaction noted no evidence (the
    state was no longer key_reused), and `--new-version` went out; without the edit it is
    refused."""
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    goroute = emulator()
    with open_journal(tmp_path / "j.db") as journal:
        add_invoice(journal, outbox, "INV-1")
        unknown_txn = "txn_000000000000000000000001"
        _refused_as_used(journal, unknown_txn)
        write_invoice(outbox, "INV-1", amount="999.00")
        scan_directory(journal, outbox, workers=1)
        assert journal.invoice("INV-1").state == "amended"

        report = run_reconcile(journal, goroute.transport(), apply=True)

        assert [case.verdict for case in report.cases] == [Verdict.not_found]
        assert "delivery_evidence" in [event.kind for event in journal.events("INV-1")]
        with pytest.raises(UsageError, match="then answered 404 for it"):
            check_new_version(journal, "INV-1", datetime.now(UTC))


def test_a_key_reused_get_that_never_names_a_number_asks_a_person_who_can_decide(
    tmp_path: Path,
):
    """helper-88: judged `lookup_failed`, such an invoice asked for one more reconcile on
    every run (the API had answered, and answered the same), recorded no verdict, and
    `release --force` had nothing to dismiss: `--new-version` stayed refused for good. It
    asks a person now, whose `release --force` lets it go on."""
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    goroute = emulator()
    with open_journal(tmp_path / "j.db") as journal:
        add_invoice(journal, outbox, "INV-1")
        existing = goroute.add_transaction("INV-2", status="delivered").id
        _refused_as_used(journal, existing)
        report = run_reconcile(journal, EditedGet(goroute.transport(), _no_number), apply=True)

        (case,) = report.cases
        assert case.verdict is Verdict.content_unconfirmed and case.needs_person
        assert f"ask GoRoute which invoice {existing} is" in case.action
        released = release(journal, "INV-1", by="clerk", force=True)
        assert released.done and "`invoicectl send DIR --new-version INV-1`" in released.message
        check_new_version(journal, "INV-1", datetime.now(UTC))  # the operator's word stands


def test_a_finding_an_operator_answered_is_not_held_again_until_it_changes(tmp_path: Path):
    """helper-89: after `release --force` of a 422's transaction whose GET names no number,
    every `reconcile --apply` held the invoice again for the same finding, and the cron run's
    operator released it again. A finding that changes (GoRoute's record now names the
    invoice, in other content) holds it again."""
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    goroute = emulator()
    with open_journal(tmp_path / "j.db") as journal:
        _refused_naming_another_version(journal, outbox, goroute)
        numberless = EditedGet(goroute.transport(), _no_number)
        run_reconcile(journal, numberless, apply=True)
        assert release(journal, "INV-1", by="clerk", force=True).done

        (again,) = run_reconcile(journal, numberless, apply=True).cases

        assert again.verdict is Verdict.content_unconfirmed
        assert journal.invoice("INV-1").hold is None
        assert "`release --force` answered this same finding" in again.action
        assert "`invoicectl send DIR --new-version INV-1`" in again.action
        check_new_version(journal, "INV-1", datetime.now(UTC))

        (changed,) = run_reconcile(journal, goroute.transport(), apply=True).cases

        assert changed.verdict is Verdict.other_version
        assert journal.invoice("INV-1").hold is not None
        with pytest.raises(UsageError):
            check_new_version(journal, "INV-1", datetime.now(UTC))


@pytest.mark.parametrize("hours_ago", [30, 2], ids=["window closed", "window open"])
def test_evidence_an_older_journal_keeps_in_the_row_outlives_a_verdict_that_clears_nothing(
    tmp_path: Path, hours_ago: float
):
    """helper-89: a journal written before evidence was an event keeps it as the row's
    verdict (`unknown_ambiguous`). A short search's `sent_then_failed`, which clears nothing,
    still replaced that verdict, and the evidence with it: `--new-version` went out. The
    way on it names is one that is taken: with the key's window open, a replay first
    (helper-90)."""
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    goroute = emulator()
    with open_journal(tmp_path / "j.db") as journal:
        _delivered_before_a_failed_send(journal, outbox, goroute, hours_ago)
        _traffic_since(goroute)
        earlier = (NOW - timedelta(hours=2)).isoformat()
        force(journal, "INV-1", verdict="unknown_ambiguous", verdict_at=earlier)
        assert standing_evidence(journal, journal.invoice("INV-1")) is not None

        report = run_reconcile(
            journal, goroute.transport(), apply=True, list_limit=5, max_list_pages=2
        )

        (case,) = report.cases
        assert case.verdict is Verdict.sent_then_failed and case.short_search
        assert "evidence of an earlier delivery stands" in case.action
        assert standing_evidence(journal, journal.invoice("INV-1")) is not None
        with pytest.raises(UsageError):
            check_new_version(journal, "INV-1", datetime.now(UTC))
        assert ("(it replays the key)" in case.action) is (hours_ago < 24)
        assert release(journal, "INV-1", by="clerk", force=True).done  # its first step
        if hours_ago >= 24:  # and, the window closed, its last
            check_new_version(journal, "INV-1", datetime.now(UTC))


def test_a_searchs_finding_released_over_is_held_again_when_found_again(tmp_path: Path):
    """helper-94: under one verdict a search may find more the next time: a short search
    found a failed transaction (`unknown_sent_earlier`), the operator released it with
    --force, and the full search then found an earlier delivery. Judged "the same finding",
    it went unheld, and `--new-version` delivered the invoice twice. Only a finding on the
    key's own transaction stands on the operator's word."""
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    goroute = emulator()
    with open_journal(tmp_path / "j.db") as journal:
        add_invoice(journal, outbox, "INV-1")
        sent(journal, "INV-1", "unknown", hours_ago=30)
        first = (NOW - timedelta(hours=30)).timestamp()
        goroute.add_transaction("INV-1", status="failed", created_at=first - 3600)
        delivered = goroute.add_transaction(
            "INV-1", status="delivered", created_at=first - 3 * 86400
        )
        for n in range(9):
            goroute.add_transaction(f"OTHER-{n}", created_at=first - 2 * 86400 + n)
        short = run_reconcile(
            journal, goroute.transport(), apply=True, list_limit=5, max_list_pages=2
        )
        assert [case.verdict for case in short.cases] == [Verdict.unknown_sent_earlier]
        assert release(journal, "INV-1", by="clerk", force=True).done

        (again,) = run_reconcile(journal, goroute.transport(), apply=True).cases

        assert again.verdict is Verdict.unknown_sent_earlier and delivered.id in again.detail
        assert journal.invoice("INV-1").hold is not None
        with pytest.raises(UsageError):
            check_new_version(journal, "INV-1", datetime.now(UTC))

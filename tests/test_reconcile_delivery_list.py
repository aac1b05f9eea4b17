"""reconcile refreshes accepted invoices' delivery status from the transactions list.

Counted from the emulator's own stats (``transaction_lists``, ``transaction_gets``): a page
answers about a hundred invoices, a GET one. What the list does not show, shows twice in two
ways, or shows otherwise than the journal holds falls back to the GET, so the verdicts are
the ones a GET per invoice reaches.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from reconcile_staging import run_reconcile, sent
from ublfactory import write_invoice

from invoicectl.journal import Journal
from invoicectl.reconcile import Verdict
from invoicectl.sandbox import Sandbox, SandboxConfig
from invoicectl.scan.ingest import scan_directory

RECEIVER = "9915:phase4-test-receiver"


@pytest.fixture
def sandbox() -> Sandbox:
    return Sandbox(SandboxConfig(rate_per_minute=1_000_000, max_concurrent=100, seed=7))


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    with Journal(tmp_path / "journal.db") as opened:
        yield opened


def stage_accepted(
    journal: Journal, outbox: Path, sandbox: Sandbox, statuses: dict[str, str]
) -> dict[str, str]:
    """Accepted invoices (as a send leaves them: no delivery status yet), each with its
    transaction in the emulator pinned at ``statuses[id]``; returns id -> transaction id."""
    receivers = {i: "9915:reject-all" if s == "failed" else RECEIVER for i, s in statuses.items()}
    for invoice_id, receiver in receivers.items():
        write_invoice(outbox, invoice_id, receiver=receiver)
    scan_directory(journal, outbox, workers=1)
    txns: dict[str, str] = {}
    for invoice_id, status in statuses.items():
        sha256 = journal.invoice(invoice_id).current_sha256  # type: ignore[union-attr]
        txn = sandbox.add_transaction(
            invoice_id, receiver=receivers[invoice_id], status=status, metadata={"sha256": sha256}
        )
        txns[invoice_id] = txn.id
        sent(journal, invoice_id, "accepted", http_status=202, outcome="accepted",
             transaction_id=txn.id)  # fmt: skip
    return txns


def reads(sandbox: Sandbox) -> tuple[int, int]:
    stats = sandbox.stats()
    return stats["transaction_lists"], stats["transaction_gets"]


def verdicts(report: object) -> dict[str, Verdict]:
    return {case.invoice_id: case.verdict for case in report.cases}  # type: ignore[attr-defined]


def test_accepted_invoices_are_refreshed_a_page_at_a_time(
    journal: Journal, outbox: Path, sandbox: Sandbox
) -> None:
    statuses = {f"INV-{n:04d}": "delivered" if n % 3 else "sending" for n in range(300)}
    stage_accepted(journal, outbox, sandbox, statuses)

    report = run_reconcile(journal, sandbox.transport())

    lists, gets = reads(sandbox)
    assert (lists, gets) == (3, 0)  # 300 invoices, 100 a page: 1 request per 100
    assert report.requests == 3
    expected = {
        i: Verdict.delivered if s == "delivered" else Verdict.delivery_pending
        for i, s in statuses.items()
    }
    assert verdicts(report) == expected
    assert journal.invoice("INV-0001").remote_status == "delivered"  # type: ignore[union-attr]

    # Again: the delivered are final and not asked for; the 100 on their way are, one in
    # three rows of the list: the same three pages.
    again = run_reconcile(journal, sandbox.transport())
    assert reads(sandbox) == (3 + 3, 0)
    assert {c.invoice_id for c in again.cases} == {
        i for i, s in statuses.items() if s != "delivered"
    }


def test_a_journal_whose_accepted_invoices_are_all_final_asks_nothing(
    journal: Journal, outbox: Path, sandbox: Sandbox
) -> None:
    statuses = {f"INV-{n:04d}": "delivered" for n in range(40)} | {"INV-F": "failed"}
    stage_accepted(journal, outbox, sandbox, statuses)
    run_reconcile(journal, sandbox.transport())
    before = reads(sandbox)

    report = run_reconcile(journal, sandbox.transport())

    assert reads(sandbox) == before and report.requests == 0
    assert verdicts(report) == {"INV-F": Verdict.delivery_failed}  # recorded earlier


def test_a_failure_the_list_shows_is_confirmed_by_its_get(
    journal: Journal, outbox: Path, sandbox: Sandbox
) -> None:
    statuses = {f"INV-{n:04d}": "delivered" for n in range(20)} | {"INV-F": "failed"}
    stage_accepted(journal, outbox, sandbox, statuses)

    report = run_reconcile(journal, sandbox.transport())

    assert reads(sandbox) == (1, 1)
    assert verdicts(report)["INV-F"] is Verdict.delivery_failed


class EditedList(httpx.AsyncBaseTransport):
    """The emulator, with every transactions-list page passed through ``edit`` first."""

    def __init__(self, sandbox: Sandbox, edit: Callable[[list[dict]], list[dict]]) -> None:
        self._inner = sandbox.transport()
        self._edit = edit

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        answer = await self._inner.handle_async_request(request)
        if not request.url.path.endswith("/api/v1/transactions"):
            return answer
        await answer.aread()
        body = json.loads(answer.content)
        body["transactions"] = self._edit(body["transactions"])
        return httpx.Response(answer.status_code, json=body)


DELIVERED = {"status": "delivered", "delivered_at": "2026-01-01T00:00:00Z"}


def _lie(rows: list[dict], txn_id: str, **changes: object) -> list[dict]:
    """``txn_id``'s row said delivered (with a time), and ``changes``."""
    return [row | DELIVERED | changes if row["transaction_id"] == txn_id else row for row in rows]


@pytest.mark.parametrize(
    ("name", "edit"),
    [
        # Says delivered, but for another invoice number / receiver: not this invoice's row.
        ("another number", lambda rows, t: _lie(rows, t, invoice_number="X")),
        ("another receiver", lambda rows, t: _lie(rows, t, receiver_id="1")),
        # Delivered without a delivery time: not taken.
        ("no delivered_at", lambda rows, t: _lie(rows, t, delivered_at=None)),
        # The same id twice, once on its way, once delivered: the list contradicts itself.
        (
            "two answers",
            lambda rows, t: rows + [r | DELIVERED for r in rows if r["transaction_id"] == t],
        ),
        # The row left out, the page out of order: never "not found", never delivered.
        ("left out", lambda rows, t: [r for r in reversed(rows) if r["transaction_id"] != t]),
    ],
)
def test_a_list_that_lies_never_makes_an_invoice_look_delivered_or_absent(
    journal: Journal,
    outbox: Path,
    sandbox: Sandbox,
    name: str,
    edit: Callable[[list[dict], str], list[dict]],
) -> None:
    statuses = {f"INV-{n:04d}": "delivered" for n in range(10)} | {"INV-P": "processing"}
    txns = stage_accepted(journal, outbox, sandbox, statuses)
    target = txns["INV-P"]

    report = run_reconcile(journal, EditedList(sandbox, lambda rows: edit(rows, target)))

    assert verdicts(report)["INV-P"] is Verdict.delivery_pending, name  # what its GET says
    assert reads(sandbox)[1] == 1, name  # that one GET, the rest from the list
    assert journal.invoice("INV-P").remote_status == "processing"  # type: ignore[union-attr]


def test_the_report_shows_what_needs_a_person_and_sums_up_the_rest(
    journal: Journal, outbox: Path, sandbox: Sandbox
) -> None:
    import io

    from rich.console import Console

    from invoicectl.render.reconcile import print_report

    statuses = {f"INV-{n:04d}": "delivered" for n in range(20)} | {"INV-F": "failed"}
    stage_accepted(journal, outbox, sandbox, statuses)
    report = run_reconcile(journal, sandbox.transport())

    def shown(every: bool) -> str:
        buffer = io.StringIO()
        print_report(Console(file=buffer, width=100, no_color=True), report, every=every)
        return buffer.getvalue()

    short = shown(every=False)
    assert "INV-F" in short and "INV-0003" not in short
    assert short.index("delivery failed (1, needs a person)") < short.index("delivered (20, no")
    assert "20 cases that need no person not listed; --all lists them" in short
    assert " ".join(short.split()).endswith(
        "In short: 21 invoices checked; 1 need a person (1 delivery failed); 20 need nothing "
        "now (20 delivered); 2 requests to GoRoute; exit 4."
    )
    assert "INV-0003" in shown(every=True)


class RenamedStatus(httpx.AsyncBaseTransport):
    """The emulator, with a status it never gives (``status``; None: the field left out) in
    place of ``processing`` in every transactions answer, list or GET."""

    def __init__(self, sandbox: Sandbox, status: str | None) -> None:
        self._inner = sandbox.transport()
        self._status = status

    def _renamed(self, txn: dict) -> dict:
        if txn.get("status") != "processing":
            return txn
        rest = {k: v for k, v in txn.items() if k != "status"}
        return rest if self._status is None else rest | {"status": self._status}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        answer = await self._inner.handle_async_request(request)
        if "/api/v1/transactions" not in request.url.path or answer.status_code != 200:
            return answer
        await answer.aread()
        body = json.loads(answer.content)
        if "transactions" in body:
            body["transactions"] = [self._renamed(row) for row in body["transactions"]]
        else:
            body = self._renamed(body)
        return httpx.Response(200, json=body)


@pytest.mark.parametrize("status", ["rejected", "ERROR", "cancelled", None])
def test_a_status_goroute_does_not_document_is_no_delivery_on_its_way(
    journal: Journal, outbox: Path, sandbox: Sandbox, status: str | None
) -> None:
    """helper-107: a transaction GoRoute answered "rejected" (a status none of its documented
    five) was reported "delivery in progress, no person needed", exit 0, run after run. It
    is unknown whether it reaches its receiver: a person asks GoRoute (exit 4); not a
    failure either, after which --new-version could deliver it twice."""
    statuses = {"INV-0001": "delivered", "INV-0002": "sending", "INV-X": "processing"}
    stage_accepted(journal, outbox, sandbox, statuses)

    report = run_reconcile(journal, RenamedStatus(sandbox, status))

    cases = {case.invoice_id: case for case in report.cases}
    assert verdicts(report) == {
        "INV-0001": Verdict.delivered,
        "INV-0002": Verdict.delivery_pending,
        "INV-X": Verdict.delivery_pending,
    }
    assert not cases["INV-0002"].needs_person
    unknown = cases["INV-X"]
    assert unknown.needs_person, unknown.action
    assert "whether INV-X reaches its receiver is unknown; ask GoRoute" in unknown.action
    assert report.exit_code == 4


def test_the_report_counts_who_needs_a_person_case_by_case(
    journal: Journal, outbox: Path, sandbox: Sandbox
) -> None:
    """helper-106: a group where one case needs a person was counted whole at the end ("2
    need a person") while the first line said 1; the group's heading said it all needed one."""
    import io

    from rich.console import Console

    from invoicectl.render.reconcile import print_report

    stage_accepted(journal, outbox, sandbox, {"INV-0002": "sending", "INV-X": "processing"})
    report = run_reconcile(journal, RenamedStatus(sandbox, "rejected"))
    buffer = io.StringIO()
    print_report(Console(file=buffer, width=100, no_color=True), report)
    said = " ".join(buffer.getvalue().split())

    assert report.needs_person == 1
    assert said.startswith("2 invoices to reconcile, 1 need a person"), said
    assert "(2, 1 need a person)" in said, said
    assert "In short: 2 invoices checked; 1 need a person (1 " in said, said
    assert "1 need nothing now (1 " in said, said

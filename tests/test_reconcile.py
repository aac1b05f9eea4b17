"""reconcile against the in-process emulator, on real journal files built from real scans.

One staged outbox reaches every verdict; the other tests take it through --apply, a second
run, the three output formats, faults on the way (5xx, 429), and refused credentials.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from reconcile_staging import FAST_RETRIES, NOW, add_invoice, run_reconcile, sent, snapshot
from rich.console import Console
from ublfactory import invoice_xml

from invoicectl.errors import CredentialsRefused, ExitCode, UsageError
from invoicectl.goroute.client import Transaction, build_send_body
from invoicectl.journal import Journal, open_journal
from invoicectl.lifecycle.decisions import adopt, check_new_version
from invoicectl.lifecycle.holds import release
from invoicectl.lifecycle.plan import attention, plan
from invoicectl.lifecycle.window import KEY_WINDOW, REPLAY_MARGIN
from invoicectl.locations import Location
from invoicectl.reconcile import CLOCK_SLACK, GUIDANCE, LOOK_BACK, JournalSide, Verdict, compare
from invoicectl.render.reconcile import (
    FIELDS,
    print_report,
    render,
    summary_line,
    to_csv,
    to_json,
    write_output,
)
from invoicectl.sandbox import Sandbox, SandboxConfig

RECEIVER = "9915:phase4-test-receiver"

# invoice id -> the verdict the staged scenario must reach
EXPECTED = {
    "INV-AS": Verdict.already_sent,
    "INV-SF": Verdict.sent_then_failed,
    "INV-DD": Verdict.different_document,
    "INV-OV": Verdict.other_version,
    "INV-CU": Verdict.content_unconfirmed,
    "INV-NF": Verdict.not_found,
    "INV-IP": Verdict.in_progress,
    "INV-UF": Verdict.unknown_found,
    "INV-UA": Verdict.unknown_ambiguous,
    "INV-SE": Verdict.unknown_sent_earlier,
    "INV-UO": Verdict.unknown_not_found_window_open,
    "INV-UC": Verdict.unknown_not_found_window_closed,
    "INV-AM": Verdict.amended,
    "INV-DL": Verdict.delivered,
    "INV-DF": Verdict.delivery_failed,
    "INV-DP": Verdict.delivery_pending,
    "INV-409": Verdict.needs_decision,
    "INV-LF": Verdict.lookup_failed,
}
# Verdicts one staged search cannot reach beside the others (it is one search for all).
REACHED_ELSEWHERE = {
    Verdict.unknown_search_incomplete: "test_a_full_page_without_paging_is_an_incomplete_search",
}
BROKEN_TXN = "txn_always_503"


class FaultyTransport(httpx.AsyncBaseTransport):
    """The emulator behind a flaky edge: scripted answers per path before the real one."""

    def __init__(self, inner: httpx.AsyncBaseTransport, script: dict[str, list[int]]) -> None:
        self._inner = inner
        self._script = {path: list(codes) for path, codes in script.items()}
        self.seen: Counter[str] = Counter()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/peppol-api")
        self.seen[path] += 1
        if path.endswith(BROKEN_TXN):
            return httpx.Response(503, json={"error_code": "SERVICE_UNAVAILABLE"})
        codes = self._script.get(path)
        if codes:
            code = codes.pop(0)
            headers = {"Retry-After": "0"} if code == 429 else {}
            return httpx.Response(code, headers=headers, json={"error_code": f"HTTP_{code}"})
        return await self._inner.handle_async_request(request)


@pytest.fixture
def sandbox() -> Sandbox:
    return Sandbox(SandboxConfig(rate_per_minute=100_000, max_concurrent=100, seed=7))


@pytest.fixture
def journal(journal_at: Location) -> Iterator[Journal]:
    with open_journal(journal_at) as opened:
        yield opened


def stage_every_verdict(journal: Journal, outbox: Path, sandbox: Sandbox) -> None:
    for invoice_id in EXPECTED:
        receiver = "9915:reject-all" if invoice_id == "INV-DF" else RECEIVER
        add_invoice(journal, outbox, invoice_id, receiver=receiver)

    def txn(number: str, **options: object) -> str:
        return sandbox.add_transaction(number, receiver=RECEIVER, **options).id  # type: ignore[arg-type]

    def key_reused(invoice_id: str, existing: str) -> None:
        sent(journal, invoice_id, "key_reused", http_status=422, outcome="key_reused",
             existing_transaction_id=existing)  # fmt: skip

    # GoRoute gives back the content hash sent with it: the content is this journal's.
    sent_content = {"sha256": journal.invoice("INV-AS").current_sha256}
    key_reused("INV-AS", txn("INV-AS", status="delivered", metadata=sent_content))
    key_reused("INV-SF", txn("INV-SF", status="failed"))
    key_reused("INV-DD", txn("OTHER-77", status="delivered"))
    key_reused("INV-OV", txn("INV-OV", status="delivered", metadata={"sha256": "0" * 64}))
    key_reused("INV-CU", txn("INV-CU", status="delivered"))  # no sha256 given back
    key_reused("INV-NF", "txn_000000000000000000000000")
    key_reused("INV-IP", txn("INV-IP", status="processing"))
    key_reused("INV-LF", BROKEN_TXN)

    txn("INV-UF", status="delivered")
    txn("INV-UA", status="delivered")
    txn("INV-UA", status="failed")
    sent(journal, "INV-UF", "unknown", hours_ago=30, http_status=503, outcome="transient")
    sent(journal, "INV-UA", "unknown", hours_ago=2, outcome=None)
    sent(journal, "INV-UO", "unknown", hours_ago=1, outcome=None)
    sent(journal, "INV-UC", "unknown", hours_ago=30, http_status=504, outcome="transient")
    txn("INV-SE", status="delivered", created_at=NOW.timestamp() - 3 * 86_400)
    sent(journal, "INV-SE", "unknown", hours_ago=2, outcome=None)

    sent(journal, "INV-AM", "accepted", http_status=202, outcome="accepted",
         transaction_id=txn("INV-AM", status="delivered"), remote_status="delivered")  # fmt: skip
    add_invoice(journal, outbox, "INV-AM", note="corrected after sending")

    for invoice_id, status in (("INV-DL", "delivered"), ("INV-DP", "pending")):
        sent(journal, invoice_id, "accepted", http_status=202, outcome="accepted",
             transaction_id=txn(invoice_id, status=status))  # fmt: skip
    failed = sandbox.add_transaction("INV-DF", receiver="9915:reject-all", status="failed").id
    sent(journal, "INV-DF", "accepted", http_status=202, outcome="accepted",
         transaction_id=failed, remote_status="sending")  # fmt: skip

    sent(journal, "INV-409", "rejected", http_status=409, outcome="rejected")


@pytest.fixture
def staged(journal: Journal, outbox: Path, sandbox: Sandbox) -> Journal:
    stage_every_verdict(journal, outbox, sandbox)
    return journal


def transport(sandbox: Sandbox, script: dict[str, list[int]] | None = None) -> FaultyTransport:
    return FaultyTransport(sandbox.transport(), script or {})


def verdicts(report: object) -> dict[str, Verdict]:
    return {case.invoice_id: case.verdict for case in report.cases}  # type: ignore[attr-defined]


def test_every_verdict_is_reached(staged: Journal, sandbox: Sandbox) -> None:
    report = run_reconcile(staged, transport(sandbox))

    assert verdicts(report) == EXPECTED
    assert set(EXPECTED.values()) | set(REACHED_ELSEWHERE) == set(Verdict)
    assert report.exit_code == ExitCode.NEEDS_RECONCILE
    by_id = {case.invoice_id: case for case in report.cases}
    for invoice_id, case in by_id.items():
        assert case.needs_person == GUIDANCE[case.verdict].needs_person, invoice_id
    # Both sides are shown.
    reused = by_id["INV-DD"]
    assert reused.api is not None and reused.api.invoice_number == "OTHER-77"
    assert "invoice number: API OTHER-77, journal INV-DD" in reused.detail
    assert reused.journal.sent_sha256 == staged.invoice("INV-DD").current_sha256
    assert reused.journal.first_attempt_at is not None
    # An unknown transaction id is "not found", not a crash.
    assert "404" in by_id["INV-NF"].detail
    # The window, and what a resend would risk.
    assert by_id["INV-UO"].window_open is True
    assert "`invoicectl send DIR` replays it under key invoice-INV-UO" in by_id["INV-UO"].action
    assert by_id["INV-UC"].window_open is False
    assert "a resend could deliver a duplicate" in by_id["INV-UC"].detail
    assert by_id["INV-UF"].window_open is False  # found: adopting is safe whatever the window
    # Amended over a delivered send: both hashes, and no new version (a second delivery).
    amended = by_id["INV-AM"]
    row = staged.invoice("INV-AM")
    assert amended.journal.sent_sha256 == row.key_sha256 != row.current_sha256
    assert row.key_sha256 in amended.action and row.current_sha256 in amended.action
    assert "credit note" in amended.action
    assert "`--new-version INV-AM` only once its delivery failed" in amended.action
    assert "revision 1" in amended.detail and "revision 2" in amended.detail
    assert by_id["INV-SF"].action.endswith("`invoicectl send DIR --new-version INV-SF`")
    assert "SERVICE_UNAVAILABLE" in by_id["INV-LF"].detail or "503" in by_id["INV-LF"].detail


def test_without_apply_only_verdicts_and_delivery_status_are_recorded(
    staged: Journal, sandbox: Sandbox
) -> None:
    before = snapshot(staged)
    report = run_reconcile(staged, transport(sandbox))
    after = snapshot(staged)

    assert report.applied == () and report.held == ()
    assert sorted(report.recorded) == ["INV-DF", "INV-DL", "INV-DP"]
    for invoice_id, verdict in EXPECTED.items():
        was, now = vars(before[invoice_id]), vars(after[invoice_id])
        changed = {k for k in was if was[k] != now[k]}
        # A failed lookup reached no verdict: nothing to record.
        expected = set() if verdict is Verdict.lookup_failed else {"verdict", "verdict_at"}
        if invoice_id in report.recorded or invoice_id == "INV-DP":
            # INV-DP: pending before (NULL) and now: only the check time moves
            expected |= {"remote_status", "remote_checked_at"}
        assert changed == expected, invoice_id
        if expected:
            assert (now["verdict"], now["verdict_at"]) == (verdict, NOW.isoformat()), invoice_id
        assert now["hold"] is None, invoice_id
    assert after["INV-DF"].remote_status == "failed"
    assert after["INV-DL"].remote_status == "delivered"


def test_apply_changes_exactly_the_unambiguous_ones(staged: Journal, sandbox: Sandbox) -> None:
    before = snapshot(staged)
    report = run_reconcile(staged, transport(sandbox), apply=True)
    after = snapshot(staged)

    assert sorted(report.applied) == ["INV-AS", "INV-UF"]
    adopted = {c.invoice_id: c for c in report.cases if c.applied}
    for invoice_id, case in adopted.items():
        row = after[invoice_id]
        assert case.api is not None
        assert (row.state, row.transaction_id, row.remote_status) == (
            "accepted",
            case.api.transaction_id,
            "delivered",
        )
        assert row.reason is None and row.remote_checked_at == NOW.isoformat()
        assert [e.kind for e in staged.events(invoice_id)] == ["verdict", "adopted"]
        assert case.exit_code == ExitCode.OK
        assert case.action == f"adopted {case.api.transaction_id}; state now accepted"
    # What must not go out on its own is held, its state, key and window as they were.
    assert sorted(report.held) == ["INV-CU", "INV-DD", "INV-OV", "INV-SE", "INV-UA"]
    for invoice_id in report.held:
        was, now = vars(before[invoice_id]), vars(after[invoice_id])
        assert {k for k in was if was[k] != now[k]} == {
            "hold", "hold_reason", "held_at", "held_by", "verdict", "verdict_at", "updated_at"
        }, invoice_id  # fmt: skip
        assert (now["hold"], now["held_by"]) == ("held", "reconcile"), invoice_id
        assert now["hold_reason"].startswith("reconcile: "), invoice_id
        # What found it at GoRoute already stands as evidence, whatever comes next.
        found = EXPECTED[invoice_id] is not Verdict.different_document
        evidence = ["delivery_evidence"] if found else []
        assert [e.kind for e in staged.events(invoice_id)] == ["verdict", *evidence, "hold"]
    untouched = set(EXPECTED) - set(adopted) - set(report.recorded) - set(report.held)
    for invoice_id in untouched:
        was, now = vars(before[invoice_id]), vars(after[invoice_id])
        judged = EXPECTED[invoice_id] is not Verdict.lookup_failed
        verdict_columns = {"verdict", "verdict_at"} if judged else set()
        assert {k for k in was if was[k] != now[k]} == verdict_columns, invoice_id
        events = [e.kind for e in staged.events(invoice_id)]
        # A key GoRoute refused as used, its transaction unseen: evidence a send got through.
        unseen = ["delivery_evidence"] if EXPECTED[invoice_id] is Verdict.not_found else []
        assert events == (["verdict", *unseen] if judged else []), invoice_id


def test_a_used_key_whose_transaction_goroute_does_not_know_gets_no_new_key_on_its_own(
    staged: Journal, sandbox: Sandbox
) -> None:
    """GoRoute refused INV-NF's key as used (422), naming a transaction it then answers 404
    for: ``not_found`` let ``send --new-version`` through, and a review's hostile server
    had the invoice delivered twice. It is evidence now: a new key needs the operator's
    ``release --force`` first."""
    run_reconcile(staged, transport(sandbox))
    later = NOW + timedelta(days=2)  # the key's window long closed

    with pytest.raises(UsageError, match="answered 404 for it: a send under that key may"):
        check_new_version(staged, "INV-NF", later)
    assert release(staged, "INV-NF", "clerk", force=True).done
    assert check_new_version(staged, "INV-NF", later).invoice_id == "INV-NF"


def test_second_run_is_idempotent(staged: Journal, sandbox: Sandbox) -> None:
    first = run_reconcile(staged, transport(sandbox), apply=True)
    rows = snapshot(staged)
    second = run_reconcile(staged, transport(sandbox), apply=True)

    assert second.applied == ()
    expected = {k: v for k, v in verdicts(first).items() if k not in first.applied}
    expected.pop("INV-DL")  # delivered is final and recorded: nothing left to look at
    assert verdicts(second) == expected
    assert second.exit_code == first.exit_code == ExitCode.NEEDS_RECONCILE
    after = snapshot(staged)
    for invoice_id, row in rows.items():
        now = vars(after[invoice_id])
        moved = {k for k in vars(row) if vars(row)[k] != now[k]}
        assert moved <= {"remote_checked_at", "verdict_at"}, invoice_id


def test_nothing_needing_a_person_exits_0_once_applied(
    journal: Journal, outbox: Path, sandbox: Sandbox
) -> None:
    add_invoice(journal, outbox, "INV-1")
    sent_content = {"sha256": journal.invoice("INV-1").current_sha256}
    existing = sandbox.add_transaction("INV-1", status="delivered", metadata=sent_content).id
    sent(journal, "INV-1", "key_reused", http_status=422, existing_transaction_id=existing)

    dry = run_reconcile(journal, transport(sandbox))
    applied = run_reconcile(journal, transport(sandbox), apply=True)
    again = run_reconcile(journal, transport(sandbox), apply=True)

    assert dry.exit_code == ExitCode.NEEDS_RECONCILE  # adoptable, not adopted yet
    assert applied.exit_code == ExitCode.OK and applied.applied == ("INV-1",)
    assert again.cases == () and again.exit_code == ExitCode.OK


def test_json_and_csv_parse_and_agree_with_the_table(staged: Journal, sandbox: Sandbox) -> None:
    report = run_reconcile(staged, transport(sandbox), apply=True)

    document = json.loads(to_json(report))
    rows = list(csv.DictReader(io.StringIO(to_csv(report))))
    table = render(report, "table", width=160)

    assert document["exit_code"] == 4
    assert document["counts"] == {str(v): n for v, n in report.counts.items()}
    assert sorted(document["applied"]) == ["INV-AS", "INV-UF"]
    assert [r["invoice_id"] for r in rows] == [c["invoice_id"] for c in document["cases"]]
    assert list(rows[0]) == list(FIELDS)
    for row, record in zip(rows, document["cases"], strict=True):
        for field in FIELDS:
            value = record[field]
            shown = (
                ""
                if value is None
                else str(value).lower()
                if isinstance(value, bool)
                else str(value)
            )
            assert row[field] == shown, (row["invoice_id"], field)
        assert row["invoice_id"] in table
        if row["api_transaction_id"]:
            assert row["api_transaction_id"] in table
    for verdict, count in report.counts.items():
        assert f"{GUIDANCE[verdict].title} ({count}," in table
    assert table.splitlines()[0] == document["summary"]
    assert "\x1b[" not in table


def test_table_on_a_console_at_fixed_width(staged: Journal, sandbox: Sandbox) -> None:
    report = run_reconcile(staged, transport(sandbox))
    buffer = io.StringIO()
    print_report(Console(file=buffer, width=100, no_color=True), report)
    text = buffer.getvalue()

    summary, *rest = text.splitlines()
    assert summary.startswith(
        "18 invoices to reconcile, 11 need a person (different_document 1, other_version 1, "
        "content_unconfirmed 1,"
    )
    assert max(len(line) for line in rest) <= 100
    assert "already sent (1, no person needed) — next: `invoicectl reconcile --apply`" in text
    assert "still in progress (1, no person needed) — next: wait" in text


def test_lookups_meeting_5xx_and_429_still_complete(staged: Journal, sandbox: Sandbox) -> None:
    as_id = staged.invoice("INV-AS").existing_transaction_id
    dl_id = staged.invoice("INV-DL").transaction_id
    flaky = transport(
        sandbox,
        {
            f"/api/v1/transactions/{as_id}": [503, 429, 502],
            f"/api/v1/transactions/{dl_id}": [429, 429],
            "/api/v1/transactions": [500, 429],
        },
    )
    report = run_reconcile(staged, flaky)

    assert verdicts(report) == EXPECTED
    assert flaky.seen[f"/api/v1/transactions/{as_id}"] == 4
    assert flaky.seen["/api/v1/transactions"] == 3
    assert flaky.seen[f"/api/v1/transactions/{BROKEN_TXN}"] == 3  # max_attempts, then given up
    lookup_failed = next(c for c in report.cases if c.verdict is Verdict.lookup_failed)
    assert lookup_failed.exit_code == ExitCode.INCOMPLETE and not lookup_failed.needs_person


def test_list_that_never_answers_leaves_unknowns_as_lookup_failed(
    journal: Journal, outbox: Path, sandbox: Sandbox
) -> None:
    add_invoice(journal, outbox, "INV-1")
    sent(journal, "INV-1", "unknown", hours_ago=30)
    before = snapshot(journal)

    report = run_reconcile(journal, transport(sandbox, {"/api/v1/transactions": [503] * 10}))

    assert verdicts(report) == {"INV-1": Verdict.lookup_failed}
    assert report.exit_code == ExitCode.INCOMPLETE
    assert report.cases[0].window_open is False
    assert snapshot(journal) == before


def test_a_transaction_another_invoice_holds_is_never_adopted(
    journal: Journal, outbox: Path, sandbox: Sandbox
) -> None:
    """The send path refuses a 202 naming another invoice's transaction; reconcile --apply
    adopted a found one all the same (a review's lying list and detail): two invoices of the
    journal on one transaction, one of them never delivered."""
    add_invoice(journal, outbox, "INV-1")
    add_invoice(journal, outbox, "INV-2")
    theirs = sandbox.add_transaction("INV-2", receiver=RECEIVER, status="delivered").id
    sent(journal, "INV-1", "accepted", http_status=202, outcome="accepted",
         transaction_id=theirs, remote_status="delivered")  # fmt: skip
    sent(journal, "INV-2", "unknown", hours_ago=30, http_status=503, outcome="transient")

    report = run_reconcile(journal, transport(sandbox), apply=True)

    (case,) = [c for c in report.cases if c.invoice_id == "INV-2"]
    assert report.applied == () and not case.applied
    assert case.action.startswith(f"not adopted: {theirs} is invoice INV-1's in this journal")
    assert journal.invoice("INV-2").state == "unknown"
    assert journal.invoice("INV-1").transaction_id == theirs


def test_lookups_stop_once_three_in_a_row_get_no_answer(
    journal: Journal, outbox: Path, sandbox: Sandbox
) -> None:
    """Each lookup waited out its own retries: against a server answering a byte a second,
    13 took 629 s (a review), where a send stops after three invoices in a row."""
    ids = [f"INV-{number}" for number in range(10)]
    for invoice_id in ids:
        add_invoice(journal, outbox, invoice_id)
        sent(journal, invoice_id, "key_reused", http_status=422, outcome="key_reused",
             existing_transaction_id=f"txn_{invoice_id}")  # fmt: skip
    down = transport(sandbox, {f"/api/v1/transactions/txn_{i}": [503] * 9 for i in ids})

    report = run_reconcile(journal, down, concurrency=1)

    assert verdicts(report) == dict.fromkeys(ids, Verdict.lookup_failed)
    assert sum(down.seen.values()) == 3 * FAST_RETRIES.max_attempts  # three, then no more
    not_asked = [c.invoice_id for c in report.cases if "not asked: 3 lookups in a row" in c.detail]
    assert len(not_asked) == 7 and report.exit_code == ExitCode.INCOMPLETE


@pytest.mark.parametrize("api_key", ["sk_test_forbidden_key", "sk_test_not_a_known_key"])
def test_refused_credentials_raise_and_change_nothing(
    staged: Journal, sandbox: Sandbox, api_key: str
) -> None:
    before = snapshot(staged)

    with pytest.raises(CredentialsRefused) as caught:
        run_reconcile(staged, transport(sandbox), api_key=api_key, apply=True)

    assert caught.value.exit_code == ExitCode.AUTH_REFUSED
    assert "reconcile changed nothing" in str(caught.value)
    assert api_key not in str(caught.value)
    assert snapshot(staged) == before


def test_search_stops_at_its_page_bound_and_says_so(
    journal: Journal, outbox: Path, sandbox: Sandbox
) -> None:
    add_invoice(journal, outbox, "INV-1")
    sent(journal, "INV-1", "unknown", hours_ago=1)
    for number in range(5):
        sandbox.add_transaction(f"OTHER-{number}")

    report = run_reconcile(journal, transport(sandbox), list_limit=2, max_list_pages=2)

    (case,) = report.cases
    assert case.verdict is Verdict.unknown_not_found_window_open
    assert "stopped after 2 pages" in case.detail
    assert (report.search.pages, report.search.transactions, report.search.complete) == (
        2,
        4,
        False,
    )


def test_search_stops_at_transactions_older_than_its_look_back(
    journal: Journal, outbox: Path, sandbox: Sandbox
) -> None:
    add_invoice(journal, outbox, "INV-1")
    sent(journal, "INV-1", "unknown", hours_ago=1)
    long_ago = (NOW - LOOK_BACK).timestamp() - 2 * 86_400
    for number in range(6):
        sandbox.add_transaction(f"OLD-{number}", created_at=long_ago - number)
    sandbox.add_transaction("INV-1", status="delivered", created_at=long_ago - 100)

    report = run_reconcile(journal, transport(sandbox), list_limit=2)

    assert report.search.pages == 1 and report.search.complete
    assert report.cases[0].verdict is Verdict.unknown_not_found_window_open


def test_key_reused_without_an_id_is_searched_for(
    journal: Journal, outbox: Path, sandbox: Sandbox
) -> None:
    add_invoice(journal, outbox, "INV-1")
    add_invoice(journal, outbox, "INV-2")
    sent(journal, "INV-1", "key_reused", http_status=422)
    sent(journal, "INV-2", "key_reused", http_status=422)
    sandbox.add_transaction("INV-1", status="delivered")

    report = run_reconcile(journal, transport(sandbox), apply=True)

    # The list shows no content hash, and the 422 says the key carried another request: it
    # may be another version of the invoice, so it is held, not adopted.
    assert verdicts(report) == {"INV-1": Verdict.content_unconfirmed, "INV-2": Verdict.not_found}
    assert report.applied == () and report.held == ("INV-1",)
    not_found = next(case for case in report.cases if case.invoice_id == "INV-2")
    assert "no usable existing_transaction_id" in not_found.detail


def test_key_reused_found_in_the_list_is_judged_by_its_own_get(
    journal: Journal, outbox: Path, sandbox: Sandbox
) -> None:
    """The list's rows carry no ``metadata``; the transaction's own GET does, and its
    content hash decides: this content is adopted, another is another version (a delivery)."""
    for invoice_id in ("INV-SAME", "INV-OTHER"):
        add_invoice(journal, outbox, invoice_id)
        sent(journal, invoice_id, "key_reused", http_status=422)
    same = journal.invoice("INV-SAME")
    assert same is not None
    sandbox.add_transaction(
        "INV-SAME", status="delivered", metadata={"sha256": same.current_sha256}
    )
    sandbox.add_transaction("INV-OTHER", status="delivered", metadata={"sha256": "c" * 64})

    report = run_reconcile(journal, transport(sandbox), apply=True)

    assert verdicts(report) == {
        "INV-SAME": Verdict.already_sent,
        "INV-OTHER": Verdict.other_version,
    }
    assert report.applied == ("INV-SAME",) and report.held == ("INV-OTHER",)
    assert report.requests == 3  # the list page, then the two transactions' GETs


def test_apply_skips_an_invoice_that_moved_on(
    journal: Journal, outbox: Path, sandbox: Sandbox
) -> None:
    add_invoice(journal, outbox, "INV-1")
    existing = sandbox.add_transaction("INV-1", status="delivered").id
    sent(journal, "INV-1", "key_reused", http_status=422, existing_transaction_id=existing)

    assert not adopt(
        journal,
        "INV-1",
        expected_state="unknown",
        idempotency_key="invoice-INV-1",
        transaction_id=existing,
        remote_status="delivered",
        checked_at=NOW.isoformat(),
        accepted_at=NOW.isoformat(),
        detail="should not happen",
    )
    assert journal.invoice("INV-1").state == "key_reused"
    assert journal.events("INV-1") == []


@pytest.mark.parametrize(
    ("api", "differences"),
    [
        ({"document_id": "INV-1", "receiver": {"identifier": "PHASE4-test-receiver"}}, []),
        ({"invoice_number": "INV-1", "receiver_id": "9915:phase4-test-receiver"}, []),
        ({"invoice_number": "INV-1", "receiver_id": "phase4-test-receiver"}, []),
        ({"invoice_number": "INV-1", "document_type": "credit_note"}, ["document type"]),
        ({"invoice_number": "INV-1", "receiver_id": "0088:phase4-test-receiver"}, ["receiver"]),
        ({"invoice_number": "INV-1", "receiver_id": "someone-else"}, ["receiver"]),
        (
            {"receiver_id": "phase4-test-receiver"},
            ["the API record carries no invoice number to match"],
        ),
    ],
)
def test_compare_tolerates_both_shapes(api: dict[str, object], differences: list[str]) -> None:
    side = JournalSide(state="key_reused", document_type="Invoice", receiver=RECEIVER)

    found = compare("INV-1", side, Transaction.from_json(api))

    assert [d.split(":")[0] for d in found] == differences


@pytest.mark.parametrize(
    ("number", "verdict", "said", "unsaid"),
    [
        ("INV-2", Verdict.different_document, "invoice number: API INV-2", "same invoice number"),
        ("INV-1", Verdict.other_version, "same invoice number, different", "invoice number: API"),
    ],
)
def test_content_that_differs_is_same_invoice_number_only_when_it_is(
    number: str, verdict: Verdict, said: str, unsaid: str
) -> None:
    """Another invoice number in other content read "invoice number: API INV-2, journal
    INV-1; same invoice number, different content" (helper-55)."""
    from invoicectl.reconcile.matching import matched

    side = JournalSide(
        state="key_reused", document_type="Invoice", receiver=RECEIVER, sent_sha256="a" * 64
    )
    txn = Transaction.from_json(
        {"id": "txn_9", "invoice_number": number, "status": "delivered",
         "metadata": {"sha256": "b" * 64}}
    )  # fmt: skip

    case = matched("INV-1", side, txn, "txn_9", adopt=Verdict.already_sent)

    assert case.verdict is verdict
    assert said in case.detail and unsaid not in case.detail
    assert "different content: the API's transaction carries sha256 " + "b" * 64 in case.detail


def test_output_is_written_atomically(staged: Journal, sandbox: Sandbox, tmp_path: Path) -> None:
    report = run_reconcile(staged, transport(sandbox))
    target = tmp_path / "out" / "report.json"
    target.parent.mkdir()
    target.write_text("old report")

    write_output(target, to_json(report))

    assert json.loads(target.read_text())["exit_code"] == 4
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]


# -- what counts as this invoice's transaction -------------------------------------------


@pytest.mark.parametrize(
    "receiver",
    [
        {"receiver": {"scheme": "DK:CVR", "identifier": "12345671"}},  # the single GET's shape
        {"receiver_id": "12345671"},  # the list's, echoing the POST's receiver_id
        {"receiver_scheme": "DK:CVR", "receiver_id": "12345671"},  # as the POST gave them
        {"receiver_id": "DK:CVR:12345671"},  # flat, the scheme in the id
        {"receiver": "dk:cvr:12345671"},
    ],
    ids=["nested", "bare-id", "as-posted", "flat", "flat-lower-case"],
)
def test_a_receiver_whose_scheme_holds_a_colon_is_the_same_receiver(
    receiver: dict[str, Any],
) -> None:
    """helper-96: the journal's ``DK:CVR:12345671``, cut at its first colon, never matched
    GoRoute's ``DK:CVR`` + ``12345671``: a delivered invoice whose answer was lost was "not
    found", with the advice to send it again."""
    side = JournalSide(state="unknown", document_type="Invoice", receiver="DK:CVR:12345671")
    txn = Transaction.from_json({"id": "txn_1", "invoice_number": "INV-DK-1", **receiver})

    assert compare("INV-DK-1", side, txn) == []


@pytest.mark.parametrize(
    "receiver",
    [
        {"receiver": {"scheme": "DK:CVR", "identifier": "12345672"}},
        {"receiver": {"scheme": "DK:SE", "identifier": "12345671"}},
        {"receiver_id": "12345672"},
        {"receiver_id": "CVR:12345671"},  # read as scheme CVR: another address
    ],
)
def test_another_receiver_is_still_told_apart(receiver: dict[str, Any]) -> None:
    side = JournalSide(state="unknown", document_type="Invoice", receiver="DK:CVR:12345671")
    txn = Transaction.from_json({"id": "txn_1", "invoice_number": "INV-DK-1", **receiver})

    (difference,) = compare("INV-DK-1", side, txn)
    assert difference.startswith("receiver: API ")


@pytest.mark.parametrize("list_limit", [2, 3, 100])
def test_an_earlier_send_is_never_adopted_whatever_the_page_size(
    journal: Journal, outbox: Path, sandbox: Sandbox, list_limit: int
) -> None:
    add_invoice(journal, outbox, "INV-1")
    sent(journal, "INV-1", "unknown", hours_ago=1)
    long_ago = NOW.timestamp() - 3 * 86_400
    for number in range(6):
        sandbox.add_transaction(f"OLD-{number}", created_at=long_ago - number)
    old = sandbox.add_transaction("INV-1", status="delivered", created_at=long_ago - 100).id
    before = snapshot(journal)

    report = run_reconcile(journal, transport(sandbox), list_limit=list_limit, apply=True)

    (case,) = report.cases
    assert case.verdict is Verdict.unknown_sent_earlier and case.needs_person
    assert case.api is not None and case.api.transaction_id == old
    assert "created before this journal's first attempt" in case.detail
    assert "would deliver the invoice again" in case.detail  # the window is open: send replays
    assert report.search.complete
    assert report.applied == () and report.exit_code == ExitCode.NEEDS_RECONCILE
    was, now = before["INV-1"], snapshot(journal)["INV-1"]
    assert (now.state, now.transaction_id) == (was.state, was.transaction_id)  # never adopted
    # --apply holds it, so the send that would replay it does not.
    assert report.held == ("INV-1",) and now.hold == "held"
    assert now.verdict == Verdict.unknown_sent_earlier


@pytest.mark.parametrize(
    ("created_before_first_attempt", "verdict"),
    [
        (-timedelta(minutes=30), Verdict.unknown_found),
        (CLOCK_SLACK / 2, Verdict.unknown_found),  # clocks disagree a little
        (CLOCK_SLACK * 1.5, Verdict.unknown_sent_earlier),
        (LOOK_BACK - timedelta(hours=1), Verdict.unknown_sent_earlier),
        (LOOK_BACK + timedelta(hours=1), Verdict.unknown_not_found_window_open),  # not counted
    ],
    ids=["after", "within-slack", "beyond-slack", "within-look-back", "beyond-look-back"],
)
def test_a_match_is_this_send_only_if_created_after_its_first_attempt(
    journal: Journal,
    outbox: Path,
    sandbox: Sandbox,
    created_before_first_attempt: timedelta,
    verdict: Verdict,
) -> None:
    add_invoice(journal, outbox, "INV-1")
    sent(journal, "INV-1", "unknown", hours_ago=2)
    first = NOW - timedelta(hours=2)
    created = (first - created_before_first_attempt).timestamp()
    sandbox.add_transaction("INV-1", status="delivered", created_at=created)

    report = run_reconcile(journal, transport(sandbox), apply=True)

    assert verdicts(report) == {"INV-1": verdict}
    assert report.applied == (("INV-1",) if verdict is Verdict.unknown_found else ())


def test_an_earlier_send_beside_this_one_is_ambiguous(
    journal: Journal, outbox: Path, sandbox: Sandbox
) -> None:
    add_invoice(journal, outbox, "INV-1")
    sent(journal, "INV-1", "unknown", hours_ago=2)
    ours = sandbox.add_transaction("INV-1", status="delivered", created_at=NOW.timestamp() - 3600)
    old = sandbox.add_transaction("INV-1", status="delivered", created_at=NOW.timestamp() - 86_400)

    report = run_reconcile(journal, transport(sandbox), apply=True)

    (case,) = report.cases
    assert case.verdict is Verdict.unknown_ambiguous and case.needs_person
    assert ours.id in case.detail and old.id in case.detail
    assert report.applied == ()


@pytest.mark.parametrize("detail_shape", ["nested", "flat"])
@pytest.mark.parametrize(
    ("amount_now", "verdict"),
    [("1250.00", Verdict.already_sent), ("990.00", Verdict.other_version)],
    ids=["same-content", "other-content"],
)
def test_key_reused_is_adopted_only_when_the_content_hash_agrees(
    journal: Journal, outbox: Path, detail_shape: str, amount_now: str, verdict: Verdict
) -> None:
    """A lost journal sent revision 1 under invoice-INV-1; this one sends the corrected file
    under the same key and meets 422. GoRoute gives back the sha256 the first send carried."""
    config = SandboxConfig(rate_per_minute=100_000, seed=7, detail_shape=detail_shape)  # type: ignore[arg-type]
    sandbox = Sandbox(config)
    first = invoice_xml("INV-1", amount="1250.00")
    metadata = {"invoice_id": "INV-1", "sha256": hashlib.sha256(first).hexdigest()}
    body = build_send_body(first.decode(), "9915", "phase4-test-receiver", metadata)
    existing = sandbox.state.send("invoice-INV-1", body).transaction_id
    add_invoice(journal, outbox, "INV-1", amount=amount_now)
    sent(journal, "INV-1", "key_reused", http_status=422, existing_transaction_id=existing)
    sandbox.advance_clock(3600)

    report = run_reconcile(journal, sandbox.transport(), apply=True)

    (case,) = report.cases
    assert case.verdict is verdict
    if verdict is Verdict.other_version:  # revision 1 is a delivery of INV-1 all the same
        assert case.needs_person and report.applied == ()
        assert "same invoice number, different content" in case.detail
        assert metadata["sha256"] in case.detail
        assert "`--new-version INV-1` would deliver INV-1 twice" in case.action
        assert journal.invoice("INV-1").state == "key_reused"
    else:
        assert report.applied == ("INV-1",)
        assert journal.invoice("INV-1").transaction_id == existing


# -- the key's window is send's ------------------------------------------------------------


@pytest.mark.parametrize(
    ("hours_ago", "verdict"),
    [
        (23.5, Verdict.unknown_not_found_window_open),
        (23.9, Verdict.unknown_not_found_window_closed),  # inside 24 h, inside send's margin
        (24.5, Verdict.unknown_not_found_window_closed),
    ],
)
def test_the_window_is_the_one_send_replays_in(
    journal: Journal, outbox: Path, sandbox: Sandbox, hours_ago: float, verdict: Verdict
) -> None:
    add_invoice(journal, outbox, "INV-1")
    sent(journal, "INV-1", "unknown", hours_ago=hours_ago)

    report = run_reconcile(journal, transport(sandbox))

    (case,) = report.cases
    first = NOW - timedelta(hours=hours_ago)
    assert case.verdict is verdict
    assert case.window_open is ("INV-1" in plan(journal, NOW).replays)
    assert case.window_closes_at == (first + KEY_WINDOW - REPLAY_MARGIN).isoformat()
    # The exit code says what `invoicectl status` says: 75 while `send` replays it, else 4.
    expected = ExitCode.INCOMPLETE if case.window_open else ExitCode.NEEDS_RECONCILE
    assert report.exit_code == case.exit_code == expected == attention(journal, NOW)


# -- lists that do not page the way the emulator's default does -----------------------------


def _sandbox(**options: object) -> Sandbox:
    return Sandbox(SandboxConfig(rate_per_minute=100_000, max_concurrent=100, seed=7, **options))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("hours_ago", "verdict"),
    [
        (30, Verdict.unknown_search_incomplete),
        (2, Verdict.unknown_not_found_window_open),  # `send` replays it safely all the same
    ],
)
def test_a_full_page_without_paging_is_an_incomplete_search(
    journal: Journal, outbox: Path, hours_ago: float, verdict: Verdict
) -> None:
    sandbox = _sandbox(list_paging=False)
    add_invoice(journal, outbox, "INV-1")
    sent(journal, "INV-1", "unknown", hours_ago=hours_ago)
    first = NOW.timestamp() - hours_ago * 3600
    sandbox.add_transaction("INV-1", status="delivered", created_at=first + 600)
    for number in range(150):
        sandbox.add_transaction(f"OTHER-{number}", created_at=NOW.timestamp() - 3000 + number)

    report = run_reconcile(journal, sandbox.transport(), list_limit=100)

    (case,) = report.cases
    assert case.verdict is verdict
    assert "not found in the 100 searched; the search was incomplete" in case.detail
    assert "the API's list says nothing of paging (no has_more, no cursor)" in case.detail
    assert not report.search.complete
    assert "transactions search incomplete" in summary_line(report)


def test_a_short_page_without_paging_may_not_be_the_whole_list(
    journal: Journal, outbox: Path
) -> None:
    # A list that says nothing of paging may stop at a page size of its own, below the limit
    # asked: a short page proves no end. What it shows is still found.
    sandbox = _sandbox(list_paging=False)
    add_invoice(journal, outbox, "INV-1")
    add_invoice(journal, outbox, "INV-2")
    sent(journal, "INV-1", "unknown", hours_ago=30)
    sent(journal, "INV-2", "unknown", hours_ago=30)
    mine = sandbox.add_transaction("INV-1", status="delivered", created_at=NOW.timestamp() - 3600)
    for number in range(5):
        sandbox.add_transaction(f"OTHER-{number}")

    report = run_reconcile(journal, sandbox.transport(), list_limit=100, apply=True)

    assert verdicts(report) == {
        "INV-1": Verdict.unknown_found,
        "INV-2": Verdict.unknown_search_incomplete,
    }
    assert report.applied == ("INV-1",) and not report.search.complete
    assert journal.invoice("INV-1").transaction_id == mine.id


def test_a_short_last_page_of_a_list_that_pages_is_its_end(journal: Journal, outbox: Path) -> None:
    # The sandbox's list says has_more; a page without it, after pages with cursors, ends it.
    sandbox = _sandbox()
    add_invoice(journal, outbox, "INV-2")
    sent(journal, "INV-2", "unknown", hours_ago=30)
    for number in range(5):
        sandbox.add_transaction(f"OTHER-{number}")

    report = run_reconcile(journal, sandbox.transport(), list_limit=2)

    assert verdicts(report) == {"INV-2": Verdict.unknown_not_found_window_closed}
    assert report.search.complete


def test_an_oldest_first_list_is_paged_to_the_end(journal: Journal, outbox: Path) -> None:
    sandbox = _sandbox(list_order="oldest_first")
    add_invoice(journal, outbox, "INV-1")
    sent(journal, "INV-1", "unknown", hours_ago=30)
    ten_days_ago = NOW.timestamp() - 10 * 86_400
    for number in range(120):
        sandbox.add_transaction(f"OLD-{number}", created_at=ten_days_ago + number)
    mine = sandbox.add_transaction(
        "INV-1", status="delivered", created_at=NOW.timestamp() - 29 * 3600
    )

    report = run_reconcile(journal, sandbox.transport(), list_limit=100, apply=True)

    assert verdicts(report) == {"INV-1": Verdict.unknown_found}
    assert (report.search.pages, report.search.transactions, report.search.complete) == (
        2,
        121,
        True,
    )
    assert journal.invoice("INV-1").transaction_id == mine.id


def test_a_list_most_recently_updated_first_is_searched_past_old_rows_updated_today(
    journal: Journal, outbox: Path
) -> None:
    """Rows created long ago but updated recently come first, their creation times not
    rising: stopping there would call the send not found, though the list holds it."""
    sandbox = _sandbox(list_order="updated_first")
    add_invoice(journal, outbox, "INV-1")
    sent(journal, "INV-1", "unknown", hours_ago=30)
    long_ago = NOW.timestamp() - 400 * 86_400
    for number in range(3):
        sandbox.add_transaction(
            f"OLD-{number}", status="delivered", created_at=long_ago, updated_at=NOW.timestamp()
        )
    mine = sandbox.add_transaction(
        "INV-1", status="delivered", created_at=NOW.timestamp() - 29 * 3600
    )

    report = run_reconcile(journal, sandbox.transport(), list_limit=2, apply=True)

    assert verdicts(report) == {"INV-1": Verdict.unknown_found}
    assert journal.invoice("INV-1").transaction_id == mine.id


class CursorIgnored(httpx.AsyncBaseTransport):
    """An API that hands out cursors but ignores them: every page is the first one again."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner
        self.pages = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if not request.url.path.endswith("/api/v1/transactions"):
            return await self._inner.handle_async_request(request)
        self.pages += 1
        url = request.url.copy_remove_param("cursor")
        response = await self._inner.handle_async_request(
            httpx.Request("GET", url, headers=request.headers)
        )
        body = json.loads(await response.aread())
        if body.get("next_cursor"):
            body["next_cursor"] = f"{body['next_cursor']}-{self.pages}"  # new each time
        return httpx.Response(response.status_code, json=body)


def test_a_transaction_seen_twice_counts_once_and_stops_the_search(
    journal: Journal, outbox: Path, sandbox: Sandbox
) -> None:
    add_invoice(journal, outbox, "INV-1")
    sent(journal, "INV-1", "unknown", hours_ago=2)
    mine = sandbox.add_transaction("INV-1", status="delivered", created_at=NOW.timestamp() - 6840)
    for number in range(5):
        sandbox.add_transaction(f"OTHER-{number}", created_at=NOW.timestamp() - 86_400 + number)
    ignoring = CursorIgnored(sandbox.transport())

    report = run_reconcile(journal, ignoring, list_limit=3, apply=True)

    assert verdicts(report) == {"INV-1": Verdict.unknown_found}
    assert report.applied == ("INV-1",)
    assert journal.invoice("INV-1").transaction_id == mine.id
    assert ignoring.pages == report.search.pages == 2
    assert report.search.transactions == 3 and not report.search.complete
    assert "transactions already seen" in report.search.note


def test_the_closing_line_says_what_waits_for_apply(
    journal: Journal, outbox: Path, sandbox: Sandbox
) -> None:
    """An invoice found and not yet adopted exits 4: the closing line said it needed nothing
    now (found by a review of the operator's decisions)."""
    from invoicectl.render.reconcile import closing_line

    add_invoice(journal, outbox, "INV-1")
    sent(journal, "INV-1", "unknown", hours_ago=30)
    sandbox.add_transaction("INV-1", status="delivered", created_at=NOW.timestamp() - 3600)

    report = run_reconcile(journal, transport(sandbox))

    assert report.exit_code == ExitCode.NEEDS_RECONCILE
    line = closing_line(report)
    assert "1 to adopt with `invoicectl reconcile --apply` (1 unanswered, found)" in line, line
    assert "need nothing now" not in line


class JournalGoneMidLookup:
    """A reader whose every lookup meets the journal gone, as lookups queued on the shared
    rate budget's lock did when a PostgreSQL backend ended: the one woken by the lock's
    release fails too before the task group has cancelled it."""

    def __init__(self) -> None:
        import asyncio

        self.lock = asyncio.Lock()
        self.started = 0

    async def get_transaction(self, transaction_id: str):
        import asyncio

        from invoicectl.journal.pg_database import JournalUnreachable

        async with self.lock:
            self.started += 1
            if self.started == 1:  # the others queue on the lock meanwhile
                await asyncio.sleep(0.05)
            raise JournalUnreachable("the journal postgresql://x cannot be reached")

    async def list_transactions(self, *, limit: int, cursor: str | None):
        raise AssertionError("not asked")


def test_lookups_that_fail_together_raise_one_error_not_a_group() -> None:
    """Two lookups failing on the journal at once came out as an ExceptionGroup: a traceback
    where one line and exit 75 were due."""
    import asyncio

    from invoicectl.goroute.limiter import RateLimiter
    from invoicectl.journal.pg_database import JournalUnreachable
    from invoicectl.reconcile.search import Lookups

    reader = JournalGoneMidLookup()
    lookups = Lookups(reader, RateLimiter(60_000), FAST_RETRIES, concurrency=3)
    with pytest.raises(JournalUnreachable, match="cannot be reached"):
        asyncio.run(lookups.fetch(["txn_1", "txn_2", "txn_3"]))
    assert reader.started >= 2


def test_smaller_pages_a_server_demands_cover_as_many_transactions(
    journal: Journal, outbox: Path
) -> None:
    """A list that refuses pages over 50: asked for pages of 100 with a bound of 2, the
    search reads 4 pages of 50, not 2, before it says it stopped short."""
    from test_history import FiftyAtMost

    sandbox = _sandbox()
    add_invoice(journal, outbox, "INV-1")
    sent(journal, "INV-1", "unknown", hours_ago=30)
    mine = sandbox.add_transaction(
        "INV-1", status="delivered", created_at=NOW.timestamp() - 29 * 3600
    )
    for number in range(150):  # newer than it: the first 150 rows of the list
        sandbox.add_transaction(f"OTHER-{number}", created_at=NOW.timestamp() - 3600 + number)
    transport = FiftyAtMost(sandbox.transport())

    report = run_reconcile(journal, transport, list_limit=100, max_list_pages=2, apply=True)

    assert transport.limits[:2] == [100, 50]
    assert verdicts(report) == {"INV-1": Verdict.unknown_found}
    assert journal.invoice("INV-1").transaction_id == mine.id


def test_an_invoice_replayed_between_its_verdict_and_its_adoption_is_not_said_adoptable(
    journal: Journal, outbox: Path, sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
):
    """helper-98: another host's send replayed it after the verdict was written and before
    ``--apply`` adopted it; the adoption, refused (the state moved), left "--apply adopts
    it" and exit 4 in the report, 0 adopted."""
    add_invoice(journal, outbox, "INV-1")
    sent(journal, "INV-1", "unknown", hours_ago=1)
    sandbox.add_transaction("INV-1", status="delivered", created_at=NOW.timestamp() - 1800)
    (first,) = journal.attempts("INV-1")
    owner = journal.transaction_owner

    def replayed_first(*args: Any) -> Any:  # read just before the adoption
        journal.db.execute(
            "INSERT INTO attempts (run_id, invoice_id, revision_sha256, idempotency_key,"
            " body_sha256, started_at) VALUES (?, ?, ?, ?, ?, ?)",
            (first.run_id, "INV-1", first.revision_sha256, first.idempotency_key, "b" * 64)
            + ((NOW + timedelta(seconds=1)).isoformat(),),
        )
        journal.db.execute("UPDATE invoices SET state = 'pending' WHERE invoice_id = 'INV-1'")
        return owner(*args)

    monkeypatch.setattr(journal, "transaction_owner", replayed_first)
    report = run_reconcile(journal, transport(sandbox), apply=True)

    (case,) = report.cases
    assert report.applied == () and not case.applied
    assert case.verdict is Verdict.lookup_failed
    assert "it moved on while this reconcile searched" in case.detail
    assert "--apply" not in case.action


class ReplayedMeanwhile(httpx.AsyncBaseTransport):
    """The emulator, while another host's send replays an invoice under its key: that send's
    attempt is written when the search's first page is asked for."""

    def __init__(self, inner: httpx.AsyncBaseTransport, replay: Callable[[], None]) -> None:
        self._inner, self._replay = inner, replay

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/transactions"):
            self._replay()
            self._replay = lambda: None
        return await self._inner.handle_async_request(request)


def test_a_verdict_on_an_invoice_replayed_while_reconcile_searched_is_not_recorded(
    journal: Journal, outbox: Path, sandbox: Sandbox
):
    """helper-65: another host's send replayed the unknown invoice while this reconcile's
    search ran; the search (read before) found nothing, the verdict "not found, window closed"
    was recorded after the replay, and `--new-version` then sent the invoice again."""
    add_invoice(journal, outbox, "INV-1")
    sent(journal, "INV-1", "unknown", hours_ago=23.8)  # its window closes in a few minutes
    (first,) = journal.attempts("INV-1")

    def replay() -> None:
        journal.db.execute(
            "INSERT INTO attempts (run_id, invoice_id, revision_sha256, idempotency_key,"
            " body_sha256, started_at) VALUES (?, ?, ?, ?, ?, ?)",
            (first.run_id, "INV-1", first.revision_sha256, first.idempotency_key, "b" * 64)
            + ((NOW + timedelta(seconds=1)).isoformat(),),
        )

    report = run_reconcile(journal, ReplayedMeanwhile(sandbox.transport(), replay), apply=True)

    (case,) = report.cases
    assert case.verdict is Verdict.lookup_failed
    assert "it moved on while this reconcile searched" in case.detail
    invoice = journal.invoice("INV-1")
    assert invoice is not None and (invoice.verdict, invoice.hold) == (None, None)

"""Judging from plain data: a journal side and a finished search in, one ``Case`` out.

No emulator and no journal: the judges are pure, so the cases that decide whether a resend
could deliver an invoice twice are pinned here directly.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from invoicectl.errors import ExitCode
from invoicectl.goroute.transactions import Found, Transaction
from invoicectl.lifecycle.window import KEY_WINDOW, REPLAY_MARGIN
from invoicectl.reconcile import JournalSide, Verdict
from invoicectl.reconcile.search_result import Search, SearchSummary
from invoicectl.reconcile.unanswered import judge_searched

FIRST = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
SIDE = JournalSide(
    state="unknown",
    document_type="Invoice",
    receiver="9915:receiver",
    idempotency_key="invoice-INV-1",
    first_attempt_at=FIRST.isoformat(),
    key_first_used_at=FIRST.isoformat(),
)


def _search(*txns: Transaction) -> Search:
    return Search({"INV-1": txns} if txns else {}, SearchSummary(1, len(txns), True, "all"))


def _txn(txn_id: str, created: datetime) -> Transaction:
    return Transaction(
        transaction_id=txn_id,
        invoice_number="INV-1",
        receiver_scheme="9915",
        receiver_id="receiver",
        status="delivered",
        created_at=created.isoformat(),
    )


def test_only_an_earlier_send_inside_the_window_warns_that_send_would_replay_it() -> None:
    earlier = _txn("txn-old", FIRST - timedelta(days=1))
    case = judge_searched("INV-1", SIDE, _search(earlier), FIRST + timedelta(hours=1))

    assert case.verdict is Verdict.unknown_sent_earlier
    assert case.needs_person and case.exit_code is ExitCode.NEEDS_RECONCILE
    assert case.window_open is True
    assert "`invoicectl send` replays this journal's request" in case.detail
    assert "Do not send it again" in case.action


def test_not_found_the_window_is_sends_and_closes_with_it() -> None:
    closes = FIRST + KEY_WINDOW - REPLAY_MARGIN
    inside = judge_searched("INV-1", SIDE, _search(), closes - timedelta(seconds=1))
    after = judge_searched("INV-1", SIDE, _search(), closes)

    assert inside.verdict is Verdict.unknown_not_found_window_open
    assert inside.exit_code is ExitCode.INCOMPLETE and not inside.needs_person
    assert inside.window_closes_at == closes.isoformat()
    assert after.verdict is Verdict.unknown_not_found_window_closed
    assert after.exit_code is ExitCode.NEEDS_RECONCILE and after.needs_person


def test_one_send_since_the_first_attempt_is_adoptable() -> None:
    ours = _txn("txn-ours", FIRST + timedelta(seconds=2))
    case = judge_searched("INV-1", SIDE, _search(ours), FIRST + timedelta(days=3))

    assert case.verdict is Verdict.unknown_found and case.verdict.guidance.adoptable
    assert case.api is not None and case.api.transaction_id == "txn-ours"
    assert case.action == "`invoicectl reconcile --apply` adopts txn-ours"


def _txn_as(created_at: str, document_type: str | None = None) -> Transaction:
    return Transaction(
        transaction_id="txn-1",
        invoice_number="INV-1",
        receiver_scheme="9915",
        receiver_id="receiver",
        status="delivered",
        created_at=created_at,
        document_type=document_type,
    )


@pytest.mark.parametrize(
    "created_at",
    [
        (FIRST + timedelta(seconds=30)).isoformat().replace("T", "t").replace("+00:00", "z"),
        str((FIRST + timedelta(seconds=30)).timestamp()),
        str(int((FIRST + timedelta(seconds=30)).timestamp() * 1000)),
    ],
)
def test_a_send_dated_in_other_legal_forms_is_this_journals(created_at: str) -> None:
    # RFC 3339 allows a lower-case t and z; an epoch is what some lists give. Read as undated,
    # the match was once called "created before this journal's first attempt".
    case = judge_searched("INV-1", SIDE, _search(_txn_as(created_at)), FIRST + timedelta(hours=1))
    assert case.verdict is Verdict.unknown_found, case.detail


@pytest.mark.parametrize(
    "document_type",
    [
        "Invoice",
        "urn:oasis:names:specification:ubl:schema:xsd:Invoice-2",
        "busdox-docid-qns::urn:oasis:names:specification:ubl:schema:xsd:Invoice-2::Invoice"
        "##urn:cen.eu:en16931:2017#compliant#urn:fdc:peppol.eu:2017:poacc:billing:3.0::2.1",
    ],
)
def test_a_document_type_as_a_peppol_identifier_is_the_same_type(document_type: str) -> None:
    txn = _txn_as((FIRST + timedelta(seconds=30)).isoformat(), document_type)
    case = judge_searched("INV-1", SIDE, _search(txn), FIRST + timedelta(hours=1))
    assert case.verdict is Verdict.unknown_found, case.detail
    credit_note = _txn_as(txn.created_at or "", "CreditNote")
    other = judge_searched("INV-1", SIDE, _search(credit_note), FIRST + timedelta(hours=1))
    assert other.verdict is not Verdict.unknown_found


def test_a_listed_match_whose_own_get_names_another_invoice_leaves_it_unknown() -> None:
    """helper-60: the list showed the unanswered send with this invoice's number; its GET named
    another invoice. Judged on the GET alone, it was `different_document`, which clears the
    evidence: `--new-version` then sent the invoice a second time. Neither answer can be
    taken over the other: what GoRoute holds is unknown."""
    listed = _txn("txn-A", FIRST + timedelta(seconds=2))
    fetched = {"txn-A": Found(transaction=replace(listed, invoice_number="INV-OTHER-9"))}

    case = judge_searched("INV-1", SIDE, _search(listed), FIRST + timedelta(days=3), fetched)

    assert case.verdict is Verdict.lookup_failed
    assert "its own GET says otherwise (invoice number: API INV-OTHER-9" in case.detail
    assert case.api is not None and case.api.transaction_id == "txn-A"

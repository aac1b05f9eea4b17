"""A field the reader takes that UBL allows once, found twice directly under the root.

Which one is meant is a guess: invoicectl took the first, another reader may take the other,
and GoRoute's schema check refuses the document. Two different invoice numbers refuse the
file (its identity is unknown); any other field twice, or one number written twice, is the
problem the invoice is journalled with. Only the root's own children count.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ublfactory import invoice_xml, write_invoice

from invoicectl.journal import Journal
from invoicectl.scan.ingest import scan_directory
from invoicectl.ubl import InvalidDocument, parse_document
from invoicectl.ubl.doctype import read_prolog
from invoicectl.ubl.two_parts import parse_in_two_parts

TWO_NUMBERS = "the document holds 2 invoice numbers (cbc:ID) at its root: INV-1, INV-2; keep one"


def reason_of(data: bytes) -> str:
    with pytest.raises(InvalidDocument) as caught:
        parse_document(data)
    return caught.value.reason


def read_in_two(data: bytes) -> bool:
    """Whether parse_document may read ``data`` from a tree of its header alone."""
    return parse_in_two_parts(data, read_prolog(data, 0).root_start) is not None


def after(data: bytes, tag: bytes, fragment: bytes) -> bytes:
    """``fragment`` right after the first element ``tag`` ends."""
    at = data.index(b"</" + tag + b">") + len(tag) + 3
    return data[:at] + fragment + data[at:]


@pytest.mark.parametrize("lines", [1, 40])
def test_two_invoice_numbers_in_the_header_refuse_the_document(lines: int) -> None:
    data = after(invoice_xml("INV-1", lines=lines), b"cbc:IssueDate", b"<cbc:ID>INV-2</cbc:ID>")
    assert read_in_two(data) == (lines > 1)  # both ways of reading are covered

    assert reason_of(data) == TWO_NUMBERS


@pytest.mark.parametrize("lines", [1, 40])
@pytest.mark.parametrize("document_type", ["Invoice", "CreditNote"])
def test_a_number_appended_after_the_lines_is_found_too(lines: int, document_type: str) -> None:
    """The lines are most of a large invoice, and are not built into a tree: its last bytes
    show that something other than a line follows them."""
    data = invoice_xml("INV-1", lines=lines, document_type=document_type)
    end = f"</{document_type}>".encode()
    data = data.replace(end, b"<cbc:ID>INV-2</cbc:ID>\n" + end)

    assert reason_of(data) == TWO_NUMBERS


@pytest.mark.parametrize("where", ["between two lines", "ahead of the first line"])
@pytest.mark.parametrize("document_type", ["Invoice", "CreditNote"])
def test_a_number_slipped_in_among_the_lines_of_a_small_invoice_is_found_too(
    where: str, document_type: str
) -> None:
    """The header walk stopped at the totals, ahead of the lines: a number between two of
    them, or just before the first, was never seen in a tree of the whole document
    (helper-105). A large invoice read in two parts does not look there (README)."""
    data = invoice_xml("INV-1", lines=2, document_type=document_type)
    line = f"<cac:{document_type}Line>".encode()
    at = data.index(line) if where == "ahead of the first line" else data.rindex(line)
    data = data[:at] + b"<cbc:ID>INV-2</cbc:ID>\n  " + data[at:]
    assert not read_in_two(data)

    assert reason_of(data) == TWO_NUMBERS


def test_three_numbers_are_all_counted_and_an_empty_one_is_named() -> None:
    data = after(invoice_xml("INV-1"), b"cbc:ID", b"<cbc:ID/><cbc:ID>INV-3</cbc:ID>")

    assert reason_of(data) == (
        "the document holds 3 invoice numbers (cbc:ID) at its root: INV-1, (empty), INV-3; keep one"
    )


def test_one_number_written_twice_is_journalled_under_it_with_the_problem() -> None:
    data = after(invoice_xml("INV-1"), b"cbc:ID", b"<cbc:ID> INV-1 </cbc:ID>")

    facts = parse_document(data)

    assert facts.invoice_id == "INV-1"
    assert facts.problem == (
        "the document holds 2 invoice numbers (cbc:ID) at its root: INV-1, INV-1; keep one"
    )


PARTY = (
    b'<cac:AccountingCustomerParty><cac:Party><cbc:EndpointID schemeID="0088">7300010000002'
    b"</cbc:EndpointID></cac:Party></cac:AccountingCustomerParty>"
)


@pytest.mark.parametrize(
    ("tag", "fragment", "problem"),
    [
        (
            b"cbc:IssueDate",
            b"<cbc:IssueDate>2026-11-03</cbc:IssueDate>",
            "2 issue dates (cbc:IssueDate) at its root: 2026-11-02, 2026-11-03",
        ),
        (
            b"cbc:DueDate",
            b"<cbc:DueDate>2026-12-20</cbc:DueDate>",
            "2 due dates (cbc:DueDate) at its root: 2026-12-10, 2026-12-20",
        ),
        (
            b"cbc:DocumentCurrencyCode",
            b"<cbc:DocumentCurrencyCode>SEK</cbc:DocumentCurrencyCode>",
            "2 currency codes (cbc:DocumentCurrencyCode) at its root: EUR, SEK",
        ),
        (
            b"cac:AccountingCustomerParty",
            PARTY,
            "2 customer parties (cac:AccountingCustomerParty) at its root",
        ),
    ],
    ids=["IssueDate", "DueDate", "DocumentCurrencyCode", "AccountingCustomerParty"],
)
@pytest.mark.parametrize("lines", [1, 40])
def test_another_field_twice_is_the_invoices_problem(
    tag: bytes, fragment: bytes, problem: str, lines: int
) -> None:
    data = after(invoice_xml("INV-1", due_date="2026-12-10", lines=lines), tag, fragment)

    facts = parse_document(data)

    assert facts.invoice_id == "INV-1"
    assert facts.problem == f"the document holds {problem}; keep one"


def test_what_ubl_allows_many_times_and_ids_below_the_root_are_no_repeat() -> None:
    means = b"<cac:PaymentMeans><cbc:PaymentMeansCode>31</cbc:PaymentMeansCode></cac:PaymentMeans>"
    data = invoice_xml("INV-1", payment_due_date="2026-12-07", lines=3)
    data = after(data, b"cac:PaymentMeans", means)
    data = after(data, b"cbc:IssueDate", b"<cbc:Note>one</cbc:Note><cbc:Note>two</cbc:Note>")
    assert data.count(b"<cbc:ID>") == 10  # the lines' own IDs, and their parts'

    facts = parse_document(data)

    assert (facts.invoice_id, facts.problem, facts.due_date) == ("INV-1", None, "2026-12-07")


def test_a_scan_answers_two_numbers_by_the_files_name_and_reads_the_others(
    tmp_path: Path, outbox: Path
) -> None:
    write_invoice(outbox, "OK-1")
    data = after(invoice_xml("INV-1"), b"cbc:ID", b"<cbc:ID>INV-2</cbc:ID>")
    (outbox / "two.xml").write_bytes(data)
    twice = after(invoice_xml("TWICE-1"), b"cbc:IssueDate", b"<cbc:IssueDate/>")
    (outbox / "twice.xml").write_bytes(twice)

    with Journal(tmp_path / "journal.db") as journal:
        report = scan_directory(journal, outbox)

    assert sorted(report.new) == ["OK-1", "TWICE-1"]
    assert sorted((problem.subject, problem.reason) for problem in report.invalid) == [
        (
            "TWICE-1",
            "the document holds 2 issue dates (cbc:IssueDate) at its root: 2026-11-02, "
            "(empty); keep one",
        ),
        ("two.xml", TWO_NUMBERS),
    ]

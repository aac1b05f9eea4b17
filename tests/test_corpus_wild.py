"""Conformance over ``../shared/corpus-wild``: 300 more real-world files from 20 other public
sources, scanned as an outbox, each as its EXPECTED.tsv row says (MANIFEST.md: 195 pending,
every other file invalid, a duplicated invoice ID's files named in its reason).

The corpus lives beside the repository and is never copied into it.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from conftest import SHARED

from invoicectl.journal import Journal
from invoicectl.journal.records import InvoiceState
from invoicectl.scan.ingest import scan_directory
from invoicectl.scan.report import ScanReport

WILD = SHARED / "corpus-wild"
EXPECTED = WILD / "EXPECTED.tsv"

pytestmark = pytest.mark.skipif(
    not EXPECTED.is_file(), reason=f"the shared corpus is not at {WILD} (beside the repository)"
)


def expected_rows() -> list[dict[str, str]]:
    with EXPECTED.open(encoding="utf-8", newline="") as tsv:
        return list(csv.DictReader(tsv, delimiter="\t"))


def id_groups() -> dict[str, list[str]]:
    """Each invoice ID the corpus holds, with its files."""
    groups: dict[str, list[str]] = {}
    for row in expected_rows():
        if row["id"]:
            groups.setdefault(row["id"], []).append(row["file"])
    return groups


def reasons_of(report: ScanReport) -> dict[str, str]:
    """Each invalid invoice's or file's reason, by its number or file name."""
    return {problem.subject: problem.reason for problem in report.invalid}


def expected_pending(row: dict[str, str], groups: dict[str, list[str]]) -> bool:
    """MANIFEST.md: a customer EndpointID with its schemeID, and an ID unique in the corpus."""
    return not row["note"] and len(groups[row["id"]]) == 1


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory):
    """The corpus scanned once into a new journal, in place (a scan changes no file)."""
    with Journal(tmp_path_factory.mktemp("wild") / "journal.db") as journal:
        yield journal, scan_directory(journal, WILD / "ubl")


def test_every_file_is_counted(scanned: tuple[Journal, ScanReport]) -> None:
    _, report = scanned
    assert report.files == len(expected_rows()) == 300


def test_what_is_expected_pending_is_pending_with_its_facts(
    scanned: tuple[Journal, ScanReport],
) -> None:
    journal, _ = scanned
    groups = id_groups()
    pending = [row for row in expected_rows() if expected_pending(row, groups)]
    assert len(pending) == 195
    for row in pending:
        invoice = journal.invoice(row["id"])
        assert invoice is not None, row["file"]
        receiver = f"{invoice.receiver_scheme}:{invoice.receiver_id}"
        assert (
            invoice.state,
            invoice.document_type,
            invoice.issue_date or "",
            invoice.currency or "",
            invoice.payable_amount or "",
            receiver,
            Path(invoice.source_path).name,
        ) == (
            InvoiceState.pending,
            row["document_type"],
            row["issue_date"],
            row["currency"],
            row["payable_amount"],
            row["customer_endpoint"],
            row["file"],
        ), row["file"]


def test_what_is_expected_invalid_is_invalid_with_a_reason(
    scanned: tuple[Journal, ScanReport],
) -> None:
    journal, report = scanned
    groups = id_groups()
    reasons = reasons_of(report)
    invalid = [row for row in expected_rows() if not row["id"] or not expected_pending(row, groups)]
    assert len(invalid) == 105
    for row in invalid:
        if row["id"]:  # journalled under its number, invalid
            invoice = journal.invoice(row["id"])
            assert invoice is not None and invoice.state is InvoiceState.invalid, row["file"]
            assert reasons.get(row["id"]), row["file"]
        else:  # no number: listed by its file name
            assert reasons.get(row["file"]), row["file"]


def test_each_duplicated_id_names_every_file_of_its_group(
    scanned: tuple[Journal, ScanReport],
) -> None:
    _, report = scanned
    groups = id_groups()
    reasons = reasons_of(report)
    repeated = {invoice_id: files for invoice_id, files in groups.items() if len(files) > 1}
    assert len(repeated) == 5
    for invoice_id, files in repeated.items():
        for name in files:
            assert name in reasons[invoice_id], (invoice_id, name)

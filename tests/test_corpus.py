"""Conformance over the shared corpus of 64 real UBL files: every EXPECTED.tsv column must match.

The corpus lives beside the repository (``../shared/corpus``) and is never copied into it.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from invoicectl.ubl import InvoiceFacts, parse_document

CORPUS = Path(__file__).parents[1].parent / "shared" / "corpus"
EXPECTED = CORPUS / "EXPECTED.tsv"


def expected_rows() -> dict[str, dict[str, str]]:
    if not EXPECTED.is_file():
        return {}
    with EXPECTED.open(encoding="utf-8", newline="") as tsv:
        return {row["file"]: row for row in csv.DictReader(tsv, delimiter="\t")}


ROWS = expected_rows()
needs_corpus = pytest.mark.skipif(
    not ROWS, reason=f"shared corpus not found at {CORPUS} (it sits beside the repository)"
)


def extracted(facts: InvoiceFacts, size: int) -> dict[str, str]:
    """The facts in EXPECTED.tsv's columns: an empty cell means absent."""
    return {
        "root": facts.document_type,
        "id": facts.invoice_id,
        "issue_date": facts.issue_date or "",
        "supplier_endpoint": str(facts.supplier_endpoint or ""),
        "customer_endpoint": str(facts.customer_endpoint or ""),
        "currency": facts.currency or "",
        "payable_amount": facts.payable_amount or "",
        "size_bytes": str(size),
    }


@needs_corpus
def test_expected_covers_every_corpus_file() -> None:
    assert set(ROWS) == {p.name for p in (CORPUS / "ubl").glob("*.xml")}
    assert len(ROWS) == 64


@needs_corpus
@pytest.mark.parametrize("name", sorted(ROWS))
def test_corpus_file_matches_expected(name: str) -> None:
    data = (CORPUS / "ubl" / name).read_bytes()
    facts = parse_document(data)
    expected = {column: value for column, value in ROWS[name].items() if column != "file"}
    assert extracted(facts, len(data)) == expected
    if expected["customer_endpoint"]:
        assert facts.problem is None
    else:
        assert facts.problem is not None and "customer EndpointID" in facts.problem

"""The sample invoices shipped in sample_invoices/ are realistic, sendable and varied."""

from __future__ import annotations

import base64
from decimal import Decimal
from pathlib import Path

import pytest
from lxml import etree

from invoicectl.ubl import InvoiceFacts, parse_document

SAMPLES = Path(__file__).parents[1] / "sample_invoices"
FILES = sorted(SAMPLES.glob("*.xml"))
CBC = "{urn:oasis:names:specification:ubl:schema:xsd:CommonBasicComponents-2}"
CAC = "{urn:oasis:names:specification:ubl:schema:xsd:CommonAggregateComponents-2}"
CUSTOMIZATION = "urn:cen.eu:en16931:2017#compliant#urn:fdc:peppol.eu:2017:poacc:billing:3.0"
PROFILE = "urn:fdc:peppol.eu:2017:poacc:billing:01:1.0"


def facts_of(path: Path) -> InvoiceFacts:
    return parse_document(path.read_bytes())


def test_at_least_twelve_samples() -> None:
    assert len(FILES) >= 12


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_sample_is_sendable_and_named_after_its_id(path: Path) -> None:
    facts = facts_of(path)
    assert facts.problem is None
    assert facts.customer_endpoint is not None
    assert path.name == f"{facts.invoice_id}.xml"
    prefix = "INV-" if facts.document_type == "Invoice" else "CN-"
    assert facts.invoice_id.startswith(prefix)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_sample_is_peppol_bis_3_with_consistent_totals(path: Path) -> None:
    root = etree.parse(str(path)).getroot()
    assert root.findtext(CBC + "CustomizationID") == CUSTOMIZATION
    assert root.findtext(CBC + "ProfileID") == PROFILE
    type_code = root.findtext(CBC + "InvoiceTypeCode") or root.findtext(CBC + "CreditNoteTypeCode")
    assert type_code == ("380" if etree.QName(root).localname == "Invoice" else "381")
    lines = root.findall(CAC + "InvoiceLine") + root.findall(CAC + "CreditNoteLine")
    line_sum = sum(Decimal(line.findtext(CBC + "LineExtensionAmount")) for line in lines)
    totals = root.find(CAC + "LegalMonetaryTotal")
    tax = Decimal(root.find(CAC + "TaxTotal").findtext(CBC + "TaxAmount"))
    assert Decimal(totals.findtext(CBC + "LineExtensionAmount")) == line_sum
    assert Decimal(totals.findtext(CBC + "PayableAmount")) == line_sum + tax


def test_ids_are_unique() -> None:
    ids = [facts_of(path).invoice_id for path in FILES]
    assert len(ids) == len(set(ids))


def test_both_document_types_and_several_currencies() -> None:
    facts = [facts_of(path) for path in FILES]
    assert {f.document_type for f in facts} == {"Invoice", "CreditNote"}
    assert {"EUR", "SEK", "NOK"} <= {f.currency for f in facts}


def test_receivers_include_the_sandbox_rejecter() -> None:
    receivers = [str(facts_of(path).customer_endpoint) for path in FILES]
    assert receivers.count("9915:reject-all") >= 2
    assert receivers.count("9915:phase4-test-receiver") > len(receivers) / 2


def test_one_sample_embeds_a_valid_pdf() -> None:
    pdfs = []
    for path in FILES:
        for blob in etree.parse(str(path)).iter(CBC + "EmbeddedDocumentBinaryObject"):
            if blob.get("mimeCode") == "application/pdf":
                pdfs.append(base64.b64decode(blob.text, validate=True))
    assert pdfs
    pdf = pdfs[0]
    assert pdf.startswith(b"%PDF-1.") and pdf.rstrip().endswith(b"%%EOF")
    startxref = int(pdf.rsplit(b"startxref", 1)[1].split()[0])
    assert pdf[startxref:].startswith(b"xref")


def test_samples_carry_non_ascii_names() -> None:
    text = "".join(path.read_text("utf-8") for path in FILES)
    for name in ("Müller", "Åkesson", "Ørskog", "Łódź"):
        assert name in text

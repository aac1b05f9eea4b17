"""Builds realistic Peppol BIS 3.0 invoices for tests that need many, or need them varied."""

from __future__ import annotations

from pathlib import Path


def invoice_xml(
    invoice_id: str,
    *,
    receiver: str = "9915:phase4-test-receiver",
    amount: str = "1250.00",
    currency: str = "EUR",
    note: str = "",
    document_type: str = "Invoice",
    padding: int = 0,
    lines: int = 1,
    issue_date: str = "2026-11-02",
    due_date: str | None = None,
    payment_due_date: str | None = None,
) -> bytes:
    """A complete, valid invoice or credit note; ``note`` and ``padding`` vary its bytes,
    and ``lines`` the number of invoice lines (most of a real invoice's bytes)."""
    scheme, _, endpoint = receiver.partition(":")
    root_ns = f"urn:oasis:names:specification:ubl:schema:xsd:{document_type}-2"
    type_code = "380" if document_type == "Invoice" else "381"
    type_tag = "InvoiceTypeCode" if document_type == "Invoice" else "CreditNoteTypeCode"
    line_tag = "InvoiceLine" if document_type == "Invoice" else "CreditNoteLine"
    qty_tag = "InvoicedQuantity" if document_type == "Invoice" else "CreditedQuantity"
    filler = f"<cbc:Note>{'x' * padding}</cbc:Note>" if padding else ""
    note_xml = f"<cbc:Note>{note}</cbc:Note>" if note else ""
    due_xml = f"\n  <cbc:DueDate>{due_date}</cbc:DueDate>" if due_date else ""
    means_xml = (
        "\n  <cac:PaymentMeans><cbc:PaymentMeansCode>30</cbc:PaymentMeansCode>"
        f"<cbc:PaymentDueDate>{payment_due_date}</cbc:PaymentDueDate></cac:PaymentMeans>"
        if payment_due_date
        else ""
    )
    invoice_lines = "\n".join(
        _line(line_tag, qty_tag, number, amount, currency) for number in range(1, lines + 1)
    )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<{document_type} xmlns="{root_ns}"
  xmlns:cac="urn:oasis:names:specification:ubl:schema:xsd:CommonAggregateComponents-2"
  xmlns:cbc="urn:oasis:names:specification:ubl:schema:xsd:CommonBasicComponents-2">
  <cbc:CustomizationID>urn:cen.eu:en16931:2017#compliant#urn:fdc:peppol.eu:2017:poacc:billing:3.0</cbc:CustomizationID>
  <cbc:ProfileID>urn:fdc:peppol.eu:2017:poacc:billing:01:1.0</cbc:ProfileID>
  <cbc:ID>{invoice_id}</cbc:ID>
  <cbc:IssueDate>{issue_date}</cbc:IssueDate>{due_xml}
  <cbc:{type_tag}>{type_code}</cbc:{type_tag}>
  {note_xml}{filler}
  <cbc:DocumentCurrencyCode>{currency}</cbc:DocumentCurrencyCode>
  <cbc:BuyerReference>PO-4711</cbc:BuyerReference>
  <cac:AccountingSupplierParty><cac:Party>
    <cbc:EndpointID schemeID="0088">7300010000001</cbc:EndpointID>
    <cac:PartyName><cbc:Name>Nordlicht Büromaschinen GmbH</cbc:Name></cac:PartyName>
    <cac:PostalAddress><cbc:CityName>Köln</cbc:CityName>
      <cac:Country><cbc:IdentificationCode>DE</cbc:IdentificationCode></cac:Country></cac:PostalAddress>
    <cac:PartyLegalEntity><cbc:RegistrationName>Nordlicht Büromaschinen GmbH</cbc:RegistrationName></cac:PartyLegalEntity>
  </cac:Party></cac:AccountingSupplierParty>
  <cac:AccountingCustomerParty><cac:Party>
    <cbc:EndpointID schemeID="{scheme}">{endpoint}</cbc:EndpointID>
    <cac:PartyName><cbc:Name>Åkerlund &amp; Søn AB</cbc:Name></cac:PartyName>
    <cac:PostalAddress><cbc:CityName>Malmö</cbc:CityName>
      <cac:Country><cbc:IdentificationCode>SE</cbc:IdentificationCode></cac:Country></cac:PostalAddress>
    <cac:PartyLegalEntity><cbc:RegistrationName>Åkerlund &amp; Søn AB</cbc:RegistrationName></cac:PartyLegalEntity>
  </cac:Party></cac:AccountingCustomerParty>{means_xml}
  <cac:TaxTotal><cbc:TaxAmount currencyID="{currency}">0.00</cbc:TaxAmount></cac:TaxTotal>
  <cac:LegalMonetaryTotal>
    <cbc:LineExtensionAmount currencyID="{currency}">{amount}</cbc:LineExtensionAmount>
    <cbc:TaxExclusiveAmount currencyID="{currency}">{amount}</cbc:TaxExclusiveAmount>
    <cbc:TaxInclusiveAmount currencyID="{currency}">{amount}</cbc:TaxInclusiveAmount>
    <cbc:PayableAmount currencyID="{currency}">{amount}</cbc:PayableAmount>
  </cac:LegalMonetaryTotal>
{invoice_lines}
</{document_type}>
""".encode()


def _line(line_tag: str, qty_tag: str, number: int, amount: str, currency: str) -> str:
    return f"""  <cac:{line_tag}>
    <cbc:ID>{number}</cbc:ID>
    <cbc:{qty_tag} unitCode="C62">1</cbc:{qty_tag}>
    <cbc:LineExtensionAmount currencyID="{currency}">{amount}</cbc:LineExtensionAmount>
    <cac:Item><cbc:Name>Wartungsvertrag Q4</cbc:Name>
      <cac:ClassifiedTaxCategory><cbc:ID>Z</cbc:ID><cbc:Percent>0</cbc:Percent>
        <cac:TaxScheme><cbc:ID>VAT</cbc:ID></cac:TaxScheme></cac:ClassifiedTaxCategory></cac:Item>
    <cac:Price><cbc:PriceAmount currencyID="{currency}">{amount}</cbc:PriceAmount></cac:Price>
  </cac:{line_tag}>"""


def write_invoice(
    directory: Path, invoice_id: str, name: str | None = None, **kwargs: object
) -> Path:
    path = directory / (name or f"{invoice_id}.xml")
    path.write_bytes(invoice_xml(invoice_id, **kwargs))  # type: ignore[arg-type]
    return path

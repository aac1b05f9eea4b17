"""Generates outboxes of realistic invoices for the benchmarks (not part of the package)."""

from __future__ import annotations

import base64
import os
import random
from pathlib import Path

_LINE = """  <cac:InvoiceLine>
    <cbc:ID>{n}</cbc:ID>
    <cbc:InvoicedQuantity unitCode="C62">{qty}</cbc:InvoicedQuantity>
    <cbc:LineExtensionAmount currencyID="EUR">{amount}</cbc:LineExtensionAmount>
    <cac:Item><cbc:Name>Verbrauchsmaterial Position {n} – Größe M</cbc:Name>
      <cac:SellersItemIdentification><cbc:ID>SKU-{sku}</cbc:ID></cac:SellersItemIdentification>
      <cac:ClassifiedTaxCategory><cbc:ID>S</cbc:ID><cbc:Percent>19</cbc:Percent>
        <cac:TaxScheme><cbc:ID>VAT</cbc:ID></cac:TaxScheme></cac:ClassifiedTaxCategory></cac:Item>
    <cac:Price><cbc:PriceAmount currencyID="EUR">{price}</cbc:PriceAmount></cac:Price>
  </cac:InvoiceLine>
"""

_HEAD = """<?xml version="1.0" encoding="UTF-8"?>
<Invoice xmlns="urn:oasis:names:specification:ubl:schema:xsd:Invoice-2"
  xmlns:cac="urn:oasis:names:specification:ubl:schema:xsd:CommonAggregateComponents-2"
  xmlns:cbc="urn:oasis:names:specification:ubl:schema:xsd:CommonBasicComponents-2">
  <cbc:CustomizationID>urn:cen.eu:en16931:2017#compliant#urn:fdc:peppol.eu:2017:poacc:billing:3.0</cbc:CustomizationID>
  <cbc:ProfileID>urn:fdc:peppol.eu:2017:poacc:billing:01:1.0</cbc:ProfileID>
  <cbc:ID>{invoice_id}</cbc:ID>
  <cbc:IssueDate>2026-11-{day:02d}</cbc:IssueDate>
  <cbc:DueDate>2026-12-{day:02d}</cbc:DueDate>
  <cbc:InvoiceTypeCode>380</cbc:InvoiceTypeCode>
  <cbc:DocumentCurrencyCode>EUR</cbc:DocumentCurrencyCode>
  <cbc:BuyerReference>PO-{po}</cbc:BuyerReference>
{attachment}  <cac:AccountingSupplierParty><cac:Party>
    <cbc:EndpointID schemeID="0088">7300010000001</cbc:EndpointID>
    <cac:PartyName><cbc:Name>Nordlicht Büromaschinen GmbH</cbc:Name></cac:PartyName>
    <cac:PostalAddress><cbc:StreetName>Hauptstraße 5</cbc:StreetName><cbc:CityName>Köln</cbc:CityName>
      <cbc:PostalZone>50667</cbc:PostalZone><cac:Country><cbc:IdentificationCode>DE</cbc:IdentificationCode></cac:Country></cac:PostalAddress>
    <cac:PartyTaxScheme><cbc:CompanyID>DE123456789</cbc:CompanyID><cac:TaxScheme><cbc:ID>VAT</cbc:ID></cac:TaxScheme></cac:PartyTaxScheme>
    <cac:PartyLegalEntity><cbc:RegistrationName>Nordlicht Büromaschinen GmbH</cbc:RegistrationName></cac:PartyLegalEntity>
  </cac:Party></cac:AccountingSupplierParty>
  <cac:AccountingCustomerParty><cac:Party>
    <cbc:EndpointID schemeID="9915">phase4-test-receiver</cbc:EndpointID>
    <cac:PartyName><cbc:Name>Åkerlund &amp; Søn AB</cbc:Name></cac:PartyName>
    <cac:PostalAddress><cbc:CityName>Malmö</cbc:CityName>
      <cac:Country><cbc:IdentificationCode>SE</cbc:IdentificationCode></cac:Country></cac:PostalAddress>
    <cac:PartyLegalEntity><cbc:RegistrationName>Åkerlund &amp; Søn AB</cbc:RegistrationName></cac:PartyLegalEntity>
  </cac:Party></cac:AccountingCustomerParty>
  <cac:TaxTotal><cbc:TaxAmount currencyID="EUR">{tax}</cbc:TaxAmount></cac:TaxTotal>
  <cac:LegalMonetaryTotal>
    <cbc:LineExtensionAmount currencyID="EUR">{net}</cbc:LineExtensionAmount>
    <cbc:TaxExclusiveAmount currencyID="EUR">{net}</cbc:TaxExclusiveAmount>
    <cbc:TaxInclusiveAmount currencyID="EUR">{gross}</cbc:TaxInclusiveAmount>
    <cbc:PayableAmount currencyID="EUR">{gross}</cbc:PayableAmount>
  </cac:LegalMonetaryTotal>
"""

_ATTACHMENT = """  <cac:AdditionalDocumentReference>
    <cbc:ID>{invoice_id}-PDF</cbc:ID>
    <cac:Attachment><cbc:EmbeddedDocumentBinaryObject mimeCode="application/pdf" filename="{invoice_id}.pdf">{data}</cbc:EmbeddedDocumentBinaryObject></cac:Attachment>
  </cac:AdditionalDocumentReference>
"""


def invoice(
    invoice_id: str, rng: random.Random, lines: int = 12, attachment_bytes: int = 0
) -> bytes:
    """One realistic invoice; 12 lines make about 10 KB."""
    body = []
    net = 0.0
    for n in range(1, lines + 1):
        qty = rng.randint(1, 40)
        price = rng.randint(100, 99999) / 100
        amount = round(qty * price, 2)
        net += amount
        body.append(
            _LINE.format(
                n=n,
                qty=qty,
                amount=f"{amount:.2f}",
                price=f"{price:.2f}",
                sku=rng.randint(10000, 99999),
            )
        )
    net = round(net, 2)
    tax = round(net * 0.19, 2)
    attachment = ""
    if attachment_bytes:
        data = base64.b64encode(os.urandom(attachment_bytes * 3 // 4)).decode()
        attachment = _ATTACHMENT.format(invoice_id=invoice_id, data=data)
    head = _HEAD.format(
        invoice_id=invoice_id,
        day=rng.randint(1, 28),
        po=rng.randint(1000, 9999),
        attachment=attachment,
        tax=f"{tax:.2f}",
        net=f"{net:.2f}",
        gross=f"{net + tax:.2f}",
    )
    return (head + "".join(body) + "</Invoice>\n").encode()


def write_outbox(
    directory: Path, count: int, large: int = 0, seed: int = 1, prefix: str = "BENCH"
) -> list[Path]:
    """``count`` invoices of about 10 KB, plus ``large`` of 2-3 MB with an embedded PDF."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    paths = []
    for number in range(count + large):
        invoice_id = f"{prefix}-{number:06d}"
        size = rng.randint(2_000_000, 3_000_000) if number >= count else 0
        path = directory / f"{invoice_id}.xml"
        path.write_bytes(invoice(invoice_id, rng, attachment_bytes=size))
        paths.append(path)
    return paths

"""Peppol BIS 3.0 style UBL invoices the emulator accepts, for tests, demos and benchmarks.

Realistic in shape and size (about 1 KB per line on top of a 3 KB frame), not validated
against the full BIS rule set: the emulator only checks what goroute-api.md says it checks.
"""

from __future__ import annotations

import json
from xml.sax.saxutils import escape

DEFAULT_RECEIVER = ("9915", "phase4-test-receiver")
DEFAULT_SENDER = ("0088", "7300010000001")

_LINE = """  <cac:InvoiceLine>
    <cbc:ID>{n}</cbc:ID>
    <cbc:InvoicedQuantity unitCode="EA">{qty}</cbc:InvoicedQuantity>
    <cbc:LineExtensionAmount currencyID="EUR">{amount}</cbc:LineExtensionAmount>
    <cac:OrderLineReference>
      <cbc:LineID>{n}</cbc:LineID>
    </cac:OrderLineReference>
    <cac:Item>
      <cbc:Description>Consulting services, work package {n}, framework contract</cbc:Description>
      <cbc:Name>Service item {n}</cbc:Name>
      <cac:SellersItemIdentification>
        <cbc:ID>SKU-{n:05d}</cbc:ID>
      </cac:SellersItemIdentification>
      <cac:ClassifiedTaxCategory>
        <cbc:ID>S</cbc:ID>
        <cbc:Percent>25</cbc:Percent>
        <cac:TaxScheme>
          <cbc:ID>VAT</cbc:ID>
        </cac:TaxScheme>
      </cac:ClassifiedTaxCategory>
    </cac:Item>
    <cac:Price>
      <cbc:PriceAmount currencyID="EUR">{price}</cbc:PriceAmount>
    </cac:Price>
  </cac:InvoiceLine>
"""

_FRAME = """<?xml version="1.0" encoding="UTF-8"?>
<Invoice xmlns="urn:oasis:names:specification:ubl:schema:xsd:Invoice-2"
         xmlns:cac="urn:oasis:names:specification:ubl:schema:xsd:CommonAggregateComponents-2"
         xmlns:cbc="urn:oasis:names:specification:ubl:schema:xsd:CommonBasicComponents-2">
  <cbc:CustomizationID>urn:cen.eu:en16931:2017#compliant#urn:fdc:peppol.eu:2017:poacc:billing:3.0</cbc:CustomizationID>
  <cbc:ProfileID>urn:fdc:peppol.eu:2017:poacc:billing:01:1.0</cbc:ProfileID>
  <cbc:ID>{invoice_id}</cbc:ID>
  <cbc:IssueDate>2024-05-02</cbc:IssueDate>
  <cbc:DueDate>2024-06-01</cbc:DueDate>
  <cbc:InvoiceTypeCode>380</cbc:InvoiceTypeCode>
  <cbc:DocumentCurrencyCode>EUR</cbc:DocumentCurrencyCode>
  <cbc:BuyerReference>PO-4711</cbc:BuyerReference>
  <cac:AccountingSupplierParty>
    <cac:Party>
      <cbc:EndpointID schemeID="{sender_scheme}">{sender_id}</cbc:EndpointID>
      <cac:PartyName>
        <cbc:Name>Supplier AB</cbc:Name>
      </cac:PartyName>
      <cac:PostalAddress>
        <cbc:StreetName>Main Street 1</cbc:StreetName>
        <cbc:CityName>Stockholm</cbc:CityName>
        <cbc:PostalZone>11122</cbc:PostalZone>
        <cac:Country>
          <cbc:IdentificationCode>SE</cbc:IdentificationCode>
        </cac:Country>
      </cac:PostalAddress>
      <cac:PartyTaxScheme>
        <cbc:CompanyID>SE556677889901</cbc:CompanyID>
        <cac:TaxScheme>
          <cbc:ID>VAT</cbc:ID>
        </cac:TaxScheme>
      </cac:PartyTaxScheme>
      <cac:PartyLegalEntity>
        <cbc:RegistrationName>Supplier AB</cbc:RegistrationName>
      </cac:PartyLegalEntity>
    </cac:Party>
  </cac:AccountingSupplierParty>
  <cac:AccountingCustomerParty>
    <cac:Party>
      <cbc:EndpointID schemeID="{receiver_scheme}">{receiver_id}</cbc:EndpointID>
      <cac:PartyName>
        <cbc:Name>Customer GmbH</cbc:Name>
      </cac:PartyName>
      <cac:PostalAddress>
        <cbc:StreetName>Hauptstrasse 5</cbc:StreetName>
        <cbc:CityName>Berlin</cbc:CityName>
        <cbc:PostalZone>10115</cbc:PostalZone>
        <cac:Country>
          <cbc:IdentificationCode>DE</cbc:IdentificationCode>
        </cac:Country>
      </cac:PostalAddress>
      <cac:PartyLegalEntity>
        <cbc:RegistrationName>Customer GmbH</cbc:RegistrationName>
      </cac:PartyLegalEntity>
    </cac:Party>
  </cac:AccountingCustomerParty>
  <cac:PaymentMeans>
    <cbc:PaymentMeansCode>30</cbc:PaymentMeansCode>
    <cac:PayeeFinancialAccount>
      <cbc:ID>SE4550000000058398257466</cbc:ID>
    </cac:PayeeFinancialAccount>
  </cac:PaymentMeans>
  <cac:TaxTotal>
    <cbc:TaxAmount currencyID="EUR">{tax}</cbc:TaxAmount>
  </cac:TaxTotal>
  <cac:LegalMonetaryTotal>
    <cbc:LineExtensionAmount currencyID="EUR">{net}</cbc:LineExtensionAmount>
    <cbc:TaxExclusiveAmount currencyID="EUR">{net}</cbc:TaxExclusiveAmount>
    <cbc:TaxInclusiveAmount currencyID="EUR">{gross}</cbc:TaxInclusiveAmount>
    <cbc:PayableAmount currencyID="EUR">{gross}</cbc:PayableAmount>
  </cac:LegalMonetaryTotal>
{lines}</Invoice>
"""


def sample_invoice(
    invoice_id: str,
    *,
    receiver: tuple[str, str] = DEFAULT_RECEIVER,
    sender: tuple[str, str] = DEFAULT_SENDER,
    lines: int = 8,
) -> str:
    """A UBL invoice as text; eight lines make about 10 KB, like a typical invoice."""
    body = "".join(
        _LINE.format(n=n, qty=n, price="100.00", amount=f"{n * 100}.00")
        for n in range(1, lines + 1)
    )
    net = sum(n * 100 for n in range(1, lines + 1))
    return _FRAME.format(
        invoice_id=escape(invoice_id),
        sender_scheme=escape(sender[0]),
        sender_id=escape(sender[1]),
        receiver_scheme=escape(receiver[0]),
        receiver_id=escape(receiver[1]),
        tax=f"{net / 4:.2f}",
        net=f"{net:.2f}",
        gross=f"{net * 1.25:.2f}",
        lines=body,
    )


def send_body(document: str, *, receiver: tuple[str, str], invoice_id: str | None = None) -> bytes:
    """The JSON request body for ``POST /api/v1/documents``, built once, as the client must."""
    fields = {
        "receiver_scheme": receiver[0],
        "receiver_id": receiver[1],
        "document": document,
        "metadata": {"invoice_id": invoice_id} if invoice_id is not None else {},
    }
    return json.dumps(fields, separators=(",", ":")).encode("utf-8")

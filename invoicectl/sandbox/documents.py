"""Checking one ``POST /api/v1/documents`` body the way GoRoute's front door would.

Everything here is pure: bytes in, a ``Submission`` or a ``Problem`` (400/413) out. The XML
parser never resolves entities, never loads a DTD and never touches the network; it takes
huge text nodes because a UBL invoice may embed a PDF of several megabytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from lxml import etree

from invoicectl.sandbox.party import Party
from invoicectl.sandbox.problems import Detail, Problem

CAC = "urn:oasis:names:specification:ubl:schema:xsd:CommonAggregateComponents-2"
CBC = "urn:oasis:names:specification:ubl:schema:xsd:CommonBasicComponents-2"
_NS = {"cac": CAC, "cbc": CBC}
DOCUMENT_TYPES = {
    f"{{urn:oasis:names:specification:ubl:schema:xsd:{name}-2}}{name}": name
    for name in ("Invoice", "CreditNote")
}
REQUIRED_FIELDS = ("receiver_scheme", "receiver_id", "document")

_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=True)


@dataclass(frozen=True)
class Submission:
    """What a valid send carries, as the emulator needs it."""

    receiver: Party
    sender: Party
    document_type: str
    document_id: str
    metadata: dict[str, Any]

    @property
    def invoice_id(self) -> str:
        """The sender's invoice id (metadata wins, as the brief sends it) else the UBL cbc:ID."""
        value = self.metadata.get("invoice_id")
        return str(value) if value is not None else self.document_id


def invalid(message: str, rule: str = "REQUEST", location: str = "") -> Problem:
    return Problem(400, "VALIDATION_ERROR", message, (Detail(rule, message, location),))


def read_submission(body: bytes, max_document_bytes: int) -> Submission:
    """Validate a raw request body; raise ``Problem`` with the first reason it is refused."""
    fields = _json_object(body)
    document = fields["document"]
    encoded = document.encode("utf-8")
    if len(encoded) > max_document_bytes:
        raise Problem(
            413,
            "PAYLOAD_TOO_LARGE",
            f"document is {len(encoded)} bytes; the limit is {max_document_bytes}",
        )
    root = parse_document(encoded)
    submission = document_facts(root, fields.get("metadata") or {})
    _check_receiver(submission.receiver, fields["receiver_scheme"], fields["receiver_id"])
    return submission


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        fields = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise invalid(f"request body is not JSON: {exc}", "JSON") from None
    if not isinstance(fields, dict):
        raise invalid("request body must be a JSON object", "JSON")
    missing = [name for name in REQUIRED_FIELDS if not fields.get(name)]
    if missing:
        details = tuple(Detail("REQUIRED", f"{name} is required", name) for name in missing)
        raise Problem(400, "VALIDATION_ERROR", f"missing field(s): {', '.join(missing)}", details)
    for name in REQUIRED_FIELDS:
        if not isinstance(fields[name], str):
            raise invalid(f"{name} must be a string", "TYPE", name)
    if "metadata" in fields and not isinstance(fields["metadata"], dict | None):
        raise invalid("metadata must be an object", "TYPE", "metadata")
    return fields


def parse_document(encoded: bytes) -> etree._Element:
    try:
        return etree.fromstring(encoded, _PARSER)
    except etree.XMLSyntaxError as exc:
        message = f"document is not well-formed XML: {exc}"
        raise Problem(
            400, "INVALID_XML", message, (Detail("XML", message, f"line {exc.lineno}"),)
        ) from None


def document_facts(root: etree._Element, metadata: dict[str, Any]) -> Submission:
    document_type = DOCUMENT_TYPES.get(root.tag)
    if document_type is None:
        raise invalid(f"unsupported document root {root.tag}", "UBL-ROOT", "/")
    document_id = _string(root.find("cbc:ID", _NS))
    if not document_id or not document_id.strip():
        raise invalid("document has no cbc:ID", "BR-02", "/cbc:ID")
    receiver = _party(root, "AccountingCustomerParty", "PEPPOL-EN16931-R010")
    sender = _party(root, "AccountingSupplierParty", "PEPPOL-EN16931-R020")
    return Submission(receiver, sender, document_type, document_id.strip(), metadata)


def _party(root: etree._Element, role: str, rule: str) -> Party:
    party = root.find(f"cac:{role}/cac:Party", _NS)
    endpoint = party.find("cbc:EndpointID", _NS) if party is not None else None
    location = f"/cac:{role}/cac:Party/cbc:EndpointID"
    if endpoint is None or not _string(endpoint).strip():
        raise invalid(f"{role} has no cbc:EndpointID", rule, location)
    scheme = endpoint.get("schemeID")
    if not scheme:
        raise invalid(f"{role} EndpointID has no schemeID", rule, location + "/@schemeID")
    assert party is not None
    name = party.findtext("cac:PartyName/cbc:Name", namespaces=_NS) or party.findtext(
        "cac:PartyLegalEntity/cbc:RegistrationName", namespaces=_NS
    )
    return Party(scheme, _string(endpoint).strip(), name)


def _string(element: etree._Element | None) -> str:
    """An element's string value, XPath's ``string()``: a comment or a processing
    instruction inside it splits its text, and is no part of it (nor is an entity left
    unresolved)."""
    return "" if element is None else str(element.xpath("string()"))


def _check_receiver(receiver: Party, scheme: str, identifier: str) -> None:
    if (scheme, identifier) != (receiver.scheme, receiver.identifier):
        message = (
            f"receiver {scheme}:{identifier} does not match the document's customer "
            f"EndpointID {receiver.participant}"
        )
        raise invalid(message, "RECEIVER_MISMATCH", "/receiver_id")

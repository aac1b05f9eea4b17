"""The emulator's ``POST /api/v1/validate``: the checks a send gets, plus a few Peppol rules.

Pure, like ``documents``: the raw XML in, ``{"valid", "errors": [{rule, location, message}]}``
out. The send checks (well-formed, a UBL Invoice or CreditNote, a cbc:ID, both parties'
EndpointID with a schemeID) stop at their first finding; the rules below are all reported.
"""

from __future__ import annotations

from typing import Any

from lxml import etree

from invoicectl.sandbox.documents import CBC, DOCUMENT_TYPES, document_facts, parse_document
from invoicectl.sandbox.problems import Detail, Problem

PEPPOL_BILLING = "urn:cen.eu:en16931:2017#compliant#urn:fdc:peppol.eu:2017:poacc:billing:3.0"


def validation_answer(document: bytes, max_document_bytes: int) -> dict[str, Any]:
    errors = findings(document, max_document_bytes)
    return {"valid": not errors, "errors": [error.as_json() for error in errors]}


def findings(document: bytes, max_document_bytes: int) -> list[Detail]:
    if len(document) > max_document_bytes:
        message = f"document is {len(document)} bytes; the limit is {max_document_bytes}"
        return [Detail("SIZE", message, "/")]
    try:
        root = parse_document(document)
    except Problem as problem:
        return list(problem.details)
    if root.tag not in DOCUMENT_TYPES:  # not UBL: no UBL rule applies
        return [Detail("UBL-ROOT", f"unsupported document root {root.tag}", "/")]
    try:
        document_facts(root, {})
    except Problem as problem:
        return [*problem.details, *_peppol_rules(root)]
    return _peppol_rules(root)


def _peppol_rules(root: etree._Element) -> list[Detail]:
    found = []
    customization = (root.findtext(f"{{{CBC}}}CustomizationID") or "").strip()
    if not customization:
        found.append(
            Detail(
                "BR-01", "An Invoice shall have a Specification identifier", "/cbc:CustomizationID"
            )
        )
    elif not customization.startswith(PEPPOL_BILLING):
        message = f"Specification identifier must start with {PEPPOL_BILLING}"
        found.append(Detail("PEPPOL-EN16931-R004", message, "/cbc:CustomizationID"))
    if not (root.findtext(f"{{{CBC}}}ProfileID") or "").strip():
        message = "Business process MUST be provided"
        found.append(Detail("PEPPOL-EN16931-R001", message, "/cbc:ProfileID"))
    return found

"""The header facts of a UBL Invoice or CreditNote (``InvoiceFacts``, ``Endpoint``) and
``parse_document``, which finds them.

The header fields are the root's direct children, matched by namespace URI and local name,
never by prefix. A document that parses and has an ID but cannot be sent (no customer
endpoint) is not an exception: it comes back as ``InvoiceFacts`` with ``problem`` set, so it
is journalled under its ID. So is one holding twice a field UBL allows once, which another
reader may take otherwise; two different invoice numbers refuse the document.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from lxml import etree

from invoicectl.text import UNPRINTABLE, one_line
from invoicectl.ubl.dates import due_day
from invoicectl.ubl.doctype import read_prolog, refuse_doctype, refuse_parsed_dtd
from invoicectl.ubl.encoding import (
    Encoding,
    not_valid_in,
    sniff_encoding,
    utf8_as_sent,
    utf8_in_disguise,
)
from invoicectl.ubl.errors import InvalidDocument
from invoicectl.ubl.lookalikes import invisible_ends, invisible_reason, lookalike
from invoicectl.ubl.parsers import PARSER
from invoicectl.ubl.reading import MAX_DOCUMENT_BYTES
from invoicectl.ubl.two_parts import (
    DOCUMENT_NODES,
    lines_end_the_root,
    parse_in_two_parts,
    refuse_a_forest,
)

_UBL_SCHEMA = "urn:oasis:names:specification:ubl:schema:xsd:"
_ROOTS = {
    f"{{{_UBL_SCHEMA}Invoice-2}}Invoice": "Invoice",
    f"{{{_UBL_SCHEMA}CreditNote-2}}CreditNote": "CreditNote",
}
_CBC = f"{{{_UBL_SCHEMA}CommonBasicComponents-2}}"
_CAC = f"{{{_UBL_SCHEMA}CommonAggregateComponents-2}}"

_ID = _CBC + "ID"
_ISSUE_DATE = _CBC + "IssueDate"
_CURRENCY = _CBC + "DocumentCurrencyCode"
_MONETARY_TOTAL = _CAC + "LegalMonetaryTotal"
_PAYABLE_AMOUNT = _CBC + "PayableAmount"
_SUPPLIER = _CAC + "AccountingSupplierParty"
_CUSTOMER = _CAC + "AccountingCustomerParty"
_PARTY = _CAC + "Party"
_ENDPOINT_ID = _CBC + "EndpointID"
_DUE_DATE = _CBC + "DueDate"
_PAYMENT_MEANS = _CAC + "PaymentMeans"
_PAYMENT_DUE_DATE = _CBC + "PaymentDueDate"
# The root's children parse_document reads: every document has these...
_HEADER = frozenset((_ID, _ISSUE_DATE, _CURRENCY, _SUPPLIER, _CUSTOMER, _MONETARY_TOTAL))
# ...and may have these, which UBL places ahead of LegalMonetaryTotal, so the walk that finds
# the others passes them anyway.
_OPTIONAL = frozenset((_DUE_DATE, _PAYMENT_MEANS))
_WANTED = _HEADER | _OPTIONAL
# Those UBL allows once (UBL 2.1: each 1..1, DueDate 0..1; PaymentMeans may repeat). One found
# twice makes the document ambiguous: another reader may take the other, and GoRoute's schema
# check refuses it.
_ONCE = {
    _ID: "invoice numbers (cbc:ID)",
    _ISSUE_DATE: "issue dates (cbc:IssueDate)",
    _DUE_DATE: "due dates (cbc:DueDate)",
    _CURRENCY: "currency codes (cbc:DocumentCurrencyCode)",
    _SUPPLIER: "supplier parties (cac:AccountingSupplierParty)",
    _CUSTOMER: "customer parties (cac:AccountingCustomerParty)",
    _MONETARY_TOTAL: "totals (cac:LegalMonetaryTotal)",
}

# White space at the ends of a number makes it unidentified: an older invoicectl trimmed it
# off (str.strip), so the journal may hold the number without it. (str.strip keeps the
# zero-width characters: a number ending in one was journalled with it, so it is a
# ``lookalikes.lookalike``, journalled as written, as every other invisible character.)
_SPACE_AT_ENDS = re.compile(r"^\s|\s$")


# Named tuples, not frozen dataclasses: a scan makes three per file, and a frozen
# dataclass takes twice as long to build.
class Endpoint(NamedTuple):
    """A Peppol participant address: ``schemeID`` verbatim (it may contain a colon) and id."""

    scheme: str
    id: str

    def __str__(self) -> str:
        return f"{self.scheme}:{self.id}"


class InvoiceFacts(NamedTuple):
    """The header fields of one Invoice or CreditNote; texts verbatim, trimmed."""

    document_type: str
    invoice_id: str
    issue_date: str | None
    currency: str | None
    payable_amount: str | None
    supplier_endpoint: Endpoint | None
    customer_endpoint: Endpoint | None
    problem: str | None
    # The day cbc:DueDate names, else the first PaymentMeans' PaymentDueDate (``ubl.dates``)
    due_date: str | None = None


# The root's children parse_document reads: the first of each tag, and any later one of a tag
# UBL allows once (``_ONCE``), in document order. (A plain tuple: built for every file.)
Header = tuple[dict[str, etree._Element], list[etree._Element]]


def parse_document(data: bytes) -> InvoiceFacts:
    """The facts of a UBL Invoice or CreditNote; InvalidDocument when it is not one."""
    if not data or data.isspace():
        raise InvalidDocument(
            "the file is empty (0 bytes)" if not data else "the file holds only white space, no XML"
        )
    declared = sniff_encoding(data)
    disguised = utf8_in_disguise(data, declared)
    data, encoding = utf8_as_sent(data, declared)
    _refuse_over_the_limit(len(data) - encoding.bom_length)
    prolog = read_prolog(data, encoding.bom_length)
    refuse_doctype(prolog.doctype)
    root, (header, once_more) = _parse_header(data, encoding, prolog.root_start)
    refuse_parsed_dtd(root)
    document_type = _document_type(root)
    repeated = _repeated(header, once_more) if once_more else None
    try:
        invoice_id = _invoice_id(header)
    except InvalidDocument as refused:  # "Ö" read as two letters, one a control: say why
        raise InvalidDocument(disguised or refused.reason) from None
    customer, problem = _customer_endpoint(header.get(_CUSTOMER))
    problem = disguised or lookalike(invoice_id) or repeated or problem
    return InvoiceFacts(
        document_type=document_type,
        invoice_id=invoice_id,
        issue_date=_text(header.get(_ISSUE_DATE)),
        currency=_text(header.get(_CURRENCY)),
        payable_amount=_text(_child(header.get(_MONETARY_TOTAL), _PAYABLE_AMOUNT)),
        supplier_endpoint=_endpoint(_party_endpoint(header.get(_SUPPLIER))),
        customer_endpoint=customer,
        problem=problem,
        due_date=due_day(_text(header.get(_DUE_DATE)))
        or due_day(_text(_child(header.get(_PAYMENT_MEANS), _PAYMENT_DUE_DATE))),
    )


def _refuse_over_the_limit(size: int) -> None:
    """The API's limit is on the document as sent, in UTF-8 (a byte-order mark dropped)."""
    if size > MAX_DOCUMENT_BYTES:
        raise InvalidDocument(
            f"the document is {size:,} bytes as sent (in UTF-8), over the API's limit of "
            f"15 MB ({MAX_DOCUMENT_BYTES:,} bytes)"
        )


def _parse_header(
    data: bytes, encoding: Encoding, root_start: int
) -> tuple[etree._Element, Header]:
    """The root and its header children (``header_children``): from a tree of the header
    alone when ``parse_in_two_parts`` can show it is the whole document's, else from the whole.
    UBL allows only invoice lines after the header: every child of a whole document's root is
    read (an ID appended after the lines, or slipped in between two: helper-105); a large one
    read in two parts is read whole when something else follows its last line. (A number
    between two lines of a large invoice is not looked for: finding it cost 5 % of every
    parse, and GoRoute's schema check refuses such a document.)"""
    root = parse_in_two_parts(data, root_start)
    if root is not None and lines_end_the_root(data):
        header = header_children(root)
        if _HEADER.issubset(header[0]):  # else a header field may follow the cut
            return root, header
    root = parse_whole(data, encoding)
    return root, header_children(root, every_child=True)  # a few dozen on a small invoice


def _document_type(root: etree._Element) -> str:
    document_type = _ROOTS.get(root.tag)
    if document_type is not None:
        return document_type
    qname = etree.QName(root)
    namespace, local = qname.namespace or "", qname.localname
    if local in ("Invoice", "CreditNote"):
        where = f"namespace {namespace}" if namespace else "no namespace"
        raise InvalidDocument(
            f"not UBL: the root element {local} is in {where}, not the UBL namespace "
            f"{_UBL_SCHEMA}{local}-2"
        )
    if namespace.startswith(_UBL_SCHEMA):
        raise InvalidDocument(
            f"a UBL {local} document; the GoRoute API takes only Invoice and CreditNote"
        )
    if local == "CrossIndustryInvoice":
        raise InvalidDocument(
            "not UBL: this is a UN/CEFACT CII invoice (CrossIndustryInvoice); "
            "the GoRoute API takes UBL Invoice and CreditNote documents"
        )
    where = f" in namespace {namespace}" if namespace else " (no namespace)"
    raise InvalidDocument(
        f"not UBL: the root element is {local}{where}, not a UBL Invoice or CreditNote"
    )


def header_children(root: etree._Element, every_child: bool = False) -> Header:
    """The first direct child of each header tag (``_HEADER``, and the ``_OPTIONAL`` ones met
    on the way), and the repeated ones of ``_ONCE``, in one walk that stops once every
    ``_HEADER`` tag is found (unless ``every_child``): UBL puts them ahead of the invoice lines,
    which are then never visited. (Plain loops here and in ``_child``: lxml's tag-filtered
    iterchildren costs more to set up than a short walk, and ElementPath's find more again.)"""
    found: dict[str, etree._Element] = {}
    repeated: list[etree._Element] = []
    missing = len(_HEADER)
    for child in root:
        tag = child.tag
        if tag in _WANTED:
            if tag not in found:
                found[tag] = child
                if tag in _HEADER:
                    missing -= 1
                    if not missing and not every_child:
                        break
            elif tag in _ONCE:
                repeated.append(child)
    return found, repeated


def _repeated(first: dict[str, etree._Element], repeated: list[etree._Element]) -> str:
    """Why a field UBL allows once is there more than once: the problem the invoice is
    journalled with, or InvalidDocument when its numbers differ (which invoice is it?)."""
    tag = next(tag for tag in _ONCE if any(child.tag == tag for child in repeated))
    copies = [first[tag], *(child for child in repeated if child.tag == tag)]
    held = f"the document holds {len(copies)} {_ONCE[tag]} at its root"
    if tag.startswith(_CAC):
        return f"{held}; keep one"
    texts = [_text(copy) for copy in copies]
    shown = ", ".join("(empty)" if text is None else one_line(text, 40) for text in texts[:3])
    reason = f"{held}: {shown}{', ...' if len(texts) > 3 else ''}; keep one"
    if tag == _ID and len(set(texts)) > 1:
        raise InvalidDocument(reason)
    return reason


def _child(element: etree._Element | None, tag: str) -> etree._Element | None:
    if element is not None:
        for child in element:
            if child.tag == tag:
                return child
    return None


# XML's white space: the only characters trimmed from a field. str.strip() also takes a
# no-break space, NEL or a line separator off the ends: a different invoice ID from the one
# sent, and one the control-character check never saw.
_XML_SPACE = " \t\r\n"


def _text(element: etree._Element | None) -> str | None:
    """The element's string value (its text and its children's, as XPath's ``string()``),
    trimmed of XML white space; None when that leaves nothing."""
    if element is None:
        return None
    text = element.text if len(element) == 0 else "".join(element.itertext())
    if text is None:
        return None
    return text.strip(_XML_SPACE) or None


def _invoice_id(header: dict[str, etree._Element]) -> str:
    """The invoice number: one line of plain text, as it will be sent and journalled."""
    element = header.get(_ID)
    if element is not None and len(element):
        raise InvalidDocument(
            f"the invoice number (cbc:ID) holds other elements ({_tags(element)}), not plain "
            "text; write the number alone"
        )
    invoice_id = _text(element)
    if invoice_id is None:
        raise InvalidDocument(_no_id_reason(header))
    if UNPRINTABLE.search(invoice_id):
        raise InvalidDocument(
            f"the invoice number (cbc:ID) '{one_line(invoice_id, 60)}' contains a line break, "
            "tab or other control character; an invoice number is one line of plain text"
        )
    if _SPACE_AT_ENDS.search(invoice_id):  # an older invoicectl took the number without it
        raise InvalidDocument(invisible_reason(invoice_id, invisible_ends(invoice_id)))
    return invoice_id


def _tags(element: etree._Element) -> str:
    names = dict.fromkeys(etree.QName(child).localname for child in element)
    return ", ".join(f"<{one_line(name, 40)}>" for name in list(names)[:3])


def _no_id_reason(children: dict[str, etree._Element]) -> str:
    if _ID in children:
        return "the invoice number (cbc:ID) is empty"
    return (
        "no invoice number: the document has no cbc:ID directly under its root "
        "(an ID inside UBLExtensions or elsewhere does not count)"
    )


def _party_endpoint(party_role: etree._Element | None) -> etree._Element | None:
    return _child(_child(party_role, _PARTY), _ENDPOINT_ID)


def _endpoint(element: etree._Element | None) -> Endpoint | None:
    identifier = _text(element)
    scheme = (element.get("schemeID") or "").strip() if element is not None else ""
    if identifier is None or not scheme:
        return None
    return Endpoint(scheme, identifier)


def _customer_endpoint(customer: etree._Element | None) -> tuple[Endpoint | None, str | None]:
    """The receiver's Peppol address, or the reason it cannot be sent."""
    element = _party_endpoint(customer)
    if element is None:
        return None, (
            "no customer EndpointID (AccountingCustomerParty/Party/EndpointID): "
            "the receiver's Peppol address is needed to send"
        )
    identifier = _text(element)
    if identifier is None:
        return None, "the customer EndpointID is empty: the receiver's Peppol address is needed"
    given = element.get("schemeID") or ""
    scheme = given.strip()
    if not scheme:
        return None, (
            f"the customer EndpointID {one_line(identifier, 80)} has no schemeID, so the "
            "receiver's Peppol scheme (e.g. 0088, 0192, 9915) is unknown"
        )
    if scheme != given or invisible_ends(identifier):
        # GoRoute compares the receiver sent with the document's as written: trimmed here,
        # it would refuse the send, with the key spent, on a difference nobody can see.
        return None, (
            f"the customer EndpointID '{one_line(identifier, 80)}' (schemeID "
            f"'{one_line(given, 20)}') starts or ends with a space or an invisible character; "
            "remove it"
        )
    return Endpoint(scheme, identifier), None


# libxml2's syntax errors, as reasons a clerk can act on.
_LXML_LOCATION = re.compile(r",? line \d+(, column \d+)?$")
_EXCESSIVE_DEPTH = re.compile(r"Excessive depth in document: (\d+)")


def parse_whole(data: bytes, encoding: Encoding) -> etree._Element:
    refuse_a_forest(data, len(data), DOCUMENT_NODES, "in all")
    try:
        return etree.fromstring(data, PARSER)
    except etree.XMLSyntaxError as exc:
        raise InvalidDocument(_syntax_reason(exc, data, encoding)) from None


def _syntax_reason(exc: etree.XMLSyntaxError, data: bytes, encoding: Encoding) -> str:
    # libxml2's encoding errors ("Invalid bytes in character encoding") say nothing a clerk
    # can act on; decoding ourselves names the encoding and the line.
    try:
        data[encoding.bom_length :].decode(encoding.codec)
    except UnicodeDecodeError as decode_error:
        return not_valid_in(encoding, data, decode_error.start)
    # libxml2 may end its message with a newline or quote lines of the file: keep one line.
    message = _LXML_LOCATION.sub("", " ".join((exc.msg or "syntax error").split())).strip()
    message = one_line(_plain_syntax_message(message), 200)
    return f"not well-formed XML (line {exc.lineno}): {message}"


def _plain_syntax_message(message: str) -> str:
    """libxml2's wording, with the two faults clerks meet most put in plain words."""
    if message.startswith("xmlParseEntityRef: no name"):
        return "a bare '&' that starts no entity (write it as &amp;)"
    if message.startswith(("Premature end of data", "EndTag: '</' not found")):
        return f"the file ends in the middle of the document; is it truncated? ({message})"
    depth = _EXCESSIVE_DEPTH.match(message)
    if depth:
        return (
            f"elements are nested more than {depth.group(1)} levels deep; "
            "no invoice nests that deep"
        )
    return message

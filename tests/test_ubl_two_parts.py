"""Reading a large invoice in two parts (``parse_in_two_parts``) answers exactly as reading it
whole: the same facts, the same reasons, line numbers included.

The two-part read takes a tree of the header only, once the lines are known to be
well-formed. Each case below pins which way it was read, so that none passes by never
taking the two-part path, and the property test holds the header tree to the whole
document's, element for element.
"""

from __future__ import annotations

import random

import pytest
from lxml import etree
from ublfactory import invoice_xml

from invoicectl.ubl import InvalidDocument, parse_document
from invoicectl.ubl.doctype import read_prolog
from invoicectl.ubl.facts import header_children
from invoicectl.ubl.parsers import PARSER
from invoicectl.ubl.two_parts import parse_in_two_parts

LINES = invoice_xml("INV-2P", lines=12)  # about 6 KB of invoice lines after the header
MONETARY_END = b"</cac:LegalMonetaryTotal>"
ROOT_END = b"</Invoice>"


def read_in_two(data: bytes) -> bool:
    """Whether parse_document reads ``data`` in two parts."""
    return parse_in_two_parts(data, read_prolog(data, 0).root_start) is not None


def in_lines(data: bytes, fragment: bytes) -> bytes:
    """``fragment`` put among the invoice lines, after the first line."""
    first_line_end = data.index(b"</cac:InvoiceLine>") + len(b"</cac:InvoiceLine>")
    return data[:first_line_end] + fragment + data[first_line_end:]


def after_lines(data: bytes, fragment: bytes) -> bytes:
    """``fragment`` as the root's last child, after all the lines."""
    at = data.rindex(ROOT_END)
    return data[:at] + fragment + data[at:]


def reason_of(data: bytes) -> str:
    with pytest.raises(InvalidDocument) as caught:
        parse_document(data)
    return caught.value.reason


def test_a_large_invoice_is_read_in_two_with_the_facts_of_the_whole() -> None:
    assert read_in_two(LINES)
    facts = parse_document(LINES)
    assert (facts.invoice_id, facts.payable_amount) == ("INV-2P", "1250.00")
    assert str(facts.customer_endpoint) == "9915:phase4-test-receiver"


def test_a_small_invoice_is_read_whole() -> None:
    assert not read_in_two(invoice_xml("INV-1"))


def test_a_fault_in_the_lines_gives_the_whole_documents_reason_and_line() -> None:
    data = in_lines(LINES, b"\n<cbc:Note>Smith & Sons</cbc:Note>")
    line = data[: data.index(b"Smith &")].count(b"\n") + 1

    assert not read_in_two(data)
    assert reason_of(data) == (
        f"not well-formed XML (line {line}): a bare '&' that starts no entity (write it as &amp;)"
    )


def test_an_undeclared_prefix_in_the_lines_is_refused_as_before() -> None:
    data = in_lines(LINES, b"<zz:Extra/>")

    assert not read_in_two(data)
    assert "Namespace prefix zz on Extra is not defined" in reason_of(data)


def test_the_lines_are_checked_in_the_roots_namespaces_not_a_lookalike_in_a_comment() -> None:
    data = LINES.replace(b"?>\n", b"?>\n<!-- <Invoice xmlns:zz='urn:zz'> -->\n", 1)
    data = in_lines(data, b"<zz:Extra/>")

    assert not read_in_two(data)
    assert "Namespace prefix zz on Extra is not defined" in reason_of(data)


def test_a_header_field_after_the_lines_is_still_found() -> None:
    start = LINES.index(b"<cac:AccountingCustomerParty>")
    end = LINES.index(b"</cac:AccountingCustomerParty>") + len(b"</cac:AccountingCustomerParty>")
    data = after_lines(LINES[:start] + LINES[end:], LINES[start:end])

    assert read_in_two(data)  # a tree of the header comes back, lacking the customer
    assert str(parse_document(data).customer_endpoint) == "9915:phase4-test-receiver"


def test_a_second_id_after_the_lines_is_not_missed_by_the_header_tree() -> None:
    """The header tree ends at the totals; the bytes after the last line send the document
    to the whole tree, which holds both numbers (tests/test_repeated_fields.py)."""
    data = after_lines(LINES, b"<cbc:ID>LATE</cbc:ID>")

    assert read_in_two(data)  # a tree of the header alone would come back...
    assert reason_of(data) == (  # ...without the second number
        "the document holds 2 invoice numbers (cbc:ID) at its root: INV-2P, LATE; keep one"
    )


def test_a_monetary_total_inside_a_line_before_the_real_one_is_not_the_cut() -> None:
    nested = (
        b"<cac:InvoiceLine><cbc:ID>0</cbc:ID><cac:LegalMonetaryTotal><cbc:PayableAmount"
        b' currencyID="EUR">9.99</cbc:PayableAmount></cac:LegalMonetaryTotal></cac:InvoiceLine>'
    )
    at = LINES.index(b"<cac:LegalMonetaryTotal>")
    data = LINES[:at] + nested + LINES[at:]

    assert parse_document(data).payable_amount == "1250.00"


def test_a_lookalike_end_tag_in_a_comment_or_cdata_is_not_the_cut() -> None:
    at = LINES.index(b"<cac:TaxTotal>")
    for hiding in (
        b"<!-- </cac:LegalMonetaryTotal> -->",
        b"<cbc:Note><![CDATA[</cac:LegalMonetaryTotal>]]></cbc:Note>",
    ):
        data = LINES[:at] + hiding + LINES[at:]
        assert parse_document(data).payable_amount == "1250.00"


def test_a_root_attribute_holding_a_closing_bracket() -> None:
    data = LINES.replace(b"<Invoice ", b"<Invoice note='a>b' other=\"c'>d\" ", 1)

    assert read_in_two(data)
    assert parse_document(data).invoice_id == "INV-2P"


def test_odd_prefixes_and_a_prolog_with_a_doctype_and_comments() -> None:
    data = (
        LINES.replace(b"cac:", b"a:")
        .replace(b"xmlns:cac=", b"xmlns:a=")
        .replace(b"<Invoice xmlns=", b"<ubl:Invoice xmlns:ubl=")
        .replace(b"</Invoice>", b"</ubl:Invoice>")
        .replace(
            b"?>\n", b"?>\n<!DOCTYPE ubl:Invoice>\n<!-- <b>not the root</b> -->\n<?pi x?>\n", 1
        )
    )

    assert read_in_two(data)
    facts = parse_document(data)
    assert (facts.invoice_id, facts.payable_amount) == ("INV-2P", "1250.00")


def test_trailing_junk_after_the_root_is_refused_as_before() -> None:
    data = LINES + b"<another-root/>"

    assert not read_in_two(data)
    assert reason_of(data).startswith("not well-formed XML")


def whole_header(data: bytes) -> dict[str, bytes] | None:
    """The whole document's header children, serialized; None when it is not well-formed."""
    try:
        root = etree.fromstring(data, PARSER)
    except etree.XMLSyntaxError:
        return None
    return {
        tag: etree.tostring(child, with_tail=False)
        for tag, child in header_children(root)[0].items()
    }


def test_the_header_tree_is_the_whole_documents_under_mutation() -> None:
    """Whenever the two-part read gives a tree, the whole document is well-formed and each
    header child found in that tree is the whole document's, byte for byte."""
    rng = random.Random(20261129)
    breaking = [b"<", b">", b"&", b"'", b'"', b"\x00", b"<!--", b"-->", b"<![CDATA[", b"]]>"]
    breaking += [MONETARY_END, b"<cac:LegalMonetaryTotal>", ROOT_END, b"<Invoice>", b" a='>' "]
    # Pieces that keep the document well-formed when they land between two elements.
    whole = [b"<cbc:ID>LATE</cbc:ID>", b"<x xmlns:zz='urn:z'><zz:y/></x>", b"<?pi ?>"]
    whole += [b"<!-- </cac:LegalMonetaryTotal> -->", b"<zz:x/>", b"<cbc:Note>&amp;</cbc:Note>"]
    cut = LINES.index(MONETARY_END) + len(MONETARY_END)
    two_part = 0
    for _ in range(600):
        data = bytearray(LINES)
        for _ in range(rng.randint(1, 3)):
            if rng.random() < 0.6:  # a whole piece at a tag, near the cut or anywhere
                near = rng.choice([rng.randint(cut - 80, cut + 80), rng.randrange(len(data))])
                at = data.find(b"<", max(0, near))
                data[at:at] = rng.choice(whole)
            elif rng.random() < 0.7:
                at = rng.randrange(len(data))
                data[at:at] = rng.choice(breaking)
            else:
                at = rng.randrange(len(data))
                del data[at : at + rng.randint(1, 30)]
        mutated = bytes(data)
        header = parse_in_two_parts(mutated, read_prolog(mutated, 0).root_start)
        if header is None:
            continue
        two_part += 1
        whole_children = whole_header(mutated)
        assert whole_children is not None, mutated
        for tag, child in header_children(header)[0].items():
            assert etree.tostring(child, with_tail=False) == whole_children[tag], mutated
    assert two_part > 100  # the property was tested, not skipped


# --- trees too large to build ----------------------------------------------------------------


def with_extension(data: bytes, elements: int) -> bytes:
    """``elements`` small elements in a UBLExtension, ahead of the header fields."""
    at = data.index(b"<cbc:CustomizationID>")
    filler = b'<a b="1" c="2" d="3"/>' * elements
    extension = (
        b'<ext:UBLExtensions xmlns:ext="urn:oasis:names:specification:ubl:schema:xsd:'
        b'CommonExtensionComponents-2"><ext:UBLExtension><ext:ExtensionContent><x xmlns="urn:x">'
        + filler
        + b"</x></ext:ExtensionContent></ext:UBLExtension></ext:UBLExtensions>"
    )
    return data[:at] + extension + data[at:]


def test_a_header_of_too_many_elements_is_refused_before_its_tree_is_built() -> None:
    """helper-97: 15 MB of small elements ahead of the lines made a tree of 600 MB."""
    reason = reason_of(with_extension(LINES, 60_000))  # 4 nodes each, and the header's
    assert reason.startswith("the document holds about 240,")
    assert reason.endswith(
        " elements and attributes ahead of its invoice lines, more than an invoice needs "
        "(200,000); is data of another kind written into it as XML?"
    )


def test_a_document_of_too_many_elements_is_refused_before_its_tree_is_built() -> None:
    small = invoice_xml("INV-TREE")  # read whole: no lines worth a second parse
    assert not read_in_two(small)
    reason = reason_of(with_extension(small, 400_000))
    assert "elements and attributes in all, more than an invoice needs (1,500,000)" in reason


def test_an_invoice_of_25_000_lines_near_the_size_limit_is_read() -> None:
    """Realistic large invoices are read, whole (their total sent last) or in two."""
    large = invoice_xml("INV-25K", lines=25_000)  # 13 MB, 725,000 nodes
    total = large[large.index(b"<cac:LegalMonetaryTotal>") : large.index(MONETARY_END) + 25]
    last = after_lines(large.replace(total, b""), total)  # read whole: its tree is built
    assert not read_in_two(last) and len(last) > 4 * 1_500_000  # the bound is looked at
    for data in (large, last, with_extension(large, 1_000)):
        assert parse_document(data).invoice_id == "INV-25K"

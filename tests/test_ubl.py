"""The safe UBL reader: one named fixture per bad-input case, the valid oddities, the exact reasons.

Fixtures live in tests/data/bad and tests/data/good. Cases a committed file cannot hold (over
15 MB, unreadable, a directory, links) are built in tmp_path.
"""

from __future__ import annotations

import codecs
import os
import time
from pathlib import Path

import pytest

from invoicectl.ubl import (
    MAX_DOCUMENT_BYTES,
    MAX_FILE_BYTES,
    Endpoint,
    InvalidDocument,
    InvoiceFacts,
    document_text,
    parse_document,
    read_document,
)

DATA = Path(__file__).parent / "data"
BAD = DATA / "bad"
GOOD = DATA / "good"

NS_INV = "urn:oasis:names:specification:ubl:schema:xsd:Invoice-2"
NS_CN = "urn:oasis:names:specification:ubl:schema:xsd:CreditNote-2"
NS_CAC = "urn:oasis:names:specification:ubl:schema:xsd:CommonAggregateComponents-2"
NS_CBC = "urn:oasis:names:specification:ubl:schema:xsd:CommonBasicComponents-2"
NS_EXT = "urn:oasis:names:specification:ubl:schema:xsd:CommonExtensionComponents-2"


def reason_of(data: bytes) -> str:
    with pytest.raises(InvalidDocument) as caught:
        parse_document(data)
    assert str(caught.value) == caught.value.reason
    assert "\n" not in caught.value.reason, "reasons are one line"
    return caught.value.reason


def invoice(body: str, root: str = "Invoice", ns: str = NS_INV, prolog: str = "") -> bytes:
    """A small UBL document around ``body`` (root children), for cases that need no file."""
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n{prolog}'
        f'<{root} xmlns="{ns}" xmlns:cac="{NS_CAC}" xmlns:cbc="{NS_CBC}">\n'
        f"{body}\n</{root}>\n"
    ).encode()


CUSTOMER = (
    "<cac:AccountingCustomerParty><cac:Party>"
    '<cbc:EndpointID schemeID="9915">phase4-test-receiver</cbc:EndpointID>'
    "</cac:Party></cac:AccountingCustomerParty>"
)


# --- bad input: one named file per case -------------------------------------------------

BAD_FILES = {
    "empty.xml": "the file is empty (0 bytes)",
    "not-well-formed.xml": (
        "not well-formed XML (line 71): the file ends in the middle of the document; "
        "is it truncated?"
    ),
    "not-ubl.xml": "not UBL: this is a UN/CEFACT CII invoice (CrossIndustryInvoice)",
    "ubl-order.xml": "a UBL Order document; the GoRoute API takes only Invoice and CreditNote",
    "id-only-in-extensions.xml": (
        "no invoice number: the document has no cbc:ID directly under its root "
        "(an ID inside UBLExtensions or elsewhere does not count)"
    ),
    "entity-declaration.xml": (
        "the file declares XML entities in a DOCTYPE; invoicectl refuses them "
        "(they can expand without bound) and UBL never uses them"
    ),
    "external-dtd.xml": (
        "the file points to an external DTD in its DOCTYPE; invoicectl never loads DTDs "
        "and UBL does not use one"
    ),
    "wrong-encoding.xml": (
        "the bytes are not valid UTF-8 although the file declares encoding UTF-8 (line 12)"
    ),
    "two-invoice-numbers.xml": (
        "the document holds 2 invoice numbers (cbc:ID) at its root: INV-2026-0042, "
        "INV-2026-0043; keep one"
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_file_is_refused_with_its_reason(name: str) -> None:
    reason = reason_of((BAD / name).read_bytes())
    assert reason.startswith(BAD_FILES[name]), reason


def test_every_bad_fixture_has_a_test() -> None:
    problems = {"no-customer-endpoint.xml", "no-customer-scheme.xml"}
    assert {p.name for p in BAD.glob("*.xml")} == set(BAD_FILES) | problems


def test_no_customer_endpoint_is_recorded_with_a_problem() -> None:
    facts = parse_document((BAD / "no-customer-endpoint.xml").read_bytes())
    assert facts.invoice_id == "BAD-NO-ENDPOINT-1"
    assert facts.customer_endpoint is None
    assert facts.problem == (
        "no customer EndpointID (AccountingCustomerParty/Party/EndpointID): "
        "the receiver's Peppol address is needed to send"
    )


def test_customer_endpoint_without_scheme_is_recorded_with_a_problem() -> None:
    facts = parse_document((BAD / "no-customer-scheme.xml").read_bytes())
    assert facts.invoice_id == "BAD-NO-SCHEME-1"
    assert facts.customer_endpoint is None
    assert facts.problem == (
        "the customer EndpointID 7300010000001 has no schemeID, so the receiver's "
        "Peppol scheme (e.g. 0088, 0192, 9915) is unknown"
    )


def test_empty_customer_endpoint_is_a_problem() -> None:
    body = (
        "<cbc:ID>X-1</cbc:ID><cac:AccountingCustomerParty><cac:Party>"
        '<cbc:EndpointID schemeID="0088">  </cbc:EndpointID>'
        "</cac:Party></cac:AccountingCustomerParty>"
    )
    facts = parse_document(invoice(body))
    assert facts.problem == (
        "the customer EndpointID is empty: the receiver's Peppol address is needed"
    )


@pytest.mark.parametrize(
    ("scheme", "identifier", "shown"),
    [
        ("0184 ", "DK87654321", "'DK87654321' (schemeID '0184 ')"),
        ("0184", "DK87654321\u00a0", "'DK87654321\\xa0' (schemeID '0184')"),
        ("0184", "\u200bDK87654321", "'\\u200bDK87654321' (schemeID '0184')"),
        ("0184", "DK87654321\u200e", "'DK87654321\\u200e' (schemeID '0184')"),
        ("0184", "DK87654321\u3164", "'DK87654321\u3164' (schemeID '0184')"),
    ],
)
def test_a_customer_endpoint_with_invisible_ends_is_a_problem(
    scheme: str, identifier: str, shown: str
) -> None:
    """GoRoute compares the receiver as written: what a trim would hide is not sent."""
    body = (
        "<cbc:ID>X-1</cbc:ID><cac:AccountingCustomerParty><cac:Party>"
        f'<cbc:EndpointID schemeID="{scheme}">{identifier}</cbc:EndpointID>'
        "</cac:Party></cac:AccountingCustomerParty>"
    )
    facts = parse_document(invoice(body))
    assert facts.customer_endpoint is None
    assert facts.problem == (
        f"the customer EndpointID {shown} starts or ends with a space or an invisible "
        "character; remove it"
    )


def test_a_customer_endpoint_split_by_a_comment_is_read_whole() -> None:
    body = (
        "<cbc:ID>X-1</cbc:ID><cac:AccountingCustomerParty><cac:Party>"
        '<cbc:EndpointID schemeID="0184">\n  DK8765<!-- checked -->4321\n</cbc:EndpointID>'
        "</cac:Party></cac:AccountingCustomerParty>"
    )
    assert parse_document(invoice(body)).customer_endpoint == Endpoint("0184", "DK87654321")


# --- entities and DTDs are never expanded or loaded -------------------------------------


def test_billion_laughs_is_refused_fast_without_expansion() -> None:
    data = (BAD / "entity-declaration.xml").read_bytes()
    assert b"<!ENTITY lol9" in data and b"&lol9;" in data
    started = time.perf_counter()
    reason_of(data)
    assert time.perf_counter() - started < 0.05


def test_billion_laughs_in_utf16_is_refused_too() -> None:
    text = (BAD / "entity-declaration.xml").read_text("utf-8")
    data = text.replace('encoding="UTF-8"', 'encoding="UTF-16"').encode("utf-16")
    assert reason_of(data).startswith("the file declares XML entities in a DOCTYPE")


def test_doctype_after_comments_is_still_found() -> None:
    prolog = '<!-- a <comment> with > signs -->\n<!DOCTYPE Invoice [<!ENTITY x "y">]>\n'
    assert reason_of(invoice("<cbc:ID>X-1</cbc:ID>", prolog=prolog)).startswith(
        "the file declares XML entities in a DOCTYPE"
    )


def test_public_external_dtd_is_refused() -> None:
    prolog = '<!DOCTYPE Invoice PUBLIC "-//X//DTD Invoice//EN" "http://dtd.example/i.dtd">\n'
    assert reason_of(invoice("<cbc:ID>X-1</cbc:ID>", prolog=prolog)).startswith(
        "the file points to an external DTD in its DOCTYPE"
    )


def test_internal_dtd_without_entities_is_refused() -> None:
    prolog = "<!DOCTYPE Invoice [<!ATTLIST Invoice lang CDATA 'en'>]>\n"
    assert reason_of(invoice("<cbc:ID>X-1</cbc:ID>", prolog=prolog)) == (
        "the file carries an internal DTD in its DOCTYPE; UBL does not use DTDs"
    )


def test_bare_doctype_declares_nothing_and_is_accepted() -> None:
    facts = parse_document(invoice(f"<cbc:ID>X-1</cbc:ID>{CUSTOMER}", prolog="<!DOCTYPE x>\n"))
    assert facts.invoice_id == "X-1"
    assert facts.problem is None


def test_undeclared_entity_reference_is_not_well_formed() -> None:
    reason = reason_of(invoice("<cbc:ID>&secret;</cbc:ID>"))
    assert reason.startswith("not well-formed XML (line 3): Entity 'secret' not defined"), reason


# --- not UBL, wrong type ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("root", "ns", "expected"),
    [
        (
            "Invoice",
            "urn:example:invoice",
            "not UBL: the root element Invoice is in namespace urn:example:invoice, "
            f"not the UBL namespace {NS_INV}",
        ),
        (
            "Invoice",
            NS_CN,
            f"not UBL: the root element Invoice is in namespace {NS_CN}, "
            f"not the UBL namespace {NS_INV}",
        ),
        (
            "DespatchAdvice",
            "urn:oasis:names:specification:ubl:schema:xsd:DespatchAdvice-2",
            "a UBL DespatchAdvice document; the GoRoute API takes only Invoice and CreditNote",
        ),
        (
            "SelfBilledCreditNote",
            "urn:oasis:names:specification:ubl:schema:xsd:SelfBilledCreditNote-2",
            "a UBL SelfBilledCreditNote document; the GoRoute API takes only Invoice and "
            "CreditNote",
        ),
        (
            "html",
            "http://www.w3.org/1999/xhtml",
            "not UBL: the root element is html in namespace http://www.w3.org/1999/xhtml, "
            "not a UBL Invoice or CreditNote",
        ),
    ],
)
def test_wrong_root_names_what_it_is(root: str, ns: str, expected: str) -> None:
    assert reason_of(invoice("<cbc:ID>X-1</cbc:ID>", root=root, ns=ns)) == expected


def test_root_without_namespace() -> None:
    data = b"<Invoice><ID>X-1</ID></Invoice>"
    assert reason_of(data) == (
        f"not UBL: the root element Invoice is in no namespace, not the UBL namespace {NS_INV}"
    )


def test_empty_id_is_refused() -> None:
    assert reason_of(invoice("<cbc:ID>  </cbc:ID>")) == "the invoice number (cbc:ID) is empty"


def test_id_elsewhere_than_under_the_root_does_not_count() -> None:
    body = "<cac:OrderReference><cbc:ID>PO-1</cbc:ID></cac:OrderReference>"
    assert reason_of(invoice(body)).startswith("no invoice number")


# --- not well-formed, encodings ---------------------------------------------------------


def test_whitespace_only_file() -> None:
    assert reason_of(b" \r\n\t\n") == "the file holds only white space, no XML"


def test_bare_ampersand_is_explained() -> None:
    body = "<cbc:ID>X-1</cbc:ID>\n<cbc:Note>Smith & Sons</cbc:Note>"
    assert reason_of(invoice(body)) == (
        "not well-formed XML (line 4): a bare '&' that starts no entity (write it as &amp;)"
    )


def test_mismatched_tags_keep_libxml2_wording() -> None:
    reason = reason_of(invoice("<cbc:ID>X-1</cbc:IssueDate>"))
    assert reason.startswith("not well-formed XML (line 3): Opening and ending tag mismatch"), (
        reason
    )


def test_latin1_bytes_without_declaration_are_not_utf8() -> None:
    data = f'<Invoice xmlns="{NS_INV}">\n<Note>M\xfcller</Note></Invoice>'.encode("latin-1")
    assert reason_of(data) == (
        "the bytes are not valid UTF-8 (line 2), and the file declares no other encoding; "
        "add an encoding declaration or re-save the file as UTF-8"
    )


def test_declared_utf16_but_8_bit_bytes() -> None:
    data = (GOOD / "no-declaration.xml").read_bytes()
    data = b'<?xml version="1.0" encoding="UTF-16"?>\n' + data
    assert reason_of(data) == (
        "the file declares encoding UTF-16 but its bytes are 8-bit text, not UTF-16; "
        "fix the declaration or re-save the file as UTF-16"
    )


def test_unknown_declared_encoding() -> None:
    data = b'<?xml version="1.0" encoding="x-klingon"?>\n<Invoice/>'
    assert reason_of(data) == (
        "the file declares encoding 'x-klingon', which is not a known character encoding"
    )


@pytest.mark.parametrize("name", ["ISO 8859-1", " ISO-8859-1", "ISO-8859-1 ", "8859-1"])
def test_an_encoding_name_libxml2_refuses_is_refused(name: str) -> None:
    """Python's codec lookup tidies such a name; libxml2 refuses the file."""
    data = f'<?xml version="1.0" encoding="{name}"?>\n<Invoice/>'.encode("latin-1")
    assert reason_of(data) == (
        f"the file declares encoding '{name}', which is not a known character encoding"
    )


def test_a_pdf_saved_as_xml_is_not_xml() -> None:
    assert reason_of(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj") == (
        "not an XML file: it does not start with '<' (is it a PDF or another format saved as .xml?)"
    )


@pytest.mark.parametrize("codec", ["utf-32", "utf-32-le", "utf-32-be"])
def test_utf32_is_refused_before_libxml2_guesses_it(codec: str) -> None:
    data = (GOOD / "no-declaration.xml").read_text("utf-8").encode(codec)
    assert reason_of(data).startswith("the file is in UTF-32")


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_utf16_without_bom_in_either_byte_order(codec: str) -> None:
    text = (GOOD / "utf16.xml").read_bytes().decode("utf-16")
    data = text.encode(codec)
    assert parse_document(data).invoice_id == "GOOD-UTF16-1"
    assert document_text(data) == document_text((GOOD / "utf16.xml").read_bytes())


def test_utf16_big_endian_with_bom() -> None:
    text = (GOOD / "utf16.xml").read_bytes().decode("utf-16")
    data = codecs.BOM_UTF16_BE + text.encode("utf-16-be")
    assert parse_document(data).invoice_id == "GOOD-UTF16-1"


# --- valid oddities ---------------------------------------------------------------------

GOOD_IDS = {
    "utf8-bom.xml": "GOOD-BOM-1",
    "no-declaration.xml": "GOOD-NODECL-1",
    "crlf.xml": "GOOD-CRLF-1",
    "comment-before-root.xml": "GOOD-COMMENT-1",
    "iso-8859-1.xml": "GOOD-LATIN1-1",
    "utf16.xml": "GOOD-UTF16-1",
    "ubl-prefix.xml": "GOOD-PREFIX-1",
    "default-cbc-namespace.xml": "GOOD-DEFAULT-CBC-1",
}


@pytest.mark.parametrize("name", sorted(GOOD_IDS))
def test_valid_oddity_parses_to_the_same_facts(name: str) -> None:
    facts = parse_document((GOOD / name).read_bytes())
    assert facts == InvoiceFacts(
        document_type="Invoice",
        invoice_id=GOOD_IDS[name],
        issue_date="2026-03-02",
        currency="SEK",
        payable_amount="562.50",
        supplier_endpoint=Endpoint("0007", "5567321236"),
        customer_endpoint=Endpoint("9915", "phase4-test-receiver"),
        problem=None,
        due_date="2026-04-01",
    )


def test_every_good_fixture_has_a_test() -> None:
    assert {p.name for p in GOOD.glob("*.xml")} == set(GOOD_IDS)


def test_fields_come_from_the_roots_direct_children_trimmed() -> None:
    body = f"""
  <ext:UBLExtensions xmlns:ext="{NS_EXT}">
    <ext:UBLExtension><cbc:ID>EXT-1</cbc:ID></ext:UBLExtension>
  </ext:UBLExtensions>
  <cbc:ID>
     018304 / 28865 </cbc:ID>
  <cbc:IssueDate>2016-04-04+01:00</cbc:IssueDate>
  <cbc:DocumentCurrencyCode>DKK</cbc:DocumentCurrencyCode>
  <cac:OrderReference><cbc:ID>PO-9</cbc:ID><cbc:IssueDate>2000-01-01</cbc:IssueDate></cac:OrderReference>
  <cac:AccountingSupplierParty><cac:Party>
    <cbc:EndpointID schemeID="DK:CVR">DK16356709</cbc:EndpointID>
  </cac:Party></cac:AccountingSupplierParty>
  {CUSTOMER}
  <cac:LegalMonetaryTotal>
    <cbc:LineExtensionAmount currencyID="DKK">-1325</cbc:LineExtensionAmount>
    <cbc:PayableAmount currencyID="DKK">-1656.25</cbc:PayableAmount>
  </cac:LegalMonetaryTotal>"""
    facts = parse_document(invoice(body))
    assert facts == InvoiceFacts(
        document_type="Invoice",
        invoice_id="018304 / 28865",
        issue_date="2016-04-04+01:00",
        currency="DKK",
        payable_amount="-1656.25",
        supplier_endpoint=Endpoint("DK:CVR", "DK16356709"),
        customer_endpoint=Endpoint("9915", "phase4-test-receiver"),
        problem=None,
    )
    assert str(facts.supplier_endpoint) == "DK:CVR:DK16356709"


def test_credit_note_and_absent_optional_fields() -> None:
    facts = parse_document(invoice(f"<cbc:ID>CN-1</cbc:ID>{CUSTOMER}", "CreditNote", NS_CN))
    assert facts.document_type == "CreditNote"
    assert (facts.issue_date, facts.currency, facts.payable_amount) == (None, None, None)
    assert facts.supplier_endpoint is None
    assert facts.problem is None


# --- read_document: file-level checks ---------------------------------------------------


def file_reason(path: Path, root: Path) -> str:
    with pytest.raises(InvalidDocument) as caught:
        read_document(path, root)
    return caught.value.reason


def test_reads_a_plain_file(tmp_path: Path) -> None:
    data = (GOOD / "crlf.xml").read_bytes()
    (tmp_path / "a.xml").write_bytes(data)
    assert read_document(tmp_path / "a.xml", tmp_path) == data


def test_follows_a_link_inside_the_root(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "real.xml").write_bytes(b"<x/>")
    (tmp_path / "link.xml").symlink_to("sub/real.xml")
    assert read_document(tmp_path / "link.xml", tmp_path) == b"<x/>"


def test_a_directory_swapped_for_a_link_out_after_the_check_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between resolving a path and opening it, a directory on the way is replaced by a
    link out of the scanned directory (O_NOFOLLOW guards the last part only): the file
    actually opened is judged, and refused."""
    from invoicectl.ubl import reading

    root, outside = tmp_path / "outbox", tmp_path / "elsewhere"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "sub" / "a.xml").write_bytes(b"<inside/>")
    (outside / "a.xml").write_bytes(b"<outside/>")
    real_open = reading._open_regular

    def swapped_then_opened(real: Path) -> int:
        (root / "sub").rename(tmp_path / "moved-away")
        (root / "sub").symlink_to(outside)
        return real_open(real)

    monkeypatch.setattr(reading, "_open_regular", swapped_then_opened)
    assert file_reason(root / "sub" / "a.xml", root) == (
        "a directory on the file's path was replaced by a link out of the scanned "
        "directory during the scan; scan again"
    )


def test_empty_file(tmp_path: Path) -> None:
    (tmp_path / "e.xml").touch()
    assert file_reason(tmp_path / "e.xml", tmp_path) == "the file is empty (0 bytes)"


def test_directory_named_xml(tmp_path: Path) -> None:
    (tmp_path / "x.xml").mkdir()
    assert file_reason(tmp_path / "x.xml", tmp_path) == (
        "a directory, not a file, although its name ends in .xml"
    )


def test_broken_link(tmp_path: Path) -> None:
    (tmp_path / "gone.xml").symlink_to("missing.xml")
    assert file_reason(tmp_path / "gone.xml", tmp_path) == (
        "a broken symbolic link: its target missing.xml does not exist"
    )


def test_link_out_of_root_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.xml"
    outside.write_bytes(b"<secret/>")
    root = tmp_path / "outbox"
    root.mkdir()
    (root / "evil.xml").symlink_to(outside)
    assert file_reason(root / "evil.xml", root) == (
        f"a symbolic link to {outside}, outside the scanned directory {root}; "
        "links are followed only inside it"
    )


def test_link_through_a_directory_out_of_root(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "a.xml").write_bytes(b"<x/>")
    root = tmp_path / "outbox"
    root.mkdir()
    (root / "dir").symlink_to(tmp_path / "elsewhere")
    assert "outside the scanned directory" in file_reason(root / "dir" / "a.xml", root)


def test_link_loop(tmp_path: Path) -> None:
    (tmp_path / "a.xml").symlink_to("b.xml")
    (tmp_path / "b.xml").symlink_to("a.xml")
    assert file_reason(tmp_path / "a.xml", tmp_path) == (
        "a symbolic link that loops back on itself"
    )


def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "locked.xml"
    path.write_bytes(b"<x/>")
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):
            pytest.skip("this process reads files whatever their mode (root or CAP_DAC_OVERRIDE)")
        assert file_reason(path, tmp_path) == (
            "cannot read the file: permission denied (check its owner and mode)"
        )
    finally:
        path.chmod(0o600)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_unreadable_file_as_an_unprivileged_user() -> None:
    """CI runs as root, who reads anything: a forked child becomes 'nobody' and reads."""
    import shutil
    import tempfile

    shared = Path(tempfile.mkdtemp(prefix="invoicectl-perm-"))
    shared.chmod(0o755)
    (shared / "locked.xml").write_bytes(b"<x/>")
    (shared / "locked.xml").chmod(0)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to nobody, read, report through the pipe, never return
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            answer = file_reason(shared / "locked.xml", shared)
        except BaseException as error:  # noqa: BLE001 - anything goes back to the parent
            answer = f"child failed: {error!r}"
        os.write(write_end, answer.encode())
        os._exit(0)
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as pipe:
            answer = pipe.read().decode()
        os.waitpid(pid, 0)
        assert answer == "cannot read the file: permission denied (check its owner and mode)"
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_over_the_limit_in_any_encoding_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "huge.xml"
    with path.open("wb") as sparse:
        sparse.truncate(MAX_FILE_BYTES + 1)
    assert file_reason(path, tmp_path) == (
        "the file is 31,457,281 bytes: over the API's limit of 15 MB (15,728,640 bytes) "
        "in any encoding"
    )


def _padded(prolog: str, encoding: str, characters: str, count: int) -> bytes:
    note = f"<cbc:Note>{characters * count}</cbc:Note>"
    text = invoice(f"<cbc:ID>BIG-1</cbc:ID>{note}{CUSTOMER}").decode()
    return text.replace('<?xml version="1.0" encoding="UTF-8"?>', prolog).encode(encoding)


def test_the_limit_is_on_the_document_as_sent_in_utf8(tmp_path: Path) -> None:
    """The API counts the document it receives, in UTF-8: a Latin-1 file under 15 MB can
    be over it, a UTF-16 file over 15 MB under it."""
    latin1 = _padded('<?xml version="1.0" encoding="ISO-8859-1"?>', "latin-1", "é", 9 << 20)
    assert len(latin1) < MAX_DOCUMENT_BYTES
    (tmp_path / "latin1.xml").write_bytes(latin1)
    with pytest.raises(InvalidDocument) as refused:
        parse_document(read_document(tmp_path / "latin1.xml", tmp_path))
    assert refused.value.reason.startswith("the document is 18,874,")
    assert refused.value.reason.endswith(
        " bytes as sent (in UTF-8), over the API's limit of 15 MB (15,728,640 bytes)"
    )
    utf16 = _padded('<?xml version="1.0" encoding="UTF-16"?>', "utf-16", "x", 9 << 20)
    assert len(utf16) > MAX_DOCUMENT_BYTES
    (tmp_path / "utf16.xml").write_bytes(utf16)
    assert parse_document(read_document(tmp_path / "utf16.xml", tmp_path)).invoice_id == "BIG-1"


def test_a_stylesheet_instruction_is_no_xml_declaration() -> None:
    """``<?xml-stylesheet ... encoding=...?>`` before the root declares nothing: the file
    is UTF-8 and is sent as it is, not read as the stylesheet's encoding."""
    data = invoice(f"<cbc:ID>Åsa-1</cbc:ID>{CUSTOMER}").replace(
        b'<?xml version="1.0" encoding="UTF-8"?>',
        b'<?xml-stylesheet type="text/xsl" href="view.xsl" encoding="ISO-8859-1"?>',
    )
    assert parse_document(data).invoice_id == "Åsa-1"
    assert document_text(data).encode() == data


def test_exactly_at_the_limit_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big.xml"
    with path.open("wb") as sparse:
        sparse.truncate(MAX_DOCUMENT_BYTES)
    assert len(read_document(path, tmp_path)) == MAX_DOCUMENT_BYTES


def test_a_file_that_grew_after_its_stat_is_read_to_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "growing.xml"
    path.write_bytes(b"<a>" + b"x" * 5000 + b"</a>")
    real_fstat = os.fstat

    def stale_fstat(fd: int) -> os.stat_result:  # the size before the last write
        fields = list(real_fstat(fd))
        fields[6] = 100  # st_size
        return os.stat_result(fields)

    monkeypatch.setattr(os, "fstat", stale_fstat)
    assert read_document(path, tmp_path) == path.read_bytes()


def test_a_file_that_grew_past_the_limit_after_its_stat_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "growing.xml"
    with path.open("wb") as sparse:
        sparse.truncate(MAX_FILE_BYTES + 10)
    real_fstat = os.fstat

    def stale_fstat(fd: int) -> os.stat_result:
        fields = list(real_fstat(fd))
        fields[6] = 1000
        return os.stat_result(fields)

    monkeypatch.setattr(os, "fstat", stale_fstat)
    with pytest.raises(InvalidDocument, match="over the API's limit"):
        read_document(path, tmp_path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_named_pipe_does_not_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.xml")
    assert file_reason(tmp_path / "pipe.xml", tmp_path) == (
        "a named pipe (FIFO), not a file; invoicectl reads regular files only"
    )


def test_a_socket_says_so(tmp_path: Path) -> None:
    """Opening a socket fails ("No such device or address"): what it is, is the reason."""
    import socket

    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "s.xml"))
    assert file_reason(tmp_path / "s.xml", tmp_path) == (
        "a socket, not a file; invoicectl reads regular files only"
    )


def test_large_embedded_attachment_parses(tmp_path: Path) -> None:
    # libxml2 refuses text nodes over 10 MB without huge_tree (design.md, Measured pitfalls).
    blob = "QUJD" * (11 * 1024 * 1024 // 4)
    body = (
        "<cbc:ID>BIG-1</cbc:ID><cac:AdditionalDocumentReference><cbc:ID>a</cbc:ID>"
        '<cac:Attachment><cbc:EmbeddedDocumentBinaryObject mimeCode="application/pdf" '
        f'filename="a.pdf">{blob}</cbc:EmbeddedDocumentBinaryObject></cac:Attachment>'
        f"</cac:AdditionalDocumentReference>{CUSTOMER}"
    )
    path = tmp_path / "big.xml"
    path.write_bytes(invoice(body))
    assert parse_document(read_document(path, tmp_path)).invoice_id == "BIG-1"


# --- document_text: the characters sent as JSON ----------------------------------------


def test_utf8_without_bom_is_returned_exactly() -> None:
    data = (GOOD / "crlf.xml").read_bytes()
    assert document_text(data) == data.decode("utf-8")
    assert "\r\n" in document_text(data)


@pytest.mark.parametrize("name", ["no-declaration.xml", "comment-before-root.xml"])
def test_other_utf8_files_are_unchanged(name: str) -> None:
    data = (GOOD / name).read_bytes()
    assert document_text(data) == data.decode("utf-8")


def test_bom_is_dropped() -> None:
    data = (GOOD / "utf8-bom.xml").read_bytes()
    text = document_text(data)
    assert text == data[3:].decode("utf-8")
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>')


def test_latin1_becomes_utf8_text_with_a_utf8_declaration() -> None:
    data = (GOOD / "iso-8859-1.xml").read_bytes()
    text = document_text(data)
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    assert "Åkesson &amp; Söner Byggvaror AB" in text and "Müller" in text
    # Only the encoding pseudo-attribute changed.
    assert text.replace('encoding="UTF-8"', 'encoding="ISO-8859-1"', 1) == data.decode("latin-1")


def test_utf16_becomes_utf8_text_without_bom() -> None:
    data = (GOOD / "utf16.xml").read_bytes()
    text = document_text(data)
    assert not text.startswith("\ufeff")
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    assert "Zakład Mechaniczny Łódź Sp. z o.o." in text


def _latin1_invoice(declaration: str) -> str:
    """iso-8859-1.xml with a non-ASCII invoice number and ``declaration`` as its first line."""
    text = (GOOD / "iso-8859-1.xml").read_bytes().decode("latin-1")
    body = text.split("\n", 1)[1].replace("GOOD-LATIN1-1", "FAC-Müller-é1")
    return declaration + "\n" + body


@pytest.mark.parametrize(
    ("bom", "codec", "declared"),
    [
        (b"", "latin-1", "ISO-8859-1"),
        (codecs.BOM_UTF16_LE, "utf-16-le", "ISO-8859-1"),  # the BOM wins, as in libxml2
        (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16"),
        (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16"),
        (b"", "utf-16-le", "UTF-16"),
    ],
)
def test_a_declaration_is_read_whole_however_much_white_space_it_holds(
    bom: bytes, codec: str, declared: str
) -> None:
    """libxml2 reads the encoding from anywhere in the declaration: so must the reader, or the
    ID recorded differs from the ID parsed and sent (and from the same file re-saved)."""
    from lxml import etree

    long = _latin1_invoice(f'<?xml version="1.0"{" " * 300}encoding="{declared}"?>')
    short = _latin1_invoice(f'<?xml version="1.0" encoding="{declared}"?>')
    data = bom + long.encode(codec)

    assert parse_document(data).invoice_id == "FAC-Müller-é1"
    assert etree.fromstring(data).findtext(f"{{{NS_CBC}}}ID") == "FAC-Müller-é1"
    assert parse_document(data) == parse_document(bom + short.encode(codec))
    sent = long.replace(f'encoding="{declared}"', 'encoding="UTF-8"')
    assert document_text(data) == sent


def test_a_second_byte_order_mark_is_not_well_formed_in_utf16_either() -> None:
    text = (GOOD / "utf16.xml").read_bytes()
    assert reason_of(codecs.BOM_UTF16_LE + text) == (
        "not well-formed XML (line 1): the file starts with two byte order marks; re-save it "
        "with one"
    )
    assert reason_of(codecs.BOM_UTF8 + (GOOD / "utf8-bom.xml").read_bytes()).startswith(
        "not well-formed XML (line 1)"
    )


def test_single_quoted_declaration_is_rewritten_in_place() -> None:
    data = "<?xml version='1.0' encoding='windows-1252' standalone='no'?>\n<a>Ø</a>"
    text = document_text(data.encode("cp1252"))
    assert text == "<?xml version='1.0' encoding='UTF-8' standalone='no'?>\n<a>Ø</a>"


@pytest.mark.parametrize("name", sorted(GOOD_IDS))
def test_document_text_sent_as_utf8_parses_to_the_same_facts(name: str) -> None:
    data = (GOOD / name).read_bytes()
    text = document_text(data)
    assert document_text(data) == text, "deterministic"
    assert parse_document(text.encode("utf-8")) == parse_document(data)


def test_document_text_refuses_contradicting_bytes() -> None:
    with pytest.raises(InvalidDocument, match="not valid UTF-8 although the file declares"):
        document_text((BAD / "wrong-encoding.xml").read_bytes())

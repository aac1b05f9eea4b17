"""The safe UBL reader: file-level checks, a hardened parse, the facts invoicectl needs.

This module owns everything invoicectl knows about a UBL file's bytes:

- ``read_document`` decides whether a path may be read at all (inside the scanned directory,
  a regular file, not empty, not over the API's 15 MB limit) and reads it.
- ``parse_document`` parses the bytes with a parser that never resolves entities, never loads
  a DTD and never touches the network, refuses any DOCTYPE that could expand or fetch
  something, and extracts the header fields (``InvoiceFacts``) from the root's direct children,
  matched by namespace URI and local name, never by prefix. A large invoice's lines, most of
  its bytes, are checked for well-formedness without building their tree (``_parse_in_two``).
- ``document_text`` turns the stored bytes into the exact characters sent as the JSON
  ``document`` string (design.md, Idempotency rule 2).

Every refusal is an ``InvalidDocument`` whose ``reason`` is one line a finance clerk can act on.
A document that parses and has an ID but cannot be sent (no customer endpoint) is not an
exception: it comes back as ``InvoiceFacts`` with ``problem`` set, so it is journalled under
its ID.
"""

from __future__ import annotations

import codecs
import errno
import functools
import os
import re
import stat
from pathlib import Path
from typing import Any, NamedTuple

from lxml import etree

MAX_DOCUMENT_BYTES = 15 * 1024 * 1024
_GONE = "the file no longer exists (moved or deleted during the scan)"

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
# The root's children parse_document reads.
_HEADER = frozenset((_ID, _ISSUE_DATE, _CURRENCY, _SUPPLIER, _CUSTOMER, _MONETARY_TOTAL))

# One parser per process: lxml parsers are not thread-safe, but building one per call costs
# more than the parse of a small invoice. huge_tree lifts libxml2's 10 MB text-node limit so a
# large embedded PDF parses; it is safe only because entities are never resolved, no DTD is
# loaded, DOCTYPEs are refused before parsing and the 15 MB cap is checked before reading.
_HARDENED: dict[str, Any] = {
    "resolve_entities": False,
    "load_dtd": False,
    "dtd_validation": False,
    "no_network": True,
    "huge_tree": True,
    "collect_ids": False,
}
# remove_blank_text drops the indentation between elements, half the nodes of a pretty-printed
# invoice (a parse 9 % faster); an element holding only white space keeps it, and reads as
# empty either way.
_PARSER = etree.XMLParser(
    **_HARDENED, remove_comments=True, remove_pis=True, remove_blank_text=True
)


class _Discard:
    """A parser target that builds nothing: the parse only checks well-formedness."""

    def close(self) -> None:
        return None


# The same hardening, no tree: libxml2 still checks every byte, in half the time.
_WELL_FORMED_PARSER = etree.XMLParser(**_HARDENED, target=_Discard())
# _parse_in_two's cut: the end of LegalMonetaryTotal, whatever its prefix. Below this many
# bytes of lines, a second parse costs more than checking them without a tree saves.
_MONETARY_TOTAL_TAG = b"LegalMonetaryTotal>"
_SPLIT_MIN_LINE_BYTES = 3072
# A start tag, its name as group 1; quoted values may hold '>'.
_START_TAG = re.compile(rb"""<([^\s/>]+)(?:\s+[^\s=/>]+\s*=\s*(?:"[^"]*"|'[^']*'))*\s*>""")

# O_NOFOLLOW: a path is opened only once resolved (or known to sit right in the scanned
# directory), so a link met here was swapped in after the check. O_NONBLOCK: opening a named
# pipe must not hang the scan.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)

_UTF8_BOM = codecs.BOM_UTF8
# The encoding pseudo-attribute of an XML declaration (which ends at the first '>').
_DECLARED_ENCODING = re.compile(rb"""<\?xml(?=[^>]*>)[^>]*?\sencoding\s*=\s*(["'])([^"'>]*)\1""")
_DECLARATION_SCAN = 200  # bytes; a declaration is far shorter
_TEXT_DECLARATION = re.compile(r"""\A(<\?xml[^>]*?\sencoding\s*=\s*)(["'])([^"']*)\2""")
_STARTS_LIKE_XML = re.compile(rb"[ \t\r\n]*<")
_LXML_LOCATION = re.compile(r",? line \d+(, column \d+)?$")
_EXCESSIVE_DEPTH = re.compile(r"Excessive depth in document: (\d+)")
# Characters that would break a one-line reason or a one-line invoice number: C0 and C1
# controls (tab and line breaks among them), the Unicode line and paragraph separators, and
# the lone surrogates a file name that is not UTF-8 decodes to.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


class InvalidDocument(Exception):
    """A file invoicectl refuses to send; ``reason`` is one line a finance clerk can act on."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` fit to quote in a one-line reason: line breaks, control and invisible
    characters as escapes (``\\n``, ``\\ufeff``), a file name's undecodable bytes as
    ``\\xNN``, and, with ``limit``, cut to that many characters."""
    if not text.isprintable():
        text = "".join(char if char.isprintable() else _escaped(char) for char in text)
    if limit is not None and len(text) > limit:
        return text[: limit - 1] + "\u2026"
    return text


def _escaped(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's stand-in for an undecodable byte
        return f"\\x{code - 0xDC00:02x}"
    return char.encode("unicode_escape", "backslashreplace").decode("ascii")


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


class _Encoding(NamedTuple):
    """How a document's bytes are encoded, as far as the BOM and declaration tell."""

    codec: str  # a Python codec name
    bom_length: int
    declared: str | None  # the declaration's encoding value, verbatim

    @property
    def label(self) -> str:
        return one_line(self.declared, 60) if self.declared else self.codec.upper()


# --- reading files -----------------------------------------------------------------------


def read_document(path: str | Path, root: str | Path) -> bytes:
    """The bytes of ``path``, a file inside ``root``; InvalidDocument for anything else.

    Symbolic links are followed only when they resolve inside ``root``, and nothing outside
    it is ever opened or stat'ed. Size is checked on the open file before reading it. (Paths
    may be strings: a scan reads thousands of files, and Path objects cost more to build
    than a small invoice takes to read.)
    """
    fd = _open_plain_file_in(os.fspath(path), os.fspath(root))
    if fd is None:
        fd = _open_regular(_resolve_inside(Path(path), Path(root)))
    try:
        size = _checked_size(os.fstat(fd))
        data = _read_at_most(fd, MAX_DOCUMENT_BYTES + 1, size)
    finally:
        os.close(fd)
    # The file may have changed between fstat and read; judge what was actually read.
    if len(data) > MAX_DOCUMENT_BYTES:
        raise InvalidDocument(_too_large(max(size, len(data))))
    if not data:
        raise InvalidDocument("the file is empty (0 bytes)")
    return data


def _open_plain_file_in(path: str, root: str) -> int | None:
    """``path`` opened as is when it sits right in ``root`` and is no symbolic link.

    The common case, and resolving costs more than reading a small invoice. Anything else,
    an error included, takes the careful way, which gives every other case its reason.
    """
    if os.path.dirname(path) != root:
        return None
    try:
        return os.open(path, _OPEN_FLAGS)
    except OSError:
        return None


def _resolve_inside(path: Path, root: Path) -> Path:
    try:
        real_root = root.resolve()
        real = path.resolve()
    except (OSError, RuntimeError):
        raise InvalidDocument("a symbolic link that loops back on itself") from None
    if not real.is_relative_to(real_root):
        raise InvalidDocument(
            f"a symbolic link to {one_line(str(real))}, outside the scanned directory "
            f"{one_line(str(real_root))}; "
            "links are followed only inside it"
        )
    if not real.exists():
        if path.is_symlink():
            raise InvalidDocument(
                f"a broken symbolic link: its target {one_line(os.readlink(path))} does not exist"
            )
        raise InvalidDocument(_GONE)
    return real


def _open_regular(real: Path) -> int:
    try:
        return os.open(real, _OPEN_FLAGS)
    except PermissionError:
        raise InvalidDocument(
            "cannot read the file: permission denied (check its owner and mode)"
        ) from None
    except FileNotFoundError:
        raise InvalidDocument(_GONE) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a link that was not there when checked
            raise InvalidDocument(
                "the file was replaced by a symbolic link during the scan; scan again"
            ) from None
        raise InvalidDocument(f"cannot read the file: {exc.strerror}") from None


def _checked_size(st: os.stat_result) -> int:
    if stat.S_ISDIR(st.st_mode):
        raise InvalidDocument("a directory, not a file, although its name ends in .xml")
    if not stat.S_ISREG(st.st_mode):
        raise InvalidDocument("not a regular file (a pipe, socket or device)")
    if st.st_size > MAX_DOCUMENT_BYTES:
        raise InvalidDocument(_too_large(st.st_size))
    if st.st_size == 0:
        raise InvalidDocument("the file is empty (0 bytes)")
    return st.st_size


def _read_at_most(fd: int, limit: int, expected: int) -> bytes:
    """Up to ``limit`` bytes of ``fd``, whatever ``fstat`` said. The first read asks for
    the ``expected`` size and one byte more (to see that the file grew): asking a small
    file for a megabyte costs a megabyte's allocation, which doubles the cost of reading."""
    first = os.read(fd, min(limit, expected + 1))
    if len(first) == expected:  # what fstat said and not a byte more: the end
        return first
    chunks = [first]
    remaining = limit - len(first)
    while remaining > 0 and chunks[-1]:
        chunks.append(os.read(fd, min(remaining, 1024 * 1024)))
        remaining -= len(chunks[-1])
    return b"".join(chunks)


def _too_large(size: int) -> str:
    return (
        f"the file is {size:,} bytes, over the API's limit of 15 MB ({MAX_DOCUMENT_BYTES:,} bytes)"
    )


# --- encodings ---------------------------------------------------------------------------


def _sniff_encoding(data: bytes) -> _Encoding:
    """The encoding per BOM, then declaration, then XML's default UTF-8.

    Raises InvalidDocument when the declaration names an unknown encoding or a UTF-16/32
    encoding for bytes that are plainly 8-bit text.
    """
    if data.startswith(b"<?xml"):  # the common case, which none of the checks below match
        return _declared_8bit(data)
    if data.startswith(
        (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, b"<\x00\x00\x00", b"\x00\x00\x00<")
    ):
        # libxml2 would guess UCS-4 on its own, past the DOCTYPE check below; nobody sends it.
        raise InvalidDocument(
            "the file is in UTF-32 (or another encoding with zero bytes), which invoicectl "
            "does not read; re-save it as UTF-8"
        )
    if data.startswith(_UTF8_BOM):
        return _Encoding(
            "utf-8", len(_UTF8_BOM), _declared_encoding(data[3 : 3 + _DECLARATION_SCAN])
        )
    for bom, codec in ((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")):
        if data.startswith(bom):
            return _Encoding(codec, 2, _declared_in_utf16(data[2:400], codec))
    # UTF-16 without BOM is legal when the declaration says so; '<?' tells the byte order.
    for start, codec in ((b"<\x00?\x00", "utf-16-le"), (b"\x00<\x00?", "utf-16-be")):
        if data.startswith(start):
            return _Encoding(codec, 0, _declared_in_utf16(data[:400], codec))
    if data.startswith((b"<\x00", b"\x00<")):
        # No XML text holds a zero byte: this is UTF-16, which XML requires to carry a BOM.
        raise InvalidDocument(
            "the file is in UTF-16 without a byte order mark or encoding declaration; "
            "re-save it as UTF-8"
        )
    if not _STARTS_LIKE_XML.match(data):
        # Also keeps libxml2 from guessing an exotic encoding (EBCDIC) we cannot pre-scan.
        raise InvalidDocument(
            "not an XML file: it does not start with '<' "
            "(is it a PDF or another format saved as .xml?)"
        )
    return _declared_8bit(data)


def _declared_8bit(data: bytes) -> _Encoding:
    """The encoding of bytes that start like 8-bit text, per their declaration."""
    declared = _declared_encoding(data)
    if declared is None:
        return _Encoding("utf-8", 0, None)
    codec = _codec_for(declared)
    if codec.startswith(("utf-16", "utf-32")):
        name = one_line(declared, 60)
        raise InvalidDocument(
            f"the file declares encoding {name} but its bytes are 8-bit text, "
            f"not {name}; fix the declaration or re-save the file as {name}"
        )
    return _Encoding(codec, 0, declared)


def _declared_encoding(data: bytes) -> str | None:
    found = _DECLARED_ENCODING.match(data, 0, _DECLARATION_SCAN)
    return found.group(2).decode("ascii", "replace") if found else None


def _declared_in_utf16(head: bytes, codec: str) -> str | None:
    text = head[: len(head) // 2 * 2].decode(codec, "replace")
    return _declared_encoding(text.encode("ascii", "replace"))


@functools.lru_cache(maxsize=64)  # a few names, met again in every file
def _codec_for(declared: str) -> str:
    try:
        info = codecs.lookup(declared)
    except (LookupError, ValueError):  # ValueError: a NUL in the name
        info = None
    # Python also names byte transforms (base64, rot13, zip) as codecs; they decode no text.
    if info is None or not info._is_text_encoding:
        raise InvalidDocument(
            f"the file declares encoding '{one_line(declared, 60)}', which is not a known "
            "character encoding"
        ) from None
    return info.name


def document_text(data: bytes) -> str:
    """The document's characters, for the JSON body (design.md, Idempotency rule 2).

    UTF-8 without BOM comes back exactly as ``data.decode("utf-8")``. Otherwise the BOM is
    dropped and the text decoded; a declaration naming another encoding is rewritten to say
    UTF-8 (only that pseudo-attribute changes), since the text will travel as UTF-8.
    """
    encoding = _sniff_encoding(data)
    try:
        text = data[encoding.bom_length :].decode(encoding.codec)
    except UnicodeDecodeError as exc:
        raise InvalidDocument(_not_valid_in(encoding, data, exc.start)) from None
    if encoding.declared is None or _codec_for(encoding.declared) == "utf-8":
        return text
    text, rewritten = _TEXT_DECLARATION.subn(r"\1\2UTF-8\2", text, count=1)
    if not rewritten:
        # Decoded as declared, the declaration itself came out garbled (ASCII bytes
        # declared as EBCDIC or UTF-7, say): the declaration does not describe the bytes.
        raise InvalidDocument(
            f"the file declares encoding {one_line(encoding.declared, 60)}, but its bytes are "
            "not in that encoding (read so, its own XML declaration is garbled); fix the "
            "declaration or re-save the file as UTF-8"
        )
    return text


def _utf8_as_sent(data: bytes, encoding: _Encoding) -> tuple[bytes, _Encoding]:
    """The bytes libxml2 parses: UTF-8 as is; any other encoding as ``document_text``'s
    characters, so that what is parsed is exactly what is sent, whatever libxml2's own
    decoders (iconv) would have made of the bytes."""
    if encoding.codec == "utf-8" and (
        encoding.declared is None or _codec_for(encoding.declared) == "utf-8"
    ):
        return data, encoding
    return document_text(data).encode("utf-8"), _Encoding("utf-8", 0, "UTF-8")


def _not_valid_in(encoding: _Encoding, data: bytes, offset: int) -> str:
    line = data[encoding.bom_length : encoding.bom_length + offset].count(b"\n") + 1
    if encoding.declared is None:
        return (
            f"the bytes are not valid {encoding.label} (line {line}), and the file declares "
            "no other encoding; add an encoding declaration or re-save the file as UTF-8"
        )
    return (
        f"the bytes are not valid {encoding.label} although the file declares encoding "
        f"{encoding.label} (line {line})"
    )


# --- DOCTYPE -----------------------------------------------------------------------------


def _refuse_doctype(doctype: bytes | None) -> None:
    """Refuse a DOCTYPE that declares anything or points outside, before libxml2 sees it.

    This check runs on the raw prolog (``_prolog``), not the parsed tree, so a billion-laughs
    file is refused without ever being handed to the parser (huge_tree lifts libxml2's own
    limits).
    """
    if doctype is None:
        return
    if b"<!ENTITY" in doctype:
        raise InvalidDocument(
            "the file declares XML entities in a DOCTYPE; invoicectl refuses them "
            "(they can expand without bound) and UBL never uses them"
        )
    if re.search(rb"<!DOCTYPE\s+\S+\s+(SYSTEM|PUBLIC)\b", doctype):
        raise InvalidDocument(
            "the file points to an external DTD in its DOCTYPE; invoicectl never loads "
            "DTDs and UBL does not use one"
        )
    if b"[" in doctype:
        raise InvalidDocument(
            "the file carries an internal DTD in its DOCTYPE; UBL does not use DTDs"
        )


class _Prolog(NamedTuple):
    """What comes before the root element, as far as a byte scan tells."""

    doctype: bytes | None  # the DOCTYPE declaration, verbatim
    root_start: int  # where the root element's start tag begins; -1 when not seen


def _prolog(data: bytes, start: int) -> _Prolog:
    """Walk declarations, processing instructions and comments from ``start`` to the root
    element. parse_document hands over UTF-8 only (_utf8_as_sent), so one byte scan serves
    every encoding. Anything malformed ends the walk: the parser then reports it."""
    doctype = None
    pos = start
    while True:
        start = data.find(b"<", pos)
        if start < 0:
            return _Prolog(doctype, -1)
        if data.startswith(b"<?", start):
            end, skip = data.find(b"?>", start + 2), 2
        elif data.startswith(b"<!--", start):
            end, skip = data.find(b"-->", start + 4), 3
        elif data.startswith(b"<!DOCTYPE", start) and doctype is None:
            doctype = _doctype_declaration(data, start)
            end, skip = start + len(doctype) - 1, 1
        else:
            return _Prolog(doctype, start)  # the root element, or something amiss
        if end < 0:
            return _Prolog(doctype, -1)  # unterminated: not well-formed
        pos = end + skip


def _doctype_declaration(prolog: bytes, start: int) -> bytes:
    subset_open = prolog.find(b"[", start)
    close = prolog.find(b">", start)
    if 0 <= subset_open < close or (subset_open >= 0 and close < 0):
        # An internal subset holds '>' of its own; it ends at ']' followed by '>'.
        subset_end = prolog.find(b"]", subset_open)
        close = prolog.find(b">", subset_end) if subset_end >= 0 else -1
    return prolog[start : close + 1 if close >= 0 else len(prolog)]


# --- parsing -----------------------------------------------------------------------------


def parse_document(data: bytes) -> InvoiceFacts:
    """The facts of a UBL Invoice or CreditNote; InvalidDocument when it is not one."""
    if not data or data.isspace():
        raise InvalidDocument(
            "the file is empty (0 bytes)" if not data else "the file holds only white space, no XML"
        )
    data, encoding = _utf8_as_sent(data, _sniff_encoding(data))
    prolog = _prolog(data, encoding.bom_length)
    _refuse_doctype(prolog.doctype)
    root, header = _parse_header(data, encoding, prolog.root_start)
    _refuse_parsed_dtd(root)
    document_type = _document_type(root)
    invoice_id = _text(header.get(_ID))
    if invoice_id is None:
        raise InvalidDocument(_no_id_reason(header))
    if _UNPRINTABLE.search(invoice_id):
        raise InvalidDocument(
            f"the invoice number (cbc:ID) '{one_line(invoice_id, 60)}' contains a line break, "
            "tab or other control character; an invoice number is one line of plain text"
        )
    customer, problem = _customer_endpoint(header.get(_CUSTOMER))
    return InvoiceFacts(
        document_type=document_type,
        invoice_id=invoice_id,
        issue_date=_text(header.get(_ISSUE_DATE)),
        currency=_text(header.get(_CURRENCY)),
        payable_amount=_text(_child(header.get(_MONETARY_TOTAL), _PAYABLE_AMOUNT)),
        supplier_endpoint=_endpoint(_party_endpoint(header.get(_SUPPLIER))),
        customer_endpoint=customer,
        problem=problem,
    )


def _parse_header(
    data: bytes, encoding: _Encoding, root_start: int
) -> tuple[etree._Element, dict[str, etree._Element]]:
    """The root and its header children (``_header_children``): from a tree of the header
    alone when ``_parse_in_two`` can show it is the whole document's, else from the whole."""
    root = _parse_in_two(data, root_start)
    if root is not None:
        header = _header_children(root)
        if len(header) == len(_HEADER):  # else a header field may follow the cut
            return root, header
    root = _parse(data, encoding)
    return root, _header_children(root)


def _parse_in_two(data: bytes, root_start: int) -> etree._Element | None:
    """A tree of the document up to the end of its LegalMonetaryTotal, the last header
    element UBL allows before the invoice lines, once the lines are known to be well-formed.

    The lines are most of an invoice, and checking them without building their tree costs
    half as much. The document is cut in two, each part closed with the root's own tags
    (the start tag verbatim, so the lines are read in the root's namespace context): the
    header part parses as a document only when the cut falls between two children of the
    root, and the two parts are then the whole document. None when the cut is not found,
    when either part is not well-formed, or when the check logged anything (a namespace
    error, say); the whole document is then parsed at once and gives the reason.
    """
    cut = _header_end(data)
    if cut < 0 or root_start < 0 or len(data) - cut < _SPLIT_MIN_LINE_BYTES:
        return None
    root_tag = _START_TAG.match(data, root_start)
    if root_tag is None:
        return None
    try:
        etree.fromstring(root_tag.group() + data[cut:], _WELL_FORMED_PARSER)
        if _WELL_FORMED_PARSER.error_log:
            return None
        return etree.fromstring(data[:cut] + b"</" + root_tag.group(1) + b">", _PARSER)
    except etree.XMLSyntaxError:
        return None


def _header_end(data: bytes) -> int:
    """Just after the first LegalMonetaryTotal's end tag, as far as bytes tell; -1 if none."""
    start = data.find(_MONETARY_TOTAL_TAG)
    if start < 0:
        return -1
    end = data.find(_MONETARY_TOTAL_TAG, start + len(_MONETARY_TOTAL_TAG))
    return end + len(_MONETARY_TOTAL_TAG) if end >= 0 else -1


def _parse(data: bytes, encoding: _Encoding) -> etree._Element:
    try:
        return etree.fromstring(data, _PARSER)
    except etree.XMLSyntaxError as exc:
        raise InvalidDocument(_syntax_reason(exc, data, encoding)) from None


def _refuse_parsed_dtd(root: etree._Element) -> None:
    # Defence in depth: the prolog scan should have caught any DOCTYPE that declares or
    # points to something; if the parser still saw one, refuse the same way.
    docinfo = root.getroottree().docinfo
    internal = docinfo.internalDTD
    if (internal is not None and internal.entities()) or docinfo.system_url or docinfo.public_id:
        raise InvalidDocument(
            "the file carries a DTD in its DOCTYPE; invoicectl never loads DTDs and UBL "
            "does not use one"
        )


def _syntax_reason(exc: etree.XMLSyntaxError, data: bytes, encoding: _Encoding) -> str:
    # libxml2's encoding errors ("Invalid bytes in character encoding") say nothing a clerk
    # can act on; decoding ourselves names the encoding and the line.
    try:
        data[encoding.bom_length :].decode(encoding.codec)
    except UnicodeDecodeError as decode_error:
        return _not_valid_in(encoding, data, decode_error.start)
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


def _header_children(root: etree._Element) -> dict[str, etree._Element]:
    """The first direct child of each header tag (``_HEADER``), in one walk that stops once
    all are found: UBL puts them ahead of the invoice lines, which are then never visited.
    (Plain loops here and in ``_child``: lxml's tag-filtered iterchildren costs more to set
    up than a short walk, and ElementPath's find more again.)"""
    found: dict[str, etree._Element] = {}
    for child in root:
        tag = child.tag
        if tag in _HEADER and tag not in found:
            found[tag] = child
            if len(found) == len(_HEADER):
                break
    return found


def _child(element: etree._Element | None, tag: str) -> etree._Element | None:
    if element is not None:
        for child in element:
            if child.tag == tag:
                return child
    return None


def _text(element: etree._Element | None) -> str | None:
    if element is None or element.text is None:
        return None
    return element.text.strip() or None


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
    scheme = (element.get("schemeID") or "").strip()
    if not scheme:
        return None, (
            f"the customer EndpointID {one_line(identifier, 80)} has no schemeID, so the "
            "receiver's Peppol scheme (e.g. 0088, 0192, 9915) is unknown"
        )
    return Endpoint(scheme, identifier), None

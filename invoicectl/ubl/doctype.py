"""The DOCTYPE guard: a byte scan of the prolog that refuses any DOCTYPE that could expand
or fetch something before libxml2 sees it, and the same check on the parsed tree."""

from __future__ import annotations

import re
from typing import NamedTuple

from lxml import etree

from invoicectl.ubl.errors import InvalidDocument


def refuse_doctype(doctype: bytes | None) -> None:
    """Refuse a DOCTYPE that declares anything or points outside, before libxml2 sees it.

    This check runs on the raw prolog (``read_prolog``), not the parsed tree, so a billion-laughs
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


class Prolog(NamedTuple):
    """What comes before the root element, as far as a byte scan tells."""

    doctype: bytes | None  # the DOCTYPE declaration, verbatim
    root_start: int  # where the root element's start tag begins; -1 when not seen


def read_prolog(data: bytes, start: int) -> Prolog:
    """Walk declarations, processing instructions and comments from ``start`` to the root
    element. parse_document hands over UTF-8 only (utf8_as_sent), so one byte scan serves
    every encoding. Anything malformed ends the walk: the parser then reports it."""
    doctype = None
    pos = start
    while True:
        start = data.find(b"<", pos)
        if start < 0:
            return Prolog(doctype, -1)
        if data.startswith(b"<?", start):
            end, skip = data.find(b"?>", start + 2), 2
        elif data.startswith(b"<!--", start):
            end, skip = data.find(b"-->", start + 4), 3
        elif data.startswith(b"<!DOCTYPE", start) and doctype is None:
            doctype = _doctype_declaration(data, start)
            end, skip = start + len(doctype) - 1, 1
        else:
            return Prolog(doctype, start)  # the root element, or something amiss
        if end < 0:
            return Prolog(doctype, -1)  # unterminated: not well-formed
        pos = end + skip


def _doctype_declaration(prolog: bytes, start: int) -> bytes:
    subset_open = prolog.find(b"[", start)
    close = prolog.find(b">", start)
    if 0 <= subset_open < close or (subset_open >= 0 and close < 0):
        # An internal subset holds '>' of its own; it ends at ']' followed by '>'.
        subset_end = prolog.find(b"]", subset_open)
        close = prolog.find(b">", subset_end) if subset_end >= 0 else -1
    return prolog[start : close + 1 if close >= 0 else len(prolog)]


def refuse_parsed_dtd(root: etree._Element) -> None:
    # Defence in depth: the prolog scan should have caught any DOCTYPE that declares or
    # points to something; if the parser still saw one, refuse the same way.
    docinfo = root.getroottree().docinfo
    internal = docinfo.internalDTD
    if (internal is not None and internal.entities()) or docinfo.system_url or docinfo.public_id:
        raise InvalidDocument(
            "the file carries a DTD in its DOCTYPE; invoicectl never loads DTDs and UBL "
            "does not use one"
        )

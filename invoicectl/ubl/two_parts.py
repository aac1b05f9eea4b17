"""The two-part parse of a large invoice: a tree of the header only, once the invoice
lines, most of its bytes, are known to be well-formed without building their tree."""

from __future__ import annotations

import re

from lxml import etree

from invoicectl.ubl.errors import InvalidDocument
from invoicectl.ubl.parsers import PARSER, WELL_FORMED_PARSER

# parse_in_two_parts's cut: the end of LegalMonetaryTotal, whatever its prefix. Below this many
# bytes of lines, a second parse costs more than checking them without a tree saves.
_MONETARY_TOTAL_TAG = b"LegalMonetaryTotal>"
_SPLIT_MIN_LINE_BYTES = 3072
# A start tag, its name as group 1; quoted values may hold '>'.
_START_TAG = re.compile(rb"""<([^\s/>]+)(?:\s+[^\s=/>]+\s*=\s*(?:"[^"]*"|'[^']*'))*\s*>""")
# The most nodes (elements and attributes) a tree is built of: libxml2 takes some 200 bytes a
# node, and 15 MB of small elements ahead of the lines made a 600 MB tree (helper-97). A real
# header holds hundreds; a 15 MB invoice of 10,000 lines about 700,000 in all. Each node takes
# 4 bytes at least (``<a/>``), so a shorter text is never counted: no cost on a usual scan.
HEADER_NODES = 200_000
DOCUMENT_NODES = 1_500_000


def parse_in_two_parts(data: bytes, root_start: int) -> etree._Element | None:
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
    refuse_a_forest(data, cut, HEADER_NODES, "ahead of its invoice lines")
    try:
        etree.fromstring(root_tag.group() + data[cut:], WELL_FORMED_PARSER)
        if WELL_FORMED_PARSER.error_log:
            return None
        return etree.fromstring(data[:cut] + b"</" + root_tag.group(1) + b">", PARSER)
    except etree.XMLSyntaxError:
        return None


# An invoice (or credit note) line's end tag, whatever its prefix, then only white space and
# comments up to the root's end tag: UBL allows nothing else after the lines.
_LINES_LAST = re.compile(
    rb"</(?:[^\s/>:]+:)?(?:Invoice|CreditNote)Line\s*>\s*(?:<!--(?:[^-]|-(?!-))*-->\s*)*\Z"
)


def lines_end_the_root(data: bytes) -> bool:
    """Whether, as far as its last bytes tell, the root's last child is an invoice line:
    nothing of the root's own comes after the lines. False when in doubt (an element appended
    after them, say): the caller then reads every child of the whole document's root."""
    root_end = data.rfind(b"</")
    last_end = data.rfind(b"</", 0, root_end)
    return last_end >= 0 and _LINES_LAST.match(data, last_end, root_end) is not None


def _header_end(data: bytes) -> int:
    """Just after the first LegalMonetaryTotal's end tag, as far as bytes tell; -1 if none."""
    start = data.find(_MONETARY_TOTAL_TAG)
    if start < 0:
        return -1
    end = data.find(_MONETARY_TOTAL_TAG, start + len(_MONETARY_TOTAL_TAG))
    return end + len(_MONETARY_TOTAL_TAG) if end >= 0 else -1


def refuse_a_forest(data: bytes, end: int, limit: int, where: str) -> None:
    """InvalidDocument when ``data[:end]`` would be a tree of more than ``limit`` nodes, told
    from its bytes (each ``<`` and ``="``: end tags and comments counted too, so it errs on
    the side of counting more)."""
    if end <= 4 * limit:
        return
    nodes = data.count(b"<", 0, end) + data.count(b'="', 0, end) + data.count(b"='", 0, end)
    if nodes > limit:
        raise InvalidDocument(
            f"the document holds about {nodes:,} elements and attributes {where}, more than "
            f"an invoice needs ({limit:,}); is data of another kind written into it as XML?"
        )

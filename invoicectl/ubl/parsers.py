"""The hardened lxml parsers, and libxml2's syntax errors as reasons a clerk can act on.

Both parsers never resolve entities, never load a DTD and never touch the network; they are
safe only together with the DOCTYPE guard (``doctype``) and the size cap (``reading``).
"""

from __future__ import annotations

import re
from typing import Any

from lxml import etree

from invoicectl.ubl.encoding import Encoding, not_valid_in
from invoicectl.ubl.errors import InvalidDocument
from invoicectl.ubl.text import one_line

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
PARSER = etree.XMLParser(**_HARDENED, remove_comments=True, remove_pis=True, remove_blank_text=True)


class _Discard:
    """A parser target that builds nothing: the parse only checks well-formedness."""

    def close(self) -> None:
        return None


# The same hardening, no tree: libxml2 still checks every byte, in half the time.
WELL_FORMED_PARSER = etree.XMLParser(**_HARDENED, target=_Discard())
_LXML_LOCATION = re.compile(r",? line \d+(, column \d+)?$")
_EXCESSIVE_DEPTH = re.compile(r"Excessive depth in document: (\d+)")


def parse_whole(data: bytes, encoding: Encoding) -> etree._Element:
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

"""A document's encoding (BOM, declaration, XML's default) and its text as sent.

``document_text`` turns the stored bytes into the exact characters sent as the JSON
``document`` string (design.md, Idempotency rule 2); ``utf8_as_sent`` hands the parser those
same characters, so that what is parsed is what is sent.
"""

from __future__ import annotations

import codecs
import functools
import re
from typing import NamedTuple

from invoicectl.text import one_line
from invoicectl.ubl.errors import InvalidDocument

_UTF8_BOM = codecs.BOM_UTF8
# The encoding pseudo-attribute of an XML declaration (which ends at the first '>'): "<?xml"
# and white space, never another instruction whose name starts so (``<?xml-stylesheet``).
_DECLARED_ENCODING = re.compile(
    rb"""<\?xml(?=\s)(?=[^>]*>)[^>]*?\sencoding\s*=\s*(["'])([^"'>]*)\1"""
)
_TEXT_DECLARATION = re.compile(r"""\A(<\?xml(?=\s)[^>]*?\sencoding\s*=\s*)(["'])([^"']*)\2""")
_STARTS_LIKE_XML = re.compile(rb"[ \t\r\n]*<")


class Encoding(NamedTuple):
    """How a document's bytes are encoded, as far as the BOM and declaration tell."""

    codec: str  # a Python codec name
    bom_length: int
    declared: str | None  # the declaration's encoding value, verbatim

    @property
    def label(self) -> str:
        return one_line(self.declared, 60) if self.declared else self.codec.upper()


def sniff_encoding(data: bytes) -> Encoding:
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
        return Encoding("utf-8", len(_UTF8_BOM), _declared_encoding(data, len(_UTF8_BOM)))
    for bom, codec in ((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")):
        if data.startswith(bom):
            return Encoding(codec, 2, _declared_in_utf16(data, 2, codec))
    # UTF-16 without BOM is legal when the declaration says so; '<?' tells the byte order.
    for start, codec in ((b"<\x00?\x00", "utf-16-le"), (b"\x00<\x00?", "utf-16-be")):
        if data.startswith(start):
            return Encoding(codec, 0, _declared_in_utf16(data, 0, codec))
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


def _declared_8bit(data: bytes) -> Encoding:
    """The encoding of bytes that start like 8-bit text, per their declaration."""
    declared = _declared_encoding(data)
    if declared is None:
        return Encoding("utf-8", 0, None)
    codec = codec_for(declared)
    if codec.startswith(("utf-16", "utf-32")):
        name = one_line(declared, 60)
        raise InvalidDocument(
            f"the file declares encoding {name} but its bytes are 8-bit text, "
            f"not {name}; fix the declaration or re-save the file as {name}"
        )
    return Encoding(codec, 0, declared)


def _declared_encoding(data: bytes, start: int = 0) -> str | None:
    """The declaration's encoding value: the whole declaration is read, up to its first
    '>', however much white space it holds (libxml2 reads it all, and so must this)."""
    end = data.find(b">", start)
    if end < 0:
        return None
    found = _DECLARED_ENCODING.match(data, start, end + 1)
    return found.group(2).decode("ascii", "replace") if found else None


def _declared_in_utf16(data: bytes, start: int, codec: str) -> str | None:
    """``_declared_encoding`` of UTF-16 text from ``start``: up to its first '>' unit."""
    close = ">".encode(codec)
    end = data.find(close, start)
    while end >= 0 and (end - start) % 2:  # half of one unit and half of the next
        end = data.find(close, end + 1)
    if end < 0:
        return None
    text = data[start : end + 2].decode(codec, "replace")
    return _declared_encoding(text.encode("ascii", "replace"))


# XML's EncName: what libxml2 accepts as an encoding's name (Python's lookup would also take
# "ISO 8859-1" or " latin-1", tidied, where libxml2 refuses the file).
_ENCODING_NAME = re.compile(r"[A-Za-z][A-Za-z0-9._-]*")
# Text codecs to Python, but no character set a document is written in: host names (idna,
# punycode), Python's own escapes, a table-driven codec given no table (charmap), one that
# refuses all (undefined). idna and undefined raise UnicodeError, which no other decoding does.
_NOT_CHARSETS = frozenset(
    ("idna", "punycode", "undefined", "unicode-escape", "raw-unicode-escape", "charmap")
)


@functools.lru_cache(maxsize=64)  # a few names, met again in every file
def codec_for(declared: str) -> str:
    try:
        info = codecs.lookup(declared) if _ENCODING_NAME.fullmatch(declared) else None
    except (LookupError, ValueError):  # ValueError: a NUL in the name
        info = None
    # Python also names byte transforms (base64, rot13, zip) as codecs; they decode no text.
    if info is None or not info._is_text_encoding or info.name in _NOT_CHARSETS:
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
    encoding = sniff_encoding(data)
    try:
        text = data[encoding.bom_length :].decode(encoding.codec)
    except UnicodeDecodeError as exc:
        raise InvalidDocument(not_valid_in(encoding, data, exc.start)) from None
    except UnicodeError:  # a codec that fails as a whole, naming no byte
        raise InvalidDocument(
            f"the bytes cannot be read as {encoding.label}, the encoding the file declares; "
            "re-save the file as UTF-8"
        ) from None
    if text.startswith("\ufeff"):  # as UTF-8, libxml2 would take it for the only BOM
        raise InvalidDocument(
            "not well-formed XML (line 1): the file starts with two byte order marks; "
            "re-save it with one"
        )
    if encoding.declared is None or codec_for(encoding.declared) == "utf-8":
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


# Single-byte code pages: text in one that holds letters past ASCII is next to never valid
# UTF-8 as well, since UTF-8 wants its high bytes in strict runs ("Ã©" is how é reads).
_SINGLE_BYTE = ("iso8859-", "cp125", "cp437", "cp850", "latin", "mac-", "koi8")


def utf8_in_disguise(data: bytes, encoding: Encoding) -> str | None:
    """Why a document declared in a single-byte code page cannot be sent, when it holds
    UTF-8 text (helper-97: "é" was sent as "Ã©", and every accented name in the document
    with it; "Ö" in a number was refused for a control character). Its invoice number, read
    as declared, is journalled: real exports do this (the corpus has one)."""
    if not encoding.codec.startswith(_SINGLE_BYTE) or data.isascii():
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    # ...and its UTF-8 reading is text of that page (Ñ, í; or €, in windows-1252): a page's
    # own text that happens to be valid UTF-8 reads as CJK there (helper-101).
    if not any(_in_page(text, codec) for codec in (encoding.codec, "cp1252")):
        return None
    return (
        f"the file declares encoding {encoding.label}, but its bytes are UTF-8 (each accented "
        f"letter written as two or more bytes, which {encoding.label} reads as as many "
        f"letters): fix the declaration to UTF-8, or re-save the file as {encoding.label}"
    )


def _in_page(text: str, codec: str) -> bool:
    try:
        text.encode(codec)
    except UnicodeEncodeError:
        return False
    return True


def utf8_as_sent(data: bytes, encoding: Encoding) -> tuple[bytes, Encoding]:
    """The bytes libxml2 parses: UTF-8 as is; any other encoding as ``document_text``'s
    characters, so that what is parsed is exactly what is sent, whatever libxml2's own
    decoders (iconv) would have made of the bytes."""
    if encoding.codec == "utf-8" and (
        encoding.declared is None or codec_for(encoding.declared) == "utf-8"
    ):
        return data, encoding
    return document_text(data).encode("utf-8"), Encoding("utf-8", 0, "UTF-8")


def not_valid_in(encoding: Encoding, data: bytes, offset: int) -> str:
    # Counted in the text: a UTF-16 character may hold a 0x0A byte that is no line break.
    before = data[encoding.bom_length : encoding.bom_length + offset]
    try:
        line = before.decode(encoding.codec, "replace").count("\n") + 1
    except UnicodeError:  # a codec that takes no "replace": the bytes' line breaks, then
        line = before.count(b"\n") + 1
    if encoding.declared is None:
        return (
            f"the bytes are not valid {encoding.label} (line {line}), and the file declares "
            "no other encoding; add an encoding declaration or re-save the file as UTF-8"
        )
    return (
        f"the bytes are not valid {encoding.label} although the file declares encoding "
        f"{encoding.label} (line {line})"
    )

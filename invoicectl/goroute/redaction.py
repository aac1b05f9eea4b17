"""Finding the API key in server text, in whatever form the server wrote it back.

A server, or a proxy in front of it, may echo the ``X-API-Key`` header into its answer, and
not always as it was sent: JSON escapes it (``\\/``, ``\\u0073`` for any character, upper or
lower hex), a URL or a form percent-encodes it (``%73``, ``%2F``, ``%252F`` twice over), HTML
writes character references (``&#115;``, ``&#x73;``), and a debugging page may print the
header's bytes in hex or base64. ``KeyForms.pattern`` matches the key with each of its characters
in any of the character forms, mixed freely, or its bytes in hex or base64, so one pass
replaces every echo
``redact`` can see; ``redact`` then decodes the text the common ways, alone and in pairs, and
if the key still shows in any decoding (an encoding nested past what the pattern spells out,
or the key's letters and digits, or its bytes in hex, with punctuation between them), the
whole text is withheld rather than kept. ``redact_data`` does the same for every string in
parsed JSON, keys included.

Keys are visible ASCII without spaces (``apikey._check_secret``), so a space in an echo can
only be a ``+`` of the key that a form decoder turned into one; the pattern takes it as such.
``KeyForms`` spells the key out: it lives only inside ``ApiKey``.
"""

from __future__ import annotations

import base64
import html
import re
import time
from collections.abc import Callable, Iterator
from typing import Any, NoReturn
from urllib.parse import unquote

MARKER = "[redacted]"
WITHHELD = "[withheld: the answer echoed the API key in an encoded form]"

_JSON_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|(.))", re.DOTALL)
_JSON_SIMPLE = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class KeyForms:
    """What ``redact`` looks for, made once per key: ``pattern`` matches the key with each of
    its characters written plainly or in any of the encodings named above, its bytes in hex
    or base64 (``_encoded_forms``), or a part of it (``_fragments``); the rest are the forms
    ``_shows`` looks for in each decoding (making them for every string took half of an
    answer's redaction). It spells the key out: its repr does not."""

    __slots__ = ("secret", "pattern", "encoded", "folded", "letters", "hex")

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.encoded = _encoded_forms(secret)
        spelled = "".join(_char_forms(char) for char in secret)
        forms = [spelled, *map(re.escape, self.encoded), *_fragments(secret)]
        self.pattern = re.compile("|".join(forms))
        self.folded = secret.casefold()
        letters = _NOT_LETTER_OR_DIGIT.sub("", self.folded)
        self.letters = letters if len(letters) >= _BARE_LETTERS else None
        raw = secret.encode()
        self.hex = raw.hex() if len(raw) >= _BARE_BYTES else None

    def __repr__(self) -> str:
        return "KeyForms(...)"

    def __reduce_ex__(self, protocol: object) -> NoReturn:
        raise TypeError("KeyForms cannot be pickled: it spells the API key out")


# A run of this many of the key's characters, in either case, is redacted wherever it stands:
# a key broken by a line break or a tag, cut short, or upper-cased shows in parts.
_FRAGMENT = 12


def _fragments(secret: str) -> list[str]:
    """Any ``_FRAGMENT`` consecutive characters of the key, in any case, and the key's
    characters that follow them; none for a key too short for a part to be its own."""
    if len(secret) < _FRAGMENT + 4:
        return []
    windows = {secret[start : start + _FRAGMENT] for start in range(len(secret) - _FRAGMENT + 1)}
    alphabet = "".join(sorted(set(secret)))
    return ["(?i:(?:" + "|".join(map(re.escape, sorted(windows))) + f")[{re.escape(alphabet)}]*)"]


def _encoded_forms(secret: str) -> list[str]:
    """The key's bytes as hex (either case) and as base64 (standard and URL-safe), where they
    fall in the encoded text: base64 writes 3 bytes as 4 characters, so a key after 0, 1 or 2
    other bytes (``X-API-Key: ...`` encoded whole) is spelled three ways. Only characters
    made of the key's bits alone are kept; longest first."""
    raw = secret.encode()
    found = {raw.hex(), raw.hex().upper()}
    for before in range(3):
        start_bit, end_bit = 8 * before, 8 * (before + len(raw))
        first, last = -(-start_bit // 6), end_bit // 6  # whole characters inside the key
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            core = encode(bytes(before) + raw).decode("ascii")[first:last]
            if len(core) >= 8:  # long enough to be nobody else's text
                found.add(core)
    return sorted(found, key=len, reverse=True)


# No echo of a key, in any form ``redact`` finds, is shorter than this (a base64 core of
# its bytes; a fragment is 12 characters): a shorter text is taken as it is.
_SHORTEST_ECHO = 8


def redact(text: str, key: KeyForms) -> str:
    """``text`` with every echo of the key replaced by ``MARKER``; ``WITHHELD`` if one hides."""
    if len(text) < min(_SHORTEST_ECHO, len(key.secret)):
        return text
    cleaned = key.pattern.sub(MARKER, text)
    if any(_shows(view, key) for view in (cleaned, *_decodings(cleaned))):
        return WITHHELD
    return cleaned


# What may stand inside a key echoed back without hiding it from a reader: white space,
# invisible characters (soft hyphen, zero-width ones, bidi marks, BOM), markup tags, and the
# control characters no text holds between its letters: a key echoed in UTF-16 and read as
# UTF-8 has a NUL after each character (helper-82: it reached the journal and the terminal).
_INSIDE = re.compile(
    r"<[^<>]{0,200}>"
    r"|[\s\x00-\x08\x0e-\x1f\x7f\u00ad\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\ufeff]"
)


# A key is withheld by its letters and digits alone only when it has this many: fewer could
# be a word or a number of someone else's text once the punctuation between them is dropped.
_BARE_LETTERS = 16
# And by its bytes in hex only from this many bytes on (16 hex digits, longer than a date
# and time with the separators dropped).
_BARE_BYTES = 8

_NOT_LETTER_OR_DIGIT = re.compile(r"[^0-9a-z]")
# What stands between the bytes of a hex dump: anything not a letter or digit, and the
# ``0x`` or ``\\x`` written before each byte (hex has no ``x`` of its own to lose).
_BETWEEN_HEX_BYTES = re.compile(r"0?x|[^0-9a-z]")


def _shows(view: str, key: KeyForms) -> bool:
    """Whether ``view`` shows the key, whole or broken up by what ``_INSIDE`` matches, in
    either case, or its bytes in hex or base64 broken up the same way (MIME's base64 breaks
    its lines every 76 characters); or the key's letters and digits with anything else
    between them (a key cut into pieces joined by dashes); or its bytes in hex with any
    separators (``73 6b 5f``, ``73:6b:5f``, ``0x73, 0x6b``)."""
    if key.secret in view:
        return True
    unbroken = _INSIDE.sub("", view)
    if any(form in unbroken for form in key.encoded):  # base64 wrapped at 76
        return True
    folded = unbroken.casefold()
    if key.folded in folded:
        return True
    if key.letters is not None and key.letters in _NOT_LETTER_OR_DIGIT.sub("", folded):
        return True
    return key.hex is not None and key.hex in _BETWEEN_HEX_BYTES.sub("", folded)


# The CPU time an answer's strings may take to be checked one by one. A GoRoute answer
# takes milliseconds; a server can make one of its size cap (2 MB) take far longer (many
# strings, each decoding several ways), outside the request's time limit and blocking the
# run's event loop, so past this the answer is withheld: unusable, as one over its cap.
REDACTION_SECONDS = 2.0


class TooCostly(ValueError):
    """An answer whose strings took longer than ``REDACTION_SECONDS`` to check."""


def redact_data(
    data: Any, redact_text: Callable[[str], str], clock: Callable[[], float] = time.thread_time
) -> Any:
    """Parsed JSON with ``redact_text`` applied to every string in it, keys included;
    ``TooCostly`` past ``REDACTION_SECONDS`` of ``clock``: the CPU time of the thread that
    checks them. Not the process's: with other threads running, reading that clock took
    about 100 us in a send (0.3 for this thread's), a twentieth of an invoice's CPU."""
    return _Redacting(redact_text, clock).data(data)


class _Redacting:
    def __init__(self, redact_text: Callable[[str], str], clock: Callable[[], float]) -> None:
        self.redact_text, self.clock = redact_text, clock
        self.until = clock() + REDACTION_SECONDS
        self.strings = 0

    def text(self, text: str) -> str:
        self.strings += 1
        if self.strings % 256 == 0 and self.clock() > self.until:
            raise TooCostly(
                f"with strings that took over {REDACTION_SECONDS:g} s of CPU to check for "
                "the API key"
            )
        return self.redact_text(text)

    def data(self, data: Any) -> Any:
        if isinstance(data, str):
            return self.text(data)
        if isinstance(data, list):
            return [self.data(item) for item in data]
        if isinstance(data, dict):
            return {self.text(key): self.data(value) for key, value in data.items()}
        return data


def _char_forms(char: str) -> str:
    code = ord(char)
    hex2 = "".join(_hex_digit(digit) for digit in f"{code:02x}")
    forms = [
        re.escape(char),
        r"\\" + re.escape(char),  # JSON's \/ \" \\, and any needless backslash
        r"\\u00" + hex2,  # JSON and JavaScript
        r"\\x" + hex2,  # Python and C
        "%" + hex2,  # URLs and forms
        "%25" + hex2,  # percent-encoded twice
        "%u00" + hex2,  # old JavaScript escape()
        f"&#0*{code};",  # HTML, decimal
        "&#[xX]0*" + "".join(_hex_digit(digit) for digit in f"{code:x}") + ";",  # HTML, hex
    ]
    if char == "+":
        forms.append(" ")  # a "+" in the key, form-decoded into a space on the way back
    return "(?:" + "|".join(forms) + ")"


def _hex_digit(digit: str) -> str:
    return f"[{digit.lower()}{digit.upper()}]" if digit.isalpha() else digit


def _decodings(text: str, depth: int = 2) -> Iterator[str]:
    """The text decoded each common way, once and twice over (lazily: the views of a large
    answer are not all held at once). A decoding that cannot change the text is skipped; ``+``
    for a space is not one of them, since it can only break a key apart, never make one."""
    for trigger, decode in _DECODERS:
        if trigger in text:
            view = decode(text)
            if view == text:  # nothing it decodes: no new view, nor any below it
                continue
            yield view
            if depth > 1:
                yield from _decodings(view, depth - 1)


def _json_unescaped(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return chr(int(match.group(1), 16))
        escaped = match.group(2)
        return _JSON_SIMPLE.get(escaped, escaped)

    return _JSON_ESCAPE.sub(one, text)


_DECODERS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("%", unquote),
    ("\\", _json_unescaped),
    ("&", html.unescape),
)

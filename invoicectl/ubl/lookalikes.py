"""Invoice numbers that would look the same as another: never sent (``lookalike``).

A second file whose number differs from the first only by a character that shows nothing
would be a second invoice to GoRoute, and a second delivery to the receiver.
"""

from __future__ import annotations

import re
import unicodedata

from invoicectl.text import one_line

# Any other character that shows nothing, at an end or inside, makes a number unsendable
# (``lookalike``):
# "INV-1\u200e" is no "INV-1", and a second file with it would be a second invoice to GoRoute
# and a second delivery to the receiver. Those Python does not print (format characters such
# as direction marks and isolates, tag characters, private use, unassigned code points), and
# printable ones that draw nothing: the combining grapheme joiner, Hangul and Khmer fillers,
# Mongolian and other variation selectors, a blank braille pattern.
_BLANK = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u2800\u3164\ufe00-\ufe0f\uffa0"
    "\U000e0100-\U000e01ef]"
)


def lookalike(invoice_id: str) -> str | None:
    """Why ``invoice_id`` cannot be sent though it is journalled under it: a number that
    would look the same as another. An older invoicectl took these as they are: journalled
    under them, an invoice it sent is amended by a new file, never unidentified."""
    if ends := invisible_ends(invoice_id):
        return invisible_reason(invoice_id, ends)
    if invoice_id.isascii():
        return None
    shown = f"the invoice number (cbc:ID) '{one_line(invoice_id, 60)}'"
    if hidden := _hidden_inside(invoice_id):  # inside as at an end (helper-97)
        if all(unicodedata.category(char) == "Zs" for char in hidden):  # helper-100
            return (
                f"{shown} holds a space other than a plain one ({_code_points(hidden)}): it "
                "looks like the number with a plain space; write a plain space"
            )
        return (
            f"{shown} holds an invisible character ({_code_points(hidden)}): it looks like "
            "the number without it; remove it"
        )
    if not unicodedata.is_normalized("NFC", invoice_id):
        # The same number saved by another tool in composed form would be another invoice.
        return (
            f"{shown} has accented letters "
            "written as a letter and a combining accent (Unicode NFD, as some tools save "
            "text), not composed (NFC); save the number with composed characters"
        )
    return None


def invisible_reason(invoice_id: str, ends: str) -> str:
    return (
        f"the invoice number (cbc:ID) '{one_line(invoice_id, 60)}' starts or ends with an "
        f"invisible character ({_code_points(ends)}); remove it"
    )


# Characters that change how their neighbours are drawn are no lookalike there (helper-101):
# a joiner or non-joiner between two characters of a script that joins or an emoji sequence
# (Persian, Devanagari, a family emoji), a variation selector after one that is not ASCII.
_JOINERS = frozenset("\u200c\u200d")
_UNJOINED = ("LATIN", "GREEK", "CYRILLIC")  # scripts whose letters no joiner changes
_SELECTOR = re.compile("[\u180b-\u180d\u180f\ufe00-\ufe0f\U000e0100-\U000e01ef]")


def _hidden_inside(text: str) -> str:
    """The characters of ``text`` that show nothing where they stand."""
    hidden = ""
    for at, char in enumerate(text):
        if not _invisible(char):
            continue
        before, after = text[at - 1 : at] if at else "", text[at + 1 : at + 2]
        if char in _JOINERS and _shaped(before) and _shaped(after):
            continue
        if _SELECTOR.match(char) and _shaped(before):
            continue
        hidden += char
    return hidden


def _shaped(char: str) -> bool:
    """A character past ASCII that a joiner or selector may change: a letter, a mark, a
    digit of a script that joins or shapes, a symbol (an emoji); not Latin, Greek or
    Cyrillic, whose letters no joiner changes ("é\u200dé" reads as "éé")."""
    return (
        len(char) == 1
        and not char.isascii()
        and unicodedata.category(char)[0] in "LMNS"
        and not _invisible(char)
        and not unicodedata.name(char, "").startswith(_UNJOINED)
    )


def _invisible(char: str) -> bool:
    return not char.isprintable() or _BLANK.match(char) is not None


def invisible_ends(text: str) -> str:
    """The characters that show nothing at the start and end of ``text`` (all of it when it
    shows nothing at all)."""
    start = 0
    while start < len(text) and _invisible(text[start]):
        start += 1
    end = len(text)
    while end > start and _invisible(text[end - 1]):
        end -= 1
    return text[:start] + text[end:]


def _code_points(text: str) -> str:
    return ", ".join(sorted({f"U+{ord(char):04X}" for char in text}))

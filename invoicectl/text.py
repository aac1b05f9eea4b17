"""Text fit to quote in a one-line reason: escapes for what would break the line."""

from __future__ import annotations

import re
from collections.abc import Sequence

# Characters that would break a one-line reason or a one-line invoice number: C0 and C1
# controls (tab and line breaks among them), the Unicode line and paragraph separators, and
# the lone surrogates a file name that is not UTF-8 decodes to.
UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
# The same without the surrogates: what no setting's text may hold (a path's undecodable
# bytes, as surrogates, are a path's own).
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` fit to quote in a one-line reason: line breaks, control and invisible
    characters as escapes (``\\n``, ``\\ufeff``), a file name's undecodable bytes as
    ``\\xNN``, and, with ``limit``, cut to that many characters."""
    if not text.isprintable():
        text = "".join(char if char.isprintable() else _escaped(char) for char in text)
    if limit is not None and len(text) > limit:
        return text[: limit - 1] + "\u2026"
    return text


def line_by_line(text: str) -> str:
    """``one_line`` for each of ``text``'s lines: a message of several keeps its line breaks,
    and each line's invisible characters are escapes."""
    return "\n".join(one_line(line) for line in text.split("\n"))


def first_few(items: Sequence[str], most: int) -> str:
    """The first ``most`` of ``items``, comma-separated, with ", ..." when there are more;
    each on one line, its invisible characters escaped (an invoice ID may hold a mark that
    turns the rest of a terminal's line around)."""
    return ", ".join(map(one_line, items[:most])) + (", ..." if len(items) > most else "")


def cut(text: str, limit: int, marker: str = "…[truncated]") -> str:
    """``text`` up to ``limit`` characters, with ``marker`` after it when it was longer."""
    return text if len(text) <= limit else text[:limit] + marker


def folded_line(text: str) -> str:
    """Text from a server on one line: its white space folded to single spaces, and every
    other control character (an escape sequence that would clear a terminal or fake a log
    line) written as an escape."""
    return one_line(" ".join(text.split()))


def decimal(text: str) -> bool:
    """Whether ``text`` is a whole number in the digits 0-9 alone: what ``int()`` then reads
    without fail. (``str.isdigit`` also takes "²", which ``int()`` refuses, and "٤٥", which it
    reads as 45: a file name or header so written is no number of ours.)"""
    return text.isascii() and text.isdigit()


def not_ascii_digits(text: str) -> str | None:
    """Why a number written in ``text`` is refused, or None when ``text`` is ASCII: Python's
    ``int()`` and ``float()`` read any script's digits ("\u0664\u0665\u0660" as 450,
    fullwidth "\uff14\uff15" as 45), and a setting or option so written is more likely
    pasted from a page, or a spoof, than meant. Names the first such character."""
    char = next((char for char in text if not char.isascii()), None)
    if char is None:
        return None
    import unicodedata

    name = unicodedata.name(char, "")
    return (
        f"it holds U+{ord(char):04X}{f' ({name})' if name else ''}: a number is read "
        "only in the digits 0-9"
    )


def _escaped(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's stand-in for an undecodable byte
        return f"\\x{code - 0xDC00:02x}"
    return char.encode("unicode_escape", "backslashreplace").decode("ascii")

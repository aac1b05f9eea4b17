"""Text out of decoded JSON from a server that may not follow its own documentation.

GoRoute's answers (and any proxy's in front of it) are read tolerantly: a field counts only if
it holds a non-empty string or a finite number, and server text is folded onto one line before
it reaches an outcome or a message.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from invoicectl.ubl.text import one_line as escaped


def text_of(value: Any) -> str | None:
    """A non-empty string from a JSON scalar; numbers become text, anything else None."""
    if isinstance(value, str):
        value = value.strip()
        return value or None
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return str(value)
    return None


def first_text(data: Mapping[str, Any], *names: str) -> str | None:
    """The first of ``names`` whose value ``text_of`` accepts."""
    for name in names:
        value = text_of(data.get(name))
        if value is not None:
            return value
    return None


def one_line(text: str) -> str:
    """Server text on one line: white space folded, and every other control character
    (an escape sequence that would clear a terminal or fake a log line) written as an escape."""
    return escaped(" ".join(text.split()))

"""Text out of decoded JSON from a server that may not follow its own documentation.

GoRoute's answers (and any proxy's in front of it) are read tolerantly: a field counts only if
it holds a non-empty string or a finite number, and a body nests no deeper than an answer
does. Server text reaches an outcome or a message through ``text.folded_line``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


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


# GoRoute's answers nest three or four levels; a body nested deeper than this is no answer of
# its (and walking it, as ``redaction.redact_data`` does, would overflow Python's stack at
# about 500 levels).
MAX_DEPTH = 32


def deeper_than(data: Any, limit: int) -> bool:
    """Whether lists and objects nest in ``data`` more than ``limit`` deep (no recursion)."""
    stack = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False

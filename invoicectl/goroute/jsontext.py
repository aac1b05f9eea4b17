"""Decoding JSON from a server that may not follow its own documentation (``json_or_none``),
and text out of what it decoded.

GoRoute's answers (and any proxy's in front of it) are read tolerantly: a field counts only if
it holds a non-empty string or a finite number, and a body nests no deeper than an answer
does. Server text reaches an outcome or a message through ``text.folded_line``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any


def text_of(value: Any) -> str | None:
    """A non-empty string from a JSON scalar; numbers become text (as the server wrote
    them, ``_Number``), anything else None."""
    if isinstance(value, str):
        value = value.strip()
        return value or None
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return value.literal if isinstance(value, _Number) else str(value)
    return None


class _Number(float):
    """A JSON number with a fraction or an exponent, which keeps the text it was written in:
    an id written ``1e2`` is no ``100.0`` (helper-82), and a lookup of the one never finds the
    other."""

    __slots__ = ("literal",)
    literal: str


def _number(literal: str) -> float:
    number = _Number(literal)
    number.literal = literal
    return number


def first_text(data: Mapping[str, Any], *names: str) -> str | None:
    """The first of ``names`` whose value ``text_of`` accepts."""
    for name in names:
        value = text_of(data.get(name))
        if value is not None:
            return value
    return None


def present_text(data: Mapping[str, Any], *names: str) -> str | None:
    """``text_of`` the first of ``names`` the data holds (not null): a field there but
    unusable (a list, an object) is read as no text, never passed over for the next name.
    A 202 with ``"transaction_id": ["x"], "id": "tx_other"`` was accepted as ``tx_other``
    (helper-82); its id is unconfirmed, and the send replayed under the same key."""
    for name in names:
        if data.get(name) is not None:
            return text_of(data[name])
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


def json_or_none(text: str) -> Any:
    """The parsed body; None when it is not JSON, or nested past ``MAX_DEPTH``."""
    if not text.strip():
        return None
    try:
        data = json.loads(text, object_pairs_hook=_one_value_a_key, parse_float=_number)
    except (ValueError, RecursionError):
        return None
    return None if deeper_than(data, MAX_DEPTH) else data


def _one_value_a_key(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys each have one value: ``{"transaction_id": "txn_1",
    "transaction_id": "txn_2"}`` says two things, and which one GoRoute meant is unknown, so
    the body is no answer (a send's is then unanswered, replayed under its key)."""
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data and (data[key] != value or text_of(data[key]) != text_of(value)):
            raise ValueError(f"the key {key!r} twice, with two values")  # 1e2 is no 100.0
        data[key] = value
    return data

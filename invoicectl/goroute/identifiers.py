"""Identifiers the server hands out, checked before anything stores or uses one.

GoRoute names transactions and requests with short ASCII ids (``txn_…``, ``tx_…``, UUIDs). Such
an id goes into a URL path (``GET /api/v1/transactions/{id}``), the journal, the report and the
terminal, so one from a broken or hostile server must not be able to make that URL too long for
httpx (a 64 KB id crashed every later reconcile), walk the path (``.`` and ``..`` made reconcile
GET ``/api/v1`` itself; ``/``), break a line or a table (whitespace, control characters), or
carry the API key back (an echoed key is ``[redacted]`` by then, and brackets are not allowed).

An id is usable when it is at most ``MAX_ID_LENGTH`` characters of letters, digits and
``._:~-``, starting with a letter or digit. What the caller does with an unusable one depends
on where it came from: a 202's makes the send unconfirmed, a 422's is dropped (the answer
still says the key was reused), a transaction's is not kept, and one already in an old journal
is never asked for (``GoRouteClient.get_transaction``).
"""

from __future__ import annotations

import re

MAX_ID_LENGTH = 128
# Long enough for any cursor a paging API hands out, far below what breaks a URL.
MAX_CURSOR_LENGTH = 1024

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:~-]*", re.ASCII)
_CURSOR = re.compile(r"[!-~]+", re.ASCII)  # visible ASCII: it travels as a query value


def usable_id(value: str | None) -> bool:
    """Whether ``value`` can be stored, shown and put in a URL path as it is."""
    return value is not None and len(value) <= MAX_ID_LENGTH and _ID.fullmatch(value) is not None


def checked_id(value: str | None) -> str | None:
    """``value`` if it is usable, else None."""
    return value if usable_id(value) else None


def usable_cursor(value: str | None) -> bool:
    """Whether a paging cursor can be sent back as a query parameter."""
    return (
        value is not None
        and len(value) <= MAX_CURSOR_LENGTH
        and _CURSOR.fullmatch(value) is not None
    )


def why_unusable(value: str) -> str:
    """Why ``value`` is not a usable id, without quoting it whole (it may be huge or hold
    control characters)."""
    if "[redacted]" in value or "[withheld" in value:
        return "it echoed the API key"
    if len(value) > MAX_ID_LENGTH:
        return f"it is {len(value)} characters long (at most {MAX_ID_LENGTH})"
    if not value:
        return "it is empty"
    if set(value) <= {"."}:
        return f"{value!r} names a path, not a transaction"
    return (
        f"{_shown(value)} has characters other than letters, digits and ._:~- "
        "or does not start with a letter or digit"
    )


def _shown(value: str) -> str:
    # repr escapes newlines and control characters, so the reason stays one printable line.
    return repr(value[:40] + ("…" if len(value) > 40 else ""))

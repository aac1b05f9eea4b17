"""The day a date field names (``due_day``), as invoicectl orders invoices by it.

A send takes the soonest due first, comparing ``YYYY-MM-DD`` texts: a date written otherwise
sorted as text, ``05.01.2026`` ahead of every date of this century.
"""

from __future__ import annotations

import re
from datetime import date

# xsd:date, after XML's white space is trimmed: a day, then maybe a time zone (Z, or an offset
# of at most 14:00), which says where the day is, not which day it is.
_XSD_DATE = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2})(?:Z|[+-](?:(?:0[0-9]|1[0-3]):[0-5][0-9]|14:00))?"
)


def due_day(text: str | None) -> str | None:
    """The day ``text`` names, as ``YYYY-MM-DD`` (``2026-01-05+01:00``: ``2026-01-05``); None
    when it names none (``05.01.2026``, ``2026-1-5``, ``2026-02-30``): the invoice is then
    undated, as one without a due date, and is sent all the same."""
    if text is None:
        return None
    written = _XSD_DATE.fullmatch(text)
    if written is None:
        return None
    day = written.group(1)
    try:
        date.fromisoformat(day)
    except ValueError:  # no such day, or year 0
        return None
    return day

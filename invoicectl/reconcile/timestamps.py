"""The timestamps reconcile compares: GoRoute's and the journal's, read as aware datetimes.

``parse_time`` reads ISO 8601 with ``Z`` or an offset (a naive time is UTC) and gives None for
anything else; ``first_time`` is when a key first carried a request, the start of its 24-hour
window and the point "sent by this journal" is measured from.
"""

from __future__ import annotations

from datetime import UTC, datetime

from invoicectl.reconcile.verdicts import JournalSide


def first_time(side: JournalSide) -> datetime | None:
    return parse_time(side.key_first_used_at or side.first_attempt_at)


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)

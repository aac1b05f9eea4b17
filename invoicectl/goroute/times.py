"""When the API says something happened: its times as aware datetimes (``parse_time``).

GoRoute's documents write ISO 8601 with ``Z``; other servers and emulators write an offset,
a lower-case ``z`` or ``t``, no zone at all, or Unix seconds or milliseconds as a number. Every
reader of a transaction's ``created_at`` (the list search's order, reconcile's windows, a
send's silence probe) reads it here, so that all agree on what a time is.
"""

from __future__ import annotations

from datetime import UTC, datetime


def parse_time(value: str | None) -> datetime | None:
    """ISO 8601 / RFC 3339 (either case of ``T`` and ``Z``; a naive time is UTC), or Unix
    seconds or milliseconds as a number; None for anything else."""
    if not value:
        return None
    text = value.strip().upper()
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return _epoch(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


# Epoch numbers past this are milliseconds (as seconds, they would be past the year 5138).
_EPOCH_MILLISECONDS = 1e11


def _epoch(text: str) -> datetime | None:
    try:
        seconds = float(text)
    except ValueError:
        return None
    if not 0 < seconds < 1e14:  # NaN too
        return None
    if seconds > _EPOCH_MILLISECONDS:
        seconds /= 1000
    return datetime.fromtimestamp(seconds, UTC)

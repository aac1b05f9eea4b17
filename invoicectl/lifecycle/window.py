"""The 24-hour window of an idempotency key (design.md, Idempotency rules 3 and 4).

Inside it, a replay under the same key with the same bytes is safe: GoRoute answers it as the
first request. After it, the key protects nothing, and an unanswered send is never replayed
automatically; reconcile finds out first.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

KEY_WINDOW = timedelta(hours=24)
# A replay must land inside the window, not merely start there.
REPLAY_MARGIN = timedelta(minutes=10)


def moment(text: str) -> datetime:
    """A time the journal recorded (ISO 8601, ``Z`` or an offset; naive is UTC)."""
    when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def window_open(first_used_at: str | None, now: datetime) -> bool:
    """Whether a replay under the key would still be protected by its 24-hour window."""
    if first_used_at is None:
        return True  # the key never left: nothing to protect against
    return now - datetime.fromisoformat(first_used_at) < KEY_WINDOW - REPLAY_MARGIN

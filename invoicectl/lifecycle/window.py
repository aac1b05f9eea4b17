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


# A first use later than now by more than this: the clock went back since it was written
# (or the row was changed by hand), so how long ago the key left cannot be told.
CLOCK_TOLERANCE = timedelta(minutes=1)


def moment(text: str) -> datetime:
    """A time the journal recorded (ISO 8601, ``Z`` or an offset; naive is UTC)."""
    when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def window_open(first_used_at: str | None, now: datetime) -> bool:
    """Whether a replay under the key would surely still be protected by its 24-hour
    window. A first use that is no time, or in the future, shows nothing: not open, so that
    reconcile looks first."""
    elapsed = _since(first_used_at, now)
    return elapsed is not None and elapsed < KEY_WINDOW - REPLAY_MARGIN


def window_closed(first_used_at: str | None, now: datetime) -> bool:
    """Whether the key's window has surely closed, so that a new key meets no replay of its
    send. A first use that is no time, or in the future, shows nothing: not closed."""
    elapsed = _since(first_used_at, now)
    return elapsed is not None and elapsed >= KEY_WINDOW - REPLAY_MARGIN


def datable(first_used_at: str | None, now: datetime) -> bool:
    """Whether ``first_used_at`` is a time the window can be reckoned from."""
    return _since(first_used_at, now) is not None


def _since(first_used_at: str | None, now: datetime) -> timedelta | None:
    """How long ago the key was first used; None when the journal cannot tell (no time, not
    a time, or later than now: the clock went back since, or the row changed by hand)."""
    if first_used_at is None:
        return None
    try:
        elapsed = now - moment(first_used_at)
    except (ValueError, TypeError):
        return None
    return elapsed if elapsed >= -CLOCK_TOLERANCE else None

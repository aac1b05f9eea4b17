"""The emulator's notion of now: an injectable clock plus an offset tests can advance.

Every rule that depends on time (the 24 h idempotency window, the 60 s rate window, the
delivery lifecycle) reads this one clock, so advancing it moves them all together.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime


class EmulatedClock:
    def __init__(self, base: Callable[[], float] = time.time) -> None:
        self._base = base
        self._offset = 0.0

    def __call__(self) -> float:
        return self._base() + self._offset

    @property
    def offset(self) -> float:
        return self._offset

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("the emulated clock only moves forward")
        self._offset += seconds


def iso(timestamp: float | None) -> str | None:
    """RFC 3339 UTC with milliseconds, the way GoRoute's examples write times."""
    if timestamp is None:
        return None
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(value: float | int | str) -> float:
    """Epoch seconds from a number or an ISO 8601 string (admin endpoints take either)."""
    if isinstance(value, int | float):
        return float(value)
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()

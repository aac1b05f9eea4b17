"""Server-side rate limits per API key: a sliding 60 s window and a concurrency cap.

Admission is all-or-nothing: a request refused with 429 takes neither a window slot nor a
concurrency slot, so a client that backs off correctly never digs itself deeper.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

WINDOW = 60.0


@dataclass(frozen=True)
class Refusal:
    """Why admission failed, and how many whole seconds until it could succeed (>= 1)."""

    reason: str
    retry_after: int


class RateLimiter:
    def __init__(self, per_minute: int, max_concurrent: int) -> None:
        self._per_minute = per_minute
        self._max_concurrent = max_concurrent
        self._windows: dict[str, deque[float]] = {}
        self._in_flight: dict[str, int] = {}
        # Every arrival, admitted or refused, per key over the last 60 s: the most any 60 s
        # held is what the tests read to prove a client (or several) kept under the limit.
        self._arrivals: dict[str, deque[float]] = {}
        self.max_in_window = 0

    def admit(self, api_key: str, now: float) -> Refusal | None:
        """Take a window slot and a concurrency slot, or say why not (taking neither)."""
        arrivals = self._arrivals.setdefault(api_key, deque())
        arrivals.append(now)
        while arrivals[0] <= now - WINDOW:
            arrivals.popleft()
        self.max_in_window = max(self.max_in_window, len(arrivals))
        window = self._windows.setdefault(api_key, deque())
        while window and window[0] <= now - WINDOW:
            window.popleft()
        if len(window) >= self._per_minute:
            wait = window[0] + WINDOW - now
            return Refusal(
                f"rate limit of {self._per_minute} requests per minute exceeded",
                max(1, math.ceil(wait)),
            )
        if self._in_flight.get(api_key, 0) >= self._max_concurrent:
            # Nobody knows when an in-flight request ends; one second is the honest minimum.
            return Refusal(f"more than {self._max_concurrent} concurrent requests", 1)
        window.append(now)
        self._in_flight[api_key] = self._in_flight.get(api_key, 0) + 1
        return None

    def release(self, api_key: str) -> None:
        self._in_flight[api_key] -= 1

    def in_flight(self, api_key: str | None = None) -> int:
        if api_key is None:
            return sum(self._in_flight.values())
        return self._in_flight.get(api_key, 0)

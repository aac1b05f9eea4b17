"""What a bar or a log line says about a wait the run is in (``goroute.limiter.Wait``).

Shared by ``send`` and ``reconcile``. A bar shows the wait while it lasts, with a countdown
for a Retry-After hold; a pacing wait shorter than ``RATE_WAIT_SHOWN`` is the run going at the
limit, not waiting on it. A log (no terminal) gets one line when a wait of at least
``PLAIN_WAIT_SHOWN`` seconds starts, so that it explains its gap, and not one per 429 when
several extend the same hold.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from invoicectl.goroute.limiter import Wait

# At 100/min every start waits 0.6 s for its slot: that is sending, not waiting.
RATE_WAIT_SHOWN = 1.0
# A wait at least this long gets a plain line when not on a terminal.
PLAIN_WAIT_SHOWN = 5.0


class WaitShown:
    """The run-wide wait in progress, as a bar shows it."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.wait: Wait | None = None
        self.until = -math.inf

    def waiting(self, wait: Wait) -> None:
        if wait.cause == "backoff":  # one request's, not the run's
            return
        if wait.cause == "rate" and wait.seconds < RATE_WAIT_SHOWN:
            return
        now = self.clock()
        if now + wait.seconds >= self.until or now >= self.until:
            self.wait, self.until = wait, now + wait.seconds

    def held_for(self) -> float:
        """Seconds left of a Retry-After hold (0 when there is none)."""
        if self.wait is None or self.wait.cause != "retry_after":
            return 0.0
        return max(0.0, self.until - self.clock())

    def status(self, working: str) -> str:
        """``working`` ("sending"), or what the run waits for."""
        left = self.until - self.clock()
        if self.wait is None or left <= 0:
            return working
        if self.wait.cause == "retry_after":
            return f"waiting {math.ceil(left)} s (Retry-After)"
        return "waiting on the rate limit"


class WaitLines:
    """Decides which waits get a plain line, and words it."""

    def __init__(
        self,
        rate_per_minute: int,
        long_wait: float = PLAIN_WAIT_SHOWN,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate_per_minute = rate_per_minute
        self.long_wait = long_wait
        self.clock = clock
        self._told_until = -math.inf  # when the last wait told of ends

    def line(self, wait: Wait) -> str | None:
        """The line for ``wait``, or None: too short, or within the one already told."""
        if wait.seconds < self.long_wait:
            return None
        until = self.clock() + wait.seconds
        if until < self._told_until + self.long_wait:
            return None
        self._told_until = until
        return wait_line(wait, self.rate_per_minute)


def wait_line(wait: Wait, rate_per_minute: int) -> str:
    """The plain line for a long wait: how long, and whose rule it is."""
    seconds = f"waiting {wait.seconds:.0f} s"
    if wait.cause == "retry_after":
        return f"{seconds} (Retry-After from the API: it answered 429, too many requests)"
    if wait.cause == "rate":
        return f"{seconds} on the rate limit ({rate_per_minute} requests a minute)"
    return f"{seconds} before trying a request again (no answer from the API)"

"""Client-side pacing: when the next request may start.

GoRoute allows ``rate`` requests per minute (100 standard, 500 professional) and answers 429
beyond that. ``RateLimiter`` keeps a run under the limit *as the server counts it*, close to
the limit, and evenly spread:

- **Even pacing.** Starts are one ``interval`` apart, ``interval = (window + margin) / rate``,
  from the very first request: a run never fires ``rate`` requests at t=0. Slots follow a
  metronome, so an event loop that wakes a few ms late costs no throughput (the next gap is
  that much shorter, never below half an interval); after a longer stall the metronome
  restarts from the late start rather than catching up in a burst.
- **A strict sliding window.** Start *n* never begins before start *n - rate* plus
  ``window + margin``, checked against the recorded start times, so no ``window`` seconds
  ever hold more than ``rate`` starts, whatever the pacing, holds or late wake-ups did.
- **The margin** is for the network: the server counts arrivals, which trail our starts by
  a latency that varies. Starts ``window + margin`` apart arrive at least ``window`` apart as
  long as latencies differ by less than ``margin``. The default (1 s) costs 1/61 of the
  limit: 98.4 % is used, 98.4 requests a minute at 100/min and 491.8 at 500/min.
- **Retry-After holds the whole run.** ``hold_until(t)`` stops every caller from starting
  before ``t``; a hold is never shortened. After it, starts resume one ``interval`` apart
  (no burst of everything that queued up during the hold).
- **Fair.** Callers start in the order they called ``acquire`` (FIFO).

How: one gate (an ``asyncio.Lock``, which wakes its waiters first come first served). The
caller at the gate sleeps until its start time, recomputing it after every sleep because a
hold may have arrived meanwhile, records its start and lets the next one in. Only the caller
at the gate ever sleeps here, so the waits it accounts never overlap: ``waited_for_rate`` and
``waited_for_retry_after`` are wall-clock seconds during which the limiter kept a waiting
request from starting (for pacing, for a Retry-After hold), not caller-seconds. Their sum is
at most the run's duration; while requests queue for the rate, ``waited_for_rate`` grows
with the run's wall time, which says the rate was the bottleneck.

**A shared budget.** Several processes on one account (send workers on one PostgreSQL
journal) pace together: ``permits``, when given, hands out the account's start slots from
one place (``permits(interval, span, rate)`` returns the seconds until this caller's slot,
one ``interval`` after the last slot any process took). The caller sleeps until its slot and
starts; one that wakes more than half the margin late (a stall) asks for a new slot rather
than start out of turn: start *n + rate* is never before slot *n* + ``window + margin``, and
start *n* never after slot *n* + margin / 2, so they stay more than ``window`` apart. The
local pacing and window are then not used (the slots are the pacing); holds still apply.

**Telling.** ``on_wait``, when set, hears every sleep at the gate before it starts, as a
``Wait`` (its cause and its length). The retry policy tells its backoffs through the same
hook. It is how the output layer learns that nothing will happen for a while, and why: a bar
can say "waiting 30 s (Retry-After)" instead of freezing, a cron log gets a line that explains
a long gap. It is called in the event loop, must return at once and must not raise; it costs
one attribute test per sleep, nothing when the limiter lets a caller through at once. (``Wait``
lives here, not in a module of its own, because this module imports nothing of invoicectl's:
the chain from ``send.options`` through ``retry`` ends here.)
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Literal

DEFAULT_WINDOW = 60.0
DEFAULT_MARGIN = 1.0

# Sleeps are floats: clock + (due - clock) may land a hair short of ``due``. Anything closer
# than this counts as due, so a fake clock never spins on a 1e-15 s remainder. A microsecond
# is nothing next to the margin.
_TOLERANCE = 1e-6

Cause = Literal["rate", "retry_after"]

# ``rate``: the client's own pacing under the limit; ``retry_after``: a 429 holds the whole
# run (its Retry-After, or the 429 backoff without one); ``backoff``: one request waits
# before trying again after an answer that was no answer (5xx, timeout, connection).
WaitCause = Literal["rate", "retry_after", "backoff"]


@dataclass(frozen=True, slots=True)
class Wait:
    """A wait about to start: why, and for how many seconds (from now)."""

    cause: WaitCause
    seconds: float


OnWait = Callable[[Wait], None]

# (interval, span, rate) -> seconds from now until the caller's slot: a shared budget.
Permits = Callable[[float, float, int], float]


class RateLimiter:
    """Paces request starts to ``rate_per_minute`` per ``window`` seconds; see the module doc."""

    def __init__(
        self,
        rate_per_minute: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        window: float = DEFAULT_WINDOW,
        margin: float = DEFAULT_MARGIN,
        on_wait: OnWait | None = None,
        permits: Permits | None = None,
    ) -> None:
        if rate_per_minute < 1:
            raise ValueError(f"rate must be at least 1 request per window, not {rate_per_minute}")
        if window <= 0 or margin < 0:
            raise ValueError("window must be positive and margin not negative")
        self.rate = rate_per_minute
        self.span = window + margin
        self.margin = margin
        self.interval = self.span / rate_per_minute
        self.clock = clock
        self.sleep = sleep
        self.on_wait = on_wait
        self.waited_for_rate = 0.0
        self.waited_for_retry_after = 0.0
        self.started = 0
        # The last ``rate`` start times: the oldest bounds the next start (sliding window).
        self._starts: deque[float] = deque(maxlen=rate_per_minute)
        self._next_paced = -math.inf
        self._hold = -math.inf
        # When the run's unbroken streak of 429s began (clock time), None outside one: every
        # request's --max-wait counts from it, so that requests in turn cannot each wait it.
        self.rate_limited_since: float | None = None
        self._gate = asyncio.Lock()
        self._permits = permits

    @property
    def held_until(self) -> float:
        """Clock time before which nobody starts because of a hold (-inf: never held)."""
        return self._hold

    @property
    def requests_per_minute(self) -> float:
        """Sustained starts per 60 s this limiter allows: ``60 / interval``."""
        return 60.0 / self.interval

    async def acquire(self) -> None:
        """Wait for this caller's start slot; return when the request may go out."""
        if self._permits is not None:
            return await self._acquire_shared(self._permits)
        async with self._gate:
            slept = False
            while True:
                now = self.clock()
                due, cause = self._earliest_start()
                if due - now <= _TOLERANCE:
                    break
                if self.on_wait is not None:
                    self.on_wait(Wait(cause, due - now))
                await self._waited(cause, due - now, now)
                slept = True
            start = self.clock()
            self._record_start(start, planned=due if slept else start)

    async def _acquire_shared(self, permits: Permits) -> None:
        async with self._gate:
            while True:
                now = self.clock()
                if self._hold - now > _TOLERANCE:
                    if self.on_wait is not None:
                        self.on_wait(Wait("retry_after", self._hold - now))
                    await self._waited("retry_after", self._hold - now, now)
                    continue
                wait = permits(self.interval, self.span, self.rate)
                asked = self.clock()
                if wait > _TOLERANCE:
                    if self.on_wait is not None:
                        self.on_wait(Wait("rate", wait))
                    await self._waited("rate", wait, asked)
                late = self.clock() - (asked + wait)
                if late <= max(self.margin / 2, _TOLERANCE) and self._hold <= self.clock():
                    break
            self._starts.append(self.clock())
            self.started += 1

    def hold_until(self, when: float) -> None:
        """Let nobody start before clock time ``when`` (a 429's Retry-After); never shortens."""
        self._hold = max(self._hold, when)

    def hold_for(self, seconds: float) -> None:
        """``hold_until`` ``seconds`` from now on this limiter's clock."""
        self.hold_until(self.clock() + max(0.0, seconds))

    def prime(self, start_times: Iterable[float]) -> None:
        """Count starts made before this limiter existed (clock times, e.g. a previous run's).

        A cron run that begins right after another ended would otherwise add a full minute's
        worth of requests on top of the previous run's last minute. Call it before the first
        ``acquire``; primed starts are not counted in ``started``.
        """
        for when in sorted(start_times):
            self._note_start(when, anchor=when)

    def _earliest_start(self) -> tuple[float, Cause]:
        paced = self._next_paced
        if len(self._starts) == self.rate:
            paced = max(paced, self._starts[0] + self.span)
        if self._hold > paced:
            return self._hold, "retry_after"
        return paced, "rate"

    def _record_start(self, start: float, planned: float) -> None:
        # The next slot follows the planned one, so the event loop waking us a few ms late
        # (a synchronous SQLite commit, a busy CPU) costs no throughput: the next gap is a
        # little shorter. Later than half an interval is a stall, not jitter: the next slot
        # then follows the actual start, and there is no catch-up burst. A caller that did
        # not have to wait (the limiter was idle) plans from its own start.
        anchor = planned if start - planned <= self.interval / 2 else start
        self._note_start(start, anchor)
        self.started += 1

    def _note_start(self, start: float, anchor: float) -> None:
        # The sliding window keeps actual start times: whatever the pacing did, the window
        # is checked against what really went out.
        self._starts.append(start)
        self._next_paced = max(self._next_paced, anchor + self.interval)

    async def _waited(self, cause: Cause, seconds: float, since: float) -> None:
        """Sleep ``seconds`` for ``cause``, the time slept counted even when the sleep is cut
        short (a deadline, a stop signal): a run that ends waiting says how long it waited."""
        try:
            await self.sleep(seconds)
        finally:
            self._account(cause, self.clock() - since)

    def _account(self, cause: Cause, seconds: float) -> None:
        if cause == "retry_after":
            self.waited_for_retry_after += seconds
        else:
            self.waited_for_rate += seconds

"""The retry policy around one logical request: one invoice's send, or one reconcile lookup.

The caller hands over ``attempt()``, which makes exactly one HTTP request (with its own
journal bookkeeping: write-ahead row before, outcome row after) and returns an ``Outcome``.
``call_with_retry`` decides whether and when to call it again, and returns:

==============================  ===============================================================
returned                        when
==============================  ===============================================================
``None``                        ``should_stop()`` was true before the first try: nothing sent
``Accepted``, ``Rejected``,     at once, never retried (permanent, or the run must stop)
``KeyReused``, ``AuthRefused``,
a redirect (``Transient``)
``Transient``                   ``max_attempts`` transient answers: the caller marks the
                                invoice ``unknown`` for the next run
``RateLimited``                 the server kept answering 429 beyond the 429 budget (below):
                                the caller leaves the invoice ``pending``; the run is incomplete
the last ``Transient`` or       ``should_stop()`` turned true between tries: no further try
``RateLimited``                 starts (a signal or ``--deadline``)
==============================  ===============================================================

Every try first waits for ``limiter.acquire()``: a retry is a request like any other.

**5xx, timeouts, connection errors** (``Transient``) are retried with jittered exponential
backoff, up to ``max_attempts`` transient answers in this call. Wait after the n-th:
uniform in ``[b/2, b]`` with ``b = min(backoff_max, backoff_initial * 2**(n-1))`` ("equal
jitter": it grows, yet clients that failed together do not retry together).

**429** (``RateLimited``) does not use up ``max_attempts``; it has a budget of its own.
Each 429 holds the *whole run* (``limiter.hold_until``) for ``Retry-After`` seconds, or,
without the header, for the same jittered backoff counted over 429s (1 s up to 60 s,
goroute-api.md section C), always capped at ``max_wait``. The request is then tried again,
as soon as the limiter lets it. It gives up, returning the 429, when the run's hold would
end more than ``max_wait`` seconds after this request's first 429, or at its
``max_rate_limited``-th 429 (a server saying ``Retry-After: 0`` forever must not make a
loop); and no hold reaches past ``max_wait`` after the first 429 of the run's unbroken
streak of them (``limiter.rate_limited_since``, cleared by any answer). So a single
Retry-After longer than ``max_wait`` is honoured up to ``max_wait``, then tried once more, as
design.md asks ("capped by --max-wait; then carry on"), and a run whose every request meets
429s waits ``max_wait`` in all, not once a request.

Waits: the limiter accounts the run's pacing and Retry-After waits (wall time); the
transient backoff sleeps happen here, per request, through the injected ``sleep``.
``on_wait`` (``limiter.Wait``) hears each transient backoff before it is slept; the 429
holds are the limiter's to tell (its own ``on_wait``).
Exceptions from ``attempt()`` are not retried: they propagate (a network failure should
already be a ``Transient``; anything else is a bug or a cancellation).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from invoicectl.goroute.outcomes import Outcome, RateLimited, Transient, redirected

# ``RetryPolicy`` is part of every run's options; tenacity and the limiter (asyncio) are
# imported where a request is retried, so a run that sends nothing loads neither.
if TYPE_CHECKING:
    import tenacity

    from invoicectl.goroute.limiter import OnWait, RateLimiter


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5  # transient answers per request per run (--max-attempts)
    max_wait: float = 300.0  # seconds of 429 waiting per request (--max-wait)
    backoff_initial: float = 1.0
    backoff_max: float = 60.0
    max_rate_limited: int = 20  # 429 answers per request, whatever their Retry-After

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.max_rate_limited < 1:
            raise ValueError("max_attempts and max_rate_limited must be at least 1")
        if self.max_wait < 0 or self.backoff_initial <= 0 or self.backoff_max < 0:
            raise ValueError("waits must not be negative, and backoff_initial must be positive")


def backoff(n: int, *, initial: float, maximum: float, rng: random.Random) -> float:
    """Seconds to wait after the n-th failure (n >= 1): uniform in [b/2, b], b doubling."""
    # min() before the power would overflow: 2**n grows past any float after ~1000 failures.
    ceiling = min(maximum, initial * 2.0 ** min(n - 1, 64))
    return rng.uniform(ceiling / 2, ceiling)


async def call_with_retry(
    attempt: Callable[[], Awaitable[Outcome]],
    *,
    policy: RetryPolicy,
    limiter: RateLimiter,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], Awaitable[None]] | None = None,
    rng: random.Random | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    on_wait: OnWait | None = None,
) -> Outcome | None:
    """Try ``attempt`` until it settles, by the rules in the module doc.

    ``clock`` and ``sleep`` default to the limiter's, and ``clock`` must be the limiter's
    clock (holds are clock times). ``rng`` jitters the backoff (default: a fresh
    ``random.Random()``).
    """
    tries = _Tries(
        attempt,
        policy=policy,
        limiter=limiter,
        clock=clock or limiter.clock,
        rng=rng or random.Random(),
        should_stop=should_stop,
    )
    # The first try outside tenacity: nearly every call settles there, and tenacity's own
    # bookkeeping (a retry state, its action chain, a coroutine check of every callback) cost
    # a send about as much as two of the journal's reads. A try worth another one goes on in
    # tenacity exactly as if tenacity had made it (``_Tries.replay_first``).
    first = await tries.one()
    if not _worth_another_try(first):
        return first
    import tenacity

    retrying = tenacity.AsyncRetrying(
        retry=tenacity.retry_if_result(_worth_another_try),
        stop=tries.give_up,
        wait=tries.wait,
        sleep=sleep or limiter.sleep,
        retry_error_callback=tries.last_outcome,
        before_sleep=None if on_wait is None else _telling(on_wait),
    )
    result: Outcome | None = await retrying(tries.replay_first)
    return result


def _telling(on_wait: OnWait) -> Callable[[tenacity.RetryCallState], None]:
    """tenacity's ``before_sleep``: a backoff about to be slept, told as a ``Wait``."""

    from invoicectl.goroute.limiter import Wait

    def before_sleep(state: tenacity.RetryCallState) -> None:
        seconds = state.next_action.sleep if state.next_action else 0.0
        if seconds > 0:  # after a 429 the wait is the limiter's hold, which it tells itself
            on_wait(Wait("backoff", seconds))

    return before_sleep


def _worth_another_try(outcome: Outcome | None) -> bool:
    return isinstance(outcome, Transient | RateLimited) and not redirected(outcome)


class _Tries:
    """What one ``call_with_retry`` has seen; tenacity asks it when to stop and how long to wait."""

    def __init__(
        self,
        attempt: Callable[[], Awaitable[Outcome]],
        *,
        policy: RetryPolicy,
        limiter: RateLimiter,
        clock: Callable[[], float],
        rng: random.Random,
        should_stop: Callable[[], bool],
    ) -> None:
        self._attempt = attempt
        self._policy = policy
        self._limiter = limiter
        self._clock = clock
        self._rng = rng
        self._should_stop = should_stop
        self.last: Outcome | None = None
        self.transient = 0
        self.rate_limited = 0
        self.first_rate_limited_at = 0.0
        self.resume_at = 0.0
        self._first_replayed = False

    async def one(self) -> Outcome | None:
        """One try, unless told to stop; then the last outcome stands (None: never tried)."""
        if self._should_stop():
            return self.last
        await self._limiter.acquire()
        # A Retry-After hold can outlast a deadline: check again before sending.
        if self._should_stop():
            return self.last
        outcome = await self._attempt()
        self.last = outcome
        if isinstance(outcome, Transient):
            self.transient += 1
        elif isinstance(outcome, RateLimited):
            self._hold_run(outcome)
        else:  # an answer: the run's streak of 429s, if any, is over
            self._limiter.rate_limited_since = None
        return outcome

    async def replay_first(self) -> Outcome | None:
        """tenacity's first call answers with the try already made (``one``'s outcome and
        counts stand as it left them); every later call is ``one``."""
        if not self._first_replayed:
            self._first_replayed = True
            return self.last
        return await self.one()

    def _hold_run(self, outcome: RateLimited) -> None:
        now = self._clock()
        self.rate_limited += 1
        if self.rate_limited == 1:
            self.first_rate_limited_at = now
        if outcome.retry_after is not None:
            wait = outcome.retry_after
        else:
            wait = self._backoff(self.rate_limited)
        # Even when this request gives up, the hold stands: the server asked the whole
        # client (one API key) to slow down, and the other requests of the run must listen.
        # But no hold reaches past --max-wait from the first 429 of the run's streak: each
        # request in turn extending it by --max-wait held a run of 13 for 13 times as long.
        wish = now + min(max(0.0, wait), self._policy.max_wait)
        limiter = self._limiter
        if limiter.rate_limited_since is None:
            limiter.rate_limited_since = now
        limiter.hold_until(min(wish, limiter.rate_limited_since + self._policy.max_wait))
        self.resume_at = max(wish, limiter.held_until)

    def give_up(self, state: tenacity.RetryCallState) -> bool:
        if self._should_stop():
            return True
        if isinstance(self.last, Transient):
            return self.transient >= self._policy.max_attempts
        waited = self.resume_at - self.first_rate_limited_at
        return self.rate_limited >= self._policy.max_rate_limited or waited > self._policy.max_wait

    def wait(self, state: tenacity.RetryCallState) -> float:
        # After a 429 the limiter's hold is the wait, shared by the whole run.
        if isinstance(self.last, Transient):
            return self._backoff(self.transient)
        return 0.0

    def last_outcome(self, state: tenacity.RetryCallState) -> Outcome | None:
        return self.last

    def _backoff(self, n: int) -> float:
        return backoff(
            n, initial=self._policy.backoff_initial, maximum=self._policy.backoff_max, rng=self._rng
        )

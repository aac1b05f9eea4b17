"""RateLimiter on virtual time: exact start slots, the sliding window, holds, FIFO, throughput."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from virtual_time import run_virtual

from invoicectl.goroute.limiter import RateLimiter


def make_limiter(
    rate_per_minute: int,
    *,
    margin: float = 1.0,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> RateLimiter:
    """A limiter on the running loop's (virtual) clock."""
    clock = asyncio.get_running_loop().time
    return RateLimiter(rate_per_minute, clock=clock, sleep=sleep, margin=margin)


def exact_limiter(sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> RateLimiter:
    """16 a minute + 4 s margin: one start every 4.0 s, exact in binary floating point."""
    return make_limiter(16, margin=4.0, sleep=sleep)


async def start_times(limiter: RateLimiter, callers: int) -> list[float]:
    """``callers`` concurrent acquires at once; the clock time each one started."""
    starts: list[float] = []

    async def one() -> None:
        await limiter.acquire()
        starts.append(limiter.clock())

    await asyncio.gather(*(one() for _ in range(callers)))
    return starts


def max_in_any_window(times: list[float], window: float) -> int:
    """The most of ``times`` that fall in one half-open interval [a, a + window)."""
    ordered = sorted(times)
    most, first = 0, 0
    for last, t in enumerate(ordered):
        while ordered[first] <= t - window:
            first += 1
        most = max(most, last - first + 1)
    return most


def test_starts_are_evenly_paced_from_the_first_request() -> None:
    async def main() -> list[float]:
        return await start_times(exact_limiter(), 6)

    assert run_virtual(main) == [0.0, 4.0, 8.0, 12.0, 16.0, 20.0]


def test_a_caller_after_a_quiet_spell_starts_at_once() -> None:
    async def main() -> list[float]:
        limiter = exact_limiter()
        first = await start_times(limiter, 1)
        await asyncio.sleep(30)
        return first + await start_times(limiter, 2)

    assert run_virtual(main) == [0.0, 30.0, 34.0]


def test_interval_and_sustained_rate_follow_from_the_margin() -> None:
    limiter = RateLimiter(500)
    assert limiter.interval == pytest.approx(61 / 500)
    assert limiter.requests_per_minute == pytest.approx(491.8, abs=0.01)
    assert RateLimiter(100).requests_per_minute == pytest.approx(98.36, abs=0.01)


def oversleeping(by: float) -> Callable[[float], Awaitable[None]]:
    """A sleep that wakes ``by`` seconds late, like an event loop busy elsewhere."""

    async def sleep(seconds: float) -> None:
        await asyncio.sleep(seconds + by)

    return sleep


def test_late_wake_ups_cost_no_throughput() -> None:
    async def main() -> list[float]:
        limiter = exact_limiter(sleep=oversleeping(0.5))
        return await start_times(limiter, 4)

    # Each start is 0.5 s late; the slots stay at 4, 8, 12.
    assert run_virtual(main) == [0.0, 4.5, 8.5, 12.5]


def test_a_stall_restarts_the_pacing_instead_of_catching_up() -> None:
    async def main() -> list[float]:
        limiter = exact_limiter(sleep=oversleeping(3.0))
        return await start_times(limiter, 3)

    # 3 s late is more than half the 4 s interval: the next slot counts from the late start.
    assert run_virtual(main) == [0.0, 7.0, 14.0]


def test_callers_start_in_the_order_they_asked() -> None:
    async def main() -> list[int]:
        limiter = exact_limiter()
        order: list[int] = []

        async def caller(n: int) -> None:
            await asyncio.sleep(n * 0.001)  # arrive in the order 0, 1, 2, ...
            await limiter.acquire()
            order.append(n)

        callers = list(range(40))
        random.Random(7).shuffle(callers)  # created out of order, arriving in order
        await asyncio.gather(*(caller(n) for n in callers))
        return order

    assert run_virtual(main) == list(range(40))


def test_a_hold_stops_everyone_then_pacing_resumes_without_a_burst() -> None:
    async def main() -> tuple[list[float], RateLimiter]:
        limiter = exact_limiter()
        limiter.hold_until(100.0)
        return await start_times(limiter, 4), limiter

    starts, limiter = run_virtual(main)
    assert starts == [100.0, 104.0, 108.0, 112.0]
    assert limiter.waited_for_retry_after == 100.0
    # Wall time, not caller-seconds: the gate waited 4 s three times, one caller at a time.
    assert limiter.waited_for_rate == 12.0


def test_a_hold_reaches_a_caller_already_waiting_for_its_slot() -> None:
    async def main() -> list[float]:
        limiter = exact_limiter()

        async def hold_at_one_second() -> None:
            await asyncio.sleep(1.0)
            limiter.hold_until(30.0)

        starts, _ = await asyncio.gather(start_times(limiter, 3), hold_at_one_second())
        return starts

    assert run_virtual(main) == [0.0, 30.0, 34.0]


def test_a_hold_is_never_shortened() -> None:
    async def main() -> list[float]:
        limiter = exact_limiter()
        limiter.hold_until(50.0)
        limiter.hold_until(20.0)
        limiter.hold_for(10.0)
        assert limiter.held_until == 50.0
        return await start_times(limiter, 1)

    assert run_virtual(main) == [50.0]


def test_a_primed_previous_run_counts_against_the_window() -> None:
    async def main() -> list[float]:
        # 4 a minute + 4 s margin: 16 s apart; the previous run started 4 in the last 40 s.
        limiter = make_limiter(4, margin=4.0)
        limiter.prime([-10.0, -40.0, -30.0, -20.0])
        return await start_times(limiter, 2)

    # The 5th start in the window waits for the oldest (-40 s) to be 64 s old.
    assert run_virtual(main) == [24.0, 40.0]


def test_a_cancelled_waiter_does_not_stall_the_queue() -> None:
    async def main() -> list[float]:
        limiter = exact_limiter()
        await limiter.acquire()
        doomed = asyncio.create_task(limiter.acquire())
        queued = asyncio.create_task(start_times(limiter, 1))
        await asyncio.sleep(1.0)
        doomed.cancel()
        return await queued

    assert run_virtual(main) == [4.0]


@pytest.mark.parametrize("rate", [0, -1])
def test_a_rate_below_one_is_refused(rate: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        RateLimiter(rate)


@pytest.mark.parametrize("rate", [100, 500])
def test_saturated_throughput_is_at_least_97_percent_of_the_limit(rate: int) -> None:
    async def main() -> list[float]:
        limiter = make_limiter(rate)
        return await start_times(limiter, rate * 10)

    starts = run_virtual(main)
    assert max_in_any_window(starts, 60.0) <= rate
    # Sustained: every minute-long stretch of the run, not just the average. The emptiest
    # minutes begin just after a start.
    emptiest = min(
        sum(1 for t in starts if a < t <= a + 60.0) for a in starts if a + 60.0 <= starts[-1]
    )
    assert emptiest >= 0.97 * rate
    assert emptiest == {100: 98, 500: 491}[rate]  # 60 / (61 / rate), rounded down
    assert (len(starts) - 1) / (starts[-1] - starts[0]) * 60 == pytest.approx(rate * 60 / 61)


def test_thousands_of_starts_with_holds_never_exceed_the_window() -> None:
    rng = random.Random(2026)

    async def main() -> tuple[list[float], list[tuple[float, float]]]:
        limiter = make_limiter(500)
        starts: list[float] = []
        holds: list[tuple[float, float]] = []

        async def worker() -> None:
            for _ in range(100):
                await limiter.acquire()
                starts.append(limiter.clock())
                await asyncio.sleep(rng.uniform(0.05, 2.0))  # the request itself
                if rng.random() < 0.002:
                    now = limiter.clock()
                    holds.append((now, now + rng.uniform(0, 90)))
                    limiter.hold_until(holds[-1][1])

        await asyncio.gather(*(worker() for _ in range(50)))
        return starts, holds

    starts, holds = run_virtual(main)
    assert len(starts) == 5000 and holds
    assert max_in_any_window(starts, 60.0) <= 500
    assert all(not (said < t < until - 1e-6) for said, until in holds for t in starts)


@settings(max_examples=60, deadline=None)
@given(
    rate=st.integers(min_value=1, max_value=120),
    margin=st.floats(min_value=0.0, max_value=3.0),
    workers=st.integers(min_value=1, max_value=30),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_the_server_never_sees_more_than_the_limit(
    rate: int, margin: float, workers: int, seed: int
) -> None:
    rng = random.Random(seed)
    acquires = rate * 3 + 7

    async def main() -> tuple[list[float], list[tuple[float, float]], RateLimiter]:
        limiter = make_limiter(rate, margin=margin)
        starts: list[float] = []
        holds: list[tuple[float, float]] = []
        remaining = [acquires]

        async def worker() -> None:
            while remaining[0] > 0:
                remaining[0] -= 1
                await asyncio.sleep(rng.choice([0.0, rng.uniform(0, 5)]))  # think time
                await limiter.acquire()
                starts.append(limiter.clock())
                if rng.random() < 0.05:
                    now = limiter.clock()
                    holds.append((now, now + rng.uniform(0, 120)))
                    limiter.hold_until(holds[-1][1])

        await asyncio.gather(*(worker() for _ in range(workers)))
        return starts, holds, limiter

    starts, holds, limiter = run_virtual(main)
    assert len(starts) == acquires == limiter.started
    # As sent: starts are window + margin apart per `rate` of them.
    assert max_in_any_window(starts, 60.0 + margin - 1e-6) <= rate
    # As the server counts them: arrivals trail starts by a latency that varies by < margin.
    latency = [0.2 + rng.uniform(0, margin * 0.999) for _ in starts]
    arrivals = [t + d for t, d in zip(starts, latency, strict=True)]
    assert max_in_any_window(arrivals, 60.0 - 1e-6) <= rate
    # Nobody started inside a hold, and nobody two at once (even pacing).
    assert all(not (said < t < until - 1e-6) for said, until in holds for t in starts)
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert min(gaps, default=limiter.interval) >= limiter.interval - 1e-6


def test_a_wait_cut_short_is_counted_for_what_it_lasted() -> None:
    """helper-68: a Retry-After wait ended by the run's deadline or a stop signal counted 0 s,
    so the metrics of a run that spent its time waiting out a 429 storm said it never waited."""

    async def main() -> RateLimiter:
        limiter = exact_limiter()
        limiter.hold_until(100.0)
        waiting = asyncio.ensure_future(limiter.acquire())
        await asyncio.sleep(30.0)
        waiting.cancel()  # the deadline
        with pytest.raises(asyncio.CancelledError):
            await waiting
        return limiter

    limiter = run_virtual(main)
    assert limiter.waited_for_retry_after == 30.0

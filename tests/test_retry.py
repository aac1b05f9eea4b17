"""call_with_retry on virtual time: what is retried, how long it waits, when it gives up."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterable

import pytest
from virtual_time import RecordingSleep, run_virtual

from invoicectl.goroute.limiter import RateLimiter
from invoicectl.goroute.outcomes import (
    Accepted,
    AuthRefused,
    KeyReused,
    Outcome,
    RateLimited,
    Rejected,
    Transient,
)
from invoicectl.goroute.retry import RetryPolicy, backoff, call_with_retry

ACCEPTED = Accepted(http_status=202, transaction_id="txn_1")
SERVER_ERROR = Transient(http_status=503, reason="service unavailable")


class Server:
    """An ``attempt()`` that answers from a script and notes when each try went out."""

    def __init__(self, answers: Iterable[Outcome], clock: Callable[[], float]) -> None:
        self._answers = iter(answers)
        self._clock = clock
        self.tried_at: list[float] = []

    async def __call__(self) -> Outcome:
        self.tried_at.append(self._clock())
        return next(self._answers)


def fast_limiter() -> RateLimiter:
    """6000 a minute, no margin: a 10 ms interval, out of the way of the waits under test."""
    return RateLimiter(6000, clock=asyncio.get_running_loop().time, margin=0.0)


def retry(
    answers: Iterable[Outcome],
    *,
    policy: RetryPolicy | None = None,
    limiter: Callable[[], RateLimiter] = fast_limiter,
    should_stop: Callable[[], bool] = lambda: False,
    seed: int = 1,
) -> tuple[Outcome | None, Server, RecordingSleep, RateLimiter]:
    """Run one call_with_retry against a scripted server on virtual time."""
    sleep = RecordingSleep()

    async def main() -> tuple[Outcome | None, Server, RateLimiter]:
        the_limiter = limiter()
        server = Server(answers, the_limiter.clock)
        outcome = await call_with_retry(
            server,
            policy=policy or RetryPolicy(),
            limiter=the_limiter,
            sleep=sleep,
            rng=random.Random(seed),
            should_stop=should_stop,
        )
        return outcome, server, the_limiter

    outcome, server, the_limiter = run_virtual(main)
    return outcome, server, sleep, the_limiter


def test_an_accepted_send_is_one_request() -> None:
    outcome, server, sleep, limiter = retry([ACCEPTED])
    assert outcome is ACCEPTED
    assert server.tried_at == [0.0]
    assert limiter.started == 1 and sleep.waits == []


@pytest.mark.parametrize(
    "answer",
    [
        Rejected(http_status=400, code="VAL_001"),
        Rejected(http_status=404, code="NOT_FOUND"),
        Rejected(http_status=409),
        KeyReused(http_status=422, existing_transaction_id="txn_9"),
        AuthRefused(http_status=401, code="INVALID_API_KEY"),
        AuthRefused(http_status=403),
    ],
    ids=["400", "404", "409", "422", "401", "403"],
)
def test_permanent_answers_are_never_retried(answer: Outcome) -> None:
    outcome, server, _, _ = retry([answer, ACCEPTED])
    assert outcome is answer
    assert len(server.tried_at) == 1


def test_transient_errors_are_retried_with_growing_jittered_waits() -> None:
    outcome, server, sleep, limiter = retry([SERVER_ERROR] * 4 + [ACCEPTED], seed=5)
    assert outcome is ACCEPTED
    assert len(server.tried_at) == 5 == limiter.started
    rng = random.Random(5)
    assert sleep.waits == [rng.uniform(b / 2, b) for b in (1.0, 2.0, 4.0, 8.0)]
    assert all(b / 2 <= w < b for w, b in zip(sleep.waits, (1, 2, 4, 8), strict=True))
    # Each try goes out as its wait ends (the limiter's 10 ms slots are long free).
    gaps = [b - a for a, b in zip(server.tried_at, server.tried_at[1:], strict=False)]
    assert gaps == pytest.approx(sleep.waits)


def test_transient_errors_give_up_after_max_attempts_with_the_last_answer() -> None:
    answers = [Transient(http_status=500 + n, reason=f"try {n}") for n in range(10)]
    outcome, server, sleep, _ = retry(answers, policy=RetryPolicy(max_attempts=3))
    assert outcome is answers[2]
    assert len(server.tried_at) == 3
    assert len(sleep.waits) == 2


def test_backoff_is_capped() -> None:
    rng = random.Random(3)
    waits = [backoff(n, initial=1.0, maximum=60.0, rng=rng) for n in range(1, 2000)]
    assert all(30.0 <= w <= 60.0 for w in waits[6:])
    assert len(set(waits)) == len(waits)  # jittered: no two clients in lockstep


def test_each_try_waits_for_its_rate_limit_slot() -> None:
    def slow_limiter() -> RateLimiter:
        # 16 a minute + 4 s margin: one start every 4 s, longer than the first backoffs.
        clock = asyncio.get_running_loop().time
        return RateLimiter(16, clock=clock, window=60.0, margin=4.0)

    _, server, _, limiter = retry([SERVER_ERROR] * 2 + [ACCEPTED], limiter=slow_limiter)
    assert server.tried_at == [0.0, 4.0, 8.0]
    assert limiter.waited_for_rate > 0


def test_a_429_holds_the_whole_run_for_its_retry_after() -> None:
    async def main() -> tuple[Outcome | None, list[float], list[float]]:
        limiter = fast_limiter()
        server = Server([RateLimited(http_status=429, retry_after=30.0), ACCEPTED], limiter.clock)
        other_started: list[float] = []

        async def another_invoice() -> None:
            await asyncio.sleep(1.0)
            await limiter.acquire()
            other_started.append(limiter.clock())

        outcome, _ = await asyncio.gather(
            call_with_retry(server, policy=RetryPolicy(), limiter=limiter, rng=random.Random(1)),
            another_invoice(),
        )
        return outcome, server.tried_at, other_started

    outcome, tried_at, other_started = run_virtual(main)
    assert outcome is ACCEPTED
    # The retry takes the first slot after the hold, the other invoice the next one.
    assert tried_at == [0.0, 30.0]
    assert other_started == [pytest.approx(30.01)]


def test_429s_do_not_use_up_the_transient_attempts() -> None:
    limited = RateLimited(http_status=429, retry_after=2.0)
    answers = [limited, SERVER_ERROR, limited, limited, ACCEPTED]
    outcome, server, _, limiter = retry(answers, policy=RetryPolicy(max_attempts=2))
    assert outcome is ACCEPTED
    assert len(server.tried_at) == 5
    assert limiter.waited_for_retry_after == pytest.approx(6.0, abs=0.05)


def test_a_retry_after_longer_than_max_wait_is_capped_then_tried_once_more() -> None:
    limited = RateLimited(http_status=429, retry_after=3600.0)
    outcome, server, _, limiter = retry([limited, limited], policy=RetryPolicy(max_wait=300.0))
    assert outcome is limited
    assert server.tried_at == [0.0, 300.0]
    # The give-up holds the run no further: --max-wait from the run's first 429 is spent.
    assert limiter.held_until == 300.0


def test_requests_meeting_429s_in_turn_wait_max_wait_in_all_not_each() -> None:
    """Each request's first 429 held the whole run --max-wait again: 13 invoices in flight
    against a server asking for a wait past 2100 held the run 13 times --max-wait (a review
    measured 102 s for --max-wait 10, 900 s for three at the default 300)."""
    limited = RateLimited(http_status=429, retry_after=3600.0)

    async def main() -> tuple[list[Outcome | None], float]:
        limiter = fast_limiter()
        clock = limiter.clock

        async def one_invoice() -> Outcome | None:
            server = Server([limited] * 10, clock)
            policy = RetryPolicy(max_wait=10.0)
            return await call_with_retry(
                server, policy=policy, limiter=limiter, rng=random.Random(1)
            )

        outcomes = await asyncio.gather(*(one_invoice() for _ in range(13)))
        return list(outcomes), clock()

    outcomes, ended = run_virtual(main)
    assert outcomes == [limited] * 13
    assert ended < 10.0 + 1.0  # --max-wait once, and the slots of one more try each


def test_429s_give_up_when_the_wait_would_pass_max_wait() -> None:
    limited = RateLimited(http_status=429, retry_after=100.0)
    outcome, server, _, _ = retry([limited] * 5 + [ACCEPTED], policy=RetryPolicy(max_wait=250.0))
    # Tries at 0, 100, 200; the third 429 would hold until 300, past 0 + 250.
    assert outcome is limited
    assert server.tried_at == [0.0, 100.0, 200.0]


def test_max_wait_zero_retries_a_429_once_without_waiting() -> None:
    limited = RateLimited(http_status=429, retry_after=5.0)
    answers = [limited, limited, ACCEPTED]
    outcome, server, _, limiter = retry(answers, policy=RetryPolicy(max_wait=0.0))
    assert outcome is limited
    assert server.tried_at == [0.0, 0.01]  # capped at 0 s, tried once more in the next slot
    assert limiter.waited_for_retry_after == 0.0


def test_a_429_without_retry_after_backs_off_with_jitter() -> None:
    limited = RateLimited(http_status=429)
    outcome, server, sleep, _ = retry([limited] * 3 + [ACCEPTED], seed=11)
    assert outcome is ACCEPTED
    rng = random.Random(11)
    expected = [rng.uniform(b / 2, b) for b in (1.0, 2.0, 4.0)]
    gaps = [b - a for a, b in zip(server.tried_at, server.tried_at[1:], strict=False)]
    assert gaps == pytest.approx(expected)
    assert set(sleep.waits) <= {0.0}  # the limiter's hold did the waiting, not a private sleep


def test_a_server_answering_retry_after_zero_forever_is_bounded() -> None:
    limited = RateLimited(http_status=429, retry_after=0.0)
    outcome, server, _, _ = retry([limited] * 100, policy=RetryPolicy(max_rate_limited=20))
    assert outcome is limited
    assert len(server.tried_at) == 20


def test_a_stop_before_the_first_try_sends_nothing() -> None:
    outcome, server, _, limiter = retry([ACCEPTED], should_stop=lambda: True)
    assert outcome is None
    assert server.tried_at == [] and limiter.started == 0


def test_a_stop_during_the_backoff_returns_the_last_answer() -> None:
    stop = [False]

    def should_stop() -> bool:
        return stop[0]

    class StopAfterFirst(Server):
        async def __call__(self) -> Outcome:
            stop[0] = True  # a SIGTERM arrives while this request is in flight
            return await super().__call__()

    async def main() -> tuple[Outcome | None, list[float]]:
        limiter = fast_limiter()
        server = StopAfterFirst([SERVER_ERROR, ACCEPTED], limiter.clock)
        outcome = await call_with_retry(
            server, policy=RetryPolicy(), limiter=limiter, should_stop=should_stop
        )
        return outcome, server.tried_at

    outcome, tried_at = run_virtual(main)
    assert outcome is SERVER_ERROR
    assert tried_at == [0.0]


def test_a_deadline_passing_during_a_hold_stops_before_the_retry() -> None:
    limited = RateLimited(http_status=429, retry_after=120.0)

    async def main() -> tuple[Outcome | None, list[float]]:
        limiter = fast_limiter()
        deadline = 60.0
        server = Server([limited, ACCEPTED], limiter.clock)
        outcome = await call_with_retry(
            server,
            policy=RetryPolicy(),
            limiter=limiter,
            should_stop=lambda: limiter.clock() >= deadline,
        )
        return outcome, server.tried_at

    outcome, tried_at = run_virtual(main)
    assert outcome is limited  # tried, rate limited, not tried again: the invoice stays pending
    assert tried_at == [0.0]


def test_an_exception_from_the_attempt_is_not_retried() -> None:
    tries = []

    async def broken() -> Outcome:
        tries.append(1)
        raise RuntimeError("bug in the client")

    async def main() -> None:
        await call_with_retry(broken, policy=RetryPolicy(), limiter=fast_limiter())

    with pytest.raises(RuntimeError, match="bug in the client"):
        run_virtual(main)
    assert tries == [1]


@pytest.mark.parametrize(
    "policy",
    [
        lambda: RetryPolicy(max_attempts=0),
        lambda: RetryPolicy(max_rate_limited=0),
        lambda: RetryPolicy(max_wait=-1.0),
        lambda: RetryPolicy(backoff_initial=0.0),
    ],
    ids=["max_attempts", "max_rate_limited", "max_wait", "backoff_initial"],
)
def test_a_policy_that_cannot_work_is_refused(policy: Callable[[], RetryPolicy]) -> None:
    with pytest.raises(ValueError):
        policy()


@pytest.mark.parametrize("answer", [ACCEPTED, Rejected(http_status=422, code="X")])
def test_a_call_settled_at_its_first_try_builds_no_retrying(
    answer: Outcome, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first try goes out before tenacity is built: what a send costs per invoice."""
    import tenacity

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("tenacity was built for a call that needed no retry")

    monkeypatch.setattr(tenacity, "AsyncRetrying", refused)
    outcome, server, sleep, _limiter = retry([answer])
    assert outcome is answer and len(server.tried_at) == 1 and sleep.waits == []


def test_a_retried_first_try_counts_as_tenacitys_first() -> None:
    """Two 503s then a 202 with max_attempts 3: the first try made outside tenacity is its
    first attempt, so the same three requests go out after the same two backoffs."""
    outcome, server, sleep, _limiter = retry(
        [SERVER_ERROR, SERVER_ERROR, ACCEPTED], policy=RetryPolicy(max_attempts=3)
    )
    assert outcome is ACCEPTED and len(server.tried_at) == 3
    assert len(sleep.waits) == 2 and 0.5 <= sleep.waits[0] <= 1.0 and 1.0 <= sleep.waits[1] <= 2.0
    outcome, server, sleep, _limiter = retry(
        [SERVER_ERROR, SERVER_ERROR, ACCEPTED], policy=RetryPolicy(max_attempts=2)
    )
    assert outcome is SERVER_ERROR and len(server.tried_at) == 2 and len(sleep.waits) == 1

"""Advisory checks (the receiver lookup, ``--validate``'s validation): asked once, briefly, and
not at all once GoRoute stops answering them.

A check only advises: when it fails, the invoice goes out as it would have without it. So a
check must never hold a run the way a send may. Each gets one try (a 429 still holds the run,
as any request's does) within ``CHECK_SECONDS``, plus a second for every 256 KB it carries;
and once ``BREAK_AFTER`` checks in a row got no answer (a timeout, no connection, a 5xx), the
run asks no more of that kind: the rest go unchecked, as after a failed check. A hanging
lookup once kept every send of a run waiting behind five tries of a minute each.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace

from invoicectl.goroute.outcomes import Outcome, Transient, WrongEndpoint, not_taken, redirected
from invoicectl.goroute.retry import RetryPolicy

# Seconds one check may take, its answer included; far more than a working API needs.
CHECK_SECONDS = 5.0
# Checks in a row without an answer before a run asks no more of them.
BREAK_AFTER = 3
# A check carrying a document gets a second more for every this many bytes (a slow uplink).
_BYTES_PER_SECOND = 256 * 1024


def one_try(policy: RetryPolicy) -> RetryPolicy:
    """The run's policy, with no second try after a 5xx or a timeout."""
    return replace(policy, max_attempts=1)


async def within(asking: Awaitable[Outcome], what: str, carried: int = 0) -> Outcome:
    """What ``asking`` (one request) comes to, or a ``Transient`` once the check's time is up
    (the connection is dropped)."""
    seconds = CHECK_SECONDS + carried / _BYTES_PER_SECOND
    try:
        async with asyncio.timeout(seconds):
            return await asking
    except TimeoutError:
        return Transient(
            reason=f"no answer within {seconds:g} s, the limit for one {what}", duration=seconds
        )


def unanswered(outcome: Outcome) -> bool:
    """Whether GoRoute gave no answer: a timeout, no connection, a 5xx, a 408."""
    if not isinstance(outcome, Transient):
        return False
    status = outcome.http_status or 500
    return not_taken(status)


class Breaker:
    """Counts one run's checks of one kind that got no answer, in a row; ``open`` once
    ``BREAK_AFTER`` did, and for the rest of the run. A check answered by a redirect, or by a
    page that is not the API's, is no failed check: every request would meet it, the base URL
    is wrong (``wrong_url``), and ``on_wrong_url`` stops the run, its invoice unsent
    (helper-91: it went out unchecked, into the redirect)."""

    def __init__(self, what: str, on_wrong_url: Callable[[str], None] = lambda why: None) -> None:
        self.what = what  # "lookups", "validations"
        self.open = False
        self.wrong_url = False
        self.on_wrong_url = on_wrong_url
        self._in_a_row = 0

    def note(self, outcome: Outcome) -> None:
        if isinstance(outcome, WrongEndpoint) or redirected(outcome):
            self.wrong_url = True
            self.on_wrong_url(
                outcome.message if isinstance(outcome, WrongEndpoint) else outcome.reason
            )
            return
        self._in_a_row = self._in_a_row + 1 if unanswered(outcome) else 0
        self.open = self.open or self._in_a_row >= BREAK_AFTER

    def not_asked(self) -> Transient:
        """The outcome of a check the open breaker saved: nothing was sent."""
        return Transient(
            reason=f"not asked: {BREAK_AFTER} {self.what} in a row got no answer in this run",
            sent=False,
        )

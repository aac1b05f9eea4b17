"""The bar ``invoicectl send`` draws on a terminal, and what it says while the run waits.

One line: what the run is doing ("sending", "waiting 30 s (Retry-After)", "waiting on the
rate limit"), the bar, done/total, accepted / retrying / failed, the rate, the time so far and
the ETA. Every column is computed when rich redraws (ten times a second), not when an invoice
finishes, so during a long wait the countdown runs, the rate falls and the ETA grows instead
of freezing on the last invoice's figures.

The ETA comes from the rate limit: remaining invoices at the configured requests per minute,
or at the pace observed so far when that is slower (receiver checks, validations, retries),
plus what is left of a Retry-After hold. Not from the last few seconds, which after a burst
or a wait say nothing about the next hour.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TimeElapsedColumn,
)
from rich.text import Text

from invoicectl.goroute.limiter import Wait
from invoicectl.send.summary import SendSummary

# A pacing wait shorter than this is the run going at the limit, not waiting on it: the bar
# says "sending" (at 100/min every start waits 0.6 s for its slot).
RATE_WAIT_SHOWN = 1.0


class BarState:
    """What the bar's columns read: the run's summary, the wait in progress, the clock."""

    def __init__(
        self,
        summary: SendSummary,
        rate_per_minute: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.summary = summary
        self.rate_per_minute = max(1, rate_per_minute)
        self.clock = clock
        self.started = clock()
        self.wait: Wait | None = None
        self.wait_until = -math.inf

    def waiting(self, wait: Wait) -> None:
        until = self.clock() + wait.seconds
        if wait.cause == "backoff":  # one request's, not the run's: "retrying" counts it
            return
        if wait.cause == "rate" and wait.seconds < RATE_WAIT_SHOWN:
            return
        if self.wait is None or until >= self.wait_until or self.clock() >= self.wait_until:
            self.wait, self.wait_until = wait, until

    def status(self) -> str:
        left = self.wait_until - self.clock()
        if self.wait is None or left <= 0:
            return "sending"
        if self.wait.cause == "retry_after":
            return f"waiting {math.ceil(left)} s (Retry-After)"
        return "waiting on the rate limit"

    def counts(self) -> str:
        summary = self.summary
        accepted = sum(1 for result in summary.results if result.state == "accepted")
        text = f"accepted {accepted} · retrying {len(summary.retrying)} · failed {summary.failed}"
        if summary.unanswered:
            text += f" · unanswered {summary.unanswered}"
        return text

    def per_minute(self) -> float:
        minutes = max(self.clock() - self.started, 1e-9) / 60
        return len(self.summary.results) / minutes

    def eta(self) -> float:
        """Seconds left: the remaining invoices at the limit's pace, or the pace seen so far
        if slower, plus what is left of a Retry-After hold."""
        done = len(self.summary.results)
        remaining = max(0, self.summary.planned - done)
        now = self.clock()
        each = 60.0 / self.rate_per_minute
        if done:
            each = max(each, (now - self.started) / done)
        held = 0.0
        if self.wait is not None and self.wait.cause == "retry_after":
            held = max(0.0, self.wait_until - now)
        return remaining * each + held


class _Column(ProgressColumn):
    def __init__(self, render: Callable[[], str]) -> None:
        super().__init__()
        self._render = render

    def render(self, task: Task) -> Text:
        return Text(self._render())


def send_bar(console: Console, state: BarState) -> Progress:
    """The bar, not started; the caller adds its one task and starts it."""
    return Progress(
        _Column(state.status),
        BarColumn(),
        MofNCompleteColumn(),
        _Column(state.counts),
        _Column(lambda: f"{state.per_minute():.1f}/min"),
        TimeElapsedColumn(),
        _Column(lambda: f"ETA {_clock_time(state.eta())}"),
        console=console,
        transient=True,
    )


def _clock_time(seconds: float) -> str:
    whole = int(math.ceil(seconds))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"

"""The bar ``invoicectl send`` draws on a terminal, and what it says while the run waits.

Two lines, each fitting 80 columns: what the run is doing ("sending", "waiting 30 s
(Retry-After)", "waiting on the rate limit"), the bar, done/total, the rate and the ETA; below
it, accepted / retrying / failed (the summary at the end gives the time taken). Cut, not
wrapped, on a narrower terminal.

Every column is computed when rich redraws (ten times a second), not when an invoice
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
from collections.abc import Callable, Iterable
from typing import Any

from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
)
from rich.text import Text

from invoicectl.goroute.limiter import Wait
from invoicectl.render.waits import WaitShown
from invoicectl.send.summary import SendSummary


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
        self.shown = WaitShown(clock)

    def waiting(self, wait: Wait) -> None:
        self.shown.waiting(wait)  # a backoff is one request's: "retrying" counts it

    def status(self) -> str:
        return self.shown.status("sending")

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
        return remaining * each + self.shown.held_for()


class LiveColumn(ProgressColumn):
    """A column computed when rich redraws, from ``render()``."""

    def __init__(self, render: Callable[[], str]) -> None:
        super().__init__()
        self._render = render

    def render(self, task: Task) -> Text:
        # Cut rather than wrapped: a bar that wraps at 80 columns becomes three lines.
        return Text(self._render(), no_wrap=True, overflow="ellipsis")


class _WithCounts(Progress):
    """The bar's line, and the counts on a line of their own below it."""

    def __init__(self, *columns: ProgressColumn, below: Callable[[], str], **options: Any):
        self._below = below  # first: rich draws once while it is being built
        super().__init__(*columns, **options)

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        yield Text(f"  {self._below()}", no_wrap=True, overflow="ellipsis")


def send_bar(console: Console, state: BarState) -> Progress:
    """The bar, not started; the caller adds its one task and starts it."""
    return _WithCounts(
        LiveColumn(state.status),
        BarColumn(bar_width=16),
        MofNCompleteColumn(),
        LiveColumn(lambda: f"{state.per_minute():.0f}/min"),
        LiveColumn(lambda: f"ETA {_clock_time(state.eta())}"),
        below=state.counts,
        console=console,
        transient=True,
    )


def _clock_time(seconds: float) -> str:
    whole = int(math.ceil(seconds))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"

"""What ``invoicectl reconcile`` shows while it looks things up, before its report.

On a terminal (stderr): a bar of invoices checked out of those that need a lookup, the
requests made, and what the run waits for (a Retry-After hold, the rate limit). Anywhere else
(cron, a pipe): a plain line at most every ``every`` invoices or ``seconds`` seconds, whichever
comes first (and the last count, after earlier ones), and one when a long wait starts; a
reconcile of thousands of invoices writes a few dozen lines, not one per invoice, and one that
is over within seconds writes none (its report says the same).

Everything here goes to stderr (through the CLI's ``say``, which timestamps a log's lines):
stdout is the report's, which comes at the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from invoicectl.render.waits import WaitLines, WaitShown

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from invoicectl.goroute.limiter import Wait
    from invoicectl.reconcile.progress import LookupProgress

EVERY = 250  # invoices between plain lines, at most
SECONDS = 10.0  # seconds between plain lines, at most (while something happens)


class ReconcileProgress:
    def __init__(
        self,
        say: Callable[[str], None],
        *,
        console: Console | None = None,
        rate_per_minute: int = 100,
        every: int = EVERY,
        seconds: float = SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``console``: a terminal to draw the bar on; None: plain lines through ``say``."""
        self._say = say
        self._console = console
        self._every = max(1, every)
        self._seconds = seconds
        self._clock = clock
        self._shown = WaitShown(clock)
        self._lines = WaitLines(rate_per_minute, clock=clock)
        self._last: LookupProgress | None = None
        self._told_checked = 0
        self._told_requests = 0
        self._told_at = clock()
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def looked(self, progress: LookupProgress) -> None:
        """A request ended, or invoices were answered."""
        self._last = progress
        if self._console is not None:
            self._draw(progress)
            return
        now = self._clock()
        # The last count only after earlier ones: a small reconcile's report says it all.
        done = progress.checked >= progress.total and self._told_checked > 0
        due = progress.checked - self._told_checked >= self._every
        late = now - self._told_at >= self._seconds
        # Requests with no invoice newly checked (GETs confirming what the list showed, retries)
        # still say the run is alive once it has spoken: no silent minutes after "N of N".
        working = progress.requests != self._told_requests and self._told_checked > 0
        if (progress.checked != self._told_checked and (due or late or done)) or (working and late):
            self._tell(progress, now)

    def _tell(self, progress: LookupProgress, now: float) -> None:
        self._say(progress_line(progress))
        self._told_checked, self._told_requests, self._told_at = (
            progress.checked,
            progress.requests,
            now,
        )

    def waited(self, wait: Wait) -> None:
        if self._console is not None:
            self._shown.waiting(wait)
            return
        line = self._lines.line(wait)
        if line is not None:
            self._say(f"reconcile: {line}")

    def __enter__(self) -> ReconcileProgress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.finished()

    def finished(self) -> None:
        """The lookups are over: the bar goes (the report follows); a log that was told a count
        gets the final one, when requests were made since."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        last = self._last
        told = (self._told_checked, self._told_requests)
        untold = last is not None and (last.checked, last.requests) != told
        if self._console is None and self._told_checked > 0 and untold:
            assert last is not None
            self._tell(last, self._clock())

    def _draw(self, progress: LookupProgress) -> None:
        if self._progress is None:
            if not progress.total:
                return
            self._progress, self._task = _bar(self._console, self._shown, lambda: self._last)
        assert self._task is not None
        self._progress.update(self._task, completed=progress.checked, total=progress.total)


def progress_line(progress: LookupProgress) -> str:
    return (
        f"reconcile: checked {progress.checked:,} of {progress.total:,} invoices; "
        f"{progress.requests:,} requests"
    )


def _bar(
    console: Console | None,
    shown: WaitShown,
    last: Callable[[], LookupProgress | None],
) -> tuple[Progress, TaskID]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from invoicectl.render.send_bar import LiveColumn

    def requests() -> str:
        current = last()
        return f"{current.requests if current else 0:,} requests"

    progress = Progress(
        LiveColumn(lambda: shown.status("checking")),
        BarColumn(),
        MofNCompleteColumn(),
        LiveColumn(requests),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    progress.start()
    current = last()
    return progress, progress.add_task("reconcile", total=current.total if current else None)

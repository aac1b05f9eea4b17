"""How a send run stops: what asked it to, and cancelling what is left (design.md, "Stopping").

A stop takes no new work: workers waiting for a start slot, a backoff or a lookup are
cancelled at once (nothing of theirs is outstanding). A request in flight (from its
write-ahead row to its recorded answer) is different:

- after the **deadline** or a **first signal** (SIGINT, SIGTERM, SIGHUP) it gets
  ``STOP_GRACE`` seconds to answer, then it is abandoned, so that ``--deadline`` is a hard
  bound on the run whatever the server does (an answer trickling one byte every few seconds
  would otherwise hold the run, and its journal lock, for as long as it likes);
- a **second signal** abandons it at once;
- after refused credentials, an outage or a rate limit beyond ``--max-wait`` it finishes.

An abandoned request keeps its write-ahead row; its invoice is ``unknown`` and the next run
replays it under the same key with the same bytes while the key's window is open. Every
reason is kept, in order: a signal after the deadline still makes the run exit 130.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from invoicectl.defaults import STOP_GRACE

if TYPE_CHECKING:  # asyncio is imported where it runs: a send's summary needs none of it
    import asyncio

SIGNAL_NAMES = frozenset({"SIGINT", "SIGTERM", "SIGHUP"})


class Stopping:
    """What stopped a run, and the cancelling it takes. Used from the event loop only."""

    def __init__(
        self,
        *,
        grace: float = STOP_GRACE,
        on_stopping: Callable[[str, int], None] = lambda reason, in_flight: None,
    ) -> None:
        self.grace = grace
        self.on_stopping = on_stopping  # (reason, requests in flight), at a first signal
        self.reasons: list[str] = []  # in order; signals by name
        self.abandoned_by: str | None = None  # the deadline's grace, or a second signal
        self.abandoned = 0  # requests in flight when they were abandoned
        self.grace_ran_out = False  # abandoned at the grace's end, not by a second signal
        self.workers: list[asyncio.Task[Any]] = []
        self.in_flight: set[asyncio.Task[Any]] = set()
        self._grace: asyncio.TimerHandle | None = None

    @property
    def stopped(self) -> bool:
        return bool(self.reasons)

    @property
    def first(self) -> str | None:
        """The first reason, a signal named ``signal`` (what ``stopped_by`` has always said)."""
        if not self.reasons:
            return None
        return "signal" if self.reasons[0] in SIGNAL_NAMES else self.reasons[0]

    @property
    def signals(self) -> list[str]:
        return [reason for reason in self.reasons if reason in SIGNAL_NAMES]

    def stop(self, reason: str) -> None:
        is_signal = reason in SIGNAL_NAMES
        if reason in self.reasons and not is_signal:
            return
        first = not self.reasons
        self.reasons.append(reason)
        if first:
            for worker in self.workers:
                if worker not in self.in_flight:
                    worker.cancel()
        if is_signal and len(self.signals) > 1:
            self.abandon(reason)
            return
        if is_signal:
            self.on_stopping(reason, len(self.in_flight))
        if is_signal or reason == "deadline":
            self._start_grace(reason)

    def abandon(self, reason: str) -> None:
        """Cancel every worker, requests in flight included: they stay ``unknown``."""
        if self.abandoned_by is None and self.in_flight:
            self.abandoned_by = reason
            self.abandoned = len(self.in_flight)
        for worker in self.workers:
            worker.cancel()

    def close(self) -> None:
        if self._grace is not None:
            self._grace.cancel()
            self._grace = None

    def _start_grace(self, reason: str) -> None:
        if self._grace is None and self.in_flight and self.abandoned_by is None:
            import asyncio

            loop = asyncio.get_running_loop()
            self._grace = loop.call_later(self.grace, self._grace_over, reason)

    def _grace_over(self, reason: str) -> None:
        self.grace_ran_out = True
        self.abandon(reason)

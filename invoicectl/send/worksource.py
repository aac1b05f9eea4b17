"""What a sender asks of the work several workers share (``send.workers``), as a Protocol:
the sender imports this, not the workers' module, which brings the plan and the lifecycle."""

from __future__ import annotations

import asyncio
from typing import Protocol


class WorkSource(Protocol):
    """Work claimed a batch at a time from a journal several workers share
    (``send.workers.Workers``); None: one run holds the journal and takes the whole plan."""

    @property
    def lost(self) -> bool: ...

    def fill(self, queue: asyncio.Queue[tuple[str, bool]], limit: int) -> bool: ...

    def permits(self, interval: float, span: float, rate: int) -> float: ...

    def may_wait_for_check(self) -> bool: ...

"""An asyncio event loop on virtual time, so pacing and retry tests take milliseconds.

``loop.time()`` is a number that only moves when every task is waiting: instead of blocking
in ``select(timeout)``, the loop jumps its clock forward by ``timeout`` to the next timer.
Code under test gets ``clock=loop.time`` and the real ``asyncio.sleep``; many coroutines
sleeping at once then interleave exactly as they would in real time, and waits are exact.

    result = run_virtual(main)          # main: async () -> T, runs on a fresh virtual loop
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


class _JumpingSelector(selectors.DefaultSelector):
    def __init__(self, advance: Callable[[float], None]) -> None:
        super().__init__()
        self._advance = advance

    def select(self, timeout: float | None = None) -> list[Any]:
        events = super().select(0)
        if events or timeout == 0:
            return events
        if timeout is None:
            raise RuntimeError("virtual time: every task waits and no timer is set (deadlock)")
        self._advance(timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self._virtual_now = 0.0
        super().__init__(_JumpingSelector(self._advance))

    def time(self) -> float:
        return self._virtual_now

    def _advance(self, seconds: float) -> None:
        self._virtual_now += seconds


def run_virtual(main: Callable[[], Awaitable[T]]) -> T:
    async def wrapper() -> T:
        return await main()

    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(wrapper())


class RecordingSleep:
    """``asyncio.sleep`` that remembers every wait it was asked for."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        await asyncio.sleep(seconds)

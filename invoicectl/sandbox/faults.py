"""Seeded dice for injected faults: slow answers, 5xx before anything happens, lost answers.

``drop`` means the send was processed and recorded and then the connection died before the
answer left: the hardest case for a client, because it cannot know the send happened.
"""

from __future__ import annotations

import random

from invoicectl.sandbox.config import Faults

SERVER_ERRORS = (500, 502, 503)


class FaultDice:
    def __init__(self, faults: Faults, rng: random.Random) -> None:
        self.faults = faults
        self._rng = rng

    def server_error(self) -> int | None:
        """A 5xx status to answer instead of processing, or None."""
        if self.faults.error_rate and self._rng.random() < self.faults.error_rate:
            return self._rng.choice(SERVER_ERRORS)
        return None

    def drop(self) -> bool:
        return bool(self.faults.drop_rate) and self._rng.random() < self.faults.drop_rate

    @property
    def latency(self) -> float:
        return self.faults.latency_ms / 1000.0

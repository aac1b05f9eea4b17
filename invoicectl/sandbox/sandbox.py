"""``Sandbox``: one emulator, its state and its ASGI app, with the Python API tests use."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette

from invoicectl.sandbox.admin import admin_routes
from invoicectl.sandbox.app import SandboxApp, Sleep
from invoicectl.sandbox.clock import EmulatedClock
from invoicectl.sandbox.config import SandboxConfig
from invoicectl.sandbox.idempotency import KeyRecord
from invoicectl.sandbox.participants import Registration
from invoicectl.sandbox.state import EmulatorState
from invoicectl.sandbox.transactions import Transaction, progress

if TYPE_CHECKING:
    import httpx


class Sandbox:
    """A GoRoute emulator held in memory.

    ``clock`` is the base time source (the admin clock endpoint adds an offset to it),
    ``sleep`` is what latency awaits, ``rng`` overrides the one ``config.seed`` would build.
    """

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config or SandboxConfig()
        self.clock = EmulatedClock(clock)
        self.state = EmulatorState(self.config, self.clock, rng or random.Random(self.config.seed))
        api = SandboxApp(self.state, sleep)
        self.app: Starlette = api.build(admin=admin_routes(self.state, api.authenticated))

    @property
    def api_key(self) -> str:
        """An accepted key (the default one when it is accepted), for printing and tests."""
        return min(self.config.api_keys)

    def transport(self) -> httpx.AsyncBaseTransport:
        """In-process transport: no sockets, and a drop raises ``httpx.RemoteProtocolError``."""
        # Imported here: serving the emulator does not need httpx, and it is slow to import.
        from invoicectl.sandbox.transport import SandboxTransport

        return SandboxTransport(self.app)

    def stats(self) -> dict[str, Any]:
        return self.state.snapshot()

    def now(self) -> float:
        return self.clock()

    def advance_clock(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def set_faults(self, **changes: Any) -> None:
        """Change ``latency_ms``, ``error_rate`` or ``drop_rate`` while running."""
        self.state.set_faults(self.state.dice.faults.changed(**changes))

    def preload_key(self, key: str, *, transaction_id: str, **options: Any) -> KeyRecord:
        """Mark ``key`` as used; see ``EmulatorState.preload_key`` for the options."""
        return self.state.preload_key(key, transaction_id=transaction_id, **options)

    def add_transaction(self, invoice_number: str, **options: Any) -> Transaction:
        """Stage a transaction; see ``EmulatorState.add_transaction`` for the options."""
        return self.state.add_transaction(invoice_number, **options)

    def stage_participant(self, participant: str, **options: Any) -> Registration:
        """Register ``participant`` otherwise than by default: ``registered``,
        ``document_types`` (e.g. ``("Invoice",)``), ``lookup_error`` (a 5xx or 408 for its
        lookups)."""
        return self.state.stage_participant(participant, **options)

    def participant(self, participant: str) -> Registration:
        """What the emulator's SMP says of ``participant`` (not counted as a lookup)."""
        return self.state.participants.find(participant)

    def transaction(self, transaction_id: str) -> Transaction | None:
        return self.state.book.get(transaction_id)

    def status(self, transaction_id: str) -> str:
        txn = self.state.book.get(transaction_id)
        if txn is None:
            raise KeyError(transaction_id)
        return progress(txn, self.clock(), self.state.timings).status

"""What the send and reconcile runs share: their clocks, their client, their runs row.

``Clocks`` is what a run reads the time from and waits with. Production uses the real ones;
tests inject their own, so a "25 hours later" run is a run whose wall clock says so, not a
journal whose rows were backdated.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from invoicectl.errors import ExitCode, InvoicectlError
from invoicectl.interrupts import signal_name
from invoicectl.journal.database import utc_now
from invoicectl.journal.interface import JournalBackend
from invoicectl.scan.report import ScanReport
from invoicectl.settings import Settings

if TYPE_CHECKING:  # imported where a run makes requests: one with nothing to send makes none
    import httpx

    from invoicectl.goroute.client import GoRouteClient


async def _sleep(seconds: float) -> None:
    """``asyncio.sleep``, imported at the first wait: a run that waits for nothing (a send
    with nothing to send) imports no asyncio."""
    import asyncio

    await asyncio.sleep(seconds)


@dataclass(frozen=True)
class Clocks:
    wall: Callable[[], datetime] = utc_now  # timestamps, and the 24-hour windows
    monotonic: Callable[[], float] = time.monotonic  # pacing, backoff and deadlines
    sleep: Callable[[float], Awaitable[None]] = _sleep
    rng: random.Random = field(default_factory=random.Random)  # backoff jitter


REAL_CLOCKS = Clocks()

# Where requests go for the length of a run, entered once the journal is locked: the
# built-in emulator for ``--sandbox`` (``sandbox.session``), else where the settings say.
Session = Callable[[], AbstractContextManager["httpx.AsyncBaseTransport | None"]]


# Scanning an outbox into the journal, as the caller chose it (``scan.ingest.scanning``):
# a run makes its scan once it holds the journal, and needs no scanner of its own.
Scan = Callable[[JournalBackend], ScanReport]


def no_session() -> AbstractContextManager[httpx.AsyncBaseTransport | None]:
    return nullcontext(None)


def make_client(settings: Settings, transport: httpx.AsyncBaseTransport | None) -> GoRouteClient:
    from invoicectl.goroute.client import GoRouteClient

    assert settings.api_key is not None
    return GoRouteClient(
        settings.base_url,
        settings.api_key,
        transport=transport,
        request_timeout=settings.request_timeout,
        max_connections=max(10, settings.concurrency),
    )


@contextmanager
def recorded_run(
    journal: JournalBackend, command: str, options: dict[str, Any], settings: Settings
) -> Iterator[int]:
    """A runs row from start to end; a run that fails still records how it ended."""
    assert settings.api_key is not None
    run_id = journal.begin_run(
        command,
        options,
        base_url=settings.base_url,
        key_fingerprint=settings.api_key.fingerprint,
    )
    try:
        yield run_id
    except InvoicectlError as error:
        journal.finish_run(run_id, int(error.exit_code), {"error": str(error)})
        raise
    except KeyboardInterrupt as interrupted:  # a stop signal (reconcile): nothing half-written
        stopped = f"interrupted by {signal_name(interrupted)}"
        journal.finish_run(run_id, int(ExitCode.INTERRUPTED), {"error": stopped})
        raise

"""``--sandbox``: the built-in emulator inside the command's own process, for one run.

Its memory is kept beside the sandbox journal between runs (``persist``), so reconcile sees
what send sent. A run enters the session once it holds the journal's lock.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from invoicectl.locations import Location, sqlite_file
from invoicectl.sandbox.config import SandboxConfig
from invoicectl.sandbox.persist import load, save
from invoicectl.sandbox.sandbox import Sandbox


@contextmanager
def sandbox_session(location: Location) -> Iterator[httpx.AsyncBaseTransport]:
    """The emulator's transport; its memory in ``<journal>-emulator.json`` (so the sandbox
    keeps a SQLite journal: a PostgreSQL one is refused)."""
    journal = sqlite_file(location, "--sandbox", "the sandbox keeps its own SQLite journal")
    # Generous limits: the client paces itself to --rate anyway.
    emulator = Sandbox(SandboxConfig.for_tier("professional", lifecycle_step=1.0))
    memory = journal.with_name(journal.stem + "-emulator.json")
    load(emulator.state, emulator.clock, memory)
    try:
        yield emulator.transport()
    finally:
        save(emulator.state, emulator.clock, memory)

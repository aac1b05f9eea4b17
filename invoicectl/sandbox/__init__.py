"""A local GoRoute emulator: the API contract of goroute-api.md, in memory, with faults.

    Sandbox(SandboxConfig.for_tier("standard", seed=1))
    ├── .app          Starlette ASGI app (routes at / and under /peppol-api)
    ├── .transport()  in-process httpx transport; drops raise httpx.RemoteProtocolError
    ├── .stats()      what the emulator saw: sends, replays, 422s, 429s, per key, per invoice,
    │                 participant lookups (in total and per participant)
    └── staging       .preload_key(), .add_transaction(), .stage_participant(),
                      .advance_clock(), .set_faults()
    serve(sandbox, host, port)       uvicorn, blocking
    BackgroundServer(sandbox)        uvicorn in a thread, for tests

Modules, each importing only modules on the lines below its own:
    persist (memory between runs), __main__ (``python -m invoicectl.sandbox``)
    sandbox (the ``Sandbox`` facade)
    state (the send path), app + admin (HTTP, typed against protocols, not the state)
    documents (body checks), idempotency, transactions (lifecycle), participants (the SMP),
    faults, responses
    config (settings), problems, party, clock, ratelimit, stats, server, transport, samples
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from invoicectl.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from invoicectl.sandbox.config import DEFAULT_API_KEY, Faults, SandboxConfig
    from invoicectl.sandbox.idempotency import request_sha256
    from invoicectl.sandbox.sandbox import Sandbox
    from invoicectl.sandbox.server import BackgroundServer, serve

__all__ = [
    "DEFAULT_API_KEY",
    "BackgroundServer",
    "Faults",
    "Sandbox",
    "SandboxConfig",
    "request_sha256",
    "serve",
]

# Where each name lives, imported at its first use: ``--sandbox`` settings read the
# emulator's key (``sandbox.config``) without loading the emulator, its app and its server.
_HOMES = {
    "DEFAULT_API_KEY": "config",
    "BackgroundServer": "server",
    "Faults": "config",
    "Sandbox": "sandbox",
    "SandboxConfig": "config",
    "request_sha256": "idempotency",
    "serve": "server",
}

__getattr__ = lazy_exports(__name__, _HOMES)

"""``/_sandbox/*``: staging and inspection endpoints that the real GoRoute does not have.

They let a test in another process do over HTTP what a test in this process does through
``Sandbox``: stage used keys, old transactions and participants, move the clock, change
faults, read stats.
They need a valid API key but are outside the rate limits.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from invoicectl.sandbox.clock import EmulatedClock, iso, parse_time
from invoicectl.sandbox.config import Faults
from invoicectl.sandbox.faults import FaultDice
from invoicectl.sandbox.idempotency import KeyRecord
from invoicectl.sandbox.participants import Registration
from invoicectl.sandbox.problems import Problem
from invoicectl.sandbox.transactions import Timings, Transaction, detail_json

Handler = Callable[[Request], Awaitable[Response]]


class Staging(Protocol):
    """What these routes use of the emulator; ``state.EmulatorState`` is the implementation.

    Declared here rather than imported, as ``app.Emulator`` is, so that the HTTP layer does
    not sit on top of the send path.
    """

    clock: EmulatedClock
    dice: FaultDice
    timings: Timings

    def snapshot(self) -> dict[str, Any]: ...

    def preload_key(
        self,
        key: str,
        *,
        transaction_id: str,
        body_sha256: str | None,
        body: bytes | str | None,
        first_seen: float | None,
    ) -> KeyRecord: ...

    def add_transaction(
        self,
        invoice_number: str,
        *,
        receiver: str = ...,
        sender: str = ...,
        status: str | None = ...,
        created_at: float | None = ...,
        transaction_id: str | None = ...,
        document_type: str = ...,
        metadata: dict[str, Any] | None = ...,
        idempotency_key: str | None = ...,
    ) -> Transaction: ...

    def set_faults(self, faults: Faults) -> None: ...

    def stage_participant(
        self,
        participant: str,
        *,
        registered: bool = ...,
        document_types: tuple[str, ...] = ...,
        lookup_error: int | None = ...,
    ) -> Registration: ...


def admin_routes(state: Staging, authenticated: Callable[[Handler], Handler]) -> list[BaseRoute]:
    admin = _Admin(state)
    return [
        Route("/stats", authenticated(admin.stats), methods=["GET"]),
        Route("/keys", authenticated(admin.add_key), methods=["POST"]),
        Route("/transactions", authenticated(admin.add_transaction), methods=["POST"]),
        Route("/participants", authenticated(admin.stage_participant), methods=["POST"]),
        Route("/clock", authenticated(admin.clock), methods=["GET", "POST"]),
        Route("/faults", authenticated(admin.faults), methods=["GET", "POST"]),
    ]


class _Admin:
    def __init__(self, state: Staging) -> None:
        self.state = state

    async def stats(self, request: Request) -> Response:
        return JSONResponse(self.state.snapshot())

    async def add_key(self, request: Request) -> Response:
        fields = await _fields(request)
        first_seen = fields.get("first_seen")
        try:
            record = self.state.preload_key(
                _required(fields, "key"),
                transaction_id=_required(fields, "transaction_id"),
                body_sha256=fields.get("body_sha256"),
                body=fields.get("body"),
                first_seen=None if first_seen is None else parse_time(first_seen),
            )
        except (TypeError, ValueError) as exc:
            raise _bad(str(exc)) from None
        return JSONResponse({**asdict(record), "first_seen_at": iso(record.first_seen)}, 201)

    async def add_transaction(self, request: Request) -> Response:
        fields = await _fields(request)
        created = fields.get("created_at")
        options = {
            name: fields[name]
            for name in ("receiver", "sender", "status", "transaction_id", "document_type")
            if name in fields
        }
        if "receiver_scheme" in fields and "receiver_id" in fields:
            options["receiver"] = f"{fields['receiver_scheme']}:{fields['receiver_id']}"
        try:
            txn = self.state.add_transaction(
                str(_required(fields, "invoice_number")),
                created_at=None if created is None else parse_time(created),
                metadata=fields.get("metadata"),
                idempotency_key=fields.get("idempotency_key"),
                **options,
            )
        except (TypeError, ValueError) as exc:
            raise _bad(str(exc)) from None
        body = detail_json(txn, self.state.clock(), self.state.timings)
        return JSONResponse({"transaction_id": txn.id, **body}, 201)

    async def stage_participant(self, request: Request) -> Response:
        """``{"participant_id", "registered"?, "document_types"?: [...], "lookup_error"?}``"""
        fields = await _fields(request)
        options: dict[str, Any] = {
            name: fields[name] for name in ("registered", "lookup_error") if name in fields
        }
        if "document_types" in fields:
            types = fields["document_types"]
            if not isinstance(types, list):
                raise _bad("document_types must be a list")
            options["document_types"] = tuple(types)
        try:
            registration = self.state.stage_participant(
                str(_required(fields, "participant_id")), **options
            )
        except (TypeError, ValueError) as exc:
            raise _bad(str(exc)) from None
        return JSONResponse(registration.as_json(), 201)

    async def clock(self, request: Request) -> Response:
        if request.method == "POST":
            fields = await _fields(request)
            advance = fields.get("advance", 0)
            if not isinstance(advance, int | float) or advance < 0:
                raise _bad("advance must be a number of seconds >= 0")
            self.state.clock.advance(float(advance))
        now = self.state.clock()
        return JSONResponse({"now": iso(now), "epoch": now, "offset": self.state.clock.offset})

    async def faults(self, request: Request) -> Response:
        if request.method == "POST":
            fields = await _fields(request)
            try:
                self.state.set_faults(self.state.dice.faults.changed(**fields))
            except (TypeError, ValueError) as exc:
                raise _bad(str(exc)) from None
        return JSONResponse(asdict(self.state.dice.faults))


async def _fields(request: Request) -> dict[str, Any]:
    try:
        fields = json.loads(await request.body())
    except ValueError:
        raise _bad("body must be JSON") from None
    if not isinstance(fields, dict):
        raise _bad("body must be a JSON object")
    return fields


def _required(fields: dict[str, Any], name: str) -> Any:
    if fields.get(name) in (None, ""):
        raise _bad(f"{name} is required")
    return fields[name]


def _bad(message: str) -> Problem:
    return Problem(400, "VALIDATION_ERROR", message)

"""The HTTP face of the emulator: GoRoute's routes as a Starlette app.

Routes are relative, and mounted twice: at the root and under ``/peppol-api``, so a client
works with either ``http://host:port`` or ``http://host:port/peppol-api`` as its base URL,
the way the real base URL carries a path prefix.

Order of checks on ``/api/v1`` and the plain participant lookup (each step stops the
request with its answer): API key (401/403) > rate window and concurrency (429, not counted) >
latency > injected 5xx (nothing recorded) > the send itself > injected drop (recorded, no
answer). A lookup counts once it is past the rate limit; its 5xx is staged per participant
(``Registry.stage``), never rolled, so lookups leave the send faults' dice alone; so do
validations (``POST /api/v1/validate``, answered from ``validation``), counted likewise.

The send itself: no Idempotency-Key (400 ``MISSING_IDEMPOTENCY_KEY``) > a malformed key (400)
> a key still live: the same bytes replay (202), other bytes are 422 whatever they hold >
the body (400/413) > the receiver (404) > accepted (202).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from invoicectl.sandbox.clock import EmulatedClock
from invoicectl.sandbox.config import SandboxConfig
from invoicectl.sandbox.faults import FaultDice
from invoicectl.sandbox.participants import Registration, identifier_answer, peppol_id_answer
from invoicectl.sandbox.problems import Problem
from invoicectl.sandbox.ratelimit import RateLimiter
from invoicectl.sandbox.responses import dropped, problem_response
from invoicectl.sandbox.stats import Stats
from invoicectl.sandbox.transactions import (
    SendAnswer,
    Timings,
    TransactionBook,
    detail_json,
    flat_detail_json,
    last_changed_first,
    summary_json,
    updated_summary_json,
)
from invoicectl.sandbox.validation import validation_answer
from invoicectl.text import decimal

Sleep = Callable[[float], Awaitable[None]]
Handler = Callable[[Request], Awaitable[Response]]
BASE_PATH = "/peppol-api"
MAX_PAGE = 1000
SERVER_ERROR_CODES = {
    408: "REQUEST_TIMEOUT",  # a lookup's only: what a proxy in front answers when it gave up
    500: "INTERNAL_ERROR",
    502: "BAD_GATEWAY",
    503: "SERVICE_UNAVAILABLE",
}
# uvicorn's own logger: ``invoicectl sandbox`` prints it on stderr in uvicorn's format.
_log = logging.getLogger("uvicorn.error")


class Emulator(Protocol):
    """What the routes use of the emulator; ``state.EmulatorState`` is the implementation.

    Declared here rather than imported so that the HTTP layer sits beside the send path
    instead of on top of it (the state imports the body checks, the store, the lifecycle).
    """

    config: SandboxConfig
    clock: EmulatedClock
    dice: FaultDice
    limiter: RateLimiter
    stats: Stats
    book: TransactionBook
    timings: Timings

    def send(self, idempotency_key: str | None, body: bytes) -> SendAnswer: ...

    def lookup_participant(self, participant: str) -> Registration: ...


class SandboxApp:
    """Builds the Starlette app over one emulator; ``Sandbox`` adds the admin routes."""

    def __init__(self, state: Emulator, sleep: Sleep) -> None:
        self.state = state
        self._sleep = sleep
        self._request_ids = itertools.count(1)

    def build(self, admin: list[BaseRoute]) -> Starlette:
        """The app, with ``admin`` mounted under ``/_sandbox`` (at both base paths)."""
        routes = [*self._routes(), Mount("/_sandbox", routes=admin)]
        return Starlette(
            routes=[*routes, Mount(BASE_PATH, routes=routes)],
            exception_handlers={HTTPException: self._http_exception},
        )

    def _routes(self) -> list[BaseRoute]:
        routes: list[BaseRoute] = [
            Route("/peppol/version", self.version, methods=["GET"]),
            Route("/api/v1/documents", self._api(self.send_document), methods=["POST"]),
            Route("/api/v1/validate", self._api(self.validate), methods=["POST"]),
            Route("/api/v1/transactions", self._api(self.list_transactions), methods=["GET"]),
            Route(
                "/api/v1/transactions/{transaction_id}",
                self._api(self.get_transaction),
                methods=["GET"],
            ),
        ]
        lookups = self.state.config.lookup_routes
        if lookups != "identifier":
            routes.append(
                Route("/api/v1/participants/lookup", self._api(self.lookup), methods=["GET"])
            )
        if lookups != "peppol_id":
            routes.append(
                Route("/participants/lookup", self._api(self.plain_lookup), methods=["GET"])
            )
        return routes

    # -- cross-cutting ------------------------------------------------------------------

    def _request_id(self) -> str:
        return f"req_{next(self._request_ids):08x}"

    def _problem(self, problem: Problem, request_id: str) -> Response:
        return problem_response(problem, request_id, self.state.config.error_shape)

    def _authenticate(self, request: Request) -> str:
        key = request.headers.get("x-api-key")
        if not key:
            raise Problem(401, "INVALID_API_KEY", "X-API-Key header is missing")
        if self.state.config.is_forbidden(key):
            raise Problem(403, "FORBIDDEN", "this API key may not use this resource")
        if key not in self.state.config.api_keys:
            raise Problem(401, "INVALID_API_KEY", "API key is invalid, expired or disabled")
        return key

    def authenticated(self, handler: Handler) -> Handler:
        """``handler`` behind the key check only (the admin routes skip the rate limits)."""

        async def endpoint(request: Request) -> Response:
            request_id = self._request_id()
            try:
                self._authenticate(request)
                return await handler(request)
            except Problem as problem:
                return self._problem(problem, request_id)
            except ClientDisconnect:
                return _dropped_client(request)

        return endpoint

    def _api(self, handler: Callable[[Request, str], Awaitable[Response]]) -> Handler:
        """Key check, rate limits and latency around one API endpoint."""

        async def endpoint(request: Request) -> Response:
            request_id = self._request_id()
            try:
                api_key = self._authenticate(request)
                self._admit(api_key)
            except Problem as problem:
                return self._problem(problem, request_id)
            try:
                if self.state.dice.latency:
                    await self._sleep(self.state.dice.latency)
                return await handler(request, request_id)
            except Problem as problem:
                return self._problem(problem, request_id)
            except ClientDisconnect:
                return _dropped_client(request)
            finally:
                self.state.limiter.release(api_key)

        return endpoint

    def _admit(self, api_key: str) -> None:
        state = self.state
        refusal = state.limiter.admit(api_key, state.clock())
        if refusal is not None:
            state.stats.rate_limited += 1
            raise Problem(
                429,
                "RATE_LIMIT_EXCEEDED",
                refusal.reason,
                extra={"retry_after": refusal.retry_after},
                headers={"Retry-After": str(refusal.retry_after)},
            )
        in_flight = state.limiter.in_flight()
        state.stats.max_in_flight = max(state.stats.max_in_flight, in_flight)

    async def _http_exception(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        code = "NOT_FOUND" if exc.status_code == 404 else "HTTP_ERROR"
        return self._problem(Problem(exc.status_code, code, exc.detail), self._request_id())

    # -- endpoints ----------------------------------------------------------------------

    async def version(self, request: Request) -> Response:
        config = self.state.config
        return JSONResponse({"version": config.version, "environment": "sandbox", "status": "ok"})

    async def send_document(self, request: Request, request_id: str) -> Response:
        state = self.state
        state.stats.sends += 1
        failure = state.dice.server_error()
        if failure is not None:
            state.stats.server_errors += 1
            code = SERVER_ERROR_CODES[failure]
            raise Problem(
                failure, code, f"injected {failure} (sandbox fault): nothing was recorded"
            )
        key = request.headers.get("idempotency-key")
        try:
            body = await _read_body(request, _body_limit(state.config.max_document_bytes))
        except Problem:
            state.stats.rejected += 1
            raise
        try:
            answer = state.send(key, body)
        except Problem as problem:
            return self._maybe_drop(self._problem(problem, request_id))
        headers = {"X-Request-ID": request_id}
        return self._maybe_drop(JSONResponse(answer.as_json(), 202, headers))

    def _maybe_drop(self, response: Response) -> Response:
        if not self.state.dice.drop():
            return response
        self.state.stats.drops += 1
        return dropped(response)

    async def validate(self, request: Request, request_id: str) -> Response:
        """``POST /api/v1/validate`` with the raw XML: ``valid`` and ``errors``, from our checks."""
        self.state.stats.validations += 1
        limit = self.state.config.max_document_bytes
        document = await _read_body(request, _body_limit(limit))
        body = validation_answer(document, limit)
        return JSONResponse(body, headers={"X-Request-ID": request_id})

    async def lookup(self, request: Request, request_id: str) -> Response:
        """``GET /api/v1/participants/lookup?peppol_id=scheme:id``: ``found``, ``capabilities``."""
        registration = self._registration(request, "peppol_id")
        return self._lookup_answer(registration, peppol_id_answer(registration), request_id)

    async def plain_lookup(self, request: Request, request_id: str) -> Response:
        """``GET /participants/lookup?identifier=scheme:id``: ``registered``, ``document_types``."""
        registration = self._registration(request, "identifier")
        body = identifier_answer(registration, self.state.clock())
        return self._lookup_answer(registration, body, request_id)

    def _registration(self, request: Request, parameter: str) -> Registration:
        asked = request.query_params.get(parameter, "")
        if not asked.strip():
            message = f"{parameter} is required, written scheme:identifier"
            raise Problem(400, "VALIDATION_ERROR", message)
        try:
            registration = self.state.lookup_participant(asked)
        except ValueError as exc:
            raise Problem(400, "VALIDATION_ERROR", str(exc)) from None
        failure = registration.lookup_error
        if failure is not None:
            self.state.stats.server_errors += 1
            code = SERVER_ERROR_CODES[failure]
            raise Problem(failure, code, f"injected {failure} (sandbox fault) for this lookup")
        return registration

    def _lookup_answer(
        self, registration: Registration, body: dict[str, Any], request_id: str
    ) -> Response:
        status = 200 if registration.registered else self.state.config.lookup_not_found_status
        return JSONResponse(body, status, headers={"X-Request-ID": request_id})

    async def get_transaction(self, request: Request, request_id: str) -> Response:
        txn_id = request.path_params["transaction_id"]
        self.state.stats.transaction_gets += 1
        txn = self.state.book.get(txn_id)
        if txn is None:
            raise Problem(404, "TRANSACTION_NOT_FOUND", f"no transaction {txn_id}")
        shape = flat_detail_json if self.state.config.detail_shape == "flat" else detail_json
        body = shape(txn, self.state.clock(), self.state.timings)
        return JSONResponse(body, headers={"X-Request-ID": request_id})

    async def list_transactions(self, request: Request, request_id: str) -> Response:
        config = self.state.config
        self.state.stats.transaction_lists += 1
        limit = _limit(request.query_params.get("limit", "50"))
        if config.list_page_cap is not None:
            limit = min(limit, config.list_page_cap)
        # Without paging the cursor is not a parameter at all: ignored, as unknown ones are.
        cursor = request.query_params.get("cursor") if config.list_paging else None
        now, timings = self.state.clock(), self.state.timings
        by_update = config.list_order == "updated_first"
        try:
            rows, next_cursor = self.state.book.page(
                limit,
                cursor,
                oldest_first=config.list_order == "oldest_first",
                order=last_changed_first(now, timings) if by_update else None,
            )
        except KeyError:
            raise Problem(400, "INVALID_CURSOR", f"unknown cursor {cursor!r}") from None
        row_of = updated_summary_json if by_update else summary_json
        body: dict[str, Any] = {"transactions": [row_of(txn, now, timings) for txn in rows]}
        if config.list_paging:
            body["has_more"] = next_cursor is not None
            body["next_cursor"] = next_cursor
        return JSONResponse(body, headers={"X-Request-ID": request_id})


def _dropped_client(request: Request) -> Response:
    """A client gone before its request was read whole (killed, or its timeout): one line,
    not a traceback; nothing is answered, since nobody is there to read it."""
    _log.warning(
        "sandbox: the client dropped the connection before its request was read (%s %s)",
        request.method,
        request.url.path,
    )
    return Response(status_code=499)


def _limit(raw: str) -> int:
    if not decimal(raw) or not 1 <= int(raw) <= MAX_PAGE:
        raise Problem(400, "VALIDATION_ERROR", f"limit must be an integer from 1 to {MAX_PAGE}")
    return int(raw)


def _body_limit(max_document_bytes: int) -> int:
    # JSON escaping can inflate a document; this bound only stops absurd bodies early.
    return 6 * max_document_bytes + 65_536


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if decimal(declared) and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> Problem:
    return Problem(413, "PAYLOAD_TOO_LARGE", f"request body exceeds {limit} bytes")

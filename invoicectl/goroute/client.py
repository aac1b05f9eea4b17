"""The GoRoute HTTP client: one request in, one plain-data outcome out.

This module is the public face of everything that touches HTTP: ``GoRouteClient`` (headers, TLS,
timeouts, the five endpoints) and ``build_send_body``. Nothing here retries, sleeps or writes
state; the sender and reconcile decide by outcome type. Nothing here raises for an HTTP answer or
a network failure either: a caller only sees exceptions for programming errors (a bad argument).

    send_document       Accepted | KeyReused | RateLimited | Rejected | AuthRefused | Transient
    get_transaction     Found | NotFound | RateLimited | Rejected | AuthRefused | Transient
    lookup_participant  Participant | RateLimited | Rejected | AuthRefused | Transient
    validate_document   Validation | RateLimited | Rejected | AuthRefused | Transient
    list_transactions, version: the parsed answer, or one of the failure outcomes above

What an answer means lives in ``answers`` (and ``endpoint``: is this the API at all?); the
shapes in ``transactions`` (a list answer is read into its ``TransactionPage`` by ``pages``),
``lookups`` and ``validation``; how much of an answer is read, and for how long, in
``reading``; which ids from the server are usable in ``identifiers``.

The API key leaves its ``ApiKey`` wrapper only inside ``lanes.Lane.send``, as the request is sent.
Any text from the server or a network error is scrubbed of the key before it reaches an outcome.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from http import HTTPStatus
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

from invoicectl import __version__, config_values
from invoicectl.defaults import DEFAULT_REQUEST_TIMEOUT
from invoicectl.goroute.answers import (
    MAX_RAW_BODY,
    Answer,
    accepted,
    failure,
    parse_retry_after,
    unexpected_shape,
)
from invoicectl.goroute.apikey import ApiKey
from invoicectl.goroute.building import RequestBuilder
from invoicectl.goroute.endpoint import MAX_PROBE_BYTES, ApiCheck, suspicious, wrong_endpoint
from invoicectl.goroute.identifiers import usable_id, why_unusable
from invoicectl.goroute.lanes import Lanes, pool_client
from invoicectl.goroute.lookups import (
    MAX_LOOKUP_BYTES,
    checked_peppol_id,
    is_lookup_document,
    lookup_outcome,
    route_missing,
)
from invoicectl.goroute.outcomes import Outcome, Rejected, Transient, Validation
from invoicectl.goroute.pages import page_of
from invoicectl.goroute.participants import Participant
from invoicectl.goroute.reading import ACCEPT_ENCODING, Bounds, exchange
from invoicectl.goroute.transactions import Found, NotFound, Transaction, TransactionPage
from invoicectl.goroute.validation import MAX_VALIDATION_BYTES, validation_outcome

__all__ = [
    "MAX_RAW_BODY",
    "Found",
    "GoRouteClient",
    "NotFound",
    "Participant",
    "Transaction",
    "TransactionPage",
    "Validation",
    "build_send_body",
    "parse_retry_after",
]

_DOCUMENTS_PATH = "/api/v1/documents"
_TRANSACTIONS_PATH = "/api/v1/transactions"
# goroute-api.md B puts the health check "outside /api/v1": outside the versioned prefix, not
# the base URL (https://app.goroute.ai/peppol-api/peppol/version); the emulator, mounted at
# its own base URL, serves it at the same relative path.
_VERSION_PATH = "/peppol/version"
# The documented participant lookups and validation (goroute-api.md B); the plain lookup is
# read, like the health check, as relative to the base URL.
_LOOKUP_PATH = "/api/v1/participants/lookup"
_PLAIN_LOOKUP_PATH = "/participants/lookup"
_VALIDATE_PATH = "/api/v1/validate"
# What ``probe`` and the wrong-URL check ask: the health check, the cheapest keyed GET.
PROBES = {"version": (_VERSION_PATH, {}), "transactions": (_TRANSACTIONS_PATH, {"limit": 1})}
# The paths whose URL a client merges with its base URL once (``building``).
_FIXED_PATHS = frozenset({_DOCUMENTS_PATH, _VALIDATE_PATH, _VERSION_PATH})

# The most each answer may be (``reading``): a 202 or an error is a few KB, a transaction one,
# a page of 100 transactions some tens of KB; the lookup and validation caps are their modules'.
_DOCUMENT_ANSWER_BYTES = 512 * 1024
_TRANSACTION_BYTES = 256 * 1024
_PAGE_BYTES = 2 * 1024 * 1024
_VERSION_BYTES = 64 * 1024
# A request's time limit grows by a second for every this many bytes it sends, so a 15 MB
# document on a slow uplink is not cut off (and left unknown) run after run.
_SLOW_UPLINK_BYTES_PER_SECOND = 256 * 1024
# The share of the request's limit a connection may take to be made (``GoRouteClient``).
_CONNECT_SHARE = 0.8

logger = logging.getLogger(__name__)


def build_send_body(
    document: str, receiver_scheme: str, receiver_id: str, metadata: Mapping[str, str]
) -> bytes:
    """The POST /api/v1/documents body, byte-identical for the same inputs.

    Idempotency holds only while a key carries the same bytes, so the encoding is pinned:
    sorted keys at every level, no optional whitespace, non-ASCII kept as UTF-8 rather than
    ``\\u`` escapes (the same characters, and a third of the size for accented text).
    """
    payload = {
        "document": document,
        "metadata": dict(metadata),
        "receiver_id": receiver_id,
        "receiver_scheme": receiver_scheme,
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


class GoRouteClient:
    """Async client for the GoRoute Peppol API. Use as ``async with GoRouteClient(...) as c``.

    ``transport`` replaces the network (respx in tests, the in-process emulator for
    ``--sandbox``); ``now`` and ``monotonic`` are the clocks for Retry-After dates and durations.
    ``request_timeout`` bounds each whole request, sending it and reading its answer, in
    wall-clock seconds (the other timeouts restart with every byte), plus a second for every
    256 KB the request carries.
    """

    def __init__(
        self,
        base_url: str,
        api_key: ApiKey,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 30.0,
        write_timeout: float = 30.0,
        pool_timeout: float = 30.0,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        max_connections: int = 100,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_url = _checked_base_url(base_url, over_network=transport is None)
        if not 0 < request_timeout < math.inf:
            raise ValueError("request_timeout must be a positive number of seconds")
        self._api_key = api_key
        self._request_timeout = request_timeout
        self._now = now
        self._monotonic = monotonic
        # Set once a lookup route proved missing: a run pays that request once, not per receiver.
        self._plain_lookup = False  # only /participants/lookup answers lookups here
        self._no_lookup = False  # neither route does
        self._api = ApiCheck(self._get, list(PROBES.values()))
        self._requests = RequestBuilder(_FIXED_PATHS)
        # A connection not made within the request's limit times out as a connect, before the
        # limit does: a request that never left is no "unknown" send (helper-82: a 1 s limit
        # cut a hanging handshake, and the invoice waited for reconcile for nothing).
        connect = min(connect_timeout, request_timeout * _CONNECT_SHARE)
        self._timeout = httpx.Timeout(
            connect=connect, read=read_timeout, write=write_timeout, pool=pool_timeout
        )
        headers = {
            "User-Agent": f"invoicectl/{__version__}",
            "Accept": "application/json",
            "Accept-Encoding": ACCEPT_ENCODING,
        }

        def pool(connections: int) -> httpx.AsyncClient:
            return pool_client(self.base_url, headers, self._timeout, connections, transport)

        pools = 1 if transport is not None else Lanes.pools_for(max_connections)
        self._lanes = Lanes(pool, max_connections, pools=pools, api_key=api_key)

    def __repr__(self) -> str:
        return f"GoRouteClient(base_url={self.base_url!r}, api_key={self._api_key!r})"

    async def __aenter__(self) -> GoRouteClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._lanes.aclose()

    async def send_document(self, idempotency_key: str, body: bytes) -> Outcome:
        """POST one document; ``body`` (from ``build_send_body``) goes out byte for byte."""
        _check_idempotency_key(idempotency_key)
        answer = await self._request(
            "POST",
            _DOCUMENTS_PATH,
            content=body,
            headers={"Content-Type": "application/json", "Idempotency-Key": idempotency_key},
            # An answer may carry the document back (extra fields are allowed).
            max_bytes=max(_DOCUMENT_ANSWER_BYTES, 2 * len(body) + 64 * 1024),
        )
        if isinstance(answer, Transient):
            return answer
        if suspicious(answer) and not await self._api.api_answers():
            return wrong_endpoint(answer, self.base_url + _DOCUMENTS_PATH, self._redact)
        if not answer.ok:
            return self._failure(answer, key_reuse_possible=True)
        return accepted(answer)

    async def get_transaction(self, transaction_id: str) -> Outcome:
        """GET one transaction: Found, NotFound (404), or the failure outcome.

        An id that is not usable (``identifiers``; one an older invoicectl stored) is not
        asked for: the answer is a ``Rejected`` with no HTTP status, which is never retried.
        """
        if not transaction_id:
            raise ValueError("transaction_id must not be empty")
        if not usable_id(transaction_id):
            return Rejected(
                message="the transaction id is unusable "
                f"({why_unusable(self._redact(transaction_id))}); "
                "GoRoute was not asked"
            )
        # Quoted whole all the same, so no id can change the path.
        path = f"{_TRANSACTIONS_PATH}/{quote(transaction_id, safe='')}"
        answer = await self._request("GET", path, max_bytes=_TRANSACTION_BYTES)
        if isinstance(answer, Transient):
            return answer
        if suspicious(answer) and not await self._api.api_answers():
            return wrong_endpoint(answer, self.base_url + path, self._redact)
        if answer.status == HTTPStatus.NOT_FOUND:
            return NotFound(raw_body=answer.raw_body, **answer.common())
        if not answer.ok:
            return self._failure(answer, key_reuse_possible=False)
        if not isinstance(answer.data, dict):
            return unexpected_shape(answer, "a transaction object")
        transaction = Transaction.from_json(answer.data)
        if transaction.transaction_id not in (None, transaction_id):
            # An answer about another transaction says nothing of this one: never adopted.
            return unexpected_shape(answer, f"the transaction asked for ({transaction_id})")
        return Found(transaction=transaction, **answer.common())

    async def list_transactions(
        self, limit: int = 100, cursor: str | None = None
    ) -> TransactionPage | Outcome:
        """GET one page of transactions (newest first, as GoRoute orders them)."""
        if limit < 1:
            raise ValueError("limit must be at least 1")
        params: dict[str, str | int] = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        answer = await self._request(
            "GET", _TRANSACTIONS_PATH, params=params, max_bytes=_PAGE_BYTES
        )
        if isinstance(answer, Transient):
            return answer
        if suspicious(answer) and not await self._api.api_answers():
            return wrong_endpoint(answer, self.base_url + _TRANSACTIONS_PATH, self._redact)
        if not answer.ok:
            return self._failure(answer, key_reuse_possible=False)
        return page_of(answer)

    async def version(self) -> dict[str, Any] | Outcome:
        """GET /peppol/version: ``{"version", "environment", "status"}`` or the failure outcome."""
        answer = await self._request("GET", _VERSION_PATH, max_bytes=_VERSION_BYTES)
        if isinstance(answer, Transient):
            return answer
        if not answer.ok:
            return self._failure(answer, key_reuse_possible=False)
        if not isinstance(answer.data, dict):
            return unexpected_shape(answer, "a version object")
        return answer.data

    async def lookup_participant(self, peppol_id: str) -> Outcome:
        """Is ``peppol_id`` (``scheme:identifier``) on the Peppol network, and for what?

        A ``Participant`` (registered or not, from a 200 or a 404 in either documented shape),
        else the failure outcome; an answer that is neither shape, or about someone else, is
        a ``Transient``, never "not registered". Asks the versioned route, else the plain one.
        """
        asked = checked_peppol_id(peppol_id)
        if self._no_lookup:  # neither route answered as a lookup: no request spent again
            return Rejected(message="GoRoute answers no participant lookup at this base URL")
        if not self._plain_lookup:
            answer = await self._get_lookup(_LOOKUP_PATH, {"peppol_id": asked})
            if isinstance(answer, Transient) or not route_missing(answer):
                return lookup_outcome(answer, asked, self._plain_failure)
        answer = await self._get_lookup(_PLAIN_LOOKUP_PATH, {"identifier": asked})
        if not isinstance(answer, Transient):
            if is_lookup_document(answer.data):
                self._plain_lookup = True
            elif not self._plain_lookup and route_missing(answer):
                self._no_lookup = True
        return lookup_outcome(answer, asked, self._plain_failure)

    async def validate_document(self, document: bytes) -> Outcome:
        """POST the stored XML bytes as-is: a ``Validation``, or the failure outcome."""
        answer = await self._request(
            "POST",
            _VALIDATE_PATH,
            content=document,
            headers={"Content-Type": "application/xml"},
            max_bytes=MAX_VALIDATION_BYTES,
        )
        return validation_outcome(answer, self._plain_failure)

    async def probe(self, name: str) -> Answer | Transient:
        """One of ``PROBES``, answered as it came (64 KB at most): ``invoicectl doctor``."""
        return await self._get(*PROBES[name])

    async def _get(self, path: str, params: Mapping[str, str | int]) -> Answer | Transient:
        return await self._request("GET", path, params=params, max_bytes=MAX_PROBE_BYTES)

    async def _get_lookup(self, path: str, params: Mapping[str, str]) -> Answer | Transient:
        return await self._request("GET", path, params=params, max_bytes=MAX_LOOKUP_BYTES)

    def _plain_failure(self, answer: Answer) -> Outcome:
        return self._failure(answer, key_reuse_possible=False)

    async def _request(
        self,
        method: str,
        path: str,
        *,
        max_bytes: int,
        content: bytes | None = None,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer | Transient:
        """One request, its answer read within ``max_bytes`` and ``request_timeout``."""
        with self._lanes.least_busy() as lane:
            answer = await exchange(
                lane.send,
                lambda: self._requests.build(lane.http, method, path, content, params, headers),
                Bounds(max_bytes, self._time_limit(content), self._timeout),
                monotonic=self._monotonic,
                redact=self._redact,
            )
        if isinstance(answer, Answer):
            logger.debug("%s %s -> %d in %.3f s", method, path, answer.status, answer.duration)
        else:
            logger.debug("%s %s: %s", method, path, answer.reason)
        return answer

    def _time_limit(self, content: bytes | None) -> float:
        return self._request_timeout + len(content or b"") / _SLOW_UPLINK_BYTES_PER_SECOND

    def _failure(self, answer: Answer, *, key_reuse_possible: bool) -> Outcome:
        return failure(
            answer,
            key_reuse_possible=key_reuse_possible,
            now=self._now,
            redact=self._redact,
            base_url=self.base_url,
        )

    def _redact(self, text: str) -> str:
        return self._api_key.redact(text)


def _checked_base_url(base_url: str, *, over_network: bool) -> str:
    """The normalised URL (``config_values.base_url``); plain http only to a loopback host."""
    base_url = config_values.base_url(base_url, "given to the client")
    # Plain HTTP would put the API key on the wire in clear text. Loopback (a local
    # emulator) and injected transports (nothing leaves the process) are exempt.
    if over_network:
        config_values.refuse_plain_http(base_url)
    return base_url


def _check_idempotency_key(key: str) -> None:
    # Length and charset rules belong to whoever makes keys (goroute-api.md C); here only
    # what would corrupt the header itself, which is a bug, not an answer to record.
    if not key or not all("\x21" <= char <= "\x7e" for char in key):
        raise ValueError("idempotency key must be non-empty visible ASCII")

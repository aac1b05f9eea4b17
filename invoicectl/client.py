"""The GoRoute HTTP client: one request in, one plain-data outcome out.

This module owns everything that touches HTTP: building the send body, the headers, TLS and
timeouts, and the translation of every answer (or the lack of one) into an ``Outcome`` as
``goroute-api.md`` sections A and C fix it. Nothing here retries, sleeps or writes state; the
sender and reconcile decide by outcome type. Nothing here raises for an HTTP answer or a network
failure either: a caller only sees exceptions for programming errors (a bad argument).

    send_document    Accepted | KeyReused | RateLimited | Rejected | AuthRefused | Transient
    get_transaction  Found | NotFound | RateLimited | Rejected | AuthRefused | Transient
    list_transactions, version: the parsed answer, or one of the failure outcomes above

The API key leaves its ``ApiKey`` wrapper only inside ``_ApiKeyAuth``, as the request is sent.
Any text that came back from the server or from a network error is scrubbed of the key before it
reaches an outcome, in case a proxy echoes request headers into an error page.
"""

from __future__ import annotations

import json
import logging
import math
import re
import socket
import ssl
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from http import HTTPStatus
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

from invoicectl import __version__
from invoicectl.apikey import ApiKey
from invoicectl.errors import ConfigError
from invoicectl.outcomes import (
    Accepted,
    AuthRefused,
    KeyReused,
    Outcome,
    RateLimited,
    Rejected,
    Transient,
)

KEY_REUSED_CODE = "IDEMPOTENCY_KEY_REUSED"
FINAL_STATUSES = frozenset({"delivered", "failed"})

# The journal keeps the raw body of every non-2xx answer; an HTML error page from a proxy can be
# large, and nothing past the first screenful helps anyone.
MAX_RAW_BODY = 64 * 1024
_MAX_MESSAGE = 200
_MAX_DETAILS = 200
_MAX_DETAIL_LINE = 1000
_REDACTED = "[redacted]"
_TRUNCATED = "…[truncated]"

_DOCUMENTS_PATH = "/api/v1/documents"
_TRANSACTIONS_PATH = "/api/v1/transactions"
# goroute-api.md B puts the health check "outside /api/v1". We read that as outside the
# versioned prefix, not outside the base URL: every documented path hangs off the base URL,
# so this is <base>/peppol/version (https://app.goroute.ai/peppol-api/peppol/version), and the
# emulator, mounted at its own base URL, serves it at the same relative path.
_VERSION_PATH = "/peppol/version"

_LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
_DELTA_SECONDS = re.compile(r"\d{1,12}(\.\d{1,9})?", re.ASCII)
_PARTICIPANT_PREFIX = "iso6523-actorid-upis::"
_HTML_TAG = re.compile(r"<[^>]*>")

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


@dataclass(frozen=True)
class Transaction:
    """One GoRoute transaction, normalised from either documented shape (see ``from_json``)."""

    transaction_id: str | None = None
    invoice_number: str | None = None
    document_type: str | None = None
    receiver: str | None = None
    receiver_scheme: str | None = None
    receiver_id: str | None = None
    sender_id: str | None = None
    status: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    delivered_at: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict, hash=False)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, hash=False)

    @property
    def is_final(self) -> bool:
        """Delivered or failed: the only statuses that will not change any more."""
        return self.status in FINAL_STATUSES

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Transaction:
        """Read the list shape (``transaction_id``, ``invoice_number``, flat ``receiver_id``)
        or the single shape (``id``, ``document_id``, nested ``receiver``), or a mix."""
        scheme, identifier = _receiver_of(data)
        metadata = data.get("metadata")
        status = _text(data.get("status"))
        return cls(
            transaction_id=_first_text(data, "transaction_id", "id"),
            invoice_number=_first_text(data, "invoice_number", "document_id"),
            document_type=_text(data.get("document_type")),
            receiver=f"{scheme}:{identifier}" if scheme and identifier else None,
            receiver_scheme=scheme,
            receiver_id=identifier,
            sender_id=_sender_of(data),
            # Status words are compared against the documented lower-case set.
            status=status.lower() if status else None,
            created_at=_text(data.get("created_at")),
            updated_at=_text(data.get("updated_at")),
            delivered_at=_text(data.get("delivered_at")),
            metadata=dict(metadata) if isinstance(metadata, Mapping) else {},
            raw=dict(data),
        )


@dataclass(frozen=True)
class TransactionPage:
    """One page of GET /api/v1/transactions. ``has_more`` without a cursor cannot be followed."""

    transactions: tuple[Transaction, ...]
    next_cursor: str | None = None
    has_more: bool = False


@dataclass(frozen=True, kw_only=True)
class Found(Outcome):
    """GET /api/v1/transactions/{id} answered with the transaction."""

    transaction: Transaction


@dataclass(frozen=True)
class NotFound(Outcome):
    """GET /api/v1/transactions/{id} answered 404: GoRoute does not know the id."""


class GoRouteClient:
    """Async client for the GoRoute Peppol API. Use as ``async with GoRouteClient(...) as c``.

    ``transport`` replaces the network (respx in tests, the in-process emulator for
    ``--sandbox``); ``now`` and ``monotonic`` are the clocks for Retry-After dates and durations.
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
        max_connections: int = 100,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_url = _checked_base_url(base_url, over_network=transport is None)
        self._api_key = api_key
        self._now = now
        self._monotonic = monotonic
        self._timeout = httpx.Timeout(
            connect=connect_timeout, read=read_timeout, write=write_timeout, pool=pool_timeout
        )
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            auth=_ApiKeyAuth(api_key),
            headers={"User-Agent": f"invoicectl/{__version__}", "Accept": "application/json"},
            timeout=self._timeout,
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
            transport=transport,
            verify=True,
            # A redirect would carry the key (and the invoice) to wherever Location points,
            # and a POST redirect is a second send: never follow one, report it.
            follow_redirects=False,
        )

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
        await self._http.aclose()

    async def send_document(self, idempotency_key: str, body: bytes) -> Outcome:
        """POST one document; ``body`` (from ``build_send_body``) goes out byte for byte."""
        _check_idempotency_key(idempotency_key)
        answer = await self._request(
            "POST",
            _DOCUMENTS_PATH,
            content=body,
            headers={"Content-Type": "application/json", "Idempotency-Key": idempotency_key},
        )
        if isinstance(answer, Transient):
            return answer
        if not answer.ok:
            return self._failure(answer, key_reuse_possible=True)
        transaction_id = _transaction_id_of(answer.data)
        if transaction_id is None:
            # Without an id nothing proves the document was queued, and nothing would let
            # reconcile find it. Transient keeps the invoice replayable under the same key
            # and bytes, which the API answers with the original id if it was in fact sent.
            return Transient(
                reason=f"GoRoute answered {answer.status} without a transaction id; "
                "the send is unconfirmed and will be replayed under the same key",
                raw_body=answer.raw_body,
                **answer.common(),
            )
        return Accepted(transaction_id=transaction_id, **answer.common())

    async def get_transaction(self, transaction_id: str) -> Outcome:
        """GET one transaction: Found, NotFound (404), or the failure outcome."""
        if not transaction_id:
            raise ValueError("transaction_id must not be empty")
        # The id comes from a server answer: quote it whole so it cannot change the path.
        answer = await self._request(
            "GET", f"{_TRANSACTIONS_PATH}/{quote(transaction_id, safe='')}"
        )
        if isinstance(answer, Transient):
            return answer
        if answer.status == HTTPStatus.NOT_FOUND:
            return NotFound(raw_body=answer.raw_body, **answer.common())
        if not answer.ok:
            return self._failure(answer, key_reuse_possible=False)
        if not isinstance(answer.data, dict):
            return _unexpected_shape(answer, "a transaction object")
        return Found(transaction=Transaction.from_json(answer.data), **answer.common())

    async def list_transactions(
        self, limit: int = 100, cursor: str | None = None
    ) -> TransactionPage | Outcome:
        """GET one page of transactions (newest first, as GoRoute orders them)."""
        if limit < 1:
            raise ValueError("limit must be at least 1")
        params: dict[str, str | int] = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        answer = await self._request("GET", _TRANSACTIONS_PATH, params=params)
        if isinstance(answer, Transient):
            return answer
        if not answer.ok:
            return self._failure(answer, key_reuse_possible=False)
        return _page_of(answer)

    async def version(self) -> dict[str, Any] | Outcome:
        """GET /peppol/version: ``{"version", "environment", "status"}`` or the failure outcome."""
        answer = await self._request("GET", _VERSION_PATH)
        if isinstance(answer, Transient):
            return answer
        if not answer.ok:
            return self._failure(answer, key_reuse_possible=False)
        if not isinstance(answer.data, dict):
            return _unexpected_shape(answer, "a version object")
        return answer.data

    async def _request(
        self,
        method: str,
        path: str,
        *,
        content: bytes | None = None,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> _Answer | Transient:
        started = self._monotonic()
        try:
            response = await self._http.request(
                method, path, content=content, params=params, headers=headers
            )
        except httpx.RequestError as exc:
            duration = self._monotonic() - started
            reason = self._redact(_transport_reason(exc, self._timeout))
            logger.debug("%s %s failed after %.3f s: %s", method, path, duration, reason)
            # No chaining and no exception object kept: httpx errors hold the request, headers
            # included, and an outcome must be safe to log and store whole.
            return Transient(reason=reason, duration=duration)
        duration = self._monotonic() - started
        answer = _Answer.read(response, duration, self._redact)
        logger.debug("%s %s -> %d in %.3f s", method, path, answer.status, duration)
        return answer

    def _failure(self, answer: _Answer, *, key_reuse_possible: bool) -> Outcome:
        """The outcome of a non-2xx answer (goroute-api.md A, and C for what A leaves open)."""
        status, error = answer.status, answer.error()
        common = {**answer.common(), "raw_body": answer.raw_body}
        if status == HTTPStatus.TOO_MANY_REQUESTS:
            retry_after = parse_retry_after(answer.headers.get("Retry-After"), self._now())
            return RateLimited(retry_after=retry_after, **common)
        if status in (HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN):
            return AuthRefused(code=error.code, message=error.message, **common)
        if status == HTTPStatus.UNPROCESSABLE_ENTITY and key_reuse_possible and error.is_key_reuse:
            return KeyReused(
                existing_transaction_id=error.existing_transaction_id,
                code=error.code,
                message=error.message,
                **common,
            )
        if 400 <= status < 500:
            return Rejected(code=error.code, message=error.message, details=error.details, **common)
        if status >= 500:
            return Transient(reason=f"GoRoute answered {status}: {error.message}", **common)
        # 1xx/3xx: redirects are not followed (see __init__), and we cannot tell what the
        # server did with the request, so it stays replayable under the same key.
        location = answer.headers.get("Location")
        where = f" to {self._redact(location)}" if location else ""
        return Transient(
            reason=f"GoRoute answered {status}{where}; check the base URL ({self.base_url})",
            **common,
        )

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key.reveal(), _REDACTED)


class _ApiKeyAuth(httpx.Auth):
    """Adds X-API-Key as each request leaves, so the client's own headers never hold the key."""

    def __init__(self, api_key: ApiKey) -> None:
        self._api_key = api_key

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["X-API-Key"] = self._api_key.reveal()
        yield request


@dataclass(frozen=True)
class _ErrorBody:
    """What an error answer says, read tolerantly from either documented body shape."""

    code: str | None
    message: str
    details: tuple[str, ...]
    existing_transaction_id: str | None

    @property
    def is_key_reuse(self) -> bool:
        return self.code == KEY_REUSED_CODE or self.existing_transaction_id is not None


@dataclass(frozen=True)
class _Answer:
    """A received response, read once: status, redacted text, parsed JSON (None if not JSON)."""

    status: int
    reason_phrase: str
    headers: httpx.Headers
    text: str
    data: Any
    duration: float

    @classmethod
    def read(
        cls, response: httpx.Response, duration: float, redact: Callable[[str], str]
    ) -> _Answer:
        text = redact(response.text)
        return cls(
            status=response.status_code,
            reason_phrase=response.reason_phrase or _standard_phrase(response.status_code),
            headers=response.headers,
            text=text,
            data=_json_or_none(text),
            duration=duration,
        )

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def raw_body(self) -> str:
        if len(self.text) <= MAX_RAW_BODY:
            return self.text
        return self.text[:MAX_RAW_BODY] + _TRUNCATED

    @property
    def request_id(self) -> str | None:
        body = self.data if isinstance(self.data, dict) else {}
        error = body.get("error")
        from_error = _text(error.get("request_id")) if isinstance(error, dict) else None
        return (
            from_error or _text(body.get("request_id")) or _text(self.headers.get("X-Request-Id"))
        )

    def common(self) -> dict[str, Any]:
        """The Outcome fields every answer fills."""
        return {
            "http_status": self.status,
            "request_id": self.request_id,
            "duration": self.duration,
        }

    def error(self) -> _ErrorBody:
        """Code: error_code, error.code, code. Message: message, error.message, detail."""
        body = self.data if isinstance(self.data, dict) else {}
        error = body.get("error")
        nested = error if isinstance(error, dict) else {}
        detail = body.get("detail")  # FastAPI-style servers put a message or a list here
        message = (
            _text(body.get("message"))
            or _text(nested.get("message"))
            or (_text(detail) if isinstance(detail, str) else None)
            or (_text(error) if isinstance(error, str) else None)
            or self._fallback_message()
        )
        if "details" in body:
            raw_details = body["details"]
        elif "details" in nested:
            raw_details = nested["details"]
        else:
            raw_details = detail if isinstance(detail, list) else None
        return _ErrorBody(
            code=_first_text(body, "error_code")
            or _text(nested.get("code"))
            or _text(body.get("code")),
            message=_one_line(message)[:_MAX_DETAIL_LINE],
            details=_details_of(raw_details),
            existing_transaction_id=_text(body.get("existing_transaction_id"))
            or _text(nested.get("existing_transaction_id")),
        )

    def _fallback_message(self) -> str:
        if self.data is None and self.text.strip():
            text = self.text
            if text.lstrip().startswith("<"):  # an HTML page from a proxy: keep its words
                text = _HTML_TAG.sub(" ", text)
            line = _one_line(text)[:_MAX_MESSAGE]
            if line:
                return line
        return self.reason_phrase or f"HTTP {self.status}"


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date, RFC 9110).

    None when absent or unreadable (the caller then backs off on its own); never negative,
    since a date already past means "now".
    """
    if value is None:
        return None
    value = value.strip()
    if _DELTA_SECONDS.fullmatch(value):
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    # RFC 5322 "-0000" parses to a naive datetime; HTTP dates are always GMT.
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


def _checked_base_url(base_url: str, *, over_network: bool) -> str:
    base_url = base_url.strip().rstrip("/")
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL:
        raise ConfigError(f"invalid base URL {base_url!r}") from None
    # httpx percent-encodes what it cannot parse ("exa mple" becomes "exa%20mple"); a host
    # like that can only be a typo, and would otherwise surface as a DNS failure per request.
    if any(char.isspace() for char in base_url) or "%" in url.host:
        raise ConfigError(f"invalid base URL {base_url!r}")
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigError(f"base URL must be an http(s) URL with a host, not {base_url!r}")
    # Plain HTTP would put the API key on the wire in clear text. Loopback (a local
    # emulator) and injected transports (nothing leaves the process) are exempt.
    if over_network and url.scheme == "http" and url.host not in _LOOPBACK_HOSTS:
        raise ConfigError(
            f"base URL {base_url!r} is plain http to a remote host; the API key would be sent "
            "unencrypted. Use https://"
        )
    return base_url


def _check_idempotency_key(key: str) -> None:
    # Length and charset rules belong to whoever makes keys (goroute-api.md C); here only
    # what would corrupt the header itself, which is a bug, not an answer to record.
    if not key or not all("\x21" <= char <= "\x7e" for char in key):
        raise ValueError("idempotency key must be non-empty visible ASCII")


def _transaction_id_of(data: Any) -> str | None:
    if not isinstance(data, dict):
        return None
    return _first_text(data, "transaction_id", "id")


def _page_of(answer: _Answer) -> TransactionPage | Outcome:
    """Accept ``{"transactions": [...], "next_cursor", "has_more"}`` or a bare list."""
    data = answer.data
    if isinstance(data, list):
        items, next_cursor, has_more = data, None, False
    elif isinstance(data, dict) and isinstance(data.get("transactions"), list):
        items = data["transactions"]
        next_cursor = _text(data.get("next_cursor"))
        more = data.get("has_more")
        has_more = more if isinstance(more, bool) else next_cursor is not None
    else:
        return _unexpected_shape(answer, "a transactions list")
    if not all(isinstance(item, dict) for item in items):
        # Skipping entries would let reconcile report "not found" for a send that exists.
        return _unexpected_shape(answer, "a list of transaction objects")
    transactions = tuple(Transaction.from_json(item) for item in items)
    return TransactionPage(transactions=transactions, next_cursor=next_cursor, has_more=has_more)


def _unexpected_shape(answer: _Answer, expected: str) -> Transient:
    return Transient(
        reason=f"GoRoute answered {answer.status} but the body is not {expected}",
        raw_body=answer.raw_body,
        **answer.common(),
    )


def _transport_reason(exc: httpx.RequestError, timeout: httpx.Timeout) -> str:
    """A one-line reason for a request that got no answer; built from the exception's message
    only (httpx messages name no headers), never from the request it carries."""
    detail = _one_line(str(exc))[:_MAX_MESSAGE]
    if isinstance(exc, httpx.ConnectTimeout):
        return f"could not connect within {timeout.connect:g} s (the request was not sent)"
    if isinstance(exc, httpx.ReadTimeout):
        return f"timed out after {timeout.read:g} s waiting for an answer"
    if isinstance(exc, httpx.WriteTimeout):
        return f"timed out after {timeout.write:g} s while sending the request"
    if isinstance(exc, httpx.PoolTimeout):
        return f"no free connection within {timeout.pool:g} s (the request was not sent)"
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    if isinstance(exc, httpx.ConnectError):
        return _connect_reason(exc, detail)
    if isinstance(exc, httpx.RemoteProtocolError):
        return _with_detail("connection dropped before an answer", detail)
    if isinstance(exc, httpx.ReadError):
        return _with_detail("connection broken while reading the answer", detail)
    if isinstance(exc, httpx.WriteError):
        return _with_detail("connection broken while sending the request", detail)
    return _with_detail(type(exc).__name__, detail)


def _connect_reason(exc: httpx.ConnectError, detail: str) -> str:
    # anyio reports only "All connection attempts failed"; the OS error that says why is
    # further down the exception chain.
    causes = list(_causes(exc))
    if any(isinstance(cause, ConnectionRefusedError) for cause in causes):
        return "connection refused"
    if any(isinstance(cause, ssl.SSLError) for cause in causes):
        return _with_detail("TLS handshake failed", detail)
    if any(isinstance(cause, socket.gaierror) for cause in causes):
        return _with_detail("host name could not be resolved", detail)
    if "refused" in detail.lower():
        return "connection refused"
    return _with_detail("could not connect", detail)


def _causes(exc: BaseException) -> Generator[BaseException, None, None]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 20:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _with_detail(reason: str, detail: str) -> str:
    return f"{reason} ({detail})" if detail else reason


def _receiver_of(data: Mapping[str, Any]) -> tuple[str | None, str | None]:
    nested = data.get("receiver")
    if isinstance(nested, Mapping):
        return _participant_of(nested)
    if isinstance(nested, str):
        return _flat_participant(None, nested)
    return _flat_participant(data.get("receiver_scheme"), data.get("receiver_id"))


def _sender_of(data: Mapping[str, Any]) -> str | None:
    nested = data.get("sender")
    if isinstance(nested, Mapping):
        scheme, identifier = _participant_of(nested)
        return f"{scheme}:{identifier}" if scheme and identifier else identifier
    return _text(data.get("sender_id"))


def _participant_of(nested: Mapping[str, Any]) -> tuple[str | None, str | None]:
    return _flat_participant(
        _first_text(nested, "scheme", "scheme_id", "schemeID"),
        _first_text(nested, "identifier", "id", "value"),
    )


def _flat_participant(scheme_value: Any, id_value: Any) -> tuple[str | None, str | None]:
    """(scheme, id) from a scheme field (may be absent) and an id that may be "scheme:id"."""
    scheme, identifier = _text(scheme_value), _text(id_value)
    if identifier is None:
        return scheme, None
    if identifier.lower().startswith(_PARTICIPANT_PREFIX):
        identifier = identifier[len(_PARTICIPANT_PREFIX) :]
    if scheme is not None:
        # With the scheme given, the id is taken verbatim (ids may contain ':'), minus a
        # repeated "scheme:" prefix.
        prefix = f"{scheme}:"
        return scheme, identifier[len(prefix) :] if identifier.startswith(prefix) else identifier
    head, sep, tail = identifier.partition(":")
    if sep and head and tail:
        return head, tail
    return None, identifier


def _details_of(value: Any) -> tuple[str, ...]:
    """Details as one-line strings from a list (of objects or strings), a string, or nothing."""
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    lines = (_detail_line(item) for item in items[:_MAX_DETAILS])
    return tuple(line[:_MAX_DETAIL_LINE] for line in lines if line)


def _detail_line(item: Any) -> str:
    if isinstance(item, dict):
        rule = _first_text(item, "rule", "code", "type")
        location = _first_text(item, "location", "path")
        loc = item.get("loc")  # FastAPI: a list of path segments
        if location is None and isinstance(loc, list):
            location = ".".join(str(part) for part in loc)
        message = _first_text(item, "message", "msg")
        if rule or location or message:
            head = " at ".join(part for part in (rule, location) if part)
            return _one_line(f"{head}: {message}" if head and message else head or message or "")
        return _one_line(json.dumps(item, sort_keys=True, ensure_ascii=False))
    if isinstance(item, str):
        return _one_line(item)
    return _one_line(json.dumps(item, ensure_ascii=False))


def _json_or_none(text: str) -> Any:
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _text(value: Any) -> str | None:
    """A non-empty string from a JSON scalar; numbers become text, anything else None."""
    if isinstance(value, str):
        value = value.strip()
        return value or None
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return str(value)
    return None


def _first_text(data: Mapping[str, Any], *names: str) -> str | None:
    for name in names:
        value = _text(data.get(name))
        if value is not None:
            return value
    return None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _standard_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""

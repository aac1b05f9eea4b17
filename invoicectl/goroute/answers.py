"""Reading GoRoute's answers: a response, or the lack of one, turned into plain data.

This module owns what ``goroute-api.md`` sections A and C say an answer means: the status
mapped to an ``Outcome``, error bodies read tolerantly from either documented shape (and from
the HTML page a proxy may send instead), Retry-After in both RFC 9110 forms, and a one-line
reason for a request that got no answer at all. How much of a body is read, and for how
long, is ``reading``'s.

Everything the server or a network error says is scrubbed of the API key (``ApiKey.redact``,
every encoded form too) before it is kept, in case a proxy echoes request headers into an
error page; ids it hands out are kept only if usable (``identifiers``).
"""

from __future__ import annotations

import json
import re
import socket
import ssl
from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from http import HTTPStatus
from typing import Any

import httpx

from invoicectl.goroute.identifiers import checked_id, usable_id, why_unusable
from invoicectl.goroute.jsontext import first_text, json_or_none, present_text, text_of
from invoicectl.goroute.outcomes import (
    Accepted,
    AuthRefused,
    KeyReused,
    Outcome,
    RateLimited,
    Rejected,
    Transient,
    not_taken,
)
from invoicectl.goroute.redaction import redact_data
from invoicectl.text import cut, folded_line

KEY_REUSED_CODE = "IDEMPOTENCY_KEY_REUSED"

# The journal keeps the raw body of every non-2xx answer; an HTML error page from a proxy can be
# large, and nothing past the first screenful helps anyone. Only that much of an answer's text,
# and a margin that holds an echo of the key cut there, is redacted and kept: all of a 30 MB
# answer full of escapes took minutes of CPU (helper-82). Its JSON is parsed whole.
MAX_RAW_BODY = 64 * 1024
_TEXT_KEPT = MAX_RAW_BODY + 4096
_MAX_MESSAGE = 200
_MAX_DETAILS = 200
_MAX_DETAIL_LINE = 1000
_TRUNCATED = "…[truncated]"

_DELTA_SECONDS = re.compile(r"\d{1,12}(\.\d{1,9})?", re.ASCII)
# Delta-seconds of more digits than _DELTA_SECONDS reads: a wait longer than any cap
# (``--max-wait``) clips, never a header read as missing (which backs off a second).
_LONGER_THAN_ANY_WAIT = 1e12
_HTML_TAG = re.compile(r"<[^>]*>")


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

    def whole(self, redact: Callable[[str], str]) -> _ErrorBody:
        """Itself, unless its texts joined (as a reason joins them) spell the API key that
        none spells alone (a server echoing it in pieces): then its message says so, in
        place of them all."""
        joined = " ".join((self.code or "", self.message, *self.details))
        if redact(joined) == joined:
            return self
        withheld = "the answer's error texts, read together, echoed the API key: withheld"
        return replace(self, message=withheld, details=())


@dataclass(frozen=True)
class Answer:
    """A received response, read once: status, redacted text, parsed JSON (None if not JSON)."""

    status: int
    reason_phrase: str
    headers: httpx.Headers
    text: str
    data: Any
    duration: float
    request_id: str | None = None  # usable (``identifiers``) or None

    @classmethod
    def read(
        cls,
        response: httpx.Response,
        body: bytes,
        duration: float,
        redact: Callable[[str], str],
    ) -> Answer:
        """``body``: the response's content, already read within its cap (``reading``).

        Everything from the server is redacted here, once: the body as text, every string in
        its JSON (decoded escapes included), the reason phrase and the request id.
        """
        # Parsed before the text is redacted, then every decoded string on its own: a marker
        # put into raw JSON text could land after a backslash and break the document.
        unredacted = _decoded(body, response)
        data = redact_data(json_or_none(unredacted), redact)  # TooCostly: see ``exchange``
        text = redact(cut(unredacted, _TEXT_KEPT, _TRUNCATED))
        header_id = text_of(response.headers.get("X-Request-Id"))
        return cls(
            status=response.status_code,
            reason_phrase=folded_line(
                redact(response.reason_phrase or _standard_phrase(response.status_code))
            ),
            headers=response.headers,
            text=text,
            data=data,
            duration=duration,
            request_id=checked_id(_request_id_of(data))
            or (checked_id(redact(header_id)) if header_id else None),
        )

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def raw_body(self) -> str:
        return cut(self.text, MAX_RAW_BODY, _TRUNCATED)

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
            text_of(body.get("message"))
            or text_of(nested.get("message"))
            or (text_of(detail) if isinstance(detail, str) else None)
            or (text_of(error) if isinstance(error, str) else None)
            or self._fallback_message()
        )
        if "details" in body:
            raw_details = body["details"]
        elif "details" in nested:
            raw_details = nested["details"]
        else:
            raw_details = detail if isinstance(detail, list) else None
        code = (
            first_text(body, "error_code")
            or text_of(nested.get("code"))
            or text_of(body.get("code"))
        )
        return _ErrorBody(
            code=folded_line(code)[:_MAX_DETAIL_LINE] if code else None,
            message=folded_line(message)[:_MAX_DETAIL_LINE],
            details=_details_of(raw_details),
            existing_transaction_id=text_of(body.get("existing_transaction_id"))
            or text_of(nested.get("existing_transaction_id")),
        )

    def _fallback_message(self) -> str:
        if self.data is None and self.text.strip():
            text = self.text
            if text.lstrip().startswith("<"):  # an HTML page from a proxy: keep its words
                text = _HTML_TAG.sub(" ", text)
            line = folded_line(text)[:_MAX_MESSAGE]
            if line:
                return line
        return self.reason_phrase or f"HTTP {self.status}"


def failure(
    answer: Answer,
    *,
    key_reuse_possible: bool,
    now: Callable[[], datetime],
    redact: Callable[[str], str],
    base_url: str,
) -> Outcome:
    """The outcome of a non-2xx answer (goroute-api.md A, and C for what A leaves open)."""
    status, error = answer.status, answer.error().whole(redact)
    common = {**answer.common(), "raw_body": answer.raw_body}
    if status == HTTPStatus.TOO_MANY_REQUESTS:
        retry_after = parse_retry_after(answer.headers.get("Retry-After"), now())
        return RateLimited(retry_after=retry_after, **common)
    if status in (HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN):
        return AuthRefused(code=error.code, message=error.message, **common)
    if status == HTTPStatus.UNPROCESSABLE_ENTITY and key_reuse_possible and error.is_key_reuse:
        existing, message = error.existing_transaction_id, error.message
        if existing is not None and not usable_id(existing):
            # Still a refused key; the id is dropped so reconcile searches for the send
            # (a key_reused invoice without an id) instead of asking for a broken URL.
            message = (
                f"{message}; the server's existing_transaction_id was unusable "
                f"({why_unusable(existing)}) and was not kept"
            )
            existing = None
        return KeyReused(
            existing_transaction_id=existing, code=error.code, message=message, **common
        )
    if not_taken(status):  # a 5xx, or a 4xx that says the request was not taken
        return Transient(reason=f"GoRoute answered {status}: {error.message}", **common)
    if status >= 400:
        return Rejected(code=error.code, message=error.message, details=error.details, **common)
    # 1xx/3xx: the client follows no redirect, and we cannot tell what the server did with
    # the request, so it stays replayable under the same key (``outcomes.redirected``).
    location = answer.headers.get("Location")
    where = f" to {folded_line(redact(location))[:_MAX_MESSAGE]}" if location else ""
    return Transient(
        reason=f"GoRoute answered {status}, a redirect{where}: the API does not redirect, so "
        f"the base URL {base_url} is wrong or has moved (check GOROUTE_BASE_URL or base_url)",
        **common,
    )


def accepted(answer: Answer) -> Accepted | Transient:
    """A 2xx to the documents POST: ``Accepted`` only with a usable transaction id.

    Without one nothing proves the document was queued, and nothing would let reconcile find
    it; an id that cannot be stored or asked for confirms nothing either. Transient keeps the
    invoice replayable under the same key and bytes, which the API answers with the original
    id if it was in fact sent.
    """
    data = answer.data
    transaction_id = present_text(data, "transaction_id", "id") if isinstance(data, dict) else None
    if transaction_id is None:
        why = "without a transaction id"
    elif not usable_id(transaction_id):
        why = f"with an unusable transaction id ({why_unusable(transaction_id)})"
    else:
        return Accepted(transaction_id=transaction_id, **answer.common())
    return Transient(
        reason=f"GoRoute answered {answer.status} {why}; "
        "the send is unconfirmed and will be replayed under the same key",
        raw_body=answer.raw_body,
        **answer.common(),
    )


def unexpected_shape(answer: Answer, expected: str) -> Transient:
    """A 2xx answer whose body is not what the endpoint documents."""
    return Transient(
        reason=f"GoRoute answered {answer.status} but the body is not {expected}",
        raw_body=answer.raw_body,
        **answer.common(),
    )


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
    if value.isascii() and value.isdigit():  # more seconds than any wait: the longest wait
        return _LONGER_THAN_ANY_WAIT
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


def transport_reason(
    exc: httpx.RequestError, timeout: httpx.Timeout, redact: Callable[[str], str]
) -> str:
    """A one-line reason for a request that got no answer; built from the exception's message
    only (httpx messages name no headers), never from the request it carries. The message may
    quote what the server sent (a malformed header line): redacted before it is cut short, so
    no cut can leave half a key."""
    detail = folded_line(redact(str(exc)))[:_MAX_MESSAGE]
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


def _details_of(value: Any) -> tuple[str, ...]:
    """Details as one-line strings from a list (of objects or strings), a string, or nothing."""
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    lines = (_detail_line(item) for item in items[:_MAX_DETAILS])
    return tuple(line[:_MAX_DETAIL_LINE] for line in lines if line)


def _detail_line(item: Any) -> str:
    if isinstance(item, dict):
        rule = first_text(item, "rule", "code", "type")
        location = first_text(item, "location", "path")
        loc = item.get("loc")  # FastAPI: a list of path segments
        if location is None and isinstance(loc, list):
            location = ".".join(str(part) for part in loc)
        message = first_text(item, "message", "msg")
        if rule or location or message:
            head = " at ".join(part for part in (rule, location) if part)
            return folded_line(f"{head}: {message}" if head and message else head or message or "")
        return folded_line(json.dumps(item, sort_keys=True, ensure_ascii=False))
    if isinstance(item, str):
        return folded_line(item)
    return folded_line(json.dumps(item, ensure_ascii=False))


def _request_id_of(data: Any) -> str | None:
    body = data if isinstance(data, dict) else {}
    error = body.get("error")
    from_error = text_of(error.get("request_id")) if isinstance(error, dict) else None
    return from_error or text_of(body.get("request_id"))


def _decoded(body: bytes, response: httpx.Response) -> str:
    # As httpx decodes ``response.text``: the declared charset, else UTF-8, never raising.
    # A charset Python knows but that is no text encoding (``idna``, ``punycode``,
    # ``undefined``) raises UnicodeError whatever ``errors`` says: UTF-8 then.
    try:
        return body.decode(response.encoding or "utf-8", errors="replace")
    except (LookupError, UnicodeError):
        return body.decode("utf-8", errors="replace")


def _standard_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""

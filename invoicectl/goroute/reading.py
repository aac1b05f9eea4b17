"""Reading an answer's body within bounds: so many bytes at most, so many seconds in all.

Every answer is streamed (``read_capped``): a declared ``Content-Length`` over the endpoint's
cap is refused before a byte is read, and a body that grows past it stops being read; the
caller then closes the response, which drops the connection. Compressed bodies are inflated
here, chunk by chunk and never past the cap, since a few KB of gzip can inflate to gigabytes;
invoicectl asks for ``identity`` and reads only gzip and deflate besides. An endless body, a
3 GB length or a 60 MB page therefore costs at most the cap in memory.

httpx's read timeout restarts with every byte, so a server trickling one byte every few seconds
would hold a request forever; the client also bounds each whole request (sending it and reading
the capped body) in wall-clock time, and ``over_time`` is what that comes to. Both failures are
``Transient`` with ``sent=True``: the request may have reached GoRoute, so the invoice's
outcome is unknown and it is replayed under the same key, never taken as refused.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx

from invoicectl.goroute.answers import Answer, transport_reason
from invoicectl.goroute.outcomes import Transient
from invoicectl.goroute.redaction import TooCostly
from invoicectl.text import decimal, folded_line

ACCEPT_ENCODING = "identity"


@dataclass(frozen=True)
class Bounds:
    """How much one request may take: body bytes, wall-clock seconds, httpx's own timeouts."""

    max_bytes: int
    seconds: float
    timeout: httpx.Timeout


async def exchange(
    send: Callable[[httpx.Request], Awaitable[httpx.Response]],
    build: Callable[[], httpx.Request],
    bounds: Bounds,
    *,
    monotonic: Callable[[], float],
    redact: Callable[[str], str],
) -> Answer | Transient:
    """Send the request ``build`` makes and read its answer within ``bounds``; the
    connection is dropped when either bound runs out. Never raises for what the network or
    the server did."""
    started = monotonic()
    try:
        async with asyncio.timeout(bounds.seconds):
            response = await send(build())
            try:
                body = await read_capped(response, bounds.max_bytes)
            finally:
                await response.aclose()
    except TimeoutError:
        # The request may have left: for a POST the document may be queued. Unknown.
        return over_time(bounds.seconds, monotonic() - started)
    except BodyUnreadable as unread:  # redacted before it is cut: no cut leaves half a key
        return too_large(response, folded_line(redact(unread.why))[:200], monotonic() - started)
    except httpx.InvalidURL as exc:  # nothing left: the URL could not even be built
        reason = folded_line(redact(str(exc)))[:200]
        return Transient(reason=f"the request could not be built ({reason})", sent=False)
    except httpx.RequestError as exc:
        # No chaining and no exception object kept: httpx errors hold the request, headers
        # included, and an outcome must be safe to log and store whole.
        never_left = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)
        return Transient(
            reason=transport_reason(exc, bounds.timeout, redact),
            duration=monotonic() - started,
            sent=not never_left,
        )
    try:
        return Answer.read(response, body, monotonic() - started, redact)
    except TooCostly as costly:  # a hostile answer: unread, whatever its status, as one too large
        return too_large(response, str(costly), monotonic() - started)


class BodyUnreadable(Exception):
    """The body is over the cap, or in an encoding invoicectl does not read; ``why`` says
    which, as it follows "GoRoute answered 202 "."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


async def read_capped(response: httpx.Response, limit: int) -> bytes:
    """The decoded body of a streamed response; ``BodyUnreadable`` past ``limit`` bytes (the
    rest is left unread) or in an encoding other than identity, gzip or deflate."""
    declared = response.headers.get("Content-Length", "").strip()
    if decimal(declared) and int(declared) > limit:
        raise BodyUnreadable(f"with more than {limit} bytes")
    if response.is_stream_consumed:  # built in memory by a test transport: read already
        if len(response.content) > limit:
            raise BodyUnreadable(f"with more than {limit} bytes")
        return response.content
    inflate = _inflater(response.headers.get("Content-Encoding", ""))
    chunks: list[bytes] = []
    size = 0
    async for raw in response.aiter_raw():
        chunk = inflate(raw, limit - size + 1) if inflate else raw
        size += len(chunk)
        if size > limit:
            raise BodyUnreadable(f"with more than {limit} bytes")
        chunks.append(chunk)
    if inflate:
        inflate.check_ended()
    return b"".join(chunks)


def too_large(response: httpx.Response, why: str, duration: float) -> Transient:
    return Transient(
        reason=f"GoRoute answered {response.status_code} {why}; the answer was not read",
        http_status=response.status_code,
        duration=duration,
    )


def over_time(seconds: float, duration: float) -> Transient:
    return Transient(
        reason=f"no complete answer within {round(seconds, 1):g} s, the limit for this request; "
        "the outcome is unknown",
        duration=duration,
    )


def _inflater(encoding: str) -> _Inflater | None:
    """A bounded decoder for ``encoding``; None for identity."""
    name = encoding.strip().lower()
    if name in ("", "identity"):
        return None
    if name in ("gzip", "x-gzip", "deflate"):
        return _Inflater(raw_fallback=name == "deflate")
    raise BodyUnreadable(f"in Content-Encoding {encoding!r}, which invoicectl does not read")


class _Inflater:
    """gzip or zlib (auto-detected), or raw deflate, which servers also send as "deflate".
    A gzip body may hold several members, read as their concatenation (RFC 1952): reading
    only the first took two answers in one body for the first alone (helper-82)."""

    def __init__(self, *, raw_fallback: bool) -> None:
        self._decoder = zlib.decompressobj(zlib.MAX_WBITS | 32)
        self._raw_fallback = raw_fallback
        self._started = False
        self._padded = False  # zero bytes came after the last member: only zeros may follow

    def __call__(self, data: bytes, room: int) -> bytes:
        """At most ``room`` bytes out of ``data``: a full ``room`` means over the cap, and the
        input left over is never inflated. Bytes after a member's end start the next one;
        zero bytes there are padding, as gzip(1) reads them (helper-84)."""
        if self._padded:
            if data.strip(b"\0"):
                raise BodyUnreadable("with a corrupt compressed body")
            return b""
        out = self._inflate(data, room)
        while self._decoder.eof and self._decoder.unused_data and len(out) < room:
            rest = self._decoder.unused_data
            if not rest.strip(b"\0"):
                self._padded = True
                break
            self._decoder = zlib.decompressobj(zlib.MAX_WBITS | 32)
            out += self._inflate(rest, room - len(out))
        return out

    def check_ended(self) -> None:
        """``BodyUnreadable`` when the body stopped inside a compressed stream: cut short,
        whatever its first bytes inflate to."""
        if self._started and not self._decoder.eof:
            raise BodyUnreadable("with a compressed body cut short")

    def _inflate(self, data: bytes, room: int) -> bytes:
        try:
            out = self._decoder.decompress(data, room)
        except zlib.error:
            if not self._raw_fallback or self._started:
                raise BodyUnreadable("with a corrupt compressed body") from None
            self._decoder = zlib.decompressobj(-zlib.MAX_WBITS)
            try:
                out = self._decoder.decompress(data, room)
            except zlib.error:
                raise BodyUnreadable("with a corrupt compressed body") from None
        self._started = True
        return out

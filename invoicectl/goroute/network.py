"""httpcore's network layer on asyncio's own transports (``AsyncioBackend``), for the client's
pools (``run_on_asyncio``).

httpx reaches its sockets through httpcore, which on asyncio goes through anyio: every read
and every write runs in a cancel scope of its own (``anyio.fail_after``) over anyio's socket
stream. For POSTs of 10 KB to the emulator on loopback from 50 tasks that was about a quarter
of the HTTP client's CPU: 0.62-0.74 ms a request against 0.48-0.56 ms here, side by side. Here
a read that must wait awaits one future, and its timeout is one timer.

What httpcore asks of a stream, and what it gets:

- ``read(max_bytes, timeout)``: what has arrived, at most ``max_bytes``; ``b""`` once the
  server has closed; ``ReadTimeout`` when nothing arrives in time, ``ReadError`` when the
  connection broke.
- ``write(buffer, timeout)``: the bytes handed to the transport a piece at a time, waiting
  while it holds more than its high-water mark unsent; ``WriteTimeout`` when the whole write
  has not gone in time, ``WriteError``.
- ``start_tls``: asyncio's TLS over the connection (over a proxy's tunnel too, TLS in TLS);
  ``ConnectError`` for a failed handshake or certificate, or for a connection that sent
  bytes before the handshake (after a proxy's answer to CONNECT: nobody's TLS),
  ``ConnectTimeout``.
- ``aclose``: the connection aborted at once, whatever it holds unsent.
- ``get_extra_info``: ``ssl_object``, ``client_addr``, ``server_addr``, ``socket``, and
  ``is_readable``, which the pool asks of an idle connection before it reuses it: has the
  server closed it, or sent something nobody asked for? What it sent in the same packet as
  an answer is read already and waits in the HTTP parser: each pool's connections count as
  expired then (``_given_up_when_answered_ahead``).

Every error is raised from the OS's or TLS's own (``__cause__``), which is where the answer's
reason looks for why (``answers.transport_reason``). Reading pauses while more than
``_READ_AHEAD`` bytes wait unread, so memory stays bounded however fast a server sends.
"""

from __future__ import annotations

import asyncio
import select
import ssl
from collections.abc import Callable, Iterable
from typing import Any

import httpcore
import httpx

# Bytes received and not yet read past which the transport stops reading from the socket.
_READ_AHEAD = 256 * 1024
# A write hands the transport this much at a time, and waits while it holds too much
# unsent: asyncio's TLS layer encrypts whatever it is handed into the socket's buffer at
# once, and tells nobody to wait, so one large write would never wait, nor time out.
_WRITE_PIECE = 64 * 1024
# anyio's delay before trying a host's next address (RFC 8305), kept.
_HAPPY_EYEBALLS_DELAY = 0.25


def run_on_asyncio(client: httpx.AsyncClient) -> None:
    """Every connection pool of ``client`` on ``AsyncioBackend``: its own, and the proxies'
    it mounted from the environment. A pool httpx or httpcore no longer builds this way
    keeps its own backend (tests/test_network.py fails then)."""
    backend = AsyncioBackend()
    for pool in _pools(client):
        if hasattr(pool, "_network_backend"):
            pool._network_backend = backend
            pool.create_connection = _given_up_when_answered_ahead(pool.create_connection)


def _given_up_when_answered_ahead(create: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``create_connection`` of a pool whose idle connections count as expired (closed, not
    reused) while answers nobody asked for wait in their HTTP parser's buffer. A server that
    sends a second answer right behind the first, in the same packet, leaves it there, where
    ``is_readable`` cannot see it, and httpcore would read it as the next request's answer."""

    def create_connection(origin: Any) -> Any:
        connection = create(origin)
        expired = connection.has_expired

        def has_expired() -> bool:
            return expired() or (connection.is_idle() and _read_ahead(connection))

        connection.has_expired = has_expired  # the pool asks it of each connection it holds
        return connection

    return create_connection


def _read_ahead(connection: Any) -> bool:
    """Whether the HTTP/1.1 parser under ``connection`` (through a proxy's layers) holds
    bytes no request has asked for yet."""
    for _ in range(4):
        parser = getattr(connection, "_h11_state", None)
        if parser is not None:
            return bool(parser.trailing_data[0])
        connection = getattr(connection, "_connection", None)
    return False


def _pools(client: httpx.AsyncClient) -> Iterable[Any]:
    for transport in (client._transport, *client._mounts.values()):
        pool = getattr(transport, "_pool", None)
        if pool is not None:
            yield pool


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        connecting = loop.create_connection(
            _Protocol,
            host,
            port,
            local_addr=None if local_address is None else (local_address, 0),
            happy_eyeballs_delay=_HAPPY_EYEBALLS_DELAY,
        )
        transport, protocol = await _connected(connecting, timeout)
        return _with_options(Stream(transport, protocol), socket_options)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        transport, protocol = await _connected(
            loop.create_unix_connection(_Protocol, path), timeout
        )
        return _with_options(Stream(transport, protocol), socket_options)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def _connected(connecting: Any, timeout: float | None) -> tuple[asyncio.Transport, _Protocol]:
    try:
        async with asyncio.timeout(timeout):
            transport, protocol = await connecting
    except TimeoutError as exc:
        raise httpcore.ConnectTimeout(f"no connection within {timeout} s") from exc
    except OSError as exc:  # refused, unreachable, a name not resolved (socket.gaierror)
        raise httpcore.ConnectError(str(exc)) from exc
    return transport, protocol


def _with_options(stream: Stream, options: Iterable[Any] | None) -> Stream:
    raw = stream.get_extra_info("socket")
    try:
        for option in options or ():
            raw.setsockopt(*option)
    except OSError as exc:  # nothing was sent yet
        stream.abort()
        raise httpcore.ConnectError(str(exc)) from exc
    return stream


class _Protocol(asyncio.Protocol):
    """What a connection has received and not yet read, and whoever waits for more."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.received = bytearray()
        self.closed = False  # the server closed, or the connection broke
        self.error: BaseException | None = None  # what broke it
        self.reading_paused = False
        self.writing_paused = False
        self.reader: asyncio.Future[None] | None = None
        self.drainer: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.received += data
        if len(self.received) > _READ_AHEAD and not self.reading_paused and self.transport:
            self.reading_paused = True
            self.transport.pause_reading()
        _wake(self.reader)

    def eof_received(self) -> bool:
        self.closed = True
        _wake(self.reader)
        _wake(self.drainer)
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.error = self.error or exc
        _wake(self.reader)
        _wake(self.drainer)

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        _wake(self.drainer)

    def adopt(self, transport: asyncio.Transport) -> None:
        """The transport that now delivers to this protocol (TLS's, once it has started)."""
        self.transport = transport
        self.reading_paused = len(self.received) > _READ_AHEAD
        if self.reading_paused:
            transport.pause_reading()

    def take(self, max_bytes: int) -> bytes:
        if len(self.received) <= max_bytes:
            data = bytes(self.received)
            self.received.clear()
        else:
            data = bytes(self.received[:max_bytes])
            del self.received[:max_bytes]
        if self.reading_paused and len(self.received) <= _READ_AHEAD and self.transport:
            self.reading_paused = False
            self.transport.resume_reading()
        return data


def _wake(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


def _expire(waiter: asyncio.Future[None], error: type[Exception], message: str) -> None:
    if not waiter.done():
        waiter.set_exception(error(message))


async def _wait(
    waiter: asyncio.Future[None], seconds: float | None, error: type[Exception], message: str
) -> None:
    """``waiter``'s end, or ``error(message)`` raised once ``seconds`` have passed."""
    timer = None
    if seconds is not None:
        loop = asyncio.get_running_loop()
        timer = loop.call_later(seconds, _expire, waiter, error, message)
    try:
        await waiter
    finally:
        if timer is not None:
            timer.cancel()


class Stream(httpcore.AsyncNetworkStream):
    """One connection, plain or TLS; both share the connection's protocol."""

    def __init__(self, transport: asyncio.Transport, protocol: _Protocol) -> None:
        self._transport = transport
        self._protocol = protocol

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        protocol = self._protocol
        while not protocol.received:
            if protocol.closed:
                if protocol.error is not None:
                    raise httpcore.ReadError(str(protocol.error)) from protocol.error
                return b""
            protocol.reader = asyncio.get_running_loop().create_future()
            try:
                await _wait(
                    protocol.reader, timeout, httpcore.ReadTimeout, f"nothing read in {timeout} s"
                )
            finally:
                protocol.reader = None
        return protocol.take(max_bytes)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        self._raise_if_broken()
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        whole = memoryview(buffer)
        for start in range(0, len(whole), _WRITE_PIECE):
            self._transport.write(whole[start : start + _WRITE_PIECE])
            await self._drained(deadline, timeout)
            self._raise_if_broken()

    async def _drained(self, deadline: float | None, timeout: float | None) -> None:
        """Back once the transport holds little enough unsent; WriteTimeout at ``deadline``."""
        protocol = self._protocol
        while protocol.writing_paused and not protocol.closed:
            loop = asyncio.get_running_loop()
            left = None if deadline is None else max(0.0, deadline - loop.time())
            protocol.drainer = loop.create_future()
            try:
                await _wait(
                    protocol.drainer, left, httpcore.WriteTimeout, f"not written in {timeout} s"
                )
            finally:
                protocol.drainer = None

    def _raise_if_broken(self) -> None:
        if self._protocol.error is not None:
            raise httpcore.WriteError(str(self._protocol.error)) from self._protocol.error
        if self._protocol.closed or self._transport.is_closing():
            raise httpcore.WriteError("the connection is closed")

    async def aclose(self) -> None:
        # At once, as anyio's streams do: a graceful close keeps a connection open for as
        # long as what it holds unsent takes to leave (forever, to a server that stopped
        # reading), and the rest of an abandoned request would trickle out meanwhile.
        self.abort()

    def abort(self) -> None:
        self._transport.abort()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        if self._protocol.received or self._protocol.closed:
            # Bytes that came before the handshake (after a proxy's answer to CONNECT) are
            # nobody's TLS: read after it, they would pass as the server's own answer.
            self.abort()
            raise httpcore.ConnectError(
                "the connection sent bytes nobody asked for before its TLS handshake"
            )
        loop = asyncio.get_running_loop()
        self._protocol.transport = None  # TLS's own, once it has started (adopt)
        try:
            async with asyncio.timeout(timeout):
                transport = await loop.start_tls(
                    self._transport, self._protocol, ssl_context, server_hostname=server_hostname
                )
        except TimeoutError as exc:
            self.abort()
            raise httpcore.ConnectTimeout(f"no TLS handshake within {timeout:g} s") from exc
        except (OSError, ssl.SSLError) as exc:  # ssl.SSLCertVerificationError among them
            self.abort()
            raise httpcore.ConnectError(str(exc)) from exc
        if transport is None:  # the connection was lost during the handshake
            self.abort()
            raise httpcore.ConnectError("the connection closed during the TLS handshake")
        self._protocol.adopt(transport)
        return Stream(transport, self._protocol)

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            return self._protocol.closed or bool(self._protocol.received) or self._unread()
        name = {"client_addr": "sockname", "server_addr": "peername"}.get(info, info)
        if name in ("ssl_object", "sockname", "peername", "socket"):
            return self._transport.get_extra_info(name)
        return None

    def _unread(self) -> bool:
        """Whether the socket holds bytes (or its end) the event loop has not delivered yet:
        the pool asks before it reuses an idle connection, and a loop busy with the
        journal's commits may not have run since the server closed it."""
        raw = self._transport.get_extra_info("socket")
        if raw is None or raw.fileno() < 0:
            return True
        poll = select.poll()
        poll.register(raw.fileno(), select.POLLIN)
        return bool(poll.poll(0))

"""A hostile HTTP server on loopback: each answer is scripted, byte by byte if need be.

The emulator answers as GoRoute does; this server answers as a broken proxy, a slow network or
an attacker might: bodies that never end, a ``Content-Length`` of gigabytes, one byte every few
seconds, the request's own key echoed back in every form. It runs in a thread of the test
process (or, for the real CLI in a subprocess, beside it) and records every request it got.

    with HostileServer(answer_json(202, {"transaction_id": "tx-1"})) as server:
        run_cli("send", ..., env={"GOROUTE_BASE_URL": server.base_url})
        assert server.requests[0].path == "/api/v1/documents"

A behaviour is a function ``(request, wire) -> None`` that writes the answer on ``wire``;
``routes`` picks one by method and path prefix, ``in_turn`` by the order requests come in,
``per_request`` by anything in the request itself.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import httpx


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # with its query string, as sent
    headers: Mapping[str, str]  # names lower-cased
    body: bytes
    # Every header line as sent (names lower-cased), repeats kept: ``headers`` keeps the last.
    header_lines: tuple[tuple[str, str], ...] = ()


class Wire:
    """The connection to the client; writes stop quietly once the client has gone."""

    def __init__(self, sock: socket.socket, stopping: threading.Event) -> None:
        self._sock = sock
        self.stopping = stopping
        self.closed = False

    def write(self, data: bytes) -> bool:
        if self.closed or self.stopping.is_set():
            return False
        try:
            self._sock.sendall(data)
        except OSError:
            self.closed = True
        return not self.closed

    def wait(self, seconds: float) -> bool:
        """Sleep, unless the server is stopping; False once it is."""
        return not self.stopping.wait(seconds)


Behaviour = Callable[[Request, Wire], None]


def head(status: int, headers: Mapping[str, str] | None = None, reason: str = "") -> bytes:
    lines = [f"HTTP/1.1 {status} {reason or _REASONS.get(status, 'Answer')}"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def answer(
    status: int,
    body: bytes = b"",
    headers: Mapping[str, str] | None = None,
    reason: str = "",
) -> Behaviour:
    """A plain, complete answer (``Content-Length`` set unless given)."""

    def behave(request: Request, wire: Wire) -> None:
        all_headers = {"Content-Length": str(len(body)), "Connection": "close", **(headers or {})}
        wire.write(head(status, all_headers, reason) + body)

    return behave


def answer_json(status: int, data: Any, headers: Mapping[str, str] | None = None) -> Behaviour:
    body = json.dumps(data).encode()
    return answer(status, body, {"Content-Type": "application/json", **(headers or {})})


# Headers of one connection, not of the request: a request handed on gets its own.
_HOP_HEADERS = ("host", "content-length", "connection", "accept-encoding")


def handed_on(target: str, request: Request) -> httpx.Response:
    """``request`` sent on to the server at ``target`` (a front before a real API)."""
    headers = {name: value for name, value in request.headers.items() if name not in _HOP_HEADERS}
    return httpx.request(
        request.method, target + request.path, content=request.body, headers=headers
    )


def as_sent(response: httpx.Response, body: bytes | None = None) -> bytes:
    """``response`` as a complete answer on the wire, with ``body`` instead of its own."""
    body = response.content if body is None else body
    headers = {
        "Content-Type": response.headers.get("content-type", "application/json"),
        "Content-Length": str(len(body)),
        "Connection": "close",
    }
    return head(response.status_code, headers, response.reason_phrase) + body


def endless(status: int = 202, chunk: bytes = b"x" * 65536) -> Behaviour:
    """A chunked body that never ends (until the client hangs up or the server stops)."""

    def behave(request: Request, wire: Wire) -> None:
        wire.write(head(status, {"Transfer-Encoding": "chunked", "Content-Type": "text/plain"}))
        framed = b"%x\r\n%s\r\n" % (len(chunk), chunk)
        while wire.write(framed):
            pass

    return behave


def claims_length(length: int, status: int = 202) -> Behaviour:
    """Declares ``length`` bytes of body and sends them as fast as the client reads."""

    def behave(request: Request, wire: Wire) -> None:
        wire.write(head(status, {"Content-Length": str(length), "Content-Type": "text/plain"}))
        block = b"y" * 65536
        sent = 0
        while sent < length and wire.write(block[: length - sent]):
            sent += len(block)

    return behave


def trickle(
    status: int = 202, body: bytes = b'{"transaction_id": "tx"}', every: float = 5.0
) -> Behaviour:
    """The head at once, then one byte of the body every ``every`` seconds."""

    def behave(request: Request, wire: Wire) -> None:
        headers = {"Content-Length": str(len(body)), "Content-Type": "application/json"}
        wire.write(head(status, headers))
        for index in range(len(body)):
            if not wire.wait(every) or not wire.write(body[index : index + 1]):
                return

    return behave


def hang(seconds: float = 3600.0) -> Behaviour:
    """Read the request, answer nothing."""

    def behave(request: Request, wire: Wire) -> None:
        wire.wait(seconds)

    return behave


def routes(
    table: Mapping[tuple[str, str], Behaviour], otherwise: Behaviour | None = None
) -> Behaviour:
    """The behaviour of the first (method, path prefix) that matches; else ``otherwise``
    (a JSON 404 when not given)."""
    fallback = otherwise or answer_json(404, {"error": {"code": "NOT_FOUND", "message": "none"}})

    def behave(request: Request, wire: Wire) -> None:
        for (method, prefix), behaviour in table.items():
            if request.method == method and request.path.startswith(prefix):
                behaviour(request, wire)
                return
        fallback(request, wire)

    return behave


def per_request(choose: Callable[[Request], Behaviour]) -> Behaviour:
    """The behaviour ``choose`` picks for each request (by its body, its headers, ...): how a
    server echoes what it was sent."""

    def behave(request: Request, wire: Wire) -> None:
        choose(request)(request, wire)

    return behave


def in_turn(*behaviours: Behaviour) -> Behaviour:
    """The first request gets the first behaviour, and so on; the last one repeats."""
    lock = threading.Lock()
    served = [0]

    def behave(request: Request, wire: Wire) -> None:
        with lock:
            index = min(served[0], len(behaviours) - 1)
            served[0] += 1
        behaviours[index](request, wire)

    return behave


class _Listening(socketserver.ThreadingTCPServer):
    # socketserver listens with a backlog of 5: 50 clients connecting at once then waited
    # out SYN retransmits of 1, 3 and 7 s, as no real server's backlog (uvicorn's is 2,048)
    # would make them.
    allow_reuse_address = True
    request_queue_size = 128


@dataclass
class HostileServer:
    """Serves ``behaviour`` on 127.0.0.1 (a free port) while the ``with`` block runs."""

    behaviour: Behaviour
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stopping = threading.Event()
        server = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                server._handle(self.request)

        self._server = _Listening(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _handle(self, sock: socket.socket) -> None:
        sock.settimeout(30)
        # One request per connection: every scripted answer closes it or never ends.
        request = _request_on(sock)
        if request is not None:
            self.requests.append(request)
            self.behaviour(request, Wire(sock, self._stopping))


def _request_on(sock: socket.socket) -> Request | None:
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        try:
            data = sock.recv(65536)
        except OSError:
            return None
        if not data:
            return None
        buffer += data
    head_bytes, _, rest = buffer.partition(b"\r\n\r\n")
    lines = head_bytes.decode("latin-1").split("\r\n")
    method, path, _version = lines[0].split(" ", 2)
    headers = {}
    header_lines = []
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
        header_lines.append((name.strip().lower(), value.strip()))
    length = int(headers.get("content-length", "0") or 0)
    deadline = time.monotonic() + 30
    while len(rest) < length and time.monotonic() < deadline:
        try:
            data = sock.recv(65536)
        except OSError:
            return None
        if not data:
            break
        rest += data
    return Request(
        method=method,
        path=path,
        headers=headers,
        body=rest[:length],
        header_lines=tuple(header_lines),
    )


_REASONS = {
    200: "OK",
    202: "Accepted",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


if __name__ == "__main__":  # pragma: no cover - a manual check: python tests/hostile.py
    with HostileServer(trickle(every=1.0)) as running:
        print(running.base_url, flush=True)
        time.sleep(3600)

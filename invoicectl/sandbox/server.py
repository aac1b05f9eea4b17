"""Serving a ``Sandbox`` over real HTTP with uvicorn, blocking or in a background thread.

The socket is bound before uvicorn starts, so port 0 works and the caller learns the real
port (through ``on_ready`` or ``BackgroundServer.base_url``) before the first request.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Protocol

import uvicorn
from starlette.types import ASGIApp

_DROP_MESSAGE = "ASGI callable returned without completing response."


class _QuietDrops(logging.Filter):
    """Uvicorn reports every unfinished response as an error; sandbox drops are on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != _DROP_MESSAGE


logging.getLogger("uvicorn.error").addFilter(_QuietDrops())


class Served(Protocol):
    """What is served: a ``Sandbox``, or anything else that carries an ASGI ``app``."""

    @property
    def app(self) -> ASGIApp: ...


def bind(host: str = "127.0.0.1", port: int = 8080) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio only sets TCP_NODELAY on accepted sockets whose proto
    # says TCP, and without it every answer (headers, then body) waits ~40 ms on Nagle.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock


def base_url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _server(sandbox: Served, *, log_config: bool) -> uvicorn.Server:
    config = uvicorn.Config(
        sandbox.app,
        access_log=False,
        lifespan="off",
        log_level="warning",
        log_config=uvicorn.config.LOGGING_CONFIG if log_config else None,
    )
    return uvicorn.Server(config)


def serve(
    sandbox: Served,
    host: str = "127.0.0.1",
    port: int = 8080,
    *,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve until interrupted; ``on_ready(base_url)`` runs once the port is listening."""
    sock = bind(host, port)
    try:
        if on_ready is not None:
            on_ready(base_url(sock))
        _server(sandbox, log_config=True).run(sockets=[sock])
    finally:
        sock.close()


class BackgroundServer:
    """Uvicorn in a thread for tests that want real HTTP and the ``Sandbox`` object at hand.

    with BackgroundServer(sandbox) as server:
        httpx.get(server.base_url + "/peppol/version")
    """

    def __init__(self, sandbox: Served, host: str = "127.0.0.1", port: int = 0) -> None:
        self._sock = bind(host, port)
        self.base_url = base_url(self._sock)
        self._server = _server(sandbox, log_config=False)
        self._thread = threading.Thread(target=self._run, name="sandbox-server", daemon=True)

    def _run(self) -> None:
        asyncio.run(self._server.serve(sockets=[self._sock]))

    def __enter__(self) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("sandbox server did not start")
            time.sleep(0.01)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()

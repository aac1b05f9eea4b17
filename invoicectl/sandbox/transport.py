"""An in-process httpx transport for the emulator that loses answers the way a network does.

httpx's own ``ASGITransport`` asserts that every response completes; a sandbox drop leaves
the response unfinished on purpose, which must reach the client as
``httpx.RemoteProtocolError`` (what httpx raises over real HTTP), not as a status.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import anyio
import httpx
from starlette.types import ASGIApp, Message

CLIENT_ADDRESS = ("127.0.0.1", 49152)


class SandboxTransport(httpx.AsyncBaseTransport):
    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        exchange = _Exchange(body)
        await self._app(_scope(request), exchange.receive, exchange.send)
        if exchange.status is None or not exchange.complete:
            raise httpx.RemoteProtocolError(
                "peer closed connection without sending complete message body", request=request
            )
        return httpx.Response(
            exchange.status,
            headers=exchange.headers,
            stream=httpx.ByteStream(b"".join(exchange.chunks)),
            request=request,
        )


class _Exchange:
    """One request's receive/send pair, collecting the response."""

    def __init__(self, body: bytes) -> None:
        self._body: bytes | None = body
        self._finished = anyio.Event()
        self.status: int | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.chunks: list[bytes] = []
        self.complete = False

    async def receive(self) -> Message:
        if self._body is not None:
            body, self._body = self._body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self._finished.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = list(message.get("headers", []))
        elif message["type"] == "http.response.body":
            self.chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                self.complete = True
                self._finished.set()


def _scope(request: httpx.Request) -> dict[str, Any]:
    url = request.url
    port = url.port or (443 if url.scheme == "https" else 80)
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "headers": [(k.lower(), v) for k, v in request.headers.raw],
        "scheme": url.scheme,
        "path": unquote(url.path),
        "raw_path": url.raw_path.split(b"?")[0],
        "query_string": url.query,
        "server": (url.host, port),
        "client": CLIENT_ADDRESS,
        "root_path": "",
    }

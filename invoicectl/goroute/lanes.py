"""The client's connections, in pools of a few each; every request takes the least busy pool.

httpcore's connection pool looks at every connection it holds (closed? expired? readable?
idle?) each time a request starts and each time an answer ends, so its cost per request grows
with its size. With the 50 connections of ``--concurrency 50`` that was most of a send's CPU:
2.1-2.7 ms a request to the emulator on loopback in one pool of 50, 0.7-0.8 ms in seven pools
of 8, measured side by side; later, with a request leaving by ``Lane.send``, 0.86-1.09 ms in
pools of 8, 0.78-0.85 in pools of 4 and 0.75-0.88 in pools of 2 (a POST of 10 KB, three rounds
each, interleaved): 4 it is. The pools together hold as many connections as the one did, and
the least busy pool always has a free one while fewer requests than that are in flight.
"""

from __future__ import annotations

import math
import os
import ssl
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache

import httpx

from invoicectl.errors import ConfigError
from invoicectl.goroute.apikey import ApiKey
from invoicectl.goroute.network import run_on_asyncio

LANE_CONNECTIONS = 4


@cache
def shared_tls_context() -> ssl.SSLContext:
    """One TLS context for every client of the process, every pool of it, and the history
    check's client before the send's: each had taken 35-40 ms of CPU to load the CAs."""
    return httpx.create_ssl_context()


def pool_client(
    base_url: str,
    headers: dict[str, str],
    timeout: httpx.Timeout,
    connections: int,
    transport: httpx.AsyncBaseTransport | None,
) -> httpx.AsyncClient:
    """The client of one pool of ``connections``; over the network (no ``transport``) on
    asyncio's own sockets (``network``) with the process's one TLS context."""
    # Plain http goes only to loopback: no HTTP_PROXY may carry the key, in clear, elsewhere.
    trust_env = httpx.URL(base_url).scheme != "http"
    try:
        client = httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=timeout,
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
            transport=transport,
            verify=shared_tls_context() if transport is None else True,
            trust_env=trust_env,
            # A redirect would carry the key (and the invoice) to wherever Location points,
            # and a POST redirect is a second send: never follow one, report it.
            follow_redirects=False,
        )
    except (ValueError, httpx.InvalidURL, ImportError) as error:
        # httpx reads the proxy variables here: one it cannot use is a setting's error.
        named = proxy_variables(os.environ) if trust_env else []
        if not named:
            raise
        raise _proxy_refusal(named, error) from None
    if transport is None:
        run_on_asyncio(client)
    return client


_PROXY_VARIABLES = ("https_proxy", "all_proxy", "http_proxy", "no_proxy")


def proxy_variables(environ: Mapping[str, str]) -> list[str]:
    """The proxy variables set in ``environ`` (in any case, as httpx reads them), by name."""
    return sorted(
        (name for name, value in environ.items() if value and name.lower() in _PROXY_VARIABLES),
        key=lambda name: (_PROXY_VARIABLES.index(name.lower()), name),
    )


def _proxy_refusal(named: list[str], error: Exception) -> ConfigError:
    """One line for a proxy variable httpx cannot use, naming the variables and never their
    values: a proxy URL may hold a password."""
    which = " or ".join(f"${name}" for name in named)
    why = (
        "a socks5:// proxy needs httpx's SOCKS support (pip install 'httpx[socks]')"
        if isinstance(error, ImportError)
        else "it is not a proxy URL httpx can use (http://, https:// or socks5://, a host, a "
        "port from 1 to 65535)"
    )
    return ConfigError(
        f"the proxy of {which} cannot be used: {why}; its value is not repeated here, as it "
        "may hold a password"
    )


class Lane:
    """One pool: its client, which builds the requests, and the way a request leaves by it."""

    def __init__(self, http: httpx.AsyncClient, api_key: ApiKey) -> None:
        self.http = http
        self.busy = 0  # requests in flight
        self._api_key = api_key
        self._timeout = http.timeout.as_dict()

    async def send(self, request: httpx.Request) -> httpx.Response:
        """``AsyncClient.send(request, stream=True)`` without the layers of it that invoicectl
        uses none of: the auth flow (the key is set here, as it leaves), redirects (never
        followed), event hooks (none) and the cookie jar (GoRoute sets no cookie). They were
        a fifth of the HTTP client's CPU a request: 1.2-1.3 ms against 1.0 ms, side by side,
        for a POST of 10 KB to the emulator on loopback. The transport is the one the client
        would choose (``HTTPS_PROXY`` and ``NO_PROXY`` honoured), the timeouts the client's."""
        if self.http.is_closed:  # httpcore's pool would open a new connection and send
            raise RuntimeError("the GoRoute client is closed; nothing was sent")
        request.headers["X-API-Key"] = self._api_key.reveal()
        request.extensions.setdefault("timeout", self._timeout)
        return await self.http._transport_for_url(request.url).handle_async_request(request)


class Lanes:
    """``make(n)`` builds one pool of ``n`` connections; ``pools=1`` for a transport that
    holds no connections (tests, the in-process emulator)."""

    def __init__(
        self,
        make: Callable[[int], httpx.AsyncClient],
        max_connections: int,
        *,
        pools: int,
        api_key: ApiKey,
    ) -> None:
        per_pool = math.ceil(max_connections / pools)
        self._lanes = [Lane(make(per_pool), api_key) for _ in range(pools)]

    @staticmethod
    def pools_for(max_connections: int) -> int:
        return max(1, math.ceil(max_connections / LANE_CONNECTIONS))

    @property
    def closed(self) -> bool:
        return all(lane.http.is_closed for lane in self._lanes)

    @contextmanager
    def least_busy(self) -> Iterator[Lane]:
        lane = min(self._lanes, key=lambda lane: lane.busy)
        lane.busy += 1
        try:
            yield lane
        finally:
            lane.busy -= 1

    async def aclose(self) -> None:
        for lane in self._lanes:
            await lane.http.aclose()

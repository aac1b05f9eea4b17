"""The client's connections, in pools of a few each; every request takes the least busy pool.

httpcore's connection pool looks at every connection it holds (closed? expired? readable?
idle?) each time a request starts and each time an answer ends, so its cost per request grows
with its size. With the 50 connections of ``--concurrency 50`` that was most of a send's CPU:
2.1-2.7 ms a request to the emulator on loopback in one pool of 50, 0.7-0.8 ms in seven pools
of 8, measured side by side. The pools together hold as many connections as the one did, and
the least busy pool always has a free one while fewer requests than that are in flight.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager

import httpx

from invoicectl.goroute.apikey import ApiKey

LANE_CONNECTIONS = 8


class KeyAuth(httpx.Auth):
    """Adds X-API-Key as each request leaves, so the client's own headers never hold the key."""

    def __init__(self, api_key: ApiKey) -> None:
        self._api_key = api_key

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["X-API-Key"] = self._api_key.reveal()
        yield request


class _Lane:
    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http
        self.busy = 0  # requests in flight


class Lanes:
    """``make(n)`` builds one pool of ``n`` connections; ``pools=1`` for a transport that
    holds no connections (tests, the in-process emulator)."""

    def __init__(
        self, make: Callable[[int], httpx.AsyncClient], max_connections: int, *, pools: int
    ) -> None:
        per_pool = math.ceil(max_connections / pools)
        self._lanes = [_Lane(make(per_pool)) for _ in range(pools)]

    @staticmethod
    def pools_for(max_connections: int) -> int:
        return max(1, math.ceil(max_connections / LANE_CONNECTIONS))

    @property
    def closed(self) -> bool:
        return all(lane.http.is_closed for lane in self._lanes)

    @contextmanager
    def least_busy(self) -> Iterator[httpx.AsyncClient]:
        lane = min(self._lanes, key=lambda lane: lane.busy)
        lane.busy += 1
        try:
            yield lane.http
        finally:
            lane.busy -= 1

    async def aclose(self) -> None:
        for lane in self._lanes:
            await lane.http.aclose()

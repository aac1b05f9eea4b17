"""The client's connections in several small pools (goroute/lanes.py), on real loopback HTTP.

However the connections are split into pools, as many requests as ``max_connections`` must be
able to be in flight at once: a server that answers only once all of them have arrived
proves it (a split that held fewer would leave the rest waiting for a free connection).
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from hostile import HostileServer, Request, Wire, answer_json

from invoicectl.goroute.apikey import ApiKey
from invoicectl.goroute.client import GoRouteClient
from invoicectl.goroute.lanes import LANE_CONNECTIONS

KEY = ApiKey("sk_test_lanes_0123456789")


def all_at_once(count: int):
    """Answers 200 once ``count`` requests are being served together; 503 after 10 s."""
    arrived = threading.Barrier(count, timeout=10)
    ok = answer_json(200, {"version": "1"})
    late = answer_json(503, {"error": "not all requests arrived together"})

    def behave(request: Request, wire: Wire) -> None:
        try:
            arrived.wait()
        except threading.BrokenBarrierError:
            late(request, wire)
            return
        ok(request, wire)

    return behave


@pytest.mark.parametrize("connections", [10, 20, 50])
def test_as_many_requests_as_connections_are_in_flight_at_once(connections: int):
    async def together(base_url: str) -> list[int]:
        async with GoRouteClient(base_url, KEY, max_connections=connections) as goroute:
            busiest = []

            async def one() -> int:
                answer = await goroute._get("/peppol/version", {})
                busiest.append(max(lane.busy for lane in goroute._lanes._lanes))
                return answer.status

            statuses = await asyncio.gather(*(one() for _ in range(connections)))
            assert max(busiest) <= LANE_CONNECTIONS  # spread over the pools
            return statuses

    with HostileServer(all_at_once(connections)) as server:
        statuses = asyncio.run(together(server.base_url))
    assert statuses == [200] * connections

"""The hostile test server itself answers as scripted (the other tests lean on it)."""

from __future__ import annotations

import time

import httpx
from hostile import HostileServer, answer_json, claims_length, in_turn, routes, trickle


def test_a_scripted_answer_and_the_request_it_recorded() -> None:
    with HostileServer(answer_json(202, {"transaction_id": "tx-1"})) as server:
        response = httpx.post(f"{server.base_url}/api/v1/documents", content=b"{}")
    assert response.status_code == 202
    assert response.json() == {"transaction_id": "tx-1"}
    assert server.requests[0].method == "POST"
    assert server.requests[0].path == "/api/v1/documents"
    assert server.requests[0].body == b"{}"


def test_routes_and_turns() -> None:
    behaviour = routes(
        {("GET", "/peppol/version"): answer_json(200, {"status": "ok"})},
        otherwise=in_turn(answer_json(503, {}), answer_json(202, {"id": "t"})),
    )
    with HostileServer(behaviour) as server:
        statuses = [
            httpx.get(f"{server.base_url}{path}").status_code
            for path in ("/peppol/version", "/a", "/b", "/c")
        ]
    assert statuses == [200, 503, 202, 202]


def test_a_trickle_is_slow_and_a_claimed_length_is_declared() -> None:
    with HostileServer(trickle(body=b"abc", every=0.2)) as server:
        started = time.monotonic()
        response = httpx.get(server.base_url)
        assert response.content == b"abc"
        assert time.monotonic() - started >= 0.55
    with (
        HostileServer(claims_length(3 * 1024**3)) as server,
        httpx.stream("GET", server.base_url) as streamed,
    ):
        assert streamed.headers["Content-Length"] == str(3 * 1024**3)

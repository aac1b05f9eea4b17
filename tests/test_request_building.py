"""The requests a client sends are the ones httpx's build_request would make, built cheaper.

``goroute.building``: a fixed path's URL is merged with the base URL once per client, the
client's headers are copied, no cookie goes out. What leaves must not change by a byte.
"""

from __future__ import annotations

import httpx
import pytest
import respx

from invoicectl.goroute.apikey import ApiKey
from invoicectl.goroute.building import RequestBuilder
from invoicectl.goroute.client import GoRouteClient, build_send_body

BASE = "https://goroute.test/peppol-api"
KEY = ApiKey("sk_test_building_SECRET_1")
BODY = build_send_body("<Invoice>é</Invoice>", "0088", "5790000436101", {"invoice_id": "B-1"})


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_a_built_request_is_what_build_request_makes() -> None:
    http = httpx.AsyncClient(
        base_url=BASE, headers={"User-Agent": "invoicectl/test", "Accept": "application/json"}
    )
    builder = RequestBuilder({"/api/v1/documents"})
    headers = {"Content-Type": "application/json", "Idempotency-Key": "invoice-B-1"}
    for _ in range(2):  # the URL merged once, then reused
        built = builder.build(http, "POST", "/api/v1/documents", BODY, None, headers)
        expected = http.build_request("POST", "/api/v1/documents", content=BODY, headers=headers)
        assert (built.method, built.url, built.content) == (
            expected.method,
            expected.url,
            expected.content,
        )
        assert built.headers.multi_items() == expected.headers.multi_items()


@pytest.mark.anyio
async def test_sends_merge_the_base_url_once_per_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """build_request merged the URL, headers and cookie jar for every request; it is now
    asked once per fixed path, and every request still carries the key and its headers."""
    calls: list[str] = []
    build_request = httpx.AsyncClient.build_request

    def counted(self: httpx.AsyncClient, method: str, url: str, **kwargs: object) -> httpx.Request:
        calls.append(url)
        return build_request(self, method, url, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(httpx.AsyncClient, "build_request", counted)
    with respx.mock(base_url=BASE) as api:
        route = api.post("/api/v1/documents").mock(
            return_value=httpx.Response(202, json={"transaction_id": "txn_b"})
        )
        async with GoRouteClient(BASE, KEY) as client:
            for n in range(5):
                await client.send_document(f"invoice-B-{n}", BODY)
    assert calls == ["/api/v1/documents"]
    sent = [call.request for call in route.calls]
    assert [request.headers["Idempotency-Key"] for request in sent] == [
        f"invoice-B-{n}" for n in range(5)
    ]
    assert all(request.headers["X-API-Key"] == KEY.reveal() for request in sent)
    assert all(request.content == BODY and "Cookie" not in request.headers for request in sent)

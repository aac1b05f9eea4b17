"""The emulator's ``POST /api/v1/validate``: its checks, its counters, and the client against it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from invoicectl.goroute.apikey import ApiKey
from invoicectl.goroute.client import GoRouteClient, Validation
from invoicectl.goroute.outcomes import RateLimited
from invoicectl.sandbox import DEFAULT_API_KEY, Sandbox, SandboxConfig
from invoicectl.sandbox.samples import sample_invoice

HEADERS = {"X-API-Key": DEFAULT_API_KEY, "Content-Type": "application/xml"}
VALIDATE = "/api/v1/validate"
PROFILE = "<cbc:ProfileID>urn:fdc:peppol.eu:2017:poacc:billing:01:1.0</cbc:ProfileID>"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def sandbox() -> Sandbox:
    return Sandbox(SandboxConfig(rate_per_minute=1000, max_concurrent=20, seed=5))


@pytest.fixture
async def http(sandbox: Sandbox) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=sandbox.transport(), base_url="http://sandbox.test", headers=HEADERS
    ) as client:
        yield client


def errors_of(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["valid"] is not bool(body["errors"])
    return [error["rule"] for error in body["errors"]]


@pytest.mark.anyio
@pytest.mark.parametrize("prefix", ["", "/peppol-api"])
async def test_a_good_invoice_is_valid_at_either_mount(
    http: httpx.AsyncClient, sandbox: Sandbox, prefix: str
) -> None:
    response = await http.post(f"{prefix}{VALIDATE}", content=sample_invoice("V-1").encode())
    assert response.json() == {"valid": True, "errors": []}
    assert sandbox.stats()["validations"] == 1
    assert sandbox.stats()["sends_received"] == 0


@pytest.mark.anyio
async def test_each_broken_rule_is_named_with_its_location(http: httpx.AsyncClient) -> None:
    good = sample_invoice("V-2")
    assert PROFILE in good
    no_profile = good.replace(PROFILE, "")
    response = await http.post(VALIDATE, content=no_profile.encode())
    assert response.json()["errors"] == [
        {
            "rule": "PEPPOL-EN16931-R001",
            "location": "/cbc:ProfileID",
            "message": "Business process MUST be provided",
        }
    ]
    no_id = no_profile.replace("<cbc:ID>V-2</cbc:ID>", "", 1)
    assert errors_of(await http.post(VALIDATE, content=no_id.encode())) == [
        "BR-02",
        "PEPPOL-EN16931-R001",
    ]
    assert errors_of(await http.post(VALIDATE, content=b"<Invoice><oops></Invoice>")) == ["XML"]
    assert errors_of(await http.post(VALIDATE, content=b"<Order/>")) == ["UBL-ROOT"]


@pytest.mark.anyio
async def test_the_key_is_required_and_the_rate_limit_counts_it(sandbox: Sandbox) -> None:
    strict = Sandbox(SandboxConfig(rate_per_minute=1, max_concurrent=20, seed=5))
    document = sample_invoice("V-3").encode()
    async with httpx.AsyncClient(transport=strict.transport(), base_url="http://s.test") as http:
        assert (await http.post(VALIDATE, content=document)).status_code == 401
    async with GoRouteClient(
        "http://s.test", ApiKey(DEFAULT_API_KEY), transport=strict.transport()
    ) as client:
        first = await client.validate_document(document)
        second = await client.validate_document(document)
    assert isinstance(first, Validation) and first.valid
    assert isinstance(second, RateLimited)
    assert strict.stats()["validations"] == 1

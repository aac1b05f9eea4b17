"""GoRouteClient.validate_document against respx: the request, the verdicts, every odd answer.

Only a 2xx with a boolean ``valid`` (or a 400 or 422 saying ``"valid": false``) is a verdict;
anything doubtful is a failed validation (a Transient or the usual failure outcome), which
never holds an invoice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import respx

from invoicectl.goroute.apikey import ApiKey
from invoicectl.goroute.client import GoRouteClient, Validation
from invoicectl.goroute.outcomes import AuthRefused, RateLimited, Rejected, Transient
from invoicectl.goroute.validation import MAX_ERRORS, MAX_VALIDATION_BYTES

BASE = "https://goroute.test/peppol-api"
SECRET = "sk_test_Zq9x7SECRETvalue42"
VALIDATE = "/api/v1/validate"
DOCUMENT = '<?xml version="1.0" encoding="UTF-8"?>\n<Invoice>é</Invoice>\n'.encode()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def api() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        yield router


@pytest.fixture
async def client() -> AsyncIterator[GoRouteClient]:
    async with GoRouteClient(BASE, ApiKey(SECRET)) as goroute:
        yield goroute


async def validated(api: respx.MockRouter, client: GoRouteClient, response: httpx.Response) -> Any:
    api.post(VALIDATE).mock(return_value=response)
    return await client.validate_document(DOCUMENT)


@pytest.mark.anyio
async def test_the_stored_bytes_go_out_as_xml_with_the_key(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    route = api.post(VALIDATE).mock(
        return_value=httpx.Response(200, json={"valid": True, "errors": []})
    )
    outcome = await client.validate_document(DOCUMENT)
    request = route.calls.last.request
    assert request.content == DOCUMENT
    assert request.headers["Content-Type"] == "application/xml"
    assert request.headers["X-API-Key"] == SECRET
    assert "Idempotency-Key" not in request.headers
    assert outcome == Validation(valid=True, errors=(), http_status=200, duration=outcome.duration)


@pytest.mark.anyio
async def test_errors_become_one_line_rule_at_location_texts(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    body = {
        "valid": False,
        "errors": [
            {
                "rule": "BR-02",
                "location": "/Invoice/cbc:ID",
                "message": "An Invoice shall\nhave an ID",
            },
            {"rule": "PEPPOL-EN16931-R001", "message": "Business process missing"},
            "plain text error",
            {"message": "no rule"},
        ],
    }
    outcome = await validated(api, client, httpx.Response(200, json=body))
    assert isinstance(outcome, Validation)
    assert not outcome.valid
    assert outcome.errors == (
        "BR-02 at /Invoice/cbc:ID: An Invoice shall have an ID",
        "PEPPOL-EN16931-R001: Business process missing",
        "plain text error",
        "(no rule given): no rule",
    )


@pytest.mark.anyio
async def test_the_errors_are_capped(api: respx.MockRouter, client: GoRouteClient) -> None:
    errors = [{"rule": f"BR-{n}", "message": "x" * 1000} for n in range(MAX_ERRORS + 20)]
    outcome = await validated(
        api, client, httpx.Response(200, json={"valid": False, "errors": errors})
    )
    assert isinstance(outcome, Validation)
    assert len(outcome.errors) == MAX_ERRORS
    assert all(len(line) <= 301 for line in outcome.errors)


@pytest.mark.anyio
async def test_invalid_without_errors_still_says_why(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    outcome = await validated(api, client, httpx.Response(200, json={"valid": False}))
    assert isinstance(outcome, Validation)
    assert outcome.errors == ("(no rule given): GoRoute found the document invalid",)


@pytest.mark.anyio
@pytest.mark.parametrize("status", [400, 422])
async def test_a_refusal_that_says_invalid_is_the_verdict(
    api: respx.MockRouter, client: GoRouteClient, status: int
) -> None:
    """helper-96: the contract names no status for an invalid document; a server answering
    422 ``{"valid": false, ...}`` had both invalid documents sent, as "unvalidated"."""
    body = {
        "valid": False,
        "errors": [
            {"rule": "BR-CO-15", "message": "totals differ"},
            {"code": "PEPPOL-EN16931-R001", "message": "no business process"},
            {"code": "SCHEMA_ERROR", "message": "cbc:Foo not expected"},  # helper-101
        ],
    }
    outcome = await validated(api, client, httpx.Response(status, json=body))
    assert isinstance(outcome, Validation) and not outcome.valid
    assert outcome.errors == (
        "BR-CO-15: totals differ",
        "PEPPOL-EN16931-R001: no business process",
        "SCHEMA_ERROR: cbc:Foo not expected",
    )


@pytest.mark.anyio
@pytest.mark.parametrize(
    "body",
    [
        {"valid": False, "error": {"code": "INVALID_CONTENT_TYPE", "message": "xml only"}},
        {"valid": False, "error_code": "PAYLOAD_TOO_LARGE", "errors": []},
        {"valid": False, "errors": [{"code": "RATE_LIMITED", "message": "try later"}]},
        {"valid": False},
    ],
)
async def test_a_refusal_of_the_request_itself_is_no_verdict(
    api: respx.MockRouter, client: GoRouteClient, body: dict[str, Any]
) -> None:
    """helper-100: ``"valid": false`` beside an error of the request's own (its content
    type, its size, a quota) said nothing of the document, which was held as invalid."""
    outcome = await validated(api, client, httpx.Response(422, json=body))
    assert not isinstance(outcome, Validation)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(200, json={"valid": "false", "errors": []}),
        httpx.Response(200, json={"errors": [{"rule": "BR-01"}]}),
        httpx.Response(200, json=[False]),
        httpx.Response(200, text="<html>proxy</html>"),
        httpx.Response(503, json={"valid": False, "errors": [{"rule": "BR-01"}]}),
        httpx.Response(302, headers={"Location": "https://elsewhere.test/"}),
    ],
)
async def test_a_doubtful_answer_is_a_failed_validation_never_invalid(
    api: respx.MockRouter, client: GoRouteClient, response: httpx.Response
) -> None:
    assert isinstance(await validated(api, client, response), Transient)


@pytest.mark.anyio
async def test_a_timeout_is_transient(api: respx.MockRouter, client: GoRouteClient) -> None:
    api.post(VALIDATE).mock(side_effect=httpx.ReadTimeout("slow"))
    assert isinstance(await client.validate_document(DOCUMENT), Transient)


@pytest.mark.anyio
async def test_an_oversized_answer_is_not_read(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    huge = b'{"valid": false, "errors": ["' + b"x" * MAX_VALIDATION_BYTES + b'"]}'
    outcome = await validated(api, client, httpx.Response(200, content=huge))
    assert isinstance(outcome, Transient)
    assert "not read" in outcome.reason


@pytest.mark.anyio
async def test_failures_are_the_usual_outcomes_and_never_carry_the_key(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    assert isinstance(await validated(api, client, httpx.Response(429)), RateLimited)
    assert isinstance(await validated(api, client, httpx.Response(401)), AuthRefused)
    echoed = httpx.Response(400, json={"message": f"bad key {SECRET}"})
    outcome = await validated(api, client, echoed)
    assert isinstance(outcome, Rejected)
    assert SECRET not in outcome.message
    assert SECRET not in (outcome.raw_body or "")

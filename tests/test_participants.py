"""GoRouteClient.lookup_participant against respx: both routes, both shapes, every odd answer.

The rule under test (issue 15, "Bad input"): only a well-formed answer about the participant
asked can say "not registered"; anything else is a failed lookup (a Transient), which the
sender treats as "could not check", never as a reason to hold an invoice.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator, Iterator
from dataclasses import fields
from typing import Any

import httpx
import pytest
import respx
from virtual_time import RecordingSleep, run_virtual

from invoicectl.goroute.apikey import ApiKey
from invoicectl.goroute.client import GoRouteClient, Participant
from invoicectl.goroute.limiter import RateLimiter
from invoicectl.goroute.lookups import MAX_LOOKUP_BYTES
from invoicectl.goroute.outcomes import AuthRefused, Outcome, RateLimited, Rejected, Transient
from invoicectl.goroute.retry import RetryPolicy, call_with_retry

BASE = "https://goroute.test/peppol-api"
SECRET = "sk_test_Zq9x7SECRETvalue42"
KEY = ApiKey(SECRET)
ASKED = "0106:12345678"
LOOKUP = "/api/v1/participants/lookup"
PLAIN = "/participants/lookup"
INVOICE = (
    "urn:oasis:names:specification:ubl:schema:xsd:Invoice-2::Invoice"
    "##urn:cen.eu:en16931:2017#compliant#urn:fdc:peppol.eu:2017:poacc:billing:3.0::2.1"
)
CREDIT_NOTE = (
    "urn:oasis:names:specification:ubl:schema:xsd:CreditNote-2::CreditNote"
    "##urn:cen.eu:en16931:2017#compliant#urn:fdc:peppol.eu:2017:poacc:billing:3.0::2.1"
)
PROCESS = "urn:fdc:peppol.eu:2017:poacc:billing:01:1.0"

# goroute-api.md B, as documented.
FOUND_A = {
    "found": True,
    "participant_id": ASKED,
    "scheme": "0106",
    "name": "Buyer BV",
    "country": "NL",
    "capabilities": [
        {"document_type": INVOICE, "process_id": PROCESS},
        {"document_type": CREDIT_NOTE, "process_id": PROCESS},
    ],
    "smp_endpoint": "https://smp.example.test",
}
NOT_FOUND_A = {
    "found": False,
    "participant_id": ASKED,
    "message": "Participant not registered on the Peppol network",
}
FOUND_B = {
    "participant_id": ASKED,
    "registered": True,
    "access_point": {"name": "AP"},
    "document_types": [{"document_type_id": INVOICE, "process_id": PROCESS}],
    "certificate": {"subject": "CN=PNL000001", "valid_until": "2030-01-01T00:00:00Z"},
}
NOT_FOUND_B = {"participant_id": ASKED, "registered": False}
# What a server without the route answers: an error body, no lookup document.
NO_ROUTE = {"error": {"code": "NOT_FOUND", "message": "Not Found"}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def api() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        yield router


@pytest.fixture
async def client() -> AsyncIterator[GoRouteClient]:
    async with GoRouteClient(BASE, KEY) as goroute:
        yield goroute


def answer(status: int, body: Any = None, **kwargs: Any) -> httpx.Response:
    if isinstance(body, dict | list):
        return httpx.Response(status, json=body, **kwargs)
    if isinstance(body, str):
        return httpx.Response(status, text=body, **kwargs)
    return httpx.Response(status, **kwargs)


def with_(body: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**body, **changes}


async def looked_up(
    api: respx.MockRouter, client: GoRouteClient, response: httpx.Response
) -> Outcome:
    api.get(LOOKUP).mock(return_value=response)
    return await client.lookup_participant(ASKED)


# --- the request ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_lookup_asks_the_versioned_route_with_the_key(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    route = api.get(LOOKUP).mock(return_value=answer(200, FOUND_A))
    plain = api.get(PLAIN)
    await client.lookup_participant(f"  {ASKED} ")
    request = route.calls.last.request
    assert str(request.url) == f"{BASE}{LOOKUP}?peppol_id=0106%3A12345678"
    assert request.headers["X-API-Key"] == SECRET
    assert "Idempotency-Key" not in request.headers
    assert not plain.called


@pytest.mark.anyio
@pytest.mark.parametrize("bad", ["", "12345678", ":123", "0106:", "0106: ", "0106:a\nb"])
async def test_a_peppol_id_not_written_scheme_colon_id_is_a_bug(
    api: respx.MockRouter, client: GoRouteClient, bad: str
) -> None:
    with pytest.raises(ValueError, match="scheme:identifier"):
        await client.lookup_participant(bad)
    assert not api.calls


# --- both shapes, both routes --------------------------------------------------------------


@pytest.mark.anyio
async def test_shape_a_found_lists_its_capabilities(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    outcome = await looked_up(api, client, answer(200, FOUND_A, headers={"X-Request-Id": "r1"}))
    assert outcome == Participant(
        http_status=200,
        request_id="r1",
        duration=outcome.duration,
        participant_id=ASKED,
        registered=True,
        document_types=(INVOICE, CREDIT_NOTE),
    )
    assert isinstance(outcome, Participant)
    assert outcome.accepts("Invoice") and outcome.accepts("CreditNote")


@pytest.mark.anyio
async def test_shape_b_found_lists_its_document_types(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    outcome = await looked_up(api, client, answer(200, FOUND_B))
    assert isinstance(outcome, Participant)
    assert (outcome.registered, outcome.document_types) == (True, (INVOICE,))
    assert outcome.accepts("Invoice")
    assert not outcome.accepts("CreditNote")


@pytest.mark.anyio
@pytest.mark.parametrize("status", [200, 404])
@pytest.mark.parametrize("body", [NOT_FOUND_A, NOT_FOUND_B], ids=["shape_a", "shape_b"])
async def test_not_registered_as_200_or_404_in_either_shape(
    api: respx.MockRouter, client: GoRouteClient, status: int, body: dict[str, Any]
) -> None:
    outcome = await looked_up(api, client, answer(status, body))
    assert isinstance(outcome, Participant)
    assert (outcome.registered, outcome.document_types, outcome.http_status) == (
        False,
        (),
        status,
    )
    assert outcome.participant_id == ASKED
    # As for every non-2xx answer, the 404's body is kept for the journal.
    assert (outcome.raw_body is not None) == (status == 404)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "missing",
    [
        answer(404, NO_ROUTE),
        answer(404),
        answer(404, "<html><body>404 Not Found</body></html>"),
        answer(405, {"detail": "Method Not Allowed"}),
    ],
    ids=["404_error_body", "404_empty", "404_html", "405"],
)
async def test_without_the_versioned_route_the_plain_route_is_asked(
    api: respx.MockRouter, client: GoRouteClient, missing: httpx.Response
) -> None:
    versioned = api.get(LOOKUP).mock(return_value=missing)
    plain = api.get(PLAIN).mock(return_value=answer(200, FOUND_B))
    outcome = await client.lookup_participant(ASKED)
    assert isinstance(outcome, Participant) and outcome.registered
    assert versioned.call_count == plain.call_count == 1
    # Relative to the base URL, outside /api/v1.
    assert str(plain.calls.last.request.url) == f"{BASE}{PLAIN}?identifier=0106%3A12345678"
    assert plain.calls.last.request.headers["X-API-Key"] == SECRET


@pytest.mark.anyio
async def test_the_fallback_is_remembered_for_the_next_lookups(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    versioned = api.get(LOOKUP).mock(return_value=answer(404, NO_ROUTE))
    plain = api.get(PLAIN).mock(
        side_effect=[
            answer(200, FOUND_B),
            answer(404, with_(NOT_FOUND_B, participant_id="9915:not-registered")),
        ]
    )
    first = await client.lookup_participant(ASKED)
    second = await client.lookup_participant("9915:not-registered")
    assert isinstance(first, Participant) and first.registered
    assert isinstance(second, Participant) and not second.registered
    assert (versioned.call_count, plain.call_count) == (1, 2)


@pytest.mark.anyio
async def test_a_404_in_shape_a_is_an_answer_not_a_missing_route(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    plain = api.get(PLAIN).mock(return_value=answer(200, FOUND_B))
    outcome = await looked_up(api, client, answer(404, NOT_FOUND_A))
    assert isinstance(outcome, Participant) and not outcome.registered
    assert not plain.called


@pytest.mark.anyio
async def test_a_server_with_neither_route_is_a_refusal_not_an_answer(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    api.get(LOOKUP).mock(return_value=answer(404, NO_ROUTE))
    api.get(PLAIN).mock(return_value=answer(404, NO_ROUTE))
    outcome = await client.lookup_participant(ASKED)
    assert isinstance(outcome, Rejected)
    assert (outcome.http_status, outcome.code) == (404, "NOT_FOUND")


@pytest.mark.anyio
async def test_either_shape_is_read_at_either_route(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    api.get(LOOKUP).mock(return_value=answer(405))
    api.get(PLAIN).mock(return_value=answer(200, FOUND_A))
    outcome = await client.lookup_participant(ASKED)
    assert isinstance(outcome, Participant)
    assert outcome.document_types == (INVOICE, CREDIT_NOTE)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("asked", "body"),
    [
        (ASKED, with_(FOUND_A, participant_id=" 0106:12345678 ")),
        ("0106:abc", with_(FOUND_B, participant_id="0106:ABC")),
        ("0106:ABC", with_(FOUND_A, participant_id="iso6523-actorid-upis::0106:abc")),
        ("0106:abc", with_(FOUND_A, participant_id="abc", scheme="0106")),
    ],
    ids=["trimmed", "case", "actor_scheme_prefix", "scheme_apart"],
)
async def test_the_participant_is_compared_as_peppol_compares_it(
    api: respx.MockRouter, client: GoRouteClient, asked: str, body: dict[str, Any]
) -> None:
    api.get(LOOKUP).mock(return_value=answer(200, body))
    outcome = await client.lookup_participant(asked)
    assert isinstance(outcome, Participant) and outcome.registered
    assert outcome.participant_id == asked


@pytest.mark.anyio
async def test_plain_strings_and_no_list_are_document_types_too(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    strings = await looked_up(api, client, answer(200, with_(FOUND_A, capabilities=[INVOICE])))
    none = await looked_up(api, client, answer(200, with_(FOUND_B, document_types=None)))
    assert isinstance(strings, Participant) and strings.document_types == (INVOICE,)
    # A registered participant that lists nothing cannot say no to a type.
    assert isinstance(none, Participant) and none.document_types == ()
    assert none.accepts("CreditNote")


# --- failed lookups: never "not registered" ------------------------------------------------

FAILED = "participant lookup failed: GoRoute answered"
NOT_A_LOOKUP = "GoRoute answered 200 but the body is not a participant lookup answer"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("response", "reason"),
    [
        (answer(200, {}), NOT_A_LOOKUP),
        (answer(200, [NOT_FOUND_A]), NOT_A_LOOKUP),
        (answer(200, "not registered"), NOT_A_LOOKUP),
        (answer(200), NOT_A_LOOKUP),
        (answer(200, {"participant_id": ASKED, "status": "unknown"}), NOT_A_LOOKUP),
        (
            answer(200, with_(NOT_FOUND_A, participant_id="0106:87654321")),
            f"{FAILED} 200, but it is about 0106:87654321, not {ASKED}",
        ),
        (
            answer(404, with_(NOT_FOUND_B, participant_id="9915:someone-else")),
            f"{FAILED} 404, but it is about 9915:someone-else, not {ASKED}",
        ),
        (
            answer(200, with_(NOT_FOUND_A, participant_id="12345678", scheme="0088")),
            f"{FAILED} 200, but it is about 12345678, not {ASKED}",
        ),
        (
            answer(200, {"found": False}),
            f"{FAILED} 200, but it does not say which participant it is about",
        ),
        (
            answer(200, with_(NOT_FOUND_A, found="false")),
            f'{FAILED} 200, but "found" is "false", not true or false',
        ),
        (
            answer(404, with_(NOT_FOUND_A, found=0)),
            f'{FAILED} 404, but "found" is 0, not true or false',
        ),
        (
            answer(200, with_(NOT_FOUND_B, registered=None)),
            f'{FAILED} 200, but "registered" is null, not true or false',
        ),
        (
            answer(404, FOUND_A),
            f'{FAILED} 404, but it says "found": true',
        ),
        (
            answer(200, with_(FOUND_A, capabilities={"document_type": INVOICE})),
            f'{FAILED} 200, but "capabilities" is not a list of document types',
        ),
        (
            answer(200, with_(FOUND_B, document_types=[{"document_type_id": INVOICE}, {}])),
            f'{FAILED} 200, but "document_types" is not a list of document types',
        ),
        (
            answer(200, with_(FOUND_A, capabilities=[{"document_type": 7}])),
            f'{FAILED} 200, but "capabilities" is not a list of document types',
        ),
        # Kept in the journal and shown by `receivers`: a lone surrogate ended its JSON in a
        # UnicodeEncodeError, and a terminal acts on an escape sequence.
        (
            httpx.Response(  # as the server wrote it: JSON's \ud800 escape
                200, content=json.dumps(with_(FOUND_A, capabilities=["bad\ud800"])).encode()
            ),
            f'{FAILED} 200, but "capabilities" is not a list of document types',
        ),
        (
            answer(200, with_(FOUND_A, capabilities=[{"document_type": "x\u001b[2J"}])),
            f'{FAILED} 200, but "capabilities" is not a list of document types',
        ),
        (
            answer(200, with_(FOUND_A, capabilities=["urn:" + "x" * 2000])),
            f'{FAILED} 200, but "capabilities" is not a list of document types',
        ),
    ],
    ids=[
        "empty_object",
        "list",
        "text",
        "empty",
        "no_flag",
        "other_participant",
        "other_participant_404",
        "other_scheme_apart",
        "no_participant",
        "found_string",
        "found_number",
        "registered_null",
        "404_found_true",
        "capabilities_object",
        "document_type_missing",
        "document_type_number",
        "document_type_surrogate",
        "document_type_escape",
        "document_type_huge",
    ],
)
async def test_an_answer_that_cannot_be_trusted_is_a_failed_lookup(
    api: respx.MockRouter, client: GoRouteClient, response: httpx.Response, reason: str
) -> None:
    plain = api.get(PLAIN).mock(return_value=answer(200, FOUND_B))
    outcome = await looked_up(api, client, response)
    assert isinstance(outcome, Transient), outcome
    assert outcome.reason == reason
    assert outcome.http_status == response.status_code
    assert not plain.called  # the route exists: its answer is the answer


@pytest.mark.anyio
async def test_a_long_foreign_participant_is_cut_in_the_reason(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    outcome = await looked_up(
        api, client, answer(200, with_(FOUND_A, participant_id="0106:" + "x\n" * 500))
    )
    assert isinstance(outcome, Transient)
    assert "\n" not in outcome.reason and len(outcome.reason) < 200


@pytest.mark.anyio
async def test_an_oversized_answer_is_not_read(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    padding = "x" * MAX_LOOKUP_BYTES
    outcome = await looked_up(api, client, answer(200, with_(NOT_FOUND_A, padding=padding)))
    assert isinstance(outcome, Transient)
    assert outcome.reason == (
        f"GoRoute answered 200 with more than {MAX_LOOKUP_BYTES} bytes; the answer was not read"
    )


@pytest.mark.anyio
async def test_an_oversized_answer_without_a_length_stops_at_the_cap(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    sent: list[int] = []

    async def endless() -> AsyncIterator[bytes]:
        yield b'{"found": false, "participant_id": "0106:12345678", "padding": "'
        for _ in range(10_000):  # 640 MB if it were all read
            sent.append(1)
            yield b"x" * 65_536

    outcome = await looked_up(api, client, httpx.Response(404, content=endless()))
    assert isinstance(outcome, Transient) and outcome.http_status == 404
    assert "with more than" in outcome.reason
    assert len(sent) <= MAX_LOOKUP_BYTES // 65_536 + 1


@pytest.mark.anyio
async def test_a_body_in_a_declared_charset_is_decoded(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    body = json.dumps(with_(FOUND_A, name="Bjørn AS"), ensure_ascii=False).encode("latin-1")
    headers = {"Content-Type": "application/json; charset=iso-8859-1"}
    outcome = await looked_up(api, client, httpx.Response(200, content=body, headers=headers))
    assert isinstance(outcome, Participant) and outcome.registered


# --- the usual failures --------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("response", "kind"),
    [
        (answer(401, {"error": {"code": "AUTH_001", "message": "bad key"}}), AuthRefused),
        (answer(403, {"error_code": "FORBIDDEN"}), AuthRefused),
        (answer(429, headers={"Retry-After": "7"}), RateLimited),
        (answer(400, {"error_code": "VALIDATION_ERROR", "message": "peppol_id"}), Rejected),
        (answer(500, NOT_FOUND_A), Transient),
        (answer(502, "<html>Bad Gateway</html>"), Transient),
        (answer(503), Transient),
        (answer(301, headers={"Location": "https://elsewhere.test/"}), Transient),
    ],
)
async def test_other_statuses_are_the_usual_outcomes(
    api: respx.MockRouter, client: GoRouteClient, response: httpx.Response, kind: type[Outcome]
) -> None:
    plain = api.get(PLAIN).mock(return_value=answer(200, FOUND_B))
    outcome = await looked_up(api, client, response)
    assert type(outcome) is kind
    assert not plain.called
    if isinstance(outcome, RateLimited):
        assert outcome.retry_after == 7.0


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("error", "sent"),
    [(httpx.ReadTimeout("timed out"), True), (httpx.ConnectError("refused"), False)],
)
async def test_no_answer_is_transient(
    api: respx.MockRouter, client: GoRouteClient, error: Exception, sent: bool
) -> None:
    api.get(LOOKUP).mock(side_effect=error)
    outcome = await client.lookup_participant(ASKED)
    assert isinstance(outcome, Transient) and outcome.sent is sent


def test_a_failed_lookup_is_retried_like_a_send() -> None:
    """5xx, then an answer of neither shape, then a good one: three tries, two backoffs."""
    sleep = RecordingSleep()

    async def main() -> tuple[Outcome | None, int]:
        with respx.mock(base_url=BASE) as api:
            route = api.get(LOOKUP).mock(
                side_effect=[answer(503), answer(200, {"ok": True}), answer(200, NOT_FOUND_A)]
            )
            limiter = RateLimiter(6000, clock=asyncio.get_running_loop().time)
            async with GoRouteClient(BASE, KEY) as goroute:
                outcome = await call_with_retry(
                    lambda: goroute.lookup_participant(ASKED),
                    policy=RetryPolicy(max_attempts=5),
                    limiter=limiter,
                    sleep=sleep,
                    rng=random.Random(1),
                )
            return outcome, route.call_count

    outcome, calls = run_virtual(main)
    assert isinstance(outcome, Participant) and not outcome.registered
    assert calls == 3
    assert len(sleep.waits) == 2
    assert 0.5 <= sleep.waits[0] <= 1.0 and 1.0 <= sleep.waits[1] <= 2.0


def test_a_lookup_that_keeps_failing_gives_up_as_transient() -> None:
    sleep = RecordingSleep()

    async def main() -> tuple[Outcome | None, int]:
        with respx.mock(base_url=BASE) as api:
            route = api.get(LOOKUP).mock(
                return_value=answer(200, with_(NOT_FOUND_A, participant_id="0106:other"))
            )
            limiter = RateLimiter(6000, clock=asyncio.get_running_loop().time)
            async with GoRouteClient(BASE, KEY) as goroute:
                outcome = await call_with_retry(
                    lambda: goroute.lookup_participant(ASKED),
                    policy=RetryPolicy(max_attempts=3),
                    limiter=limiter,
                    sleep=sleep,
                )
            return outcome, route.call_count

    outcome, calls = run_virtual(main)
    assert isinstance(outcome, Transient) and "0106:other" in outcome.reason
    assert calls == 3


# --- the key -------------------------------------------------------------------------------

ECHO = f"<html>X-API-Key: {SECRET}</html>"
SECRET_SCENARIOS: list[httpx.Response | Exception] = [
    answer(200, with_(FOUND_A, name=f"echo {SECRET}")),
    answer(200, with_(FOUND_A, participant_id=f"0106:{SECRET}")),
    answer(200, with_(NOT_FOUND_A, found=SECRET)),
    answer(404, with_(NOT_FOUND_A, message=f"no {SECRET}")),
    answer(404, with_(FOUND_A, capabilities=[SECRET])),
    answer(200, ECHO),
    answer(401, {"error": {"code": "AUTH_001", "message": f"key {SECRET} is invalid"}}),
    answer(500, ECHO),
    answer(301, headers={"Location": f"https://x.test/?key={SECRET}"}),
    httpx.ConnectError(f"could not connect with {SECRET}"),
]


def rendered(outcome: Outcome) -> str:
    return "\n".join(
        [repr(outcome), str(outcome)] + [str(getattr(outcome, f.name)) for f in fields(outcome)]
    )


@pytest.mark.anyio
@pytest.mark.parametrize("scenario", SECRET_SCENARIOS)
async def test_the_key_appears_in_no_lookup_outcome(
    api: respx.MockRouter, client: GoRouteClient, scenario: httpx.Response | Exception
) -> None:
    if isinstance(scenario, Exception):
        api.get(LOOKUP).mock(side_effect=scenario)
    else:
        api.get(LOOKUP).mock(return_value=scenario)
    api.get(PLAIN).mock(return_value=answer(404, ECHO))
    outcome = await client.lookup_participant(ASKED)
    assert SECRET not in rendered(outcome)


@pytest.mark.anyio
async def test_the_key_appears_in_no_fallback_outcome(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    api.get(LOOKUP).mock(return_value=answer(404, ECHO))
    api.get(PLAIN).mock(return_value=answer(404, ECHO))
    outcome = await client.lookup_participant(ASKED)
    assert isinstance(outcome, Rejected)
    assert SECRET not in rendered(outcome)
    assert outcome.raw_body == ECHO.replace(SECRET, "[redacted]")

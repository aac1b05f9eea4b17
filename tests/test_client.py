"""GoRouteClient against respx: every answer goroute-api.md describes maps to one outcome.

Also pinned here: the request as sent (headers, exact bytes), the body's determinism, both
transaction shapes, and that the API key shows up nowhere but in the X-API-Key header.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import fields
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

import httpx
import pytest
import respx
from hostile import HostileServer, answer_json
from hypothesis import given
from hypothesis import strategies as st

from invoicectl import DEFAULT_BASE_URL, __version__
from invoicectl.errors import ConfigError
from invoicectl.goroute import redaction
from invoicectl.goroute.answers import Answer
from invoicectl.goroute.apikey import ApiKey
from invoicectl.goroute.client import (
    MAX_RAW_BODY,
    Found,
    GoRouteClient,
    NotFound,
    Transaction,
    TransactionPage,
    build_send_body,
    parse_retry_after,
)
from invoicectl.goroute.outcomes import (
    Accepted,
    AuthRefused,
    KeyReused,
    Outcome,
    RateLimited,
    Rejected,
    Transient,
    WrongEndpoint,
)

BASE = "https://goroute.test/peppol-api"
SECRET = "sk_test_Zq9x7SECRETvalue42"
KEY = ApiKey(SECRET)
IDEMPOTENCY_KEY = "invoice-F-2024-001"
NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)
BODY = build_send_body("<Invoice/>", "0088", "5790000436101", {"invoice_id": "F-2024-001"})
DOCUMENTS = "/api/v1/documents"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def api() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        yield router


@pytest.fixture
async def client() -> AsyncIterator[GoRouteClient]:
    async with GoRouteClient(BASE, KEY, now=lambda: NOW) as goroute:
        yield goroute


def answer(status: int, body: Any = None, **kwargs: Any) -> httpx.Response:
    """A response whose body is JSON for dicts/lists, text for str, empty for None."""
    if isinstance(body, dict | list):
        return httpx.Response(status, json=body, **kwargs)
    if isinstance(body, str):
        return httpx.Response(status, text=body, **kwargs)
    return httpx.Response(status, **kwargs)


async def send_answered(
    api: respx.MockRouter, client: GoRouteClient, response: httpx.Response
) -> Outcome:
    api.post(DOCUMENTS).mock(return_value=response)
    return await client.send_document(IDEMPOTENCY_KEY, BODY)


# --- the body ------------------------------------------------------------------------------


def test_body_is_sorted_compact_utf8_json() -> None:
    body = build_send_body(
        '<?xml version="1.0" encoding="UTF-8"?><Invoice>Bjørn "Ø" & Co</Invoice>',
        "0088",
        "5790000436101",
        {"sha256": "ab12", "invoice_id": "F-1"},
    )
    assert (
        body
        == (
            '{"document":"<?xml version=\\"1.0\\" encoding=\\"UTF-8\\"?>'
            '<Invoice>Bjørn \\"Ø\\" & Co</Invoice>",'
            '"metadata":{"invoice_id":"F-1","sha256":"ab12"},'
            '"receiver_id":"5790000436101","receiver_scheme":"0088"}'
        ).encode()
    )


def test_body_ignores_metadata_insertion_order() -> None:
    first = build_send_body("<x/>", "9915", "r", {"a": "1", "b": "2", "c": "3"})
    second = build_send_body("<x/>", "9915", "r", {"c": "3", "a": "1", "b": "2"})
    assert first == second


metadata_maps = st.dictionaries(st.text(), st.text(), max_size=6)


@given(document=st.text(), scheme=st.text(), receiver=st.text(), metadata=metadata_maps)
def test_body_is_deterministic_and_round_trips(
    document: str, scheme: str, receiver: str, metadata: dict[str, str]
) -> None:
    reordered = dict(reversed(list(metadata.items())))
    body = build_send_body(document, scheme, receiver, metadata)
    assert body == build_send_body(document, scheme, receiver, dict(metadata))
    assert body == build_send_body(document, scheme, receiver, reordered)
    assert json.loads(body) == {
        "document": document,
        "metadata": metadata,
        "receiver_id": receiver,
        "receiver_scheme": scheme,
    }


# --- the request as sent -------------------------------------------------------------------


@pytest.mark.anyio
async def test_send_request_headers_and_exact_bytes(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    route = api.post(DOCUMENTS).mock(return_value=answer(202, {"transaction_id": "txn_1"}))
    await client.send_document(IDEMPOTENCY_KEY, BODY)
    request = route.calls.last.request
    assert request.method == "POST"
    assert str(request.url) == "https://goroute.test/peppol-api/api/v1/documents"
    assert request.content == BODY
    assert request.headers["X-API-Key"] == SECRET
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["Idempotency-Key"] == IDEMPOTENCY_KEY
    assert request.headers["User-Agent"] == f"invoicectl/{__version__}"
    assert request.headers["Accept"] == "application/json"
    assert request.headers["Content-Length"] == str(len(BODY))


@pytest.mark.anyio
async def test_retries_of_the_same_body_are_byte_identical(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    route = api.post(DOCUMENTS).mock(side_effect=[answer(503), answer(202, {"id": "tx_1"})])
    await client.send_document(IDEMPOTENCY_KEY, BODY)
    await client.send_document(IDEMPOTENCY_KEY, BODY)
    first, second = (call.request for call in route.calls)
    assert first.content == second.content == BODY
    assert first.headers["Idempotency-Key"] == second.headers["Idempotency-Key"]


@pytest.mark.anyio
async def test_get_requests_carry_the_key_but_no_idempotency_key(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    route = api.get("/api/v1/transactions/txn_1").mock(return_value=answer(200, {"id": "txn_1"}))
    await client.get_transaction("txn_1")
    request = route.calls.last.request
    assert request.headers["X-API-Key"] == SECRET
    assert "Idempotency-Key" not in request.headers
    assert "Content-Type" not in request.headers


@pytest.mark.anyio
@pytest.mark.parametrize("bad", ["", "two words", "clé", "a\r\nX-Evil: 1"])
async def test_a_key_that_would_corrupt_the_header_is_a_bug(
    api: respx.MockRouter, client: GoRouteClient, bad: str
) -> None:
    with pytest.raises(ValueError, match="visible ASCII"):
        await client.send_document(bad, BODY)
    assert not api.calls


@pytest.mark.anyio
async def test_redirects_are_not_followed(api: respx.MockRouter, client: GoRouteClient) -> None:
    api.post(DOCUMENTS).mock(
        return_value=answer(307, headers={"Location": "https://elsewhere.test/collect"})
    )
    outcome = await client.send_document(IDEMPOTENCY_KEY, BODY)
    assert isinstance(outcome, Transient)
    assert outcome.reason == (
        "GoRoute answered 307, a redirect to https://elsewhere.test/collect: the API does not "
        f"redirect, so the base URL {BASE} is wrong or has moved (check GOROUTE_BASE_URL or "
        "base_url)"
    )
    assert len(api.calls) == 1


# --- 2xx -------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("charset", ["idna", "punycode", "undefined"])
async def test_a_charset_that_is_no_text_encoding_reads_as_utf8(
    api: respx.MockRouter, client: GoRouteClient, charset: str
) -> None:
    """Python knows these names, but decoding with them raises UnicodeError whatever the
    error handling: it was a traceback that stopped the run mid-batch (a probing review)."""
    body = '{"transaction_id": "txn_1", "status": "pending", "note": "Bjørn"}'.encode()
    headers = {"Content-Type": f"application/json; charset={charset}"}
    outcome = await send_answered(api, client, httpx.Response(202, content=body, headers=headers))
    assert isinstance(outcome, Accepted) and outcome.transaction_id == "txn_1"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("literal", "expected_id"), [("1e2", "1e2"), ("12.50", "12.50"), ("9007199254740993", None)]
)
async def test_a_numeric_id_is_kept_as_the_server_wrote_it(
    api: respx.MockRouter, client: GoRouteClient, literal: str, expected_id: str | None
) -> None:
    """helper-82: ``1e2`` was kept as "100.0", an id no lookup finds (a float's text is
    Python's, not the server's); a large integer is exact as JSON reads it."""
    body = f'{{"transaction_id": {literal}, "status": "pending"}}'
    outcome = await send_answered(api, client, answer(202, body))
    assert isinstance(outcome, Accepted)
    assert outcome.transaction_id == (expected_id or literal)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "body", "expected_id"),
    [
        (202, {"transaction_id": "txn_01HQ", "status": "pending"}, "txn_01HQ"),
        (200, {"id": "tx_77"}, "tx_77"),
        (201, {"transaction_id": "txn_a", "id": "tx_b"}, "txn_a"),
        (202, {"transaction_id": 12345}, "12345"),
    ],
)
async def test_2xx_with_an_id_is_accepted(
    api: respx.MockRouter,
    client: GoRouteClient,
    status: int,
    body: dict[str, Any],
    expected_id: str,
) -> None:
    outcome = await send_answered(
        api, client, answer(status, body, headers={"X-Request-Id": "req-9"})
    )
    assert outcome == Accepted(
        http_status=status,
        request_id="req-9",
        transaction_id=expected_id,
        duration=outcome.duration,
    )


@pytest.mark.anyio
@pytest.mark.parametrize(
    "body", [{}, {"status": "queued"}, {"transaction_id": ""}, None, "queued", "{not json", []]
)
async def test_2xx_without_an_id_is_transient(
    api: respx.MockRouter, client: GoRouteClient, body: Any
) -> None:
    outcome = await send_answered(api, client, answer(202, body))
    assert isinstance(outcome, Transient)
    assert outcome.http_status == 202
    assert outcome.reason == (
        "GoRoute answered 202 without a transaction id; "
        "the send is unconfirmed and will be replayed under the same key"
    )


def nested(depth: int) -> str:
    return '{"transaction_id": "txn_1", "x": ' + "[" * depth + "]" * depth + "}"


@pytest.mark.anyio
@pytest.mark.parametrize("status", [202, 400, 422, 503])
async def test_an_answer_nested_past_any_api_answer_is_no_answer_and_no_crash(
    api: respx.MockRouter, client: GoRouteClient, status: int
) -> None:
    """About 1 KB nested 500 deep parses, then overflowed the stack where the key is
    looked for in every string (every command ended in a traceback)."""
    outcome = await send_answered(api, client, answer(status, nested(600)))
    assert not isinstance(outcome, Accepted)
    assert isinstance(outcome, Transient if status in (202, 503) else Rejected)
    shallow = await send_answered(api, client, answer(202, nested(20)))
    assert isinstance(shallow, Accepted) and shallow.transaction_id == "txn_1"


@pytest.mark.anyio
async def test_a_202_naming_two_transactions_is_no_answer(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    """A key twice with two values: which transaction GoRoute meant is unknown (the last one
    was stored, unchecked); the same key twice with one value is only repetition."""
    twice = '{"transaction_id": "txn_1", "status": "pending", "transaction_id": "txn_2"}'
    outcome = await send_answered(api, client, answer(202, twice))
    assert isinstance(outcome, Transient)
    repeated = '{"transaction_id": "txn_1", "transaction_id": "txn_1"}'
    same = await send_answered(api, client, answer(202, repeated))
    assert isinstance(same, Accepted) and same.transaction_id == "txn_1"
    # Equal numbers in two spellings are two ids once an id keeps its spelling (helper-85).
    spelt_twice = '{"transaction_id": 1e2, "transaction_id": 100.0}'
    assert isinstance(await send_answered(api, client, answer(202, spelt_twice)), Transient)


@pytest.mark.anyio
async def test_duration_comes_from_the_injected_monotonic_clock(api: respx.MockRouter) -> None:
    ticks = iter([100.0, 102.5])
    async with GoRouteClient(BASE, KEY, monotonic=lambda: next(ticks)) as goroute:
        outcome = await send_answered(api, goroute, answer(202, {"transaction_id": "txn_1"}))
    assert outcome.duration == 2.5


# --- 429 -----------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("7", 7.0),
        ("0", 0.0),
        (" 120 ", 120.0),
        ("1.5", 1.5),
        (format_datetime(datetime(2025, 3, 1, 12, 1, 30, tzinfo=UTC), usegmt=True), 90.0),
        ("Sat, 01 Mar 2025 12:00:05 GMT", 5.0),
        ("Sat, 01 Mar 2025 11:00:00 GMT", 0.0),  # already past: now, never negative
        ("Saturday, 01-Mar-25 12:00:10 GMT", 10.0),  # obsolete RFC 850 form
        ("soon", None),
        ("", None),
        ("-5", None),
        ("1e3", None),
        ("Sat, 99 Foo 2025 99:99:99 GMT", None),
        (None, None),
    ],
)
async def test_429_reads_retry_after(
    api: respx.MockRouter, client: GoRouteClient, header: str | None, expected: float | None
) -> None:
    headers = {} if header is None else {"Retry-After": header}
    body = {"error": {"code": "RATE_LIMITED", "message": "slow down"}}
    outcome = await send_answered(api, client, answer(429, body, headers=headers))
    assert isinstance(outcome, RateLimited)
    assert outcome.retry_after == expected
    assert outcome.http_status == 429
    assert json.loads(outcome.raw_body or "") == body


def test_retry_after_date_without_zone_is_gmt() -> None:
    assert parse_retry_after("Sat, 01 Mar 2025 12:00:30 -0000", NOW) == 30.0


def test_retry_after_of_twenty_digits_is_the_longest_wait_not_none() -> None:
    """Read as missing, it backed off a second instead of the capped wait."""
    assert parse_retry_after("9" * 20, NOW) == 1e12


# --- 422 -----------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    "body",
    [
        {
            "error_code": "IDEMPOTENCY_KEY_REUSED",
            "message": "key already used for a different request",
            "existing_transaction_id": "txn_orig",
        },
        {
            "error": {
                "code": "IDEMPOTENCY_KEY_REUSED",
                "message": "key already used for a different request",
                "existing_transaction_id": "txn_orig",
                "request_id": "req-1",
            }
        },
    ],
)
async def test_422_key_reused_in_either_shape(
    api: respx.MockRouter, client: GoRouteClient, body: dict[str, Any]
) -> None:
    outcome = await send_answered(api, client, answer(422, body))
    assert isinstance(outcome, KeyReused)
    assert outcome.existing_transaction_id == "txn_orig"
    assert outcome.code == "IDEMPOTENCY_KEY_REUSED"
    assert outcome.message == "key already used for a different request"
    assert outcome.http_status == 422
    assert json.loads(outcome.raw_body or "") == body


@pytest.mark.anyio
async def test_422_with_an_existing_id_but_another_code_is_key_reused(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    body = {"code": "DUPLICATE", "existing_transaction_id": "tx_5"}
    outcome = await send_answered(api, client, answer(422, body))
    assert isinstance(outcome, KeyReused)
    assert outcome.existing_transaction_id == "tx_5"
    assert outcome.code == "DUPLICATE"


@pytest.mark.anyio
async def test_422_key_reused_without_an_id_keeps_none(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    outcome = await send_answered(
        api, client, answer(422, {"error_code": "IDEMPOTENCY_KEY_REUSED"})
    )
    assert isinstance(outcome, KeyReused)
    assert outcome.existing_transaction_id is None


@pytest.mark.anyio
async def test_other_422_is_rejected(api: respx.MockRouter, client: GoRouteClient) -> None:
    body = {
        "error": {
            "code": "VAL_001",
            "message": "Schematron validation failed",
            "details": [
                {
                    "rule": "BR-CO-10",
                    "location": "/Invoice/cac:LegalMonetaryTotal",
                    "message": "Sum",
                },
            ],
        }
    }
    outcome = await send_answered(api, client, answer(422, body))
    assert outcome == Rejected(
        http_status=422,
        code="VAL_001",
        message="Schematron validation failed",
        details=("BR-CO-10 at /Invoice/cac:LegalMonetaryTotal: Sum",),
        raw_body=outcome.raw_body,
        duration=outcome.duration,
    )
    assert json.loads(outcome.raw_body or "") == body


# --- 401 / 403 -----------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "body", "code", "message"),
    [
        (
            401,
            {"error": {"code": "AUTH_001", "message": "Invalid API key"}},
            "AUTH_001",
            "Invalid API key",
        ),
        (
            401,
            {"error_code": "INVALID_API_KEY", "message": "expired"},
            "INVALID_API_KEY",
            "expired",
        ),
        (
            403,
            {"code": "IP_NOT_ALLOWED", "detail": "IP not allowed"},
            "IP_NOT_ALLOWED",
            "IP not allowed",
        ),
        (403, None, None, "Forbidden"),
    ],
)
async def test_401_403_are_auth_refused(
    api: respx.MockRouter,
    client: GoRouteClient,
    status: int,
    body: Any,
    code: str | None,
    message: str,
) -> None:
    outcome = await send_answered(api, client, answer(status, body))
    assert isinstance(outcome, AuthRefused)
    assert (outcome.http_status, outcome.code, outcome.message) == (status, code, message)


# --- other 4xx -----------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "body", "code", "message"),
    [
        (
            400,
            {"error_code": "INVALID_IDEMPOTENCY_KEY", "message": "key too long"},
            "INVALID_IDEMPOTENCY_KEY",
            "key too long",
        ),
        (
            400,
            {"error": {"code": "INVALID_XML", "message": "not well-formed"}},
            "INVALID_XML",
            "not well-formed",
        ),
        (
            404,
            {"error": {"code": "RECEIVER_NOT_FOUND", "message": "not in SMP"}},
            "RECEIVER_NOT_FOUND",
            "not in SMP",
        ),
        (409, {"code": "CONFLICT", "message": "duplicate"}, "CONFLICT", "duplicate"),
        (413, None, None, "Request Entity Too Large"),
        (418, {"error": "teapot"}, None, "teapot"),
    ],
)
async def test_other_4xx_are_rejected(
    api: respx.MockRouter,
    client: GoRouteClient,
    status: int,
    body: Any,
    code: str | None,
    message: str,
) -> None:
    outcome = await send_answered(api, client, answer(status, body))
    assert isinstance(outcome, Rejected)
    assert (outcome.http_status, outcome.code, outcome.message) == (status, code, message)


@pytest.mark.anyio
@pytest.mark.parametrize("status", [408, 421, 425])
async def test_a_4xx_that_says_the_request_was_not_taken_is_transient(
    api: respx.MockRouter, client: GoRouteClient, status: int
) -> None:
    """408 (a proxy stopped waiting), 421 and 425 say the request may be sent again: the
    same key and bytes are replayed, where a permanent refusal would leave a document that
    was never taken waiting for an operator."""
    outcome = await send_answered(api, client, answer(status, {"message": "try again"}))
    assert isinstance(outcome, Transient)
    assert outcome.http_status == status and "try again" in outcome.reason


@pytest.mark.anyio
async def test_terminal_control_characters_in_server_text_are_escaped(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    """An escape sequence that would clear a terminal, or a carriage return that would fake
    a line, never reaches a screen or a log as it came."""
    payload = "\x1b[2J\x1b[31mPWNED\x1b]0;title\x07\x1b[0m\r\rfake line"
    body = {"error_code": payload, "message": payload, "details": [payload]}
    outcome = await send_answered(api, client, answer(409, body))
    assert isinstance(outcome, Rejected)
    for text in (outcome.code, outcome.message, *outcome.details):
        assert text is not None and text.isprintable(), text
    assert outcome.message == "\\x1b[2J\\x1b[31mPWNED\\x1b]0;title\\x07\\x1b[0m fake line"
    phrase = await send_answered(
        api, client, httpx.Response(418, extensions={"reason_phrase": b"\x1b[2Jteapot"})
    )
    assert isinstance(phrase, Rejected) and phrase.message == "\\x1b[2Jteapot"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("details", "expected"),
    [
        (
            [
                {
                    "rule": "BR-01",
                    "location": "/Invoice/cbc:ID",
                    "message": "An Invoice shall have\n an ID",
                },
                {"rule": "BR-CO-15", "message": "Total mismatch"},
                {"location": "/Invoice", "message": "bad"},
                {"message": "only a message"},
                {"unexpected": "shape"},
                "a plain string",
                "",
            ],
            (
                "BR-01 at /Invoice/cbc:ID: An Invoice shall have an ID",
                "BR-CO-15: Total mismatch",
                "/Invoice: bad",
                "only a message",
                '{"unexpected": "shape"}',
                "a plain string",
            ),
        ),
        (
            "XSD validation failed at line 3\n  column 7",
            ("XSD validation failed at line 3 column 7",),
        ),
        ("", ()),
        (None, ()),
        ({"rule": "BR-02", "message": "one object"}, ("BR-02: one object",)),
    ],
)
@pytest.mark.parametrize("nested", [False, True], ids=["flat", "nested"])
async def test_details_in_every_documented_form(
    api: respx.MockRouter,
    client: GoRouteClient,
    details: Any,
    expected: tuple[str, ...],
    nested: bool,
) -> None:
    body: dict[str, Any] = {"code": "VAL_001", "message": "invalid", "details": details}
    if nested:
        body = {"error": body}
    outcome = await send_answered(api, client, answer(400, body))
    assert isinstance(outcome, Rejected)
    assert outcome.details == expected


@pytest.mark.anyio
async def test_details_absent(api: respx.MockRouter, client: GoRouteClient) -> None:
    outcome = await send_answered(api, client, answer(400, {"error_code": "X", "message": "m"}))
    assert isinstance(outcome, Rejected)
    assert outcome.details == ()


@pytest.mark.anyio
async def test_fastapi_style_detail_list(api: respx.MockRouter, client: GoRouteClient) -> None:
    body = {
        "detail": [{"loc": ["body", "receiver_id"], "msg": "field required", "type": "missing"}]
    }
    outcome = await send_answered(api, client, answer(400, body))
    assert isinstance(outcome, Rejected)
    assert outcome.message == "Bad Request"
    assert outcome.details == ("missing at body.receiver_id: field required",)


@pytest.mark.anyio
async def test_error_code_wins_over_nested_and_plain_code(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    body = {"error_code": "A", "error": {"code": "B", "message": "nested"}, "code": "C"}
    outcome = await send_answered(api, client, answer(400, body))
    assert isinstance(outcome, Rejected)
    assert (outcome.code, outcome.message) == ("A", "nested")


# --- bodies that are not the JSON we expect ------------------------------------------------


HTML_502 = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n"
    "</body>\r\n</html>\r\n"
)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (400, "", "Bad Request"),
        (400, None, "Bad Request"),
        (400, "   \n", "Bad Request"),
        (400, '{"error_code": "INVALID', '{"error_code": "INVALID'),
        (400, "Bad things happened\non two lines", "Bad things happened on two lines"),
        (400, "x" * 500, "x" * 200),
        (400, ["a", "list"], "Bad Request"),
        (400, {"message": 42}, "42"),
        (400, {"error": None, "message": None}, "Bad Request"),
        (599, None, ""),
    ],
)
async def test_unexpected_bodies_never_crash(
    api: respx.MockRouter, client: GoRouteClient, status: int, body: Any, message: str
) -> None:
    outcome = await send_answered(api, client, answer(status, body))
    if status >= 500:
        assert isinstance(outcome, Transient)
        assert outcome.reason == "GoRoute answered 599: HTTP 599"
        return
    assert isinstance(outcome, Rejected)
    assert outcome.message == message
    assert outcome.code is None


NOT_FOUND_PAGE = "<html><body><h1>Not Found</h1></body></html>"


@pytest.mark.anyio
async def test_an_html_404_where_the_api_answers_is_the_apis_own(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    """The health check answers in JSON: the 404 page is the API's (a receiver not found)."""
    api.get("/peppol/version").mock(return_value=answer(200, {"status": "ok"}))
    outcome = await send_answered(api, client, answer(404, NOT_FOUND_PAGE))
    assert isinstance(outcome, Rejected)
    assert outcome.message == "Not Found"


@pytest.mark.anyio
async def test_answers_that_meet_the_api_check_while_it_runs_take_its_verdict(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    """helper-91: the first HTML 404 asked the health check; the answers that came while it
    was asked read "no API" and were told the base URL is wrong (their keys given back,
    though GoRoute had taken the requests), while the first was rejected by the API."""

    async def slow_health(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.2)
        return answer(200, {"status": "ok"})

    health = api.get("/peppol/version").mock(side_effect=slow_health)
    api.post("/api/v1/documents").mock(return_value=answer(404, NOT_FOUND_PAGE))
    outcomes = await asyncio.gather(
        *(client.send_document(f"{IDEMPOTENCY_KEY}-{n}", BODY) for n in range(3))
    )
    assert [type(outcome) for outcome in outcomes] == [Rejected] * 3
    assert health.call_count == 1


@pytest.mark.anyio
async def test_an_answer_waiting_on_a_check_that_was_cancelled_asks_anew(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    """helper-94: the check's request cancelled, those waiting on it took "no API" for its
    verdict, and their requests were told the base URL is wrong."""

    async def slow_health(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.2)
        return answer(200, {"status": "ok"})

    health = api.get("/peppol/version").mock(side_effect=slow_health)
    api.post("/api/v1/documents").mock(return_value=answer(404, NOT_FOUND_PAGE))
    checking = asyncio.create_task(client.send_document(f"{IDEMPOTENCY_KEY}-1", BODY))
    await asyncio.sleep(0.05)  # its 404 came; it asks the health check now
    waiting = asyncio.create_task(client.send_document(f"{IDEMPOTENCY_KEY}-2", BODY))
    await asyncio.sleep(0.05)
    checking.cancel()
    assert isinstance(await waiting, Rejected)  # it asked the health check itself
    assert health.called


@pytest.mark.anyio
@pytest.mark.parametrize("status", [404, 405])
async def test_a_page_where_no_api_answers_is_a_wrong_endpoint(
    api: respx.MockRouter, client: GoRouteClient, status: int
) -> None:
    """A typo in the base URL: every API path is a web server's page. Nothing is rejected."""
    api.get("/peppol/version").mock(return_value=answer(404, NOT_FOUND_PAGE))
    api.get("/api/v1/transactions").mock(return_value=answer(404, ""))
    outcome = await send_answered(api, client, answer(status, NOT_FOUND_PAGE))
    assert isinstance(outcome, WrongEndpoint)
    assert outcome.message.startswith(f"{BASE}/api/v1/documents answered {status} (text/plain")
    assert "the base URL is wrong" in outcome.message
    # Asked once per client: a second send spends no more probes.
    again = await client.send_document(IDEMPOTENCY_KEY, BODY)
    assert isinstance(again, WrongEndpoint)
    assert api.calls.call_count == 4
    # A transaction that is "not found" there is not taken as not found at GoRoute.
    api.get("/api/v1/transactions/tx-1").mock(return_value=answer(404, NOT_FOUND_PAGE))
    assert isinstance(await client.get_transaction("tx-1"), WrongEndpoint)


@pytest.mark.anyio
async def test_an_unanswered_probe_stops_without_deciding(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    api.get("/peppol/version").mock(side_effect=httpx.ConnectError("refused"))
    outcome = await send_answered(api, client, answer(404, NOT_FOUND_PAGE))
    assert isinstance(outcome, WrongEndpoint)
    api.get("/peppol/version").mock(return_value=answer(200, {"status": "ok"}))
    assert isinstance(await client.send_document(IDEMPOTENCY_KEY, BODY), Rejected)


@pytest.mark.anyio
async def test_html_from_a_proxy_on_5xx(api: respx.MockRouter, client: GoRouteClient) -> None:
    outcome = await send_answered(api, client, answer(502, HTML_502))
    assert isinstance(outcome, Transient)
    assert outcome.reason == "GoRoute answered 502: 502 Bad Gateway 502 Bad Gateway nginx"
    assert outcome.raw_body == HTML_502


@pytest.mark.anyio
async def test_deeply_nested_json_is_treated_as_text(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    outcome = await send_answered(api, client, answer(400, "[" * 100_000))
    assert isinstance(outcome, Rejected)
    assert outcome.message == "[" * 200


@pytest.mark.anyio
async def test_raw_body_is_truncated(api: respx.MockRouter, client: GoRouteClient) -> None:
    outcome = await send_answered(api, client, answer(500, "e" * (MAX_RAW_BODY + 10)))
    assert outcome.raw_body == "e" * MAX_RAW_BODY + "…[truncated]"


# --- 5xx -----------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("status", [500, 502, 503, 504])
async def test_5xx_is_transient(api: respx.MockRouter, client: GoRouteClient, status: int) -> None:
    body = {"error": {"code": "SRV", "message": "try later", "request_id": "req-5"}}
    outcome = await send_answered(api, client, answer(status, body))
    assert isinstance(outcome, Transient)
    assert outcome.reason == f"GoRoute answered {status}: try later"
    assert (outcome.http_status, outcome.request_id) == (status, "req-5")
    assert json.loads(outcome.raw_body or "") == body


# --- request ids ---------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("body", "headers", "expected"),
    [
        ({"error": {"request_id": "req-body"}}, {"X-Request-Id": "req-header"}, "req-body"),
        ({"request_id": "req-top"}, {"X-Request-Id": "req-header"}, "req-top"),
        ({"message": "m"}, {"x-request-id": "req-header"}, "req-header"),
        ("plain text", {}, None),
    ],
)
async def test_request_id(
    api: respx.MockRouter,
    client: GoRouteClient,
    body: Any,
    headers: dict[str, str],
    expected: str | None,
) -> None:
    outcome = await send_answered(api, client, answer(400, body, headers=headers))
    assert outcome.request_id == expected


# --- no answer at all ----------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (httpx.ReadTimeout("timed out"), "timed out after 30 s waiting for an answer"),
        (httpx.WriteTimeout("timed out"), "timed out after 30 s while sending the request"),
        (
            httpx.ConnectTimeout("timed out"),
            "could not connect within 10 s (the request was not sent)",
        ),
        (
            httpx.PoolTimeout("timed out"),
            "no free connection within 30 s (the request was not sent)",
        ),
        (httpx.ConnectError("[Errno 111] Connection refused"), "connection refused"),
        (
            httpx.ConnectError("[Errno -2] Name or service not known"),
            "could not connect ([Errno -2] Name or service not known)",
        ),
        (
            httpx.RemoteProtocolError("Server disconnected without sending a response."),
            "connection dropped before an answer (Server disconnected without sending a response.)",
        ),
        (httpx.ReadError(""), "connection broken while reading the answer"),
        (
            httpx.WriteError("Broken pipe"),
            "connection broken while sending the request (Broken pipe)",
        ),
        (httpx.UnsupportedProtocol("no"), "UnsupportedProtocol (no)"),
    ],
)
async def test_network_failures_are_transient(
    api: respx.MockRouter, client: GoRouteClient, error: Exception, reason: str
) -> None:
    api.post(DOCUMENTS).mock(side_effect=error)
    outcome = await client.send_document(IDEMPOTENCY_KEY, BODY)
    # Only a failure to connect proves the request never left.
    never_left = isinstance(error, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)
    assert outcome == Transient(reason=reason, duration=outcome.duration, sent=not never_left)


@pytest.mark.anyio
async def test_timeouts_are_configurable_and_named(api: respx.MockRouter) -> None:
    api.post(DOCUMENTS).mock(side_effect=httpx.ReadTimeout("timed out"))
    async with GoRouteClient(BASE, KEY, read_timeout=2.5) as goroute:
        outcome = await goroute.send_document(IDEMPOTENCY_KEY, BODY)
    assert isinstance(outcome, Transient)
    assert outcome.reason == "timed out after 2.5 s waiting for an answer"


@pytest.mark.anyio
async def test_a_real_refused_connection() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with GoRouteClient(f"http://127.0.0.1:{port}", KEY, connect_timeout=5) as goroute:
        outcome = await goroute.send_document(IDEMPOTENCY_KEY, BODY)
    assert outcome == Transient(reason="connection refused", duration=outcome.duration, sent=False)


@pytest.mark.anyio
async def test_a_real_server_that_hangs_up() -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server, GoRouteClient(f"http://127.0.0.1:{port}", KEY) as goroute:
        outcome = await goroute.send_document(IDEMPOTENCY_KEY, BODY)
    assert isinstance(outcome, Transient)
    assert outcome.reason.startswith("connection dropped before an answer")


@pytest.fixture
def no_proxy_settings(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


@pytest.mark.anyio
async def test_an_https_send_goes_by_the_proxy_the_environment_names(
    no_proxy_settings: pytest.MonkeyPatch,
) -> None:
    """A request leaves by the transport httpx's client would pick (``Lane.send`` skips the
    client's own send): through ``HTTPS_PROXY``, as a tunnel the key never crosses in clear."""
    with HostileServer(answer_json(502, {"error": "no tunnel today"})) as proxy:
        no_proxy_settings.setenv("HTTPS_PROXY", proxy.base_url)
        async with GoRouteClient("https://goroute.test", KEY) as goroute:
            outcome = await goroute.send_document(IDEMPOTENCY_KEY, BODY)
    assert isinstance(outcome, Transient)
    [tunnel] = proxy.requests
    assert (tunnel.method, tunnel.path) == ("CONNECT", "goroute.test:443")
    assert SECRET not in repr(tunnel)


@pytest.mark.anyio
async def test_plain_http_to_loopback_never_goes_by_a_proxy(
    no_proxy_settings: pytest.MonkeyPatch,
) -> None:
    """Plain http is allowed only to loopback (an emulator): a proxy named in the environment
    would have had the key in clear text, on whatever host it runs."""
    with (
        HostileServer(answer_json(502, {"error": "proxy"})) as proxy,
        HostileServer(answer_json(202, {"transaction_id": "tx-direct"})) as server,
    ):
        no_proxy_settings.setenv("HTTP_PROXY", proxy.base_url)
        no_proxy_settings.setenv("ALL_PROXY", proxy.base_url)
        async with GoRouteClient(server.base_url, KEY) as goroute:
            outcome = await goroute.send_document(IDEMPOTENCY_KEY, BODY)
    assert isinstance(outcome, Accepted)
    assert proxy.requests == []
    assert server.requests[0].headers["x-api-key"] == SECRET


@pytest.mark.anyio
async def test_a_closed_client_sends_nothing(no_proxy_settings: pytest.MonkeyPatch) -> None:
    with HostileServer(answer_json(202, {"transaction_id": "tx-after-close"})) as server:
        goroute = GoRouteClient(server.base_url, KEY)
        await goroute.aclose()
        with pytest.raises(RuntimeError):
            await goroute.send_document(IDEMPOTENCY_KEY, BODY)
    assert server.requests == []


@pytest.mark.anyio
async def test_the_clients_of_a_process_load_the_cas_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A send's history check and its sends, each pool of them, share one TLS context:
    each context loads the CA bundle again (35-40 ms of CPU)."""
    import ssl

    from invoicectl.goroute.lanes import shared_tls_context

    made: list[ssl.SSLContext] = []
    create = ssl.create_default_context

    def counted(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        made.append(create(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(ssl, "create_default_context", counted)
    shared_tls_context.cache_clear()
    async with GoRouteClient(BASE, KEY, max_connections=50), GoRouteClient(BASE, KEY):
        pass
    assert len(made) == 1


@pytest.mark.anyio
async def test_a_request_carries_the_client_s_timeouts(api: respx.MockRouter) -> None:
    seen: list[dict[str, float]] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions["timeout"])
        return httpx.Response(202, json={"transaction_id": "tx-1"})

    api.post(DOCUMENTS).mock(side_effect=record)
    async with GoRouteClient(BASE, KEY, read_timeout=2.5, connect_timeout=4) as goroute:
        await goroute.send_document(IDEMPOTENCY_KEY, BODY)
    assert seen[0]["read"] == 2.5
    assert seen[0]["connect"] == 4


# --- transactions --------------------------------------------------------------------------

LIST_ITEM = {
    "transaction_id": "txn_01HQ",
    "direction": "outbound",
    "document_type": "Invoice",
    "invoice_number": "F-2024-001",
    "sender_id": "0088:7300010000001",
    "receiver_id": "0088:5790000436101",
    "status": "delivered",
    "created_at": "2025-02-28T10:00:00Z",
    "delivered_at": "2025-02-28T10:00:05Z",
}

SINGLE = {
    "id": "tx_42",
    "status": "Processing",
    "document_type": "CreditNote",
    "document_id": "CN-7",
    "sender": {"scheme": "0106", "identifier": "12345678", "name": "Seller BV"},
    "receiver": {"scheme": "9915", "identifier": "phase4-test-receiver", "name": "Buyer"},
    "created_at": "2025-02-28T10:00:00Z",
    "updated_at": "2025-02-28T10:01:00Z",
    "delivered_at": None,
    "message_id": "msg-1",
    "metadata": {"invoice_id": "CN-7", "sha256": "ab"},
}


def test_transaction_from_the_list_shape() -> None:
    transaction = Transaction.from_json(LIST_ITEM)
    assert transaction == Transaction(
        transaction_id="txn_01HQ",
        invoice_number="F-2024-001",
        document_type="Invoice",
        receiver="0088:5790000436101",
        receiver_scheme="0088",
        receiver_id="5790000436101",
        sender_id="0088:7300010000001",
        status="delivered",
        created_at="2025-02-28T10:00:00Z",
        delivered_at="2025-02-28T10:00:05Z",
        raw=LIST_ITEM,
    )
    assert transaction.is_final


def test_transaction_from_the_single_shape() -> None:
    transaction = Transaction.from_json(SINGLE)
    assert transaction == Transaction(
        transaction_id="tx_42",
        invoice_number="CN-7",
        document_type="CreditNote",
        receiver="9915:phase4-test-receiver",
        receiver_scheme="9915",
        receiver_id="phase4-test-receiver",
        sender_id="0106:12345678",
        status="processing",
        created_at="2025-02-28T10:00:00Z",
        updated_at="2025-02-28T10:01:00Z",
        metadata={"invoice_id": "CN-7", "sha256": "ab"},
        raw=SINGLE,
    )
    assert not transaction.is_final
    assert "raw" not in repr(transaction)


@pytest.mark.parametrize(
    ("fields_", "receiver", "scheme", "identifier"),
    [
        ({"receiver_id": "5790000436101"}, None, None, "5790000436101"),
        ({"receiver_id": "0088:5790000436101"}, "0088:5790000436101", "0088", "5790000436101"),
        (
            {"receiver_id": "iso6523-actorid-upis::0088:579"},
            "0088:579",
            "0088",
            "579",
        ),
        ({"receiver_scheme": "0088", "receiver_id": "579"}, "0088:579", "0088", "579"),
        ({"receiver_scheme": "0088", "receiver_id": "0088:579"}, "0088:579", "0088", "579"),
        ({"receiver_scheme": "9915", "receiver_id": "a:b"}, "9915:a:b", "9915", "a:b"),
        ({"receiver": "0106:123"}, "0106:123", "0106", "123"),
        ({"receiver": {"identifier": "0106:123"}}, "0106:123", "0106", "123"),
        ({"receiver": {"identifier": "123"}}, None, None, "123"),
        (
            {"receiver": {"scheme": "iso6523-actorid-upis", "identifier": "0088:579"}},
            "0088:579",
            "0088",
            "579",
        ),
        (
            {"receiver_scheme": "ISO6523-ACTORID-UPIS", "receiver_id": "0088:579"},
            "0088:579",
            "0088",
            "579",
        ),
        ({"receiver": {"scheme": "0106"}}, None, "0106", None),
        ({"receiver_id": ":123"}, None, None, ":123"),
        ({}, None, None, None),
    ],
)
def test_receiver_forms(
    fields_: dict[str, Any], receiver: str | None, scheme: str | None, identifier: str | None
) -> None:
    transaction = Transaction.from_json(fields_)
    assert (transaction.receiver, transaction.receiver_scheme, transaction.receiver_id) == (
        receiver,
        scheme,
        identifier,
    )


def test_transaction_tolerates_odd_values() -> None:
    transaction = Transaction.from_json(
        {
            "id": 7,
            "status": None,
            "metadata": "not a map",
            "invoice_number": "  ",
            "document_id": "D",
        }
    )
    assert transaction.transaction_id == "7"
    assert transaction.status is None
    assert transaction.metadata == {}
    assert transaction.invoice_number == "D"


@pytest.mark.anyio
@pytest.mark.parametrize(("body", "expected_id"), [(SINGLE, "tx_42"), (LIST_ITEM, "txn_01HQ")])
async def test_get_transaction_found(
    api: respx.MockRouter, client: GoRouteClient, body: dict[str, Any], expected_id: str
) -> None:
    api.get(f"/api/v1/transactions/{expected_id}").mock(
        return_value=answer(200, body, headers={"X-Request-Id": "req-g"})
    )
    outcome = await client.get_transaction(expected_id)
    assert isinstance(outcome, Found)
    assert outcome.transaction == Transaction.from_json(body)
    assert (outcome.http_status, outcome.request_id) == (200, "req-g")


@pytest.mark.anyio
async def test_an_answer_about_another_transaction_is_no_lookup(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    """Asked for tx_42, told of txn_999999 delivered: reconcile must not adopt that."""
    other = {**SINGLE, "transaction_id": "txn_999999", "id": "txn_999999"}
    api.get("/api/v1/transactions/tx_42").mock(return_value=answer(200, other))
    outcome = await client.get_transaction("tx_42")
    assert isinstance(outcome, Transient)
    assert outcome.reason == (
        "GoRoute answered 200 but the body is not the transaction asked for (tx_42)"
    )


@pytest.mark.anyio
async def test_get_transaction_404_is_not_found(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    body = {"error": {"code": "NOT_FOUND", "message": "no such transaction"}}
    api.get("/api/v1/transactions/txn_gone").mock(return_value=answer(404, body))
    outcome = await client.get_transaction("txn_gone")
    assert outcome == NotFound(
        http_status=404, raw_body=outcome.raw_body, duration=outcome.duration
    )
    assert json.loads(outcome.raw_body or "") == body


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (429, None, RateLimited),
        (401, None, AuthRefused),
        (403, None, AuthRefused),
        (400, None, Rejected),
        (422, {"error_code": "IDEMPOTENCY_KEY_REUSED", "existing_transaction_id": "x"}, Rejected),
        (503, None, Transient),
        (200, ["not", "an", "object"], Transient),
        (200, "not json", Transient),
    ],
)
async def test_get_transaction_failures(
    api: respx.MockRouter, client: GoRouteClient, status: int, body: Any, kind: type[Outcome]
) -> None:
    api.get("/api/v1/transactions/txn_1").mock(return_value=answer(status, body))
    outcome = await client.get_transaction("txn_1")
    assert type(outcome) is kind
    assert outcome.http_status == status


@pytest.mark.anyio
async def test_get_transaction_quotes_the_id(api: respx.MockRouter, client: GoRouteClient) -> None:
    route = api.route(method="GET").mock(return_value=answer(404))
    await client.get_transaction("txn:1.a~b")
    assert route.calls[0].request.url.raw_path == b"/peppol-api/api/v1/transactions/txn%3A1.a~b"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("txn_id", "why"),
    [
        ("../documents?x=1", "has characters other than"),
        (".", "names a path"),
        ("..", "names a path"),
        ("a/b", "has characters other than"),
        ("tx\n1", "has characters other than"),
        ("t" * 70_000, "70000 characters long"),
        ("tx-[redacted]", "echoed the API key"),
    ],
)
async def test_get_transaction_refuses_an_unusable_id_without_asking(
    api: respx.MockRouter, client: GoRouteClient, txn_id: str, why: str
) -> None:
    route = api.route().mock(return_value=answer(200, SINGLE))
    outcome = await client.get_transaction(txn_id)
    assert isinstance(outcome, Rejected) and outcome.http_status is None
    assert why in outcome.message and "GoRoute was not asked" in outcome.message
    assert outcome.message.isprintable() and len(outcome.message) < 300
    assert not route.calls


@pytest.mark.anyio
async def test_get_transaction_needs_an_id(client: GoRouteClient) -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        await client.get_transaction("")


@pytest.mark.anyio
async def test_list_transactions_page(api: respx.MockRouter, client: GoRouteClient) -> None:
    body = {"transactions": [LIST_ITEM, SINGLE], "next_cursor": "c2", "has_more": True}
    route = api.get("/api/v1/transactions").mock(return_value=answer(200, body))
    page = await client.list_transactions(limit=50, cursor="c1")
    assert page == TransactionPage(
        transactions=(Transaction.from_json(LIST_ITEM), Transaction.from_json(SINGLE)),
        next_cursor="c2",
        has_more=True,
        pages_told=True,
    )
    assert dict(route.calls.last.request.url.params) == {"limit": "50", "cursor": "c1"}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("body", "cursor", "has_more"),
    [
        ({"transactions": [LIST_ITEM]}, None, False),
        ({"transactions": [LIST_ITEM], "next_cursor": "c2"}, "c2", True),
        ({"transactions": [LIST_ITEM], "next_cursor": "c2", "has_more": False}, "c2", False),
        ({"transactions": [LIST_ITEM], "next_cursor": None, "has_more": True}, None, True),
        ([LIST_ITEM], None, False),
    ],
)
async def test_list_transactions_paging_fields(
    api: respx.MockRouter,
    client: GoRouteClient,
    body: Any,
    cursor: str | None,
    has_more: bool,
) -> None:
    route = api.get("/api/v1/transactions").mock(return_value=answer(200, body))
    page = await client.list_transactions()
    assert isinstance(page, TransactionPage)
    assert (page.next_cursor, page.has_more) == (cursor, has_more)
    # Only a body with a paging field says whether more follow (a short page proves no end).
    assert page.pages_told is (isinstance(body, dict) and len(body) > 1)
    assert page.transactions == (Transaction.from_json(LIST_ITEM),)
    assert dict(route.calls.last.request.url.params) == {"limit": "100"}


@pytest.mark.anyio
@pytest.mark.parametrize(
    "body", [{"items": []}, {"transactions": "none"}, {"transactions": [LIST_ITEM, "x"]}, "text"]
)
async def test_list_transactions_unexpected_shapes_are_transient(
    api: respx.MockRouter, client: GoRouteClient, body: Any
) -> None:
    api.get("/api/v1/transactions").mock(return_value=answer(200, body))
    outcome = await client.list_transactions()
    assert isinstance(outcome, Transient)
    assert outcome.reason.startswith("GoRoute answered 200 but the body is not ")


@pytest.mark.anyio
async def test_list_transactions_failure(api: respx.MockRouter, client: GoRouteClient) -> None:
    api.get("/api/v1/transactions").mock(return_value=answer(401))
    assert isinstance(await client.list_transactions(), AuthRefused)


@pytest.mark.anyio
async def test_list_transactions_limit_must_be_positive(client: GoRouteClient) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        await client.list_transactions(limit=0)


# --- version -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_version_is_relative_to_the_base_url(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    body = {"version": "2.3.1", "environment": "sandbox", "status": "ok"}
    route = api.get("/peppol/version").mock(return_value=answer(200, body))
    assert await client.version() == body
    assert str(route.calls.last.request.url) == "https://goroute.test/peppol-api/peppol/version"


@pytest.mark.anyio
@pytest.mark.parametrize(("status", "body"), [(503, None), (200, "ok")])
async def test_version_failures(
    api: respx.MockRouter, client: GoRouteClient, status: int, body: Any
) -> None:
    api.get("/peppol/version").mock(return_value=answer(status, body))
    assert isinstance(await client.version(), Transient)


# --- configuration -------------------------------------------------------------------------


def test_default_base_url() -> None:
    assert DEFAULT_BASE_URL == "https://app.goroute.ai/peppol-api"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("https://app.goroute.ai/peppol-api/", "https://app.goroute.ai/peppol-api"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("http://localhost:8080/x", "http://localhost:8080/x"),
    ],
)
async def test_base_url_is_normalised(given: str, kept: str) -> None:
    async with GoRouteClient(given, KEY) as goroute:
        assert goroute.base_url == kept


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("ftp://example.test", r"must be an http\(s\) URL"),
        ("app.goroute.ai/peppol-api", r"must be an http\(s\) URL"),
        ("https://", r"must be an http\(s\) URL"),
        ("http://app.goroute.ai/peppol-api", "plain http to a remote host"),
        ("https://exa mple.test", r"must be an http\(s\) URL|non-empty text"),
        ("https://exa%41mple.test", r"must be an http\(s\) URL|non-empty text"),
        ("https://exa\x00mple.test", r"must be an http\(s\) URL|non-empty text"),
    ],
)
def test_bad_base_urls_are_config_errors(given: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        GoRouteClient(given, KEY)


@pytest.mark.anyio
async def test_plain_http_is_fine_through_an_injected_transport() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(202, json={"id": "tx_1"}))
    async with GoRouteClient("http://sandbox", KEY, transport=transport) as goroute:
        outcome = await goroute.send_document(IDEMPOTENCY_KEY, BODY)
    assert isinstance(outcome, Accepted)


@pytest.mark.anyio
async def test_context_manager_closes_the_connection_pool() -> None:
    goroute = GoRouteClient(BASE, KEY)
    async with goroute:
        pass
    assert goroute._lanes.closed


# --- the key stays secret ------------------------------------------------------------------


def test_client_repr_shows_base_url_and_fingerprint_only() -> None:
    goroute = GoRouteClient(BASE, KEY)
    assert repr(goroute) == (
        f"GoRouteClient(base_url='{BASE}', api_key=ApiKey(fingerprint='{KEY.fingerprint}'))"
    )


ECHO = f"<html><body>Bad request. Headers were: X-API-Key: {SECRET}</body></html>"

SECRET_SCENARIOS: list[httpx.Response | Exception] = [
    answer(202, {"transaction_id": "txn_1"}),
    answer(202, {}),
    answer(429, headers={"Retry-After": "3"}),
    answer(422, {"error_code": "IDEMPOTENCY_KEY_REUSED", "existing_transaction_id": "t"}),
    answer(401, {"error": {"code": "AUTH_001", "message": f"key {SECRET} is invalid"}}),
    answer(400, ECHO),
    answer(400, {"message": "bad", "details": [f"header X-API-Key={SECRET}"]}),
    answer(500, ECHO),
    answer(301, headers={"Location": f"https://x.test/?key={SECRET}"}),
    httpx.ReadTimeout("timed out"),
    httpx.ConnectError(f"could not connect with {SECRET}"),
    httpx.RemoteProtocolError("Server disconnected"),
]


def rendered(outcome: Outcome) -> str:
    """Everything an outcome could show: repr, str, and every field, raw_body included."""
    return "\n".join(
        [repr(outcome), str(outcome)] + [str(getattr(outcome, f.name)) for f in fields(outcome)]
    )


@pytest.mark.anyio
@pytest.mark.parametrize("scenario", SECRET_SCENARIOS)
async def test_the_key_appears_in_no_outcome(
    api: respx.MockRouter, client: GoRouteClient, scenario: httpx.Response | Exception
) -> None:
    if isinstance(scenario, Exception):
        api.post(DOCUMENTS).mock(side_effect=scenario)
    else:
        api.post(DOCUMENTS).mock(return_value=scenario)
    outcome = await client.send_document(IDEMPOTENCY_KEY, BODY)
    assert SECRET not in rendered(outcome)


@pytest.mark.anyio
async def test_an_echoed_key_is_redacted_from_raw_body(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    outcome = await send_answered(api, client, answer(400, ECHO))
    assert outcome.raw_body == ECHO.replace(SECRET, "[redacted]")


@pytest.mark.anyio
async def test_a_large_json_answer_shows_a_redacted_start_and_keeps_the_key_out_of_all(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    """Its raw text is redacted only as far as it can be shown (``MAX_RAW_BODY`` and a
    margin): the key echoed across the cut, and far past it, is in no field either way."""
    pad = "x" * (MAX_RAW_BODY - 20)
    body = {"a": pad, "b": f"{SECRET} {SECRET}", "c": pad * 3, "d": SECRET, "id": "tx_9"}
    outcome = await send_answered(api, client, answer(400, body))
    assert SECRET not in rendered(outcome)
    assert outcome.raw_body.endswith("…[truncated]")


def test_the_text_redacted_of_a_large_answer_is_bounded() -> None:
    """helper-82: all of an answer's text was searched for the key, though only
    ``MAX_RAW_BODY`` of it is ever kept; 4 MB a server filled with escapes took 6 s of CPU
    (a document's answer may be 30 MB). Only what is kept, and a margin, is searched now;
    the key echoed just inside the kept part is still found."""
    asked: list[int] = []

    def redact(text: str) -> str:
        asked.append(len(text))
        return text.replace(SECRET, "[redacted]")

    body = ("%25&#x73;\\u0073" * 300_000)[: 4 * 1024 * 1024]
    body = body[: MAX_RAW_BODY - 10] + SECRET + body[MAX_RAW_BODY:]
    response = httpx.Response(500, text=body)
    read = Answer.read(response, response.content, 0.0, redact)

    assert max(asked) <= MAX_RAW_BODY + 4096 + len("…[truncated]")
    assert SECRET not in read.text and "[redacted]" in read.text
    assert read.raw_body.endswith("…[truncated]") and len(read.raw_body) < MAX_RAW_BODY + 20


@pytest.mark.anyio
@pytest.mark.parametrize("status", [202, 422])
async def test_an_answer_whose_strings_take_too_long_to_check_is_not_read(
    api: respx.MockRouter,
    client: GoRouteClient,
    monkeypatch: pytest.MonkeyPatch,
    status: int,
) -> None:
    """Each string is checked for the key on its own; a server can make that take many
    seconds of CPU (2 MB of short strings that decode several ways: 16 s), outside the
    request's time limit. Past ``REDACTION_SECONDS`` the answer is not read, whatever its
    status, as one over its cap: a send's outcome is unknown (a 422 "key reused" read as a
    plain refusal would have made the invoice rejected). Below it, as it was."""
    monkeypatch.setattr(redaction, "REDACTION_SECONDS", 0.0)
    padding = ["%25&amp;" + str(n) for n in range(600)]
    body = {"error_code": "IDEMPOTENCY_KEY_REUSED", "existing_transaction_id": "t", "p": padding}

    costly = await send_answered(api, client, answer(status, body))
    cheap = await send_answered(api, client, answer(202, {"transaction_id": "txn_1"}))

    assert isinstance(costly, Transient) and costly.http_status == status
    assert "took over 0 s of CPU to check for the API key" in costly.reason
    assert isinstance(cheap, Accepted)


def test_no_half_of_an_echo_reaches_raw_body_past_a_collapsed_match() -> None:
    """A review's probe of a cut window: one fragment match collapsing 80 KB to a marker,
    then a JSON-escaped echo where the window was cut. The whole text is redacted, so the
    echo is whole when it is found, and raw_body shows none of it."""
    secret = "sk_test_Zq9x7SECRETvalue42"
    escaped = "".join(f"\\u{ord(c):04x}" for c in secret)
    head = '{"a": "' + secret[1:] + "e" * 80_000 + '", "b": "'
    pad = "x" * (2 * MAX_RAW_BODY - 6 * 20 - len(head))
    raw = head + pad + escaped + '", "c": "' + "y" * 1000 + '"}'
    body = raw.encode()

    read = Answer.read(httpx.Response(400, content=body), body, 0.1, ApiKey(secret).redact)

    assert secret[:12] not in redaction._json_unescaped(read.raw_body)


def test_the_redaction_budget_is_counted_on_its_clock() -> None:
    ticks = iter(range(1_000_000))
    strings = ["word" * 3] * 1000

    with pytest.raises(redaction.TooCostly):
        redaction.redact_data(strings, str.upper, clock=lambda: float(next(ticks)))
    assert redaction.redact_data(strings, str.upper, clock=lambda: 0.0) == ["WORDWORDWORD"] * 1000


@pytest.mark.anyio
async def test_the_key_appears_in_no_transaction(
    api: respx.MockRouter, client: GoRouteClient
) -> None:
    api.get("/api/v1/transactions/t").mock(return_value=answer(200, SINGLE))
    outcome = await client.get_transaction("t")
    assert SECRET not in rendered(outcome)


@pytest.mark.anyio
async def test_the_key_appears_in_no_raised_error(client: GoRouteClient) -> None:
    for call in (
        client.send_document("bad key", BODY),
        client.get_transaction(""),
        client.list_transactions(limit=0),
    ):
        with pytest.raises(ValueError) as raised:
            await call
        assert SECRET not in str(raised.value)
        assert SECRET not in repr(raised.value)


@pytest.mark.anyio
async def test_the_key_appears_in_no_log_line_over_real_http(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A real socket, so httpx and httpcore log everything they log at DEBUG."""
    received: list[bytes] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        received.append(head + await reader.readexactly(length))
        reply = b'{"transaction_id":"txn_1"}'
        writer.write(
            b"HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(reply), reply)
        )
        await writer.drain()
        writer.close()

    caplog.set_level(logging.DEBUG)
    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with GoRouteClient(f"http://127.0.0.1:{port}", KEY) as goroute:
        async with server:
            outcome = await goroute.send_document(IDEMPOTENCY_KEY, BODY)
        failure = await goroute.get_transaction("txn_1")  # the server is gone: a failure path

    assert isinstance(outcome, Accepted)
    assert isinstance(failure, Transient)
    assert re.search(rb"(?im)^x-api-key: " + SECRET.encode() + rb"\r$", received[0])
    assert received[0].endswith(BODY)
    assert any(record.name.startswith("httpcore") for record in caplog.records)
    assert any(record.name == "invoicectl.goroute.client" for record in caplog.records)
    assert SECRET not in caplog.text
    assert "x-api-key" not in caplog.text.lower()

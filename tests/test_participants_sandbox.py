"""The emulator's participant lookups: both routes, its test receivers, its counters, and the
project's client against it, in process and over real loopback HTTP."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from virtual_time import RecordingSleep, run_virtual

from invoicectl.goroute.apikey import ApiKey
from invoicectl.goroute.client import GoRouteClient, Participant
from invoicectl.goroute.limiter import RateLimiter
from invoicectl.goroute.outcomes import Accepted, AuthRefused, RateLimited, Rejected, Transient
from invoicectl.goroute.retry import RetryPolicy, call_with_retry
from invoicectl.sandbox import DEFAULT_API_KEY, BackgroundServer, Sandbox, SandboxConfig
from invoicectl.sandbox.participants import BILLING_PROCESS, CREDIT_NOTE, INVOICE
from invoicectl.sandbox.samples import sample_invoice, send_body

HEADERS = {"X-API-Key": DEFAULT_API_KEY}
LOOKUP = "/api/v1/participants/lookup"
PLAIN = "/participants/lookup"
BOTH_TYPES = (INVOICE, CREDIT_NOTE)
# Every receiver the emulator accepts sends to is on its network, for both document types.
REGISTERED = [
    "9915:phase4-test-receiver",
    "9915:reject-all",
    "9915:timeout-test",
    "9915:invalid-cert",
    "0088:5790000436101",
    "0106:12345678",
]


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


@pytest.fixture
async def goroute(sandbox: Sandbox) -> AsyncIterator[GoRouteClient]:
    key = ApiKey(DEFAULT_API_KEY)
    base = "http://sandbox.test/peppol-api"
    async with GoRouteClient(base, key, transport=sandbox.transport()) as client:
        yield client


# --- the routes ----------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("prefix", ["", "/peppol-api"])
async def test_the_versioned_route_answers_found_and_capabilities(
    http: httpx.AsyncClient, prefix: str
) -> None:
    response = await http.get(
        f"{prefix}{LOOKUP}", params={"peppol_id": "9915:phase4-test-receiver"}
    )
    assert response.status_code == 200
    body = response.json()
    assert (body["found"], body["participant_id"], body["scheme"]) == (
        True,
        "9915:phase4-test-receiver",
        "9915",
    )
    assert body["capabilities"] == [
        {"document_type": INVOICE, "process_id": BILLING_PROCESS},
        {"document_type": CREDIT_NOTE, "process_id": BILLING_PROCESS},
    ]
    assert response.headers["X-Request-ID"].startswith("req_")


@pytest.mark.anyio
@pytest.mark.parametrize("prefix", ["", "/peppol-api"])
async def test_the_plain_route_answers_registered_and_document_types(
    http: httpx.AsyncClient, prefix: str
) -> None:
    response = await http.get(f"{prefix}{PLAIN}", params={"identifier": "9915:invoices-only"})
    assert response.status_code == 200
    body = response.json()
    assert (body["registered"], body["participant_id"]) == (True, "9915:invoices-only")
    assert body["document_types"] == [{"document_type_id": INVOICE, "process_id": BILLING_PROCESS}]
    assert set(body) >= {"access_point", "certificate"}


@pytest.mark.anyio
async def test_not_registered_is_404_in_both_shapes(http: httpx.AsyncClient) -> None:
    versioned = await http.get(LOOKUP, params={"peppol_id": "9915:not-registered"})
    plain = await http.get(PLAIN, params={"identifier": "9915:Not-Registered"})
    assert versioned.status_code == plain.status_code == 404
    assert versioned.json() == {
        "found": False,
        "participant_id": "9915:not-registered",
        "message": "Participant not registered on the Peppol network",
    }
    assert plain.json()["registered"] is False


@pytest.mark.anyio
async def test_not_registered_can_be_answered_200() -> None:
    sandbox = Sandbox(SandboxConfig(lookup_not_found_status=200))
    async with GoRouteClient(
        "http://sandbox.test", ApiKey(DEFAULT_API_KEY), transport=sandbox.transport()
    ) as goroute:
        outcome = await goroute.lookup_participant("9915:not-registered")
    assert isinstance(outcome, Participant)
    assert (outcome.http_status, outcome.registered) == (200, False)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("path", "params"),
    [
        (LOOKUP, {}),
        (LOOKUP, {"peppol_id": "  "}),
        (LOOKUP, {"identifier": "9915:phase4-test-receiver"}),
        (PLAIN, {"identifier": "phase4-test-receiver"}),
        (PLAIN, {"identifier": "9915:"}),
    ],
)
async def test_a_lookup_without_a_participant_is_400(
    http: httpx.AsyncClient, path: str, params: dict[str, str]
) -> None:
    response = await http.get(path, params=params)
    assert response.status_code == 400
    assert response.json()["error_code"] == "VALIDATION_ERROR"


@pytest.mark.anyio
async def test_lookups_need_the_key(http: httpx.AsyncClient) -> None:
    params = {"identifier": "9915:phase4-test-receiver"}
    missing = await http.get(PLAIN, params=params, headers={"X-API-Key": ""})
    wrong = await http.get(PLAIN, params=params, headers={"X-API-Key": "sk_test_wrong"})
    forbidden = await http.get(LOOKUP, params=params, headers={"X-API-Key": "sk_test_forbidden1"})
    assert (missing.status_code, wrong.status_code, forbidden.status_code) == (401, 401, 403)


@pytest.mark.anyio
async def test_lookups_count_against_the_rate_limit_like_sends() -> None:
    sandbox = Sandbox(SandboxConfig(rate_per_minute=2, seed=1))
    async with GoRouteClient(
        "http://sandbox.test", ApiKey(DEFAULT_API_KEY), transport=sandbox.transport()
    ) as goroute:
        first = await goroute.lookup_participant("9915:phase4-test-receiver")
        body = send_body(sample_invoice("INV-1"), receiver=("9915", "phase4-test-receiver"))
        sent = await goroute.send_document("invoice-INV-1", body)
        limited = await goroute.lookup_participant("9915:reject-all")
    assert isinstance(first, Participant) and isinstance(sent, Accepted)
    assert isinstance(limited, RateLimited) and limited.retry_after is not None
    stats = sandbox.stats()
    # A refused lookup reached nobody's counter but the limiter's.
    assert (stats["participant_lookups"], stats["rate_limited"]) == (1, 1)


# --- the test receivers, through the project's client -------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("participant", REGISTERED)
async def test_every_receiver_that_takes_sends_is_registered_for_both_types(
    goroute: GoRouteClient, participant: str
) -> None:
    outcome = await goroute.lookup_participant(participant)
    assert isinstance(outcome, Participant)
    assert (outcome.registered, outcome.document_types) == (True, BOTH_TYPES)
    assert outcome.accepts("Invoice") and outcome.accepts("CreditNote")


@pytest.mark.anyio
async def test_not_registered_is_not_found(goroute: GoRouteClient) -> None:
    outcome = await goroute.lookup_participant("9915:not-registered")
    assert outcome == Participant(
        http_status=404,
        request_id=outcome.request_id,
        raw_body=outcome.raw_body,
        duration=outcome.duration,
        participant_id="9915:not-registered",
        registered=False,
    )


@pytest.mark.anyio
async def test_invoices_only_takes_invoices_but_not_credit_notes(
    goroute: GoRouteClient, sandbox: Sandbox
) -> None:
    outcome = await goroute.lookup_participant("9915:invoices-only")
    assert isinstance(outcome, Participant)
    assert (outcome.registered, outcome.document_types) == (True, (INVOICE,))
    assert outcome.accepts("Invoice")
    assert not outcome.accepts("CreditNote")

    # Sends to it go as they go to phase4-test-receiver: accepted, then delivered.
    receiver = ("9915", "invoices-only")
    body = send_body(sample_invoice("INV-7", receiver=receiver), receiver=receiver)
    sent = await goroute.send_document("invoice-INV-7", body)
    assert isinstance(sent, Accepted)
    sandbox.advance_clock(60)
    assert sandbox.status(sent.transaction_id) == "delivered"


@pytest.mark.anyio
async def test_a_staged_participant_is_answered_by_lookups_and_sends_alike(
    goroute: GoRouteClient, sandbox: Sandbox
) -> None:
    sandbox.stage_participant("0088:5790000436101", registered=False)
    sandbox.stage_participant("0106:credit-only", document_types=("CreditNote",))
    gone = await goroute.lookup_participant("0088:5790000436101")
    credit_only = await goroute.lookup_participant("0106:CREDIT-ONLY")
    receiver = ("0088", "5790000436101")
    body = send_body(sample_invoice("INV-8", receiver=receiver), receiver=receiver)
    refused = await goroute.send_document("invoice-INV-8", body)

    assert isinstance(gone, Participant) and not gone.registered
    assert isinstance(credit_only, Participant)
    assert credit_only.document_types == (CREDIT_NOTE,)
    assert isinstance(refused, Rejected) and refused.code == "RECEIVER_NOT_FOUND"


@pytest.mark.anyio
async def test_a_send_to_a_receiver_no_lookup_could_name_is_still_accepted(
    goroute: GoRouteClient,
) -> None:
    receiver = (" ", "abc")  # a blank schemeID: the send path never refused it
    body = send_body(sample_invoice("INV-9", receiver=receiver), receiver=receiver)
    assert isinstance(await goroute.send_document("invoice-INV-9", body), Accepted)


@pytest.mark.anyio
async def test_a_staged_lookup_error_is_a_failed_lookup(
    goroute: GoRouteClient, sandbox: Sandbox
) -> None:
    sandbox.stage_participant("9915:flaky", lookup_error=503)
    outcome = await goroute.lookup_participant("9915:flaky")
    assert isinstance(outcome, Transient)
    assert outcome.http_status == 503
    assert outcome.reason.startswith("GoRoute answered 503: injected 503")
    assert sandbox.stats()["lookups_per_participant"] == {"9915:flaky": 1}


@pytest.mark.anyio
async def test_a_bad_key_is_refused_for_lookups(sandbox: Sandbox) -> None:
    key = ApiKey("sk_test_not_this_one")
    async with GoRouteClient("http://sandbox.test", key, transport=sandbox.transport()) as client:
        outcome = await client.lookup_participant("9915:phase4-test-receiver")
    assert isinstance(outcome, AuthRefused) and outcome.http_status == 401


def test_staging_refuses_nonsense(sandbox: Sandbox) -> None:
    for bad in (
        {"lookup_error": 418},
        {"registered": "no"},
        {"document_types": ("Invoice", "")},
    ):
        with pytest.raises(ValueError):
            sandbox.stage_participant("9915:x", **bad)
    with pytest.raises(ValueError, match="scheme:identifier"):
        sandbox.stage_participant("nocolon")
    with pytest.raises(ValueError):
        SandboxConfig(lookup_not_found_status=410)


# --- counted -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_stats_count_lookups_in_total_and_per_participant(
    goroute: GoRouteClient, http: httpx.AsyncClient, sandbox: Sandbox
) -> None:
    for participant in ("9915:phase4-test-receiver", "9915:Phase4-Test-Receiver", "0106:1"):
        await goroute.lookup_participant(participant)
    await http.get(PLAIN, params={"identifier": "9915:not-registered"})
    refused = await http.get(
        LOOKUP, params={"peppol_id": "0106:1"}, headers={"X-API-Key": "sk_test_wrong"}
    )
    over_http = (await http.get("/_sandbox/stats")).json()

    assert refused.status_code == 401  # not counted: it never reached the lookup
    assert over_http["participant_lookups"] == 4
    assert over_http["lookups_per_participant"] == {
        "9915:phase4-test-receiver": 2,
        "0106:1": 1,
        "9915:not-registered": 1,
    }
    assert over_http["sends_received"] == 0
    # Asking the SMP from Python (for a test's own checks) is not a lookup.
    assert sandbox.participant("0106:1").registered
    assert sandbox.stats()["participant_lookups"] == 4


def test_a_lookup_failing_every_try_is_retried_then_given_up() -> None:
    sandbox = Sandbox(SandboxConfig(rate_per_minute=1000))
    sandbox.stage_participant("9915:down", lookup_error=502)
    sleep = RecordingSleep()

    async def main() -> Any:
        limiter = RateLimiter(6000, clock=asyncio.get_running_loop().time, margin=0.0)
        async with GoRouteClient(
            "http://sandbox.test", ApiKey(DEFAULT_API_KEY), transport=sandbox.transport()
        ) as goroute:
            return await call_with_retry(
                lambda: goroute.lookup_participant("9915:down"),
                policy=RetryPolicy(max_attempts=3),
                limiter=limiter,
                sleep=sleep,
                rng=random.Random(2),
            )

    outcome = run_virtual(main)
    assert isinstance(outcome, Transient) and outcome.http_status == 502
    assert sandbox.stats()["lookups_per_participant"] == {"9915:down": 3}
    assert len(sleep.waits) == 2


@pytest.mark.anyio
async def test_admin_endpoint_stages_a_participant(http: httpx.AsyncClient) -> None:
    staged = await http.post(
        "/_sandbox/participants",
        json={"participant_id": "0106:Buyer", "document_types": ["Invoice"]},
    )
    assert staged.status_code == 201
    assert staged.json() == {
        "participant_id": "0106:buyer",
        "registered": True,
        "document_types": ["Invoice"],
        "lookup_error": None,
    }
    answer = (await http.get(LOOKUP, params={"peppol_id": "0106:buyer"})).json()
    assert [c["document_type"] for c in answer["capabilities"]] == [INVOICE]
    for bad in ({}, {"participant_id": "x"}, {"participant_id": "1:2", "document_types": "x"}):
        assert (await http.post("/_sandbox/participants", json=bad)).status_code == 400


# --- over real loopback HTTP ---------------------------------------------------------------


@pytest.fixture
def only_plain() -> Iterator[tuple[Sandbox, BackgroundServer]]:
    sandbox = Sandbox(SandboxConfig(lookup_routes="identifier"))
    with BackgroundServer(sandbox) as server:
        yield sandbox, server


@pytest.mark.anyio
async def test_over_loopback_the_client_falls_back_once_and_counts_one_lookup_per_receiver(
    only_plain: tuple[Sandbox, BackgroundServer],
) -> None:
    sandbox, server = only_plain
    receivers = ["9915:phase4-test-receiver", "9915:invoices-only", "9915:not-registered"]
    async with GoRouteClient(server.base_url + "/peppol-api", ApiKey(DEFAULT_API_KEY)) as goroute:
        outcomes = [await goroute.lookup_participant(receiver) for receiver in receivers]
        # The versioned route is not there: a plain 404, not a lookup answer.
        async with httpx.AsyncClient(base_url=server.base_url, headers=HEADERS) as raw:
            missing = await raw.get(LOOKUP, params={"peppol_id": receivers[0]})

    assert [type(o) for o in outcomes] == [Participant] * 3
    registered = [o.registered for o in outcomes if isinstance(o, Participant)]
    assert registered == [True, True, False]
    invoices_only = outcomes[1]
    assert isinstance(invoices_only, Participant) and not invoices_only.accepts("CreditNote")
    assert missing.status_code == 404 and "found" not in missing.json()
    stats = sandbox.stats()
    assert stats["participant_lookups"] == 3
    assert stats["lookups_per_participant"] == {receiver: 1 for receiver in receivers}


@pytest.mark.anyio
async def test_over_loopback_the_versioned_route_only() -> None:
    sandbox = Sandbox(SandboxConfig(lookup_routes="peppol_id"))
    with BackgroundServer(sandbox) as server:
        async with GoRouteClient(server.base_url, ApiKey(DEFAULT_API_KEY)) as goroute:
            outcome = await goroute.lookup_participant("9915:timeout-test")
        plain = httpx.get(server.base_url + PLAIN, params={"identifier": "9915:x"}, headers=HEADERS)
    assert isinstance(outcome, Participant) and outcome.document_types == BOTH_TYPES
    assert plain.status_code == 404
    assert sandbox.stats()["participant_lookups"] == 1

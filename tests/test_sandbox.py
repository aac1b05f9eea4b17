"""The GoRoute emulator, in process: every rule of goroute-api.md tier A, plus faults and staging.

Requests go through raw httpx and ``Sandbox.transport()``; time is a fake clock the tests move,
so 24-hour windows and 60-second rate windows take no time at all.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from invoicectl.sandbox import DEFAULT_API_KEY, Sandbox, SandboxConfig, request_sha256
from invoicectl.sandbox.problems import Problem
from invoicectl.sandbox.samples import sample_invoice, send_body

T0 = 1_714_000_000.0
RECEIVER = ("9915", "phase4-test-receiver")
DAY = 86_400.0


class FakeClock:
    def __init__(self, start: float = T0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class GatedSleep:
    """Latency that lasts until the test opens the gate."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()

    async def __call__(self, seconds: float) -> None:
        await self.gate.wait()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sandbox(clock: FakeClock) -> Sandbox:
    return Sandbox(SandboxConfig(rate_per_minute=10_000, max_concurrent=100, seed=7), clock=clock)


@pytest.fixture
async def client(sandbox: Sandbox) -> AsyncIterator[httpx.AsyncClient]:
    async with _client(sandbox) as http:
        yield http


def _client(sandbox: Sandbox, key: str | None = DEFAULT_API_KEY) -> httpx.AsyncClient:
    headers = {"X-API-Key": key} if key is not None else {}
    return httpx.AsyncClient(
        transport=sandbox.transport(), base_url="http://sandbox", headers=headers
    )


def body_for(
    invoice_id: str = "INV-1", receiver: tuple[str, str] = RECEIVER, **options: Any
) -> bytes:
    document = sample_invoice(invoice_id, receiver=receiver, **options)
    return send_body(document, receiver=receiver, invoice_id=invoice_id)


def raw_body(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


async def send(
    client: httpx.AsyncClient, body: bytes, key: str | bytes | None = "invoice-INV-1"
) -> httpx.Response:
    headers: dict[str, str | bytes] = {"Content-Type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return await client.post("/api/v1/documents", content=body, headers=headers)


def error_code(response: httpx.Response) -> str:
    return str(response.json()["error_code"])


# -- sending and idempotency -------------------------------------------------------------


@pytest.mark.anyio
async def test_a_valid_send_is_accepted_with_a_new_transaction(
    client: httpx.AsyncClient, sandbox: Sandbox
) -> None:
    response = await send(client, body_for())

    assert response.status_code == 202, response.text
    answer = response.json()
    assert answer["status"] == "pending"
    assert answer["transaction_id"].startswith("txn_")
    assert sandbox.stats()["accepted"] == 1


@pytest.mark.anyio
async def test_same_key_same_body_replays_the_original_transaction(
    client: httpx.AsyncClient, sandbox: Sandbox, clock: FakeClock
) -> None:
    first = await send(client, body_for())
    clock.advance(DAY - 1)
    replay = await send(client, body_for())

    assert replay.status_code == 202, replay.text
    assert replay.json()["transaction_id"] == first.json()["transaction_id"]
    stats = sandbox.stats()
    assert (stats["accepted"], stats["replays"], stats["transactions"]) == (1, 1, 1)
    assert stats["per_key"]["invoice-INV-1"] == {"sends": 2, "transactions": 1}


@pytest.mark.anyio
async def test_same_key_other_body_is_422_naming_the_existing_transaction(
    client: httpx.AsyncClient, sandbox: Sandbox
) -> None:
    first = await send(client, body_for())
    changed = await send(client, body_for(lines=9))

    assert changed.status_code == 422, changed.text
    answer = changed.json()
    assert answer["error_code"] == "IDEMPOTENCY_KEY_REUSED"
    assert answer["existing_transaction_id"] == first.json()["transaction_id"]
    assert answer["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert sandbox.stats()["key_reused"] == 1
    assert sandbox.stats()["transactions"] == 1


@pytest.mark.anyio
async def test_a_key_stops_protecting_after_24_hours(
    client: httpx.AsyncClient, sandbox: Sandbox, clock: FakeClock
) -> None:
    first = await send(client, body_for())
    clock.advance(DAY)
    resend = await send(client, body_for())

    assert resend.status_code == 202, resend.text
    assert resend.json()["transaction_id"] != first.json()["transaction_id"]
    assert sandbox.stats()["per_invoice"] == {"INV-1": 2}
    assert sandbox.stats()["duplicates"] == ["INV-1"]


@pytest.mark.anyio
async def test_a_changed_body_is_accepted_under_the_old_key_after_24_hours(
    client: httpx.AsyncClient, clock: FakeClock
) -> None:
    await send(client, body_for())
    clock.advance(DAY + 1)

    assert (await send(client, body_for(lines=9))).status_code == 202


@pytest.mark.anyio
@pytest.mark.parametrize(
    "key", ["k" * 65, "invoice 1", "invoice/1", "fakt\u00fcra".encode(), ""], ids=repr
)
async def test_a_malformed_idempotency_key_is_400(
    client: httpx.AsyncClient, key: str | bytes
) -> None:
    response = await send(client, body_for(), key=key)

    assert response.status_code == 400, response.text
    assert error_code(response) == "INVALID_IDEMPOTENCY_KEY"


@pytest.mark.anyio
async def test_a_key_of_64_allowed_characters_is_accepted(client: httpx.AsyncClient) -> None:
    key = ("invoice-A.b_c:9" * 5)[:64]
    assert (await send(client, body_for(), key=key)).status_code == 202


@pytest.mark.anyio
async def test_the_key_length_limit_is_configurable(clock: FakeClock) -> None:
    sandbox = Sandbox(SandboxConfig(max_key_length=10), clock=clock)
    async with _client(sandbox) as client:
        assert (await send(client, body_for(), key="k" * 10)).status_code == 202
        assert (await send(client, body_for(), key="k" * 11)).status_code == 400


@pytest.mark.anyio
async def test_a_refused_send_does_not_consume_its_key(client: httpx.AsyncClient) -> None:
    mismatched = send_body(sample_invoice("INV-1"), receiver=("0088", "123"))
    assert (await send(client, mismatched)).status_code == 400

    assert (await send(client, body_for())).status_code == 202


@pytest.mark.anyio
async def test_a_send_without_an_idempotency_key_is_400(
    client: httpx.AsyncClient, sandbox: Sandbox
) -> None:
    # Tier A: every send carries Idempotency-Key. (This test used to expect every keyless send
    # to be accepted as new; the contract has no such case.)
    response = await send(client, body_for(), key=None)

    assert response.status_code == 400, response.text
    assert error_code(response) == "MISSING_IDEMPOTENCY_KEY"
    assert response.json()["details"][0]["location"] == "header:Idempotency-Key"
    stats = sandbox.stats()
    assert (stats["rejected"], stats["transactions"], stats["per_invoice"]) == (1, 0, {})


@pytest.mark.anyio
@pytest.mark.parametrize(
    "other",
    [
        b"not json",
        raw_body(receiver_scheme="9915", receiver_id="x"),
        send_body(sample_invoice("INV-1", lines=9), receiver=("0088", "123")),
    ],
    ids=["not-json", "missing-document", "receiver-mismatch"],
)
async def test_a_live_key_answers_422_before_the_new_body_is_validated(
    client: httpx.AsyncClient, sandbox: Sandbox, other: bytes
) -> None:
    first = await send(client, body_for())
    refused = await send(client, other)

    assert refused.status_code == 422, refused.text
    assert error_code(refused) == "IDEMPOTENCY_KEY_REUSED"
    assert refused.json()["existing_transaction_id"] == first.json()["transaction_id"]
    assert (await send(client, body_for())).json() == first.json()  # still a replay
    assert (sandbox.stats()["key_reused"], sandbox.stats()["rejected"]) == (1, 0)


# -- validation --------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("body", "code", "detail"),
    [
        (b"not json", "VALIDATION_ERROR", "JSON"),
        (b"[1, 2]", "VALIDATION_ERROR", "JSON"),
        (raw_body(receiver_scheme="9915", receiver_id="x"), "VALIDATION_ERROR", "REQUIRED"),
        (
            raw_body(receiver_scheme="9915", receiver_id="x", document="<Invoice>"),
            "INVALID_XML",
            "XML",
        ),
        (
            raw_body(receiver_scheme="9915", receiver_id="x", document="<a/>"),
            "VALIDATION_ERROR",
            "UBL-ROOT",
        ),
    ],
    ids=["not-json", "not-object", "missing-document", "not-well-formed", "not-ubl"],
)
async def test_bad_requests_are_400_with_a_reason(
    client: httpx.AsyncClient, sandbox: Sandbox, body: bytes, code: str, detail: str
) -> None:
    response = await send(client, body)

    assert response.status_code == 400, response.text
    assert error_code(response) == code
    assert response.json()["details"][0]["rule"] == detail
    assert sandbox.stats()["rejected"] == 1
    assert sandbox.stats()["transactions"] == 0


@pytest.mark.anyio
async def test_a_missing_field_is_named_in_the_details(client: httpx.AsyncClient) -> None:
    response = await send(client, raw_body(document="<x/>"))

    locations = [d["location"] for d in response.json()["details"]]
    assert locations == ["receiver_scheme", "receiver_id"]


@pytest.mark.anyio
async def test_an_endpoint_and_id_split_by_comments_are_read_whole(
    client: httpx.AsyncClient,
) -> None:
    """As XPath's ``string()`` and invoicectl read them: a comment is no part of the text."""
    document = (
        sample_invoice("INV-1", receiver=RECEIVER)
        .replace("<cbc:ID>INV-1<", "<cbc:ID>INV<!-- n -->-1<", 1)
        .replace(">phase4-test-receiver<", ">phase4-<!-- checked -->test-receiver<", 1)
    )
    assert "<!-- checked -->" in document and "<!-- n -->" in document
    response = await send(client, send_body(document, receiver=RECEIVER))

    assert response.status_code == 202, response.text


@pytest.mark.anyio
@pytest.mark.parametrize(
    "receiver", [("0088", "phase4-test-receiver"), ("9915", "someone-else")], ids=repr
)
async def test_a_receiver_other_than_the_customer_endpoint_is_400(
    client: httpx.AsyncClient, receiver: tuple[str, str]
) -> None:
    body = send_body(sample_invoice("INV-1", receiver=RECEIVER), receiver=receiver)
    response = await send(client, body)

    assert response.status_code == 400, response.text
    assert response.json()["details"][0]["rule"] == "RECEIVER_MISMATCH"


@pytest.mark.anyio
async def test_the_receiver_is_read_namespace_aware(client: httpx.AsyncClient) -> None:
    # A lookalike element in a foreign namespace must not count as the customer endpoint.
    document = sample_invoice("INV-1").replace(
        "<cac:AccountingCustomerParty>",
        '<x:AccountingCustomerParty xmlns:x="urn:other"><x:EndpointID schemeID="0088">1'
        "</x:EndpointID></x:AccountingCustomerParty><cac:AccountingCustomerParty>",
    )
    assert (await send(client, send_body(document, receiver=("0088", "1")))).status_code == 400
    assert (await send(client, send_body(document, receiver=RECEIVER))).status_code == 202


@pytest.mark.anyio
async def test_external_entities_are_never_resolved(client: httpx.AsyncClient) -> None:
    document = sample_invoice("INV-1").replace(
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<!DOCTYPE Invoice [<!ENTITY leak SYSTEM "file:///etc/passwd">]>',
    )
    document = document.replace("<cbc:ID>INV-1</cbc:ID>", "<cbc:ID>&leak;</cbc:ID>", 1)
    response = await send(client, send_body(document, receiver=RECEIVER))

    assert response.status_code == 400, response.text
    assert "root:" not in response.text


@pytest.mark.anyio
async def test_a_document_over_the_size_limit_is_413(clock: FakeClock) -> None:
    sandbox = Sandbox(SandboxConfig(max_document_bytes=5_000), clock=clock)
    async with _client(sandbox) as client:
        response = await send(client, body_for())

    assert response.status_code == 413, response.text
    assert error_code(response) == "PAYLOAD_TOO_LARGE"


@pytest.mark.anyio
async def test_a_document_over_15_mb_is_413_by_default(client: httpx.AsyncClient) -> None:
    padding = "<!--" + "x" * (15 * 1024 * 1024) + "-->"
    document = sample_invoice("INV-1").replace("</Invoice>", padding + "</Invoice>")

    assert (await send(client, send_body(document, receiver=RECEIVER))).status_code == 413


@pytest.mark.anyio
async def test_a_large_text_node_under_the_limit_parses(client: httpx.AsyncClient) -> None:
    # lxml refuses text nodes over 10 MB unless huge_tree is on (design.md, measured pitfalls).
    attachment = "<cbc:Note>" + "A" * (11 * 1024 * 1024) + "</cbc:Note>"
    document = sample_invoice("INV-1").replace("<cbc:IssueDate>", attachment + "<cbc:IssueDate>")

    assert (await send(client, send_body(document, receiver=RECEIVER))).status_code == 202


@pytest.mark.anyio
async def test_an_unregistered_receiver_is_404_and_keeps_the_key_free(
    client: httpx.AsyncClient, sandbox: Sandbox
) -> None:
    response = await send(client, body_for(receiver=("9915", "not-registered")))

    assert response.status_code == 404, response.text
    assert error_code(response) == "RECEIVER_NOT_FOUND"
    assert sandbox.stats()["transactions"] == 0
    assert (await send(client, body_for())).status_code == 202


@pytest.mark.anyio
async def test_a_credit_note_is_accepted(client: httpx.AsyncClient, sandbox: Sandbox) -> None:
    document = (
        sample_invoice("CN-1", lines=0)
        .replace("Invoice-2", "CreditNote-2")
        .replace("<Invoice ", "<CreditNote ")
        .replace("</Invoice>", "</CreditNote>")
    )
    response = await send(client, send_body(document, receiver=RECEIVER), key="cn-1")
    txn = sandbox.transaction(response.json()["transaction_id"])

    assert txn is not None and txn.document_type == "CreditNote"


# -- authentication ----------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("key", "status"),
    [(None, 401), ("sk_test_wrong", 401), ("sk_test_forbidden_1", 403), ("sk_test_banned", 403)],
)
async def test_keys_are_checked_on_every_api_and_admin_route(
    clock: FakeClock, key: str | None, status: int
) -> None:
    config = SandboxConfig(
        api_keys=frozenset({DEFAULT_API_KEY, "sk_test_banned"}),
        forbidden_keys=frozenset({"sk_test_banned"}),
    )
    sandbox = Sandbox(config, clock=clock)
    async with _client(sandbox, key) as client:
        answers = [
            await send(client, body_for()),
            await client.get("/api/v1/transactions"),
            await client.get("/api/v1/transactions/txn_1"),
            await client.get("/_sandbox/stats"),
            await client.post("/_sandbox/clock", json={"advance": 1}),
        ]
    assert [a.status_code for a in answers] == [status] * 5
    assert all(a.json()["error"]["code"] in ("INVALID_API_KEY", "FORBIDDEN") for a in answers)
    assert sandbox.stats()["sends_received"] == 0


@pytest.mark.anyio
async def test_the_version_needs_no_key(sandbox: Sandbox) -> None:
    async with _client(sandbox, key=None) as client:
        response = await client.get("/peppol/version")

    assert response.json() == {"version": "sandbox-1.0", "environment": "sandbox", "status": "ok"}


@pytest.mark.anyio
async def test_everything_is_also_served_under_the_peppol_api_prefix(sandbox: Sandbox) -> None:
    async with httpx.AsyncClient(
        transport=sandbox.transport(),
        base_url="http://sandbox/peppol-api",
        headers={"X-API-Key": DEFAULT_API_KEY},
    ) as client:
        sent = await send(client, body_for())
        found = await client.get(f"/api/v1/transactions/{sent.json()['transaction_id']}")
        version = await client.get("/peppol/version")

    assert (sent.status_code, found.status_code, version.status_code) == (202, 200, 200)


# -- rate limits -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_rate_window_slides_and_429s_are_not_counted(clock: FakeClock) -> None:
    sandbox = Sandbox(SandboxConfig(rate_per_minute=3), clock=clock)
    async with _client(sandbox) as client:
        assert (await send(client, body_for("A"), key="a")).status_code == 202
        clock.advance(20)
        assert (await client.get("/api/v1/transactions")).status_code == 200  # GETs count
        assert (await send(client, body_for("C"), key="c")).status_code == 202
        limited = await send(client, body_for("D"), key="d")
        assert limited.status_code == 429, limited.text
        assert limited.headers["Retry-After"] == "40"
        assert error_code(limited) == "RATE_LIMIT_EXCEEDED"
        clock.advance(39.5)
        assert (await send(client, body_for("D"), key="d")).headers["Retry-After"] == "1"
        clock.advance(0.5)
        # The two 429s took no slot: the first request has just left the window.
        assert (await send(client, body_for("D"), key="d")).status_code == 202
        assert (await send(client, body_for("E"), key="e")).status_code == 429
    assert sandbox.stats()["rate_limited"] == 3


@pytest.mark.anyio
async def test_rate_windows_are_per_api_key(clock: FakeClock) -> None:
    config = SandboxConfig(api_keys=frozenset({"sk_test_a", "sk_test_b"}), rate_per_minute=1)
    sandbox = Sandbox(config, clock=clock)
    async with _client(sandbox, "sk_test_a") as a, _client(sandbox, "sk_test_b") as b:
        assert (await a.get("/api/v1/transactions")).status_code == 200
        assert (await b.get("/api/v1/transactions")).status_code == 200
        assert (await a.get("/api/v1/transactions")).status_code == 429


@pytest.mark.anyio
async def test_requests_beyond_the_concurrency_cap_get_429(clock: FakeClock) -> None:
    sleep = GatedSleep()
    config = SandboxConfig(max_concurrent=2, latency_ms=50)
    sandbox = Sandbox(config, clock=clock, sleep=sleep)
    async with _client(sandbox) as client:
        slow = [asyncio.create_task(send(client, body_for(f"S{i}"), key=f"s{i}")) for i in (1, 2)]
        while sandbox.state.limiter.in_flight() < 2:
            await asyncio.sleep(0)
        refused = await send(client, body_for("S3"), key="s3")
        sleep.gate.set()
        done = await asyncio.gather(*slow)
        after = await send(client, body_for("S3"), key="s3")

    assert refused.status_code == 429, refused.text
    assert refused.headers["Retry-After"] == "1"
    assert [r.status_code for r in done] == [202, 202]
    assert after.status_code == 202
    assert sandbox.stats()["max_in_flight"] == 2


def test_tiers_carry_the_briefs_limits() -> None:
    assert SandboxConfig.for_tier("standard").rate_per_minute == 100
    professional = SandboxConfig.for_tier("professional", seed=3)
    assert (professional.rate_per_minute, professional.max_concurrent) == (500, 50)
    enterprise = SandboxConfig.for_tier("enterprise", rate_per_minute=9, max_concurrent=2)
    assert enterprise.rate_per_minute == 9
    with pytest.raises(ValueError, match="enterprise"):
        SandboxConfig.for_tier("enterprise")
    with pytest.raises(ValueError, match="unknown tier"):
        SandboxConfig.for_tier("gold")


# -- transactions and their lifecycle ----------------------------------------------------


async def _status(client: httpx.AsyncClient, txn_id: str) -> dict[str, Any]:
    response = await client.get(f"/api/v1/transactions/{txn_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("receiver", "timeline"),
    [
        (
            "phase4-test-receiver",
            [(0, "pending"), (2, "processing"), (4, "sending"), (6, "delivered")],
        ),
        ("reject-all", [(0, "pending"), (5.9, "sending"), (6, "failed"), (600, "failed")]),
        ("timeout-test", [(4, "sending"), (34, "sending"), (48.9, "sending"), (49, "delivered")]),
    ],
)
async def test_status_follows_emulated_time(
    client: httpx.AsyncClient,
    clock: FakeClock,
    receiver: str,
    timeline: list[tuple[float, str]],
) -> None:
    sent = await send(client, body_for(receiver=("9915", receiver)))
    txn_id = sent.json()["transaction_id"]
    seen = []
    for at, _ in timeline:
        clock.now = T0 + at
        seen.append((at, (await _status(client, txn_id))["status"]))
    assert seen == timeline


@pytest.mark.anyio
async def test_a_transaction_has_the_nested_shape(
    client: httpx.AsyncClient, clock: FakeClock
) -> None:
    sent = await send(client, body_for("INV-9"))
    clock.advance(7)
    txn = await _status(client, sent.json()["transaction_id"])

    assert txn["id"] == sent.json()["transaction_id"]
    assert (txn["status"], txn["document_type"], txn["document_id"]) == (
        "delivered",
        "Invoice",
        "INV-9",
    )
    assert txn["sender"] == {"scheme": "0088", "identifier": "7300010000001", "name": "Supplier AB"}
    assert txn["receiver"] == {
        "scheme": "9915",
        "identifier": "phase4-test-receiver",
        "name": "Customer GmbH",
    }
    assert txn["created_at"] == "2024-04-24T23:06:40.000Z"
    assert txn["delivered_at"] == txn["updated_at"] == "2024-04-24T23:06:46.000Z"
    assert txn["message_id"].endswith("@sandbox.goroute")
    assert txn["metadata"] == {"invoice_id": "INV-9"}


@pytest.mark.anyio
async def test_an_unknown_transaction_is_404(client: httpx.AsyncClient) -> None:
    response = await client.get("/api/v1/transactions/txn_nope")

    assert response.status_code == 404
    assert error_code(response) == "TRANSACTION_NOT_FOUND"


@pytest.mark.anyio
async def test_the_list_is_flat_newest_first_and_pages_by_cursor(
    client: httpx.AsyncClient, clock: FakeClock
) -> None:
    ids = []
    for n in range(5):
        ids.append((await send(client, body_for(f"INV-{n}"), key=f"k{n}")).json()["transaction_id"])
        clock.advance(1)
    pages, cursor = [], None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await client.get("/api/v1/transactions", params=params)).json()
        pages.append([row["transaction_id"] for row in page["transactions"]])
        cursor = page["next_cursor"]
        assert page["has_more"] is (cursor is not None)
        if cursor is None:
            break

    assert pages == [ids[4:2:-1], ids[2:0:-1], ids[:1]]
    row = (await client.get("/api/v1/transactions", params={"limit": 1})).json()["transactions"][0]
    assert row == {
        "transaction_id": ids[4],
        "direction": "outbound",
        "document_type": "Invoice",
        "invoice_number": "INV-4",
        "sender_id": "0088:7300010000001",
        "receiver_id": "9915:phase4-test-receiver",
        "status": "pending",
        "created_at": "2024-04-24T23:06:44.000Z",
        "delivered_at": None,
    }


@pytest.mark.anyio
async def test_the_list_can_be_served_without_paging_and_oldest_first(clock: FakeClock) -> None:
    config = SandboxConfig(rate_per_minute=10_000, list_paging=False, list_order="oldest_first")
    sandbox = Sandbox(config, clock=clock)
    ids = [sandbox.add_transaction(f"INV-{n}", created_at=T0 + n).id for n in range(5)]
    async with _client(sandbox) as client:
        first = (await client.get("/api/v1/transactions", params={"limit": 2})).json()
        again = await client.get("/api/v1/transactions", params={"limit": 2, "cursor": ids[1]})

    assert list(first) == ["transactions"]  # no has_more, no next_cursor
    assert [row["transaction_id"] for row in first["transactions"]] == ids[:2]
    assert again.status_code == 200 and again.json() == first  # the cursor is ignored


@pytest.mark.anyio
async def test_the_detail_can_be_served_in_the_flat_shape(clock: FakeClock) -> None:
    sandbox = Sandbox(SandboxConfig(detail_shape="flat"), clock=clock)
    async with _client(sandbox) as client:
        sent = await send(client, body_for("INV-9"))
        clock.advance(7)
        txn = await _status(client, sent.json()["transaction_id"])

    assert txn["transaction_id"] == sent.json()["transaction_id"] and "id" not in txn
    assert (txn["invoice_number"], txn["receiver_id"], txn["status"]) == (
        "INV-9",
        "9915:phase4-test-receiver",
        "delivered",
    )
    assert txn["metadata"] == {"invoice_id": "INV-9"}
    assert "receiver" not in txn and "document_id" not in txn


@pytest.mark.anyio
@pytest.mark.parametrize("query", ["limit=0", "limit=x", "limit=1001", "cursor=txn_unknown"])
async def test_bad_list_parameters_are_400(client: httpx.AsyncClient, query: str) -> None:
    assert (await client.get(f"/api/v1/transactions?{query}")).status_code == 400


# -- faults ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_drop_records_the_send_and_loses_the_answer(clock: FakeClock) -> None:
    sandbox = Sandbox(SandboxConfig(drop_rate=1.0), clock=clock)
    async with _client(sandbox) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            await send(client, body_for())
        stats = sandbox.stats()
        assert (stats["accepted"], stats["drops"], stats["transactions"]) == (1, 1, 1)
        sandbox.set_faults(drop_rate=0.0)
        replay = await send(client, body_for())

    assert replay.status_code == 202
    assert sandbox.stats()["replays"] == 1
    assert sandbox.stats()["per_invoice"] == {"INV-1": 1}


@pytest.mark.anyio
async def test_an_injected_server_error_records_nothing(clock: FakeClock) -> None:
    sandbox = Sandbox(SandboxConfig(error_rate=1.0, seed=1), clock=clock)
    async with _client(sandbox) as client:
        failed = [await send(client, body_for()) for _ in range(20)]
        sandbox.set_faults(error_rate=0.0)
        later = await send(client, body_for(lines=9))

    assert {r.status_code for r in failed} == {500, 502, 503}
    assert later.status_code == 202  # the key was never consumed
    stats = sandbox.stats()
    assert (stats["server_errors"], stats["accepted"], stats["sends_received"]) == (20, 1, 21)


@pytest.mark.anyio
async def test_the_fault_dice_are_reproducible_from_the_seed(clock: FakeClock) -> None:
    async def statuses(seed: int) -> list[int]:
        sandbox = Sandbox(SandboxConfig(error_rate=0.5, seed=seed), clock=clock)
        async with _client(sandbox) as client:
            return [(await send(client, body_for(), key=f"k{i}")).status_code for i in range(30)]

    first = await statuses(11)
    assert first == await statuses(11)
    assert 202 in first and any(s >= 500 for s in first)


@pytest.mark.anyio
async def test_latency_is_awaited_on_api_requests_only(clock: FakeClock) -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    sandbox = Sandbox(SandboxConfig(latency_ms=250), clock=clock, sleep=sleep)
    async with _client(sandbox) as client:
        await send(client, body_for())
        await client.get("/api/v1/transactions")
        await client.get("/peppol/version")
        await client.get("/_sandbox/stats")

    assert waits == [0.25, 0.25]


# -- staging -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_preloaded_key_answers_422_with_its_transaction(
    client: httpx.AsyncClient, sandbox: Sandbox
) -> None:
    sandbox.preload_key("invoice-INV-1", transaction_id="txn_staged")
    response = await send(client, body_for())

    assert response.status_code == 422
    assert response.json()["existing_transaction_id"] == "txn_staged"


@pytest.mark.anyio
async def test_a_preloaded_key_with_the_same_body_replays(
    client: httpx.AsyncClient, sandbox: Sandbox, clock: FakeClock
) -> None:
    sandbox.preload_key(
        "invoice-INV-1", transaction_id="txn_staged", body=body_for(), first_seen=T0 - DAY + 5
    )
    assert (await send(client, body_for())).json()["transaction_id"] == "txn_staged"
    clock.advance(5)
    assert (await send(client, body_for())).json()["transaction_id"] != "txn_staged"


@pytest.mark.anyio
async def test_a_staged_transaction_keeps_its_status(
    client: httpx.AsyncClient, sandbox: Sandbox, clock: FakeClock
) -> None:
    txn = sandbox.add_transaction(
        "INV-7",
        receiver="0088:5790000435975",
        status="sending",
        created_at=T0 - 3600,
        transaction_id="txn_old",
    )
    clock.advance(DAY)
    found = await _status(client, txn.id)

    assert (found["status"], found["document_id"], found["receiver"]["identifier"]) == (
        "sending",
        "INV-7",
        "5790000435975",
    )
    assert sandbox.stats()["per_invoice"] == {"INV-7": 1}
    with pytest.raises(ValueError, match="status"):
        sandbox.add_transaction("INV-8", status="lost")


@pytest.mark.anyio
async def test_staging_over_the_admin_endpoints(client: httpx.AsyncClient) -> None:
    staged = await client.post(
        "/_sandbox/transactions",
        json={
            "invoice_number": "INV-1",
            "receiver_scheme": "9915",
            "receiver_id": "phase4-test-receiver",
            "status": "delivered",
            "created_at": "2024-04-20T10:00:00Z",
        },
    )
    assert staged.status_code == 201, staged.text
    txn_id = staged.json()["transaction_id"]
    key = await client.post(
        "/_sandbox/keys",
        json={"key": "invoice-INV-1", "transaction_id": txn_id, "body_sha256": "0" * 64},
    )
    assert key.status_code == 201, key.text

    refused = await send(client, body_for())
    assert refused.status_code == 422
    assert refused.json()["existing_transaction_id"] == txn_id
    clock = await client.post("/_sandbox/clock", json={"advance": DAY})
    assert clock.json()["offset"] == DAY
    assert (await send(client, body_for())).status_code == 202

    stats = (await client.get("/_sandbox/stats")).json()
    assert stats["per_invoice"] == {"INV-1": 2}
    assert stats["key_reused"] == 1


@pytest.mark.anyio
async def test_faults_change_over_the_admin_endpoint(
    client: httpx.AsyncClient, sandbox: Sandbox
) -> None:
    changed = await client.post("/_sandbox/faults", json={"drop_rate": 1.0})
    assert changed.json() == {"latency_ms": 0.0, "error_rate": 0.0, "drop_rate": 1.0}
    with pytest.raises(httpx.RemoteProtocolError):
        await send(client, body_for())

    for bad in ({"drop_rate": 2}, {"speed": 1}, [1]):
        assert (await client.post("/_sandbox/faults", json=bad)).status_code == 400


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("path", "payload"),
    [
        ("/_sandbox/keys", {"key": "k"}),
        ("/_sandbox/transactions", {"invoice_number": "1", "receiver": "no-colon"}),
        ("/_sandbox/transactions", {"receiver": "9915:x"}),
        ("/_sandbox/clock", {"advance": -1}),
    ],
)
async def test_bad_staging_requests_are_400(
    client: httpx.AsyncClient, path: str, payload: dict[str, Any]
) -> None:
    assert (await client.post(path, json=payload)).status_code == 400


# -- the idempotency rules as a property -------------------------------------------------


class _Model:
    """What goroute-api.md A says should happen, written as plainly as possible."""

    def __init__(self) -> None:
        self.keys: dict[str, tuple[str, float, int]] = {}  # key -> (sha, first seen, txn no.)
        self.transactions = 0

    def send(self, key: str, body: bytes, now: float) -> tuple[int, int]:
        digest = request_sha256(body)
        held = self.keys.get(key)
        if held is not None and now - held[1] < DAY:
            return (202, held[2]) if held[0] == digest else (422, held[2])
        self.transactions += 1
        self.keys[key] = (digest, now, self.transactions)
        return 202, self.transactions


_BODIES = [body_for("INV-1"), body_for("INV-1", lines=9), body_for("INV-2")]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b"]),
            st.sampled_from(range(len(_BODIES))),
            st.sampled_from([0.0, 1.0, 3600.0, DAY - 1, DAY]),
        ),
        max_size=12,
    )
)
def test_idempotency_matches_the_contract(steps: list[tuple[str, int, float]]) -> None:
    clock = FakeClock()
    sandbox = Sandbox(SandboxConfig(rate_per_minute=10_000), clock=clock, rng=random.Random(0))
    model = _Model()
    numbering: dict[str, int] = {}
    for key, which, wait in steps:
        clock.advance(wait)
        expected_status, expected_txn = model.send(key, _BODIES[which], clock.now)
        try:
            answer = sandbox.state.send(key, _BODIES[which])
            status, txn_id = 202, answer.transaction_id
        except Problem as problem:
            status, txn_id = problem.status, problem.extra["existing_transaction_id"]
        numbering.setdefault(txn_id, len(numbering) + 1)
        assert (status, numbering[txn_id]) == (expected_status, expected_txn)
    assert sandbox.stats()["transactions"] == model.transactions

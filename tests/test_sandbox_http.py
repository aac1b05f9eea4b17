"""The emulator over real loopback HTTP (uvicorn), and the project's client against it.

Drops are the reason this file exists: only a real connection shows that a dropped answer
reaches httpx as a transport error, never as an HTTP status.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from invoicectl.goroute.apikey import ApiKey
from invoicectl.goroute.client import Found, GoRouteClient, TransactionPage, build_send_body
from invoicectl.goroute.outcomes import Accepted, KeyReused, Transient
from invoicectl.sandbox import DEFAULT_API_KEY, BackgroundServer, Sandbox, SandboxConfig
from invoicectl.sandbox.samples import sample_invoice, send_body

RECEIVER = ("9915", "phase4-test-receiver")
HEADERS = {"X-API-Key": DEFAULT_API_KEY}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def sandbox() -> Sandbox:
    return Sandbox(SandboxConfig(rate_per_minute=1000, max_concurrent=20, seed=3))


@pytest.fixture
def server(sandbox: Sandbox) -> Iterator[BackgroundServer]:
    with BackgroundServer(sandbox) as running:
        yield running


def post(client: httpx.Client, body: bytes, key: str) -> httpx.Response:
    return client.post("/api/v1/documents", content=body, headers={"Idempotency-Key": key})


def test_send_replay_and_drop_over_loopback(sandbox: Sandbox, server: BackgroundServer) -> None:
    body = send_body(sample_invoice("INV-1"), receiver=RECEIVER, invoice_id="INV-1")
    with httpx.Client(base_url=server.base_url, headers=HEADERS) as client:
        first = post(client, body, "invoice-INV-1")
        replay = post(client, body, "invoice-INV-1")
        sandbox.set_faults(drop_rate=1.0)
        with pytest.raises(httpx.RemoteProtocolError):
            post(client, body, "invoice-INV-1")
        with pytest.raises(httpx.RemoteProtocolError):
            post(client, send_body(sample_invoice("INV-2"), receiver=RECEIVER), "invoice-INV-2")
        sandbox.set_faults(drop_rate=0.0)
        after_drop = post(
            client, send_body(sample_invoice("INV-2"), receiver=RECEIVER), "invoice-INV-2"
        )
        stats = client.get("/_sandbox/stats").json()

    assert first.status_code == replay.status_code == 202
    assert replay.json()["transaction_id"] == first.json()["transaction_id"]
    assert after_drop.status_code == 202
    assert (stats["accepted"], stats["replays"], stats["drops"]) == (2, 3, 2)
    assert stats["duplicates"] == []


def test_a_429_carries_retry_after_over_the_wire() -> None:
    sandbox = Sandbox(SandboxConfig(rate_per_minute=1))
    with (
        BackgroundServer(sandbox) as server,
        httpx.Client(base_url=server.base_url + "/peppol-api", headers=HEADERS) as client,
    ):
        assert client.get("/api/v1/transactions").status_code == 200
        limited = client.get("/api/v1/transactions")

    assert limited.status_code == 429
    assert 1 <= int(limited.headers["Retry-After"]) <= 60


@pytest.mark.anyio
@pytest.mark.parametrize("over", ["loopback", "in-process"])
async def test_the_project_client_against_the_emulator(sandbox: Sandbox, over: str) -> None:
    body = build_send_body(sample_invoice("INV-5"), *RECEIVER, {"invoice_id": "INV-5"})
    changed = build_send_body(sample_invoice("INV-5", lines=2), *RECEIVER, {"invoice_id": "INV-5"})
    key = ApiKey(DEFAULT_API_KEY)
    with BackgroundServer(sandbox) as server:
        if over == "loopback":
            client = GoRouteClient(server.base_url + "/peppol-api", key)
        else:
            client = GoRouteClient("http://sandbox", key, transport=sandbox.transport())
        async with client:
            sent = await client.send_document("invoice-INV-5", body)
            replay = await client.send_document("invoice-INV-5", body)
            reused = await client.send_document("invoice-INV-5", changed)
            sandbox.set_faults(drop_rate=1.0)
            dropped = await client.send_document("invoice-INV-6", body)
            sandbox.set_faults(drop_rate=0.0)
            found = await client.get_transaction(sent.transaction_id)  # type: ignore[union-attr]
            page = await client.list_transactions(limit=10)
            version = await client.version()

    assert isinstance(sent, Accepted), sent
    assert isinstance(replay, Accepted) and replay.transaction_id == sent.transaction_id
    assert isinstance(reused, KeyReused), reused
    assert reused.existing_transaction_id == sent.transaction_id
    assert isinstance(dropped, Transient), dropped
    assert isinstance(found, Found) and found.transaction.invoice_number == "INV-5"
    assert found.transaction.receiver == "9915:phase4-test-receiver"
    assert isinstance(page, TransactionPage) and len(page.transactions) == 2
    assert version == {"version": "sandbox-1.0", "environment": "sandbox", "status": "ok"}


@pytest.mark.slow
def test_python_dash_m_serves_on_a_free_port() -> None:
    command = [sys.executable, "-m", "invoicectl.sandbox", "--port", "0", "--drop-rate", "1"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert " listening on http://127.0.0.1:" in line, line
            assert DEFAULT_API_KEY in line
            base_url = line.split(" listening on ")[1].split()[0]
            body = send_body(sample_invoice("INV-1"), receiver=RECEIVER)
            with httpx.Client(base_url=base_url, headers=HEADERS) as client:
                with pytest.raises(httpx.RemoteProtocolError):
                    post(client, body, "invoice-INV-1")
                stats = client.get("/_sandbox/stats").json()
        finally:
            process.terminate()
            process.wait(timeout=10)

    assert (stats["accepted"], stats["drops"]) == (1, 1)

"""The client's network layer on asyncio (``goroute.network``), on real loopback sockets:
what httpcore asks of a stream (reads, writes, their timeouts, the end of a connection, TLS),
and that every pool of the client runs on it."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import socket
import ssl
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpcore
import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from hostile import HostileServer, Request, Wire, answer, answer_json

from invoicectl.goroute import network
from invoicectl.goroute.answers import transport_reason
from invoicectl.goroute.apikey import ApiKey
from invoicectl.goroute.client import GoRouteClient
from invoicectl.goroute.network import AsyncioBackend, run_on_asyncio
from invoicectl.goroute.outcomes import Accepted, Transient

KEY = ApiKey("sk_test_network_layer_secret")
TIMEOUT = httpx.Timeout(5.0)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the layer is asyncio's: invoicectl runs on nothing else


Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def on_asyncio(client: httpx.AsyncClient) -> bool:
    """Whether every connection pool of ``client`` runs on ``AsyncioBackend``."""
    pools = list(network._pools(client))
    return bool(pools) and all(
        isinstance(getattr(pool, "_network_backend", None), AsyncioBackend) for pool in pools
    )


@asynccontextmanager
async def server(serve: Serve, ssl_context: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    """A loopback server running ``serve`` for each connection; yields its port. Every
    connection it accepted is closed, and its handler ended, when the block ends."""
    handlers: set[asyncio.Task[None]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        try:
            await serve(reader, writer)
        except (ConnectionError, ssl.SSLError, asyncio.IncompleteReadError):
            pass  # the client went away: what some tests make it do
        finally:
            writer.close()

    listening = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ssl_context)
    try:
        yield listening.sockets[0].getsockname()[1]
    finally:
        listening.close()
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await listening.wait_closed()


async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await asyncio.sleep(30)


def says_after(seconds: float, data: bytes) -> Serve:
    """A server that sends ``data`` once ``seconds`` have passed, then says nothing."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(seconds)
        writer.write(data)
        await writer.drain()
        await asyncio.sleep(30)

    return serve


@asynccontextmanager
async def connected(port: int) -> AsyncIterator[httpcore.AsyncNetworkStream]:
    stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
    try:
        yield stream
    finally:
        await stream.aclose()
        await asyncio.sleep(0)  # the transport closes on the loop's next pass


@pytest.mark.anyio
async def test_a_read_waits_for_bytes_and_ends_at_its_timeout() -> None:
    async with server(says_after(0.1, b"hello")) as port, connected(port) as stream:
        assert await stream.read(65536, timeout=5) == b"hello"
        with pytest.raises(httpcore.ReadTimeout):
            await stream.read(65536, timeout=0.2)


@pytest.mark.anyio
async def test_the_end_of_a_connection_reads_empty_after_what_came_before_it() -> None:
    async def say_and_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"a" * 1000)
        await writer.drain()
        writer.close()

    async with server(say_and_close) as port, connected(port) as stream:
        await asyncio.sleep(0.2)  # the close has arrived by now, behind the bytes
        assert stream.get_extra_info("is_readable")
        assert await stream.read(600) == b"a" * 600
        assert await stream.read(65536) == b"a" * 400
        assert await stream.read(65536) == b""
        with pytest.raises(httpcore.WriteError):
            await stream.write(b"GET / HTTP/1.1\r\n\r\n")


@pytest.mark.anyio
async def test_a_reset_connection_is_a_read_error_caused_by_the_reset() -> None:
    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raw = writer.get_extra_info("socket")
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    async with server(reset) as port, connected(port) as stream:
        with pytest.raises(httpcore.ReadError) as raised:
            await stream.read(65536, timeout=5)
    assert isinstance(raised.value.__cause__, ConnectionResetError)


@pytest.mark.anyio
async def test_an_idle_connection_is_readable_only_once_the_server_closed_it() -> None:
    closing = asyncio.Event()

    async def close_when_told(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await closing.wait()
        writer.close()

    async with server(close_when_told) as port, connected(port) as stream:
        await asyncio.sleep(0.05)
        assert not stream.get_extra_info("is_readable")
        closing.set()
        await asyncio.sleep(0.2)
        assert stream.get_extra_info("is_readable")
        assert stream.get_extra_info("server_addr")[1] == port
        assert stream.get_extra_info("client_addr")[0] == "127.0.0.1"
        assert stream.get_extra_info("ssl_object") is None


@pytest.mark.anyio
async def test_a_server_that_does_not_read_ends_a_write_at_its_timeout() -> None:
    """And closing the connection then closes it at once: what it holds unsent is dropped,
    not left to trickle out to a server that stopped reading."""
    async with server(silent) as port:
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        with pytest.raises(httpcore.WriteTimeout):
            await stream.write(b"x" * 64 * 1024 * 1024, timeout=0.3)  # past the kernel's buffers
        raw = stream.get_extra_info("socket")
        await stream.aclose()
        await asyncio.sleep(0.05)
        assert raw.fileno() == -1


@pytest.mark.anyio
async def test_a_fast_server_is_read_with_bounded_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading pauses while more than the read-ahead waits unread: however fast a server
    sends, what waits stays near that, and every byte arrives, in order."""
    total = 8 * 1024 * 1024
    block = bytes(range(256)) * 256

    async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(total // len(block)):
            writer.write(block)
            await writer.drain()
        writer.close()

    async with server(flood) as port, connected(port) as stream:
        assert isinstance(stream, network.Stream)
        await asyncio.sleep(0.5)  # the server sends as fast as it can; nobody reads
        waiting = len(stream._protocol.received)
        assert 0 < waiting <= network._READ_AHEAD + 1024 * 1024
        received = bytearray()
        while chunk := await stream.read(65536, timeout=5):
            received += chunk
    assert len(received) == total
    assert received == block * (total // len(block))


@pytest.mark.anyio
async def test_a_cancelled_read_leaves_the_stream_usable() -> None:
    async with server(says_after(0.3, b"late")) as port, connected(port) as stream:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await stream.read(65536)
        assert await stream.read(65536, timeout=5) == b"late"


@pytest.mark.anyio
async def test_nothing_listening_is_a_connect_error_the_client_calls_refused() -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    with pytest.raises(httpcore.ConnectError) as raised:
        await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
    assert isinstance(raised.value.__cause__, ConnectionRefusedError)
    async with GoRouteClient(f"http://127.0.0.1:{port}", KEY) as goroute:
        outcome = await goroute.send_document("key-refused", b'{"document": "x"}')
    assert isinstance(outcome, Transient)
    assert outcome.reason == "connection refused"
    assert not outcome.sent


@pytest.mark.anyio
async def test_a_unix_socket(tmp_path: Path) -> None:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await reader.read(100))
        await writer.drain()
        writer.close()

    path = str(tmp_path / "s")
    listening = await asyncio.start_unix_server(echo, path)
    try:
        stream = await AsyncioBackend().connect_unix_socket(path, timeout=5)
        await stream.write(b"ping", timeout=5)
        assert await stream.read(100, timeout=5) == b"ping"
        assert await stream.read(100, timeout=5) == b""
        await stream.aclose()
        await asyncio.sleep(0)
    finally:
        listening.close()
        await listening.wait_closed()


# ---- TLS ------------------------------------------------------------------------------------


def _certificate_authority(tmp_path: Path) -> tuple[ssl.SSLContext, Path]:
    """A server context for 127.0.0.1 signed by a CA of the test's own; the CA's file."""
    now = datetime.datetime.now(datetime.UTC)

    def certificate(
        subject: str,
        key: ec.EllipticCurvePrivateKey,
        issuer: x509.Name,
        signer: ec.EllipticCurvePrivateKey,
        ca: bool,
    ) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False,
            )
        return builder.sign(signer, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "invoicectl test CA")])
    ca = certificate("invoicectl test CA", ca_key, ca_name, ca_key, ca=True)
    server_key = ec.generate_private_key(ec.SECP256R1())
    leaf = certificate("127.0.0.1", server_key, ca_name, ca_key, ca=False)
    pem = serialization.Encoding.PEM
    (tmp_path / "ca.pem").write_bytes(ca.public_bytes(pem))
    (tmp_path / "server.pem").write_bytes(
        leaf.public_bytes(pem)
        + server_key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "server.pem")
    return context, tmp_path / "ca.pem"


async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.readuntil(b"\r\n\r\n")
    body = b'{"transaction_id": "tx-tls"}'
    writer.write(
        b"HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    await writer.drain()
    await asyncio.sleep(1)


@pytest.mark.anyio
async def test_https_on_asyncio_answers_and_refuses_a_certificate_it_cannot_verify(
    tmp_path: Path,
) -> None:
    server_context, ca_file = _certificate_authority(tmp_path)
    async with server(accepted, server_context) as port:
        trusting = httpx.AsyncClient(verify=ssl.create_default_context(cafile=ca_file))
        run_on_asyncio(trusting)
        async with trusting:
            response = await trusting.get(f"https://127.0.0.1:{port}/")
        assert (response.status_code, response.json()) == (202, {"transaction_id": "tx-tls"})

        doubting = httpx.AsyncClient()  # the system's CAs, which never signed this one
        run_on_asyncio(doubting)
        async with doubting:
            with pytest.raises(httpx.ConnectError) as raised:
                await doubting.get(f"https://127.0.0.1:{port}/")
    reason = transport_reason(raised.value, TIMEOUT, lambda text: text)
    assert reason.startswith("TLS handshake failed (")
    assert "certificate verify failed" in reason


@pytest.mark.anyio
async def test_a_silent_tls_server_is_a_connect_timeout() -> None:
    # It accepts the connection and never answers the handshake.
    async with server(silent) as port, connected(port) as stream:
        with pytest.raises(httpcore.ConnectTimeout):
            await stream.start_tls(ssl.create_default_context(), "127.0.0.1", timeout=0.3)


@pytest.mark.anyio
async def test_a_tls_server_that_does_not_read_ends_a_write_at_its_timeout(
    tmp_path: Path,
) -> None:
    """asyncio's TLS layer encrypts whatever it is handed into the socket's buffer at once
    and tells nobody to wait: a write is handed over a piece at a time, so it waits, and
    times out, as a plain one does."""
    server_context, ca_file = _certificate_authority(tmp_path)
    async with server(silent, server_context) as port:
        plain = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        stream = await plain.start_tls(
            ssl.create_default_context(cafile=ca_file), "127.0.0.1", timeout=5
        )
        assert stream.get_extra_info("ssl_object") is not None
        with pytest.raises(httpcore.WriteTimeout):
            await stream.write(b"x" * 64 * 1024 * 1024, timeout=0.3)
        await stream.aclose()
        await asyncio.sleep(0.05)


@pytest.mark.anyio
async def test_bytes_a_proxy_sends_past_its_tunnel_answer_never_pass_as_the_servers(
    tmp_path: Path,
) -> None:
    """Between the client and an ``HTTPS_PROXY`` the answer to CONNECT is plain text: bytes
    sent after it, before any TLS, must not be read as the server's answer from inside the
    tunnel. A forged 202 there would have marked an invoice delivered that was not."""
    forged = (
        b'HTTP/1.1 202 Accepted\r\nContent-Length: 36\r\n\r\n{"transaction_id": "tx-forged-here"}'
    )

    async def forging_proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        # Past the 64 KB httpcore reads the tunnel's answer in, so that some is left unread.
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n" + b" " * 70_000 + forged)
        await writer.drain()
        await asyncio.sleep(5)

    async with server(forging_proxy) as port:
        client = httpx.AsyncClient(proxy=f"http://127.0.0.1:{port}")
        run_on_asyncio(client)
        assert on_asyncio(client)
        async with client:
            with pytest.raises(httpx.ConnectError) as raised:
                await client.post("https://goroute.test/api/v1/documents", content=b"{}")
    assert "before its TLS handshake" in str(raised.value)


# ---- the client's pools -----------------------------------------------------------------------


@pytest.mark.anyio
async def test_every_pool_of_the_client_runs_on_asyncio(monkeypatch: pytest.MonkeyPatch) -> None:
    """The send's pools and each proxy the environment names: a newer httpx or httpcore that
    builds its pools otherwise fails here, not quietly in production."""
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    async with GoRouteClient("https://goroute.test", KEY, max_connections=12) as goroute:
        clients = [lane.http for lane in goroute._lanes._lanes]
        assert len(clients) == 3
        assert all(on_asyncio(client) for client in clients)
        assert all(client._mounts for client in clients)  # the proxy's pool among them


@pytest.mark.anyio
async def test_a_send_on_loopback_crosses_the_asyncio_streams(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    streams: list[network.Stream] = []
    made = network.Stream.__init__

    def counted(self: network.Stream, *args: object) -> None:
        made(self, *args)  # type: ignore[arg-type]
        streams.append(self)

    monkeypatch.setattr(network.Stream, "__init__", counted)
    with HostileServer(answer_json(202, {"transaction_id": "tx-loopback"})) as hostile:
        async with GoRouteClient(hostile.base_url, KEY) as goroute:
            outcomes = [
                await goroute.send_document(f"key-{n}", b'{"document": "x"}') for n in range(3)
            ]
    assert all(isinstance(outcome, Accepted) for outcome in outcomes)
    assert len(streams) == len(hostile.requests) == 3  # it closes each connection it answers


@pytest.mark.anyio
async def test_a_kept_connection_is_reused_and_one_the_server_closed_is_not() -> None:
    """The pool asks an idle connection whether it is readable before it reuses it: one the
    server closed meanwhile is given up for a new one, and the request never sees it."""
    connections: list[asyncio.StreamWriter] = []

    async def keep_alive(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        while True:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    async with server(keep_alive) as port:
        client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}")
        run_on_asyncio(client)
        async with client:
            for _ in range(3):
                assert (await client.get("/")).text == "ok"
            assert len(connections) == 1
            connections[0].close()
            await asyncio.sleep(0.2)
            assert (await client.get("/")).text == "ok"
            assert len(connections) == 2


@pytest.mark.anyio
async def test_a_connection_closed_while_the_loop_was_busy_is_not_reused() -> None:
    """A send's commits run on the event loop: a server may close an idle connection while
    the loop is busy and has not yet delivered the close. The pool asks the socket itself
    before it reuses a connection, so the request goes on a new one instead of being lost
    on the old (an invoice needlessly unknown)."""
    keep_alive = answer(200, b"ok", {"Connection": "keep-alive"})

    def answer_then_close_soon(request: Request, wire: Wire) -> None:
        keep_alive(request, wire)
        wire.wait(0.1)  # then the server closes the connection, whatever it said

    with HostileServer(answer_then_close_soon) as hostile:
        client = httpx.AsyncClient(base_url=hostile.base_url)
        run_on_asyncio(client)
        async with client:
            assert (await client.get("/first")).text == "ok"
            time.sleep(0.3)  # the loop blocked, as a commit blocks it; the server closes
            assert (await client.get("/second")).text == "ok"
    assert [request.path for request in hostile.requests] == ["/first", "/second"]


@pytest.mark.anyio
async def test_an_answer_nobody_asked_for_never_passes_as_the_next_requests() -> None:
    """A server (or a broken proxy) sends a second answer right behind the first, in the
    same packet: the client has read both, and the second waits in the parser's buffer, not
    on the socket. That connection is given up, so the next request gets its own answer, not
    the stale one (an invoice recorded as refused, or as another's transaction, when GoRoute
    accepted it)."""
    stale = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 5\r\n\r\nstale"
    connections: list[asyncio.StreamWriter] = []

    async def answers_ahead(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        while True:
            request = await reader.readuntil(b"\r\n\r\n")
            path = request.split(b" ", 2)[1]
            body = b"ok " + path
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            if path == b"/first":
                writer.write(stale)
            await writer.drain()

    async with server(answers_ahead) as port:
        client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}")
        run_on_asyncio(client)
        async with client:
            assert (await client.get("/first")).text == "ok /first"
            second = await client.get("/second")
            assert (second.status_code, second.text) == (200, "ok /second")
            assert (await client.get("/third")).text == "ok /third"
    assert len(connections) == 2  # the one that answered ahead, then one kept

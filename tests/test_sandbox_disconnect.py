"""A client that goes away mid-request is one line in the sandbox's log, never a traceback
(issue 12, item 11: a killed ``send`` left 41 ``ClientDisconnect`` tracebacks)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

from invoicectl.sandbox import DEFAULT_API_KEY

_DROPPED = "sandbox: the client dropped the connection before its request was read"


def _request(body: bytes, claimed: int) -> bytes:
    return (
        b"POST /api/v1/documents HTTP/1.1\r\nHost: sandbox\r\n"
        + f"X-API-Key: {DEFAULT_API_KEY}\r\nIdempotency-Key: invoice-GONE-1\r\n".encode()
        + f"Content-Type: application/json\r\nContent-Length: {claimed}\r\n\r\n".encode()
        + body
    )


def test_clients_gone_mid_request_are_one_line_each_and_no_traceback() -> None:
    # With latency, the whole request arrives and the client is gone before it is read, as
    # when a send with requests in flight is killed; without it, half a body arrives.
    command = [sys.executable, "-m", "invoicectl", "sandbox", "--port", "0", "--latency-ms", "300"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline().rsplit(":", 1)[1])
        body = b'{"document": "<Invoice/>"}'
        for request in (_request(body[:5], len(body)), _request(body, len(body))) * 2:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
                client.sendall(request)
                time.sleep(0.1)
        time.sleep(0.6)  # the latency runs out, and each request is read
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=10)

    assert "Traceback" not in stderr and "ClientDisconnect" not in stderr, stderr
    dropped = [line for line in stderr.splitlines() if _DROPPED in line]
    assert len(dropped) == 4, stderr
    assert dropped[0].endswith("(POST /api/v1/documents)")

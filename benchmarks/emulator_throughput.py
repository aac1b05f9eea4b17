"""How many sends per second the sandbox emulator serves over loopback HTTP.

    .venv/bin/python benchmarks/emulator_throughput.py [--sends 5000] [--connections 32]

Starts ``python -m invoicectl.sandbox`` on a free loopback port (no latency, no faults, a
rate limit far above the load), then drives distinct sends (one idempotency key each, a ~10 KB
UBL invoice) from load-generator processes. The generator is deliberately cheap so that the
figure measures the server: raw asyncio streams, keep-alive connections, request bytes built
before the clock starts. The requirement is 500 sends/s; the ratio to it is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass

from invoicectl.sandbox.config import DEFAULT_API_KEY
from invoicectl.sandbox.samples import sample_invoice, send_body

REQUIRED_PER_SECOND = 500
RECEIVER = ("9915", "phase4-test-receiver")


@dataclass(frozen=True)
class WorkerResult:
    started: float
    finished: float
    accepted: int
    other: int


def build_request(host: str, port: int, index: int, lines: int) -> bytes:
    invoice_id = f"BENCH-{index:07d}"
    body = send_body(
        sample_invoice(invoice_id, lines=lines), receiver=RECEIVER, invoice_id=invoice_id
    )
    head = (
        f"POST /api/v1/documents HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"X-API-Key: {DEFAULT_API_KEY}\r\nIdempotency-Key: invoice-{invoice_id}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("ascii") + body


async def _connection(host: str, port: int, requests: list[bytes]) -> tuple[int, int]:
    reader, writer = await asyncio.open_connection(host, port)
    accepted = other = 0
    try:
        for request in requests:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            if head.startswith(b"HTTP/1.1 202"):
                accepted += 1
            else:
                other += 1
    finally:
        writer.close()
        await writer.wait_closed()
    return accepted, other


async def _drive(host: str, port: int, requests: list[bytes], connections: int) -> tuple[int, int]:
    slices = [requests[i::connections] for i in range(connections)]
    results = await asyncio.gather(*(_connection(host, port, s) for s in slices if s))
    return sum(a for a, _ in results), sum(o for _, o in results)


def worker(args: tuple[str, int, range, int, int, float]) -> WorkerResult:
    host, port, indices, lines, connections, start_at = args
    requests = [build_request(host, port, i, lines) for i in indices]
    time.sleep(max(0.0, start_at - time.time()))  # all workers start together
    started = time.time()
    accepted, other = asyncio.run(_drive(host, port, requests, connections))
    return WorkerResult(started, time.time(), accepted, other)


def start_server() -> tuple[subprocess.Popen[str], str, int]:
    command = [
        sys.executable, "-m", "invoicectl.sandbox", "--port", "0", "--tier", "enterprise",
        "--rate", "100000000", "--concurrency", "100000",
    ]  # fmt: skip
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    line = server.stdout.readline()
    url = line.split(" listening on ")[1].split()[0]
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return server, host, int(port)


def server_stats(host: str, port: int) -> dict[str, object]:
    request = urllib.request.Request(
        f"http://{host}:{port}/_sandbox/stats", headers={"X-API-Key": DEFAULT_API_KEY}
    )
    with urllib.request.urlopen(request) as answer:
        stats: dict[str, object] = json.load(answer)
        return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sends", type=int, default=5000)
    parser.add_argument("--connections", type=int, default=32, help="per load process")
    parser.add_argument("--processes", type=int, default=1, help="load-generator processes")
    parser.add_argument("--lines", type=int, default=8, help="invoice lines (8 is ~10 KB)")
    args = parser.parse_args()

    server, host, port = start_server()
    try:
        start_at = time.time() + 1.0 + args.sends / 20_000  # time to build the requests
        jobs = [
            (
                host,
                port,
                range(p, args.sends, args.processes),
                args.lines,
                args.connections,
                start_at,
            )
            for p in range(args.processes)
        ]
        with multiprocessing.get_context("spawn").Pool(args.processes) as pool:
            results = pool.map(worker, jobs)
        stats = server_stats(host, port)
    finally:
        server.terminate()
        server.wait(timeout=10)
        if server.stdout is not None:
            server.stdout.close()

    elapsed = max(r.finished for r in results) - min(r.started for r in results)
    accepted = sum(r.accepted for r in results)
    rate = accepted / elapsed
    print(
        f"{accepted} sends accepted ({sum(r.other for r in results)} other answers) "
        f"in {elapsed:.2f} s over {args.processes} x {args.connections} keep-alive connections"
    )
    print(f"server stats: accepted={stats['accepted']} transactions={stats['transactions']}")
    print(
        f"throughput: {rate:.0f} sends/s = {rate / REQUIRED_PER_SECOND:.2f}x the 500/s requirement"
    )


if __name__ == "__main__":
    main()

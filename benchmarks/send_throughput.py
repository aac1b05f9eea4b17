"""Send throughput, CPU and memory, measured side by side in one run.

Against the emulator on loopback (`invoicectl sandbox` in its own process) with a realistic
300 ms answer time and a strict limit of 500/min and 50 concurrent:

1. `invoicectl send --rate 500 --concurrency 50` for a fixed period (default 120 s, via
   --deadline): sustained throughput as a share of the limit (target >= 97 %) and the
   number of 429 answers the emulator served (target 0);
2. beside it, on a fresh emulator of the same kind, a naive sequential sender (one blocking
   request at a time, as a plain script would) for the same period: the ratio;
3. `invoicectl send` of 10,000 invoices against an emulator without latency or limit:
   CPU seconds per sent invoice and peak RSS (target < 200 MB).

    python benchmarks/send_throughput.py [--seconds 120] [--bulk 10000] [--json]

--seconds 0 skips 1. and 2. (compare.py runs only 3., on fewer invoices); --json ends the
output with one line of JSON (the bulk send's figures) for compare.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from outbox import write_outbox  # noqa: E402

LIMIT = 500


@contextmanager
def emulator(*args: str):
    process = subprocess.Popen(
        [sys.executable, "-m", "invoicectl", "sandbox", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(3)]
        values = dict(line.strip().split("=", 1) for line in lines[1:])
        yield values["GOROUTE_BASE_URL"], values["GOROUTE_API_KEY"]
    finally:
        process.terminate()
        process.wait(timeout=10)


def stats(base_url: str, key: str) -> dict:
    return httpx.get(f"{base_url}/_sandbox/stats", headers={"X-API-Key": key}).json()


def run_invoicectl(
    outbox: Path, journal: Path, base_url: str, key: str, *args: str
) -> tuple[dict, float, float]:
    """The JSON summary, CPU seconds and peak RSS (MB) of one `invoicectl send` process."""
    env = {**os.environ, "GOROUTE_BASE_URL": base_url, "GOROUTE_API_KEY": key}
    probe = (
        "import resource, subprocess, sys;"
        "out = subprocess.run(sys.argv[1:], capture_output=True, text=True);"
        "usage = resource.getrusage(resource.RUSAGE_CHILDREN);"
        "print(usage.ru_utime + usage.ru_stime, usage.ru_maxrss);"
        "print(out.stdout); print(out.stderr, file=sys.stderr)"
    )
    command = [
        sys.executable,
        "-m",
        "invoicectl",
        "send",
        str(outbox),
        "--journal",
        str(journal),
        "--json",
        *args,
    ]
    result = subprocess.run(
        [sys.executable, "-c", probe, *command], env=env, capture_output=True, text=True, check=True
    )
    if not result.stdout.split("\n", 1)[1].strip():
        raise SystemExit(f"invoicectl send printed nothing: {result.stderr[-3000:]}")
    first, rest = result.stdout.split("\n", 1)
    cpu, rss = first.split()
    return json.loads(rest), float(cpu), int(rss) / 1024


def naive_sender(outbox: Path, base_url: str, key: str, seconds: float) -> int:
    """What a plain script does: one blocking request at a time."""
    sent = 0
    deadline = time.monotonic() + seconds
    with httpx.Client(base_url=base_url, headers={"X-API-Key": key}, timeout=30) as client:
        for path in sorted(outbox.iterdir()):
            if time.monotonic() >= deadline:
                break
            body = {
                "receiver_scheme": "9915",
                "receiver_id": "phase4-test-receiver",
                "document": path.read_text(encoding="utf-8"),
                "metadata": {"invoice_id": path.stem},
            }
            answer = client.post(
                "/api/v1/documents", json=body, headers={"Idempotency-Key": f"naive-{path.stem}"}
            )
            sent += answer.status_code == 202
    return sent


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--bulk", type=int, default=10_000)
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="invoicectl-send-bench-"))
    strict = ("--rate", str(LIMIT), "--concurrency", "50", "--latency-ms", "300")
    try:
        if args.seconds > 0:
            enough = int(LIMIT * args.seconds / 60 * 1.1) + 50
            outbox = work / "outbox"
            write_outbox(outbox, enough)

            with emulator(*strict) as (base_url, key):
                summary, cpu, rss = run_invoicectl(
                    outbox,
                    work / "paced.db",
                    base_url,
                    key,
                    "--rate",
                    str(LIMIT),
                    "--concurrency",
                    "50",
                    "--deadline",
                    str(args.seconds),
                )
                served = stats(base_url, key)
            accepted = summary["counts"].get("accepted", 0)
            elapsed = summary["timing"]["elapsed_seconds"]
            per_minute = accepted / elapsed * 60
            print(
                f"invoicectl: {accepted} accepted in {elapsed:.1f} s = {per_minute:.1f}/min, "
                f"{per_minute / LIMIT:.1%} of the {LIMIT}/min limit (target >= 97 %); "
                f"429s served: {served['rate_limited']} (target 0); "
                f"latency median {summary['timing']['request_latency']['median']} s, "
                f"waited on the limiter {summary['timing']['waited_for_rate_limit_seconds']} s"
            )

            with emulator(*strict) as (base_url, key):
                naive = naive_sender(outbox, base_url, key, args.seconds)
            naive_per_minute = naive / args.seconds * 60
            print(
                f"naive sequential sender: {naive} in {args.seconds:.0f} s = {naive_per_minute:.1f}/min; "
                f"invoicectl / naive = {per_minute / max(naive_per_minute, 1e-9):.2f}"
            )

        bulk = work / "bulk"
        write_outbox(bulk, args.bulk, seed=2, prefix="BULK")
        with emulator("--tier", "enterprise", "--rate", "100000000", "--concurrency", "1000") as (
            base_url,
            key,
        ):
            summary, cpu, rss = run_invoicectl(
                bulk,
                work / "bulk.db",
                base_url,
                key,
                "--rate",
                "100000",
                "--concurrency",
                "50",
            )
        accepted = summary["counts"].get("accepted", 0)
        print(
            f"bulk: {accepted} accepted in {summary['timing']['elapsed_seconds']:.1f} s; "
            f"CPU {cpu / max(accepted, 1) * 1000:.2f} ms per sent invoice (scan included); "
            f"peak RSS {rss:.0f} MB (target < 200 MB)"
        )
        if args.json:
            figures = {
                "bulk_accepted": accepted,
                "bulk_elapsed_s": summary["timing"]["elapsed_seconds"],
                "bulk_cpu_ms_per_invoice": cpu / max(accepted, 1) * 1000,
                "bulk_rss_mb": rss,
            }
            print(json.dumps(figures))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

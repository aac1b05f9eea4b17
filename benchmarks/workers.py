"""Send workers on one PostgreSQL journal: 1 against 3, on one account whose limit binds.

A throwaway PostgreSQL server (``tests/pgserver.py``: initdb, pg_ctl, a free port), the
emulator in its own process with a limit of ``--limit`` requests a minute (default 1,200)
and 100 ms answers, and an outbox with more invoices than the run can send. Each case gets
a new database, scanned first (so the workers' own scans find nothing new), then
``invoicectl send --deadline S`` in 1 or 3 processes at once, all with ``--rate LIMIT``.

Figures, from the emulator (what the account saw): the most requests any 60 s held
(``max_in_60s``) ÷ the limit (the target is >= 0.97, never > 1), the sends it accepted, and
the 429s it served (target 0). ``S`` is 75 s so a whole steady minute lies inside the run.

    python benchmarks/workers.py [--seconds 75] [--limit 1200]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from outbox import write_outbox  # noqa: E402
from pgserver import running_server  # noqa: E402
from send_throughput import emulator  # noqa: E402


def _scan(outbox: Path, url: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "invoicectl", "scan", str(outbox), "--journal", url, "--quiet"],
        check=False,
        capture_output=True,
    )


def case(outbox: Path, url: str, limit: int, workers: int, seconds: float) -> dict:
    """``workers`` sends at once for ``seconds``; the emulator's figures."""
    with emulator("--rate", str(limit), "--concurrency", "50", "--latency-ms", "100") as (
        base_url,
        key,
    ):
        _scan(outbox, url)
        env = {**os.environ, "GOROUTE_BASE_URL": base_url, "GOROUTE_API_KEY": key}
        command = [sys.executable, "-m", "invoicectl", "send", str(outbox), "--journal", url]
        args = ["--rate", str(limit), "--concurrency", "10", "--deadline", str(seconds)]
        started = time.monotonic()
        processes = [
            subprocess.Popen(
                [*command, *args, "--quiet"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(workers)
        ]
        for process in processes:
            _, stderr = process.communicate(timeout=seconds + 120)
            if process.returncode not in (0, 75):
                print(f"a worker exited {process.returncode}: {stderr[-2000:]}", file=sys.stderr)
        elapsed = time.monotonic() - started
        served = httpx.get(f"{base_url}/_sandbox/stats", headers={"X-API-Key": key}).json()
    return {
        "workers": workers,
        "max_in_60s": served["max_in_60s"],
        "ratio": served["max_in_60s"] / limit,
        "accepted": served["accepted"],
        "rate_limited": served["rate_limited"],
        "duplicates": len(served["duplicates"]),
        "elapsed": elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=75.0)
    parser.add_argument("--limit", type=int, default=1200)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="invoicectl-workers-bench-"))
    try:
        outbox = work / "outbox"
        write_outbox(outbox, int(args.limit * args.seconds / 60 * 1.2) + 50)
        with running_server() as server:
            results = [
                case(outbox, server.new_database(), args.limit, workers, args.seconds)
                for workers in (1, 3)
            ]
        for result in results:
            print(
                f"{result['workers']} worker(s): most in any 60 s {result['max_in_60s']} of "
                f"{args.limit} = {result['ratio']:.3f} (target >= 0.97, never > 1); "
                f"{result['accepted']} accepted in {result['elapsed']:.1f} s; "
                f"429s {result['rate_limited']}; invoices delivered twice {result['duplicates']}"
            )
        one, three = results
        print(f"achieved / limit: 1 worker {one['ratio']:.3f}  |  3 workers {three['ratio']:.3f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

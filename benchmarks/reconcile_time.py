"""How long ``reconcile`` takes for many cases, next to the minimum the rate limit allows.

    .venv/bin/python benchmarks/reconcile_time.py [--cases 2000] [--rate 2000] [--in-process]

Stages ``--cases`` invoices in a fresh journal (real files, a real scan), half ``key_reused``
(each with its existing transaction staged in the emulator: one GET each) and half
``unknown`` (found through the transactions list, ``--list-limit`` per page), then runs
``reconcile`` against the emulator over loopback HTTP (uvicorn; ``--in-process`` for its
in-process transport) with the emulator's server-side limit set to ``--rate`` requests per
minute. The limit-bound minimum is requests / rate; the limiter's 1 s network margin makes
the best possible 61/60 of that. At the standard tier (``--rate 100``) 2,000 key-reuse cases
take 20 minutes whatever the tool does, so the default rate is higher for a quick run.

    .venv/bin/python benchmarks/reconcile_time.py --accepted 1500

counts instead the requests that refresh the delivery status of ``--accepted`` freshly
accepted invoices (their transactions just created in the emulator, still on their way), from
the emulator's own stats (``transaction_lists``, ``transaction_gets``); the target is at most
one request per 50 invoices. Then a journal whose accepted invoices are all delivered, asked
twice: the second reconcile must make no request at all.

    .venv/bin/python benchmarks/reconcile_time.py --history 10000,100000

builds journals of those sizes whose accepted invoices are all final (sent two days ago and
delivered; ``journal_size.build``) and runs the real CLI's ``reconcile`` on each as a
subprocess against ``invoicectl sandbox`` on loopback: its wall time, its peak RSS (GNU time)
and the requests it made (the emulator's ``/_sandbox/stats``: transaction GETs and list
pages), then the largest/smallest ratios side by side. Target: no request, and time and RSS
that do not grow with history (ratio near 1).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from invoicectl.goroute.apikey import ApiKey  # noqa: E402
from invoicectl.goroute.client import GoRouteClient  # noqa: E402
from invoicectl.goroute.limiter import RateLimiter  # noqa: E402
from invoicectl.goroute.retry import RetryPolicy  # noqa: E402
from invoicectl.journal import Journal  # noqa: E402
from invoicectl.journal.records import InvoiceState  # noqa: E402
from invoicectl.lifecycle.keys import idempotency_key  # noqa: E402
from invoicectl.reconcile import ReconcileReport, reconcile  # noqa: E402
from invoicectl.sandbox import BackgroundServer, Sandbox, SandboxConfig  # noqa: E402
from invoicectl.sandbox.samples import sample_invoice  # noqa: E402
from invoicectl.scan.ingest import scan_directory  # noqa: E402


def stage(journal: Journal, outbox: Path, sandbox: Sandbox, cases: int) -> None:
    for n in range(cases):
        (outbox / f"R-{n:05d}.xml").write_text(sample_invoice(f"R-{n:05d}", lines=4))
    scan_directory(journal, outbox)
    at = (datetime.now(UTC) - timedelta(hours=2)).isoformat()
    with journal.transaction():
        run_id = journal.db.execute(
            "INSERT INTO runs (command, options, pid, host, started_at) VALUES (?, ?, ?, ?, ?)",
            ("send", "{}", os.getpid(), "bench", at),
        ).lastrowid
        for n, row in enumerate(journal.invoices()):
            invoice_id = row.invoice_id
            txn = sandbox.add_transaction(invoice_id, status="delivered").id
            reused = n % 2 == 0
            journal.db.execute(
                "INSERT INTO attempts (run_id, invoice_id, revision_sha256, idempotency_key,"
                " body_sha256, started_at, http_status, existing_transaction_id)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, invoice_id, row.current_sha256, idempotency_key(invoice_id))
                + ("b" * 64, at, 422 if reused else None, txn if reused else None),
            )
            staged = replace(
                row,
                state=InvoiceState.key_reused if reused else InvoiceState.unknown,
                idempotency_key=idempotency_key(invoice_id),
                key_sha256=row.current_sha256,
                key_first_used_at=at,
                existing_transaction_id=txn if reused else None,
            )
            journal.save(staged, was=row)


async def run(
    base_url: str, transport: object, journal: Journal, args: argparse.Namespace
) -> ReconcileReport:
    async with GoRouteClient(base_url, ApiKey(args.api_key), transport=transport) as client:  # type: ignore[arg-type]
        return await reconcile(
            journal,
            client,
            limiter=RateLimiter(args.rate),
            policy=RetryPolicy(),
            list_limit=args.list_limit,
            concurrency=args.concurrency,
        )


def stage_accepted(
    journal: Journal, outbox: Path, sandbox: Sandbox, count: int, status: str | None
) -> None:
    """``count`` invoices accepted by a send a minute ago, each with its transaction."""
    for n in range(count):
        (outbox / f"A-{n:05d}.xml").write_text(sample_invoice(f"A-{n:05d}", lines=4))
    scan_directory(journal, outbox)
    at = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    with journal.transaction():
        for row in journal.invoices():
            txn = sandbox.add_transaction(row.invoice_id, status=status).id
            accepted = replace(
                row,
                state=InvoiceState.accepted,
                idempotency_key=idempotency_key(row.invoice_id),
                key_sha256=row.current_sha256,
                key_first_used_at=at,
                transaction_id=txn,
            )
            journal.save(accepted, was=row)


def delivery_requests(args: argparse.Namespace) -> None:
    """The requests that refresh ``--accepted`` invoices, and those of an all-final journal."""
    for status, label in ((None, "freshly accepted"), ("delivered", "all delivered")):
        sandbox = Sandbox(SandboxConfig(rate_per_minute=1_000_000, max_concurrent=100))
        args.api_key, args.rate = sandbox.api_key, 1_000_000
        with tempfile.TemporaryDirectory() as tmp:
            outbox = Path(tmp) / "outbox"
            outbox.mkdir()
            with Journal(Path(tmp) / "journal.db") as journal:
                stage_accepted(journal, outbox, sandbox, args.accepted, status)
                runs = 1 if status is None else 2
                for number in range(1, runs + 1):
                    before = sandbox.stats()
                    started = time.perf_counter()
                    report = asyncio.run(
                        run("http://sandbox.test", sandbox.transport(), journal, args)
                    )
                    elapsed = time.perf_counter() - started
                    after = sandbox.stats()
                    lists = after["transaction_lists"] - before["transaction_lists"]
                    gets = after["transaction_gets"] - before["transaction_gets"]
                    per = args.accepted / max(1, lists + gets)
                    print(
                        f"{label}, reconcile {number}: {args.accepted} accepted, "
                        f"{lists} list pages + {gets} GETs = {lists + gets} requests "
                        f"({per:.0f} invoices a request; target >= 50), {len(report.cases)} cases, "
                        f"{elapsed:.2f} s"
                    )


def history(args: argparse.Namespace) -> None:
    """``reconcile`` on journals of ``--history`` sizes, every accepted invoice final."""
    import httpx
    from journal_size import build, emulator, timed  # type: ignore[import-not-found]

    sizes = [int(size) for size in args.history.split(",")]
    figures: dict[int, tuple[float, float, int]] = {}
    with emulator() as (base_url, key), tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GOROUTE_BASE_URL": base_url, "GOROUTE_API_KEY": key}
        headers = {"X-API-Key": key}

        def requests_seen() -> int:
            stats = httpx.get(f"{base_url}/_sandbox/stats", headers=headers).json()
            return int(stats["transaction_gets"]) + int(stats["transaction_lists"])

        for size in sizes:
            path = Path(tmp) / f"journal-{size}.db"
            built = build(path, size, Path(tmp) / f"build-{size}", base_url)
            print(f"{size:,} invoices built in {built:.0f} s", flush=True)
            command = [sys.executable, "-m", "invoicectl", "reconcile", "--journal", str(path)]
            samples = []
            for _ in range(args.rounds):
                before = requests_seen()
                run = timed([*command, "--format", "json"], env)
                samples.append((run.seconds, run.rss_mb, requests_seen() - before))
            seconds = sorted(sample[0] for sample in samples)[len(samples) // 2]
            figures[size] = (seconds, max(s[1] for s in samples), max(s[2] for s in samples))
            path.unlink()
    small, large = min(sizes), max(sizes)
    print(f"{'invoices':>10} {'seconds':>8} {'RSS MB':>7} {'requests':>8}")
    for size, (seconds, rss, requests) in figures.items():
        print(f"{size:>10,} {seconds:>8.2f} {rss:>7.1f} {requests:>8}")
    print(
        f"ratio {large:,} / {small:,}: time {figures[large][0] / figures[small][0]:.2f}, "
        f"RSS {figures[large][1] / figures[small][1]:.2f} (median of {args.rounds} rounds)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument(
        "--rate", type=int, default=2000, help="requests per minute (standard: 100)"
    )
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--list-limit", type=int, default=100)
    parser.add_argument(
        "--in-process", action="store_true", help="no sockets: in-process transport"
    )
    parser.add_argument(
        "--accepted", type=int, default=0, help="count delivery refreshes of N accepted invoices"
    )
    parser.add_argument(
        "--history", help="journal sizes, all accepted invoices final (e.g. 10000,100000)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="reconciles per size (--history)")
    args = parser.parse_args()
    if args.history:
        history(args)
        return
    if args.accepted:
        delivery_requests(args)
        return

    sandbox = Sandbox(SandboxConfig(rate_per_minute=args.rate, max_concurrent=args.concurrency))
    args.api_key = sandbox.api_key
    with tempfile.TemporaryDirectory() as tmp:
        outbox = Path(tmp) / "outbox"
        outbox.mkdir()
        with Journal(Path(tmp) / "journal.db") as journal:
            stage(journal, outbox, sandbox, args.cases)
            started = time.perf_counter()
            if args.in_process:
                report = asyncio.run(run("http://sandbox.test", sandbox.transport(), journal, args))
            else:
                with BackgroundServer(sandbox) as server:
                    report = asyncio.run(run(server.base_url, None, journal, args))
            elapsed = time.perf_counter() - started

    minimum = report.requests / args.rate * 60
    stats = sandbox.stats()
    print(f"cases {len(report.cases)} ({dict((str(k), v) for k, v in report.counts.items())})")
    print(
        f"requests {report.requests} at {args.rate}/min, concurrency {args.concurrency}, "
        f"{'in-process' if args.in_process else 'loopback HTTP'}; server 429s {stats['rate_limited']}"
    )
    print(
        f"measured {elapsed:.1f} s; limit-bound minimum {minimum:.1f} s (requests / rate), "
        f"{minimum * 61 / 60:.1f} s with the limiter's 1 s margin; ratio {elapsed / minimum:.3f}"
    )
    print(
        f"at the standard tier (100/min) the same {report.requests} requests need at least "
        f"{report.requests / 100:.1f} min; {args.cases} cases all key_reused would need "
        f"{args.cases / 100:.0f} min"
    )


if __name__ == "__main__":
    main()

"""``invoicectl verify``, ``export``, ``verify-export`` and an export's top-up on journals of N
sent invoices: time and peak RSS, and how each grows from the smallest N to the largest.

    .venv/bin/python benchmarks/audit_time.py [--count 10000,100000] [--work DIR] [--keep]

For each count, a journal is built fast but through the journal's own write paths, so that
its chain is the one a real run leaves: ``invoicectl scan`` of an outbox from ``outbox.py``
(about 10 KB an invoice), then, in one process and without HTTP, each invoice's key claimed,
its attempt written before the (imagined) request and answered ``Accepted`` after it, by the
lifecycle's own ``claim_key`` / ``begin_attempt`` / ``record_answer``, with the body hash the
sender computes (a thousand invoices a transaction, at ``synchronous=NORMAL``: the build's
speed is not what is measured). Then, each in a fresh process, timed with its own CPU time and
peak RSS:

    verify             ``invoicectl verify`` (every blob read, every attempt body rebuilt)
    verify 10%         ``invoicectl verify --read-data-subset 10%``
    export             ``invoicectl export`` of every invoice to an empty directory
    verify-export      ``invoicectl verify-export`` of that export
    top-up             ``invoicectl export`` to the same directory once 20 more invoices
                       are sent: a nightly top-up, whose cost should follow its 20

(The chain's upgrade of a journal written before it was measured here by dropping the chain
from a copy; a journal that lacks the chain's migrations but records later ones is now
refused as one whose chain was removed by hand, so that copy can no longer stand for an old
journal, and the measure was taken out.)

and then, for each measure, the ratios largest/smallest of seconds, CPU and RSS beside the
ratio of the counts. Run from a checkout with its ``.venv`` (the set-up of the README): it
measures the invoicectl of the checkout it is in, whatever else is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO), str(HERE)]

from outbox import write_outbox  # noqa: E402

PER_TRANSACTION = 1000
TOP_UP = 20  # invoices sent after the first export, for the top-up


class Measured(NamedTuple):
    seconds: float
    cpu: float
    rss_mb: float
    exit_code: int
    last_line: str


def build(work: Path, count: int) -> Path:
    outbox = work / "outbox"
    started = time.perf_counter()
    write_outbox(outbox, count)
    print(f"  outbox of {count:,} files: {time.perf_counter() - started:.1f} s", flush=True)
    journal_path = work / "journal.db"
    scanned = measure([*CLI, "scan", str(outbox), "--journal", str(journal_path)])
    print(f"  scan: {scanned.seconds:.1f} s, exit {scanned.exit_code}", flush=True)
    started = time.perf_counter()
    send_in_process(journal_path)
    with closing(sqlite3.connect(journal_path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.rmtree(outbox)  # the journal holds the bytes; the export writes them again
    print(f"  send (in-process): {time.perf_counter() - started:.1f} s", flush=True)
    return journal_path


def send_in_process(journal_path: Path) -> None:
    """Every invoice never sent: its key claimed, its attempt written before the (imagined)
    request and answered ``Accepted`` after it, by the lifecycle's own functions."""
    from invoicectl.goroute.client import build_send_body
    from invoicectl.goroute.outcomes import Accepted
    from invoicectl.journal import Journal
    from invoicectl.lifecycle.sending import begin_attempt, claim_key, record_answer
    from invoicectl.ubl.encoding import document_text

    with Journal(journal_path) as journal:
        run_id = journal.begin_run("send", {"benchmark": True})
        pending = journal.never_sent()
        for first in range(0, len(pending), PER_TRANSACTION):
            with journal.bulk_writes(), journal.transaction():
                for invoice_id in pending[first : first + PER_TRANSACTION]:
                    item = claim_key(journal, invoice_id, replay=False)
                    body = build_send_body(
                        document_text(journal.content(item.sha256)),
                        item.receiver_scheme,
                        item.receiver_id,
                        {"invoice_id": invoice_id, "sha256": item.sha256},
                    )
                    attempt, was = begin_attempt(
                        journal, run_id, item, hashlib.sha256(body).hexdigest()
                    )
                    answer = Accepted(
                        http_status=202, duration=0.01, transaction_id=f"tx-{invoice_id}"
                    )
                    record_answer(journal, attempt, item, answer, was)
        journal.finish_run(run_id, 0, {})


def send_more(work: Path, journal: Path) -> None:
    """20 new invoices scanned and sent: what a nightly top-up of the export finds."""
    outbox = work / "more"
    write_outbox(outbox, TOP_UP, seed=97, prefix="MORE")
    done = measure([*CLI, "scan", str(outbox), "--journal", str(journal)])
    assert done.exit_code == 0, done.last_line
    send_in_process(journal)
    shutil.rmtree(outbox)


# Runs one command and reports its own peak RSS and CPU: a small parent for each, so that
# the figures are that command's alone.
_MEASURE = (
    "import resource, subprocess, sys\n"
    "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
    "usage = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "last = (done.stdout.strip().splitlines() or done.stderr.strip().splitlines() or [''])[-1]\n"
    "print(usage.ru_maxrss, usage.ru_utime + usage.ru_stime, done.returncode, last[:160])\n"
)
CLI = [sys.executable, "-m", "invoicectl"]


def measure(command: list[str]) -> Measured:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, *command],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    elapsed = time.perf_counter() - started
    rss, cpu, code, *last = done.stdout.strip().split(" ", 3)
    return Measured(elapsed, float(cpu), int(rss) / 1024, int(code), (last or [""])[0])


def measure_all(work: Path, count: int) -> dict[str, Measured]:
    print(f"journal of {count:,} invoices in {work}", flush=True)
    journal = build(work, count)
    size = journal.stat().st_size / 1e6
    with closing(sqlite3.connect(journal)) as conn:
        (events,) = conn.execute("SELECT count(*) FROM chain").fetchone()
    print(f"  {size:,.0f} MB, {events:,} chain events", flush=True)
    export = work / "export"
    runs = {
        "verify": [*CLI, "verify", "--journal", str(journal)],
        "verify 10%": [*CLI, "verify", "--journal", str(journal), "--read-data-subset", "10%"],
        "export": [*CLI, "export", str(export), "--journal", str(journal)],
        "verify-export": [*CLI, "verify-export", str(export)],
        "top-up": [*CLI, "export", str(export), "--journal", str(journal)],
    }
    results = {}
    for label, command in runs.items():
        if label == "top-up":
            send_more(work, journal)
        results[label] = measure(command)
        show(label, results[label])
    return results


def show(label: str, done: Measured) -> None:
    print(
        f"  {label}: {done.seconds:.2f} s wall, {done.cpu:.2f} s CPU, peak RSS"
        f" {done.rss_mb:.0f} MB, exit {done.exit_code}: {done.last_line}",
        flush=True,
    )


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        model = platform.processor() or model
    return f"{model}, nproc {os.cpu_count()}, Python {platform.python_version()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--count", default="10000,100000", help="invoices per journal, comma-separated"
    )
    parser.add_argument("--work", type=Path, default=None, help="where the journals go")
    parser.add_argument("--keep", action="store_true", help="keep the journals and exports")
    args = parser.parse_args()
    counts = sorted({int(text.replace("_", "")) for text in args.count.split(",")})
    work = args.work or Path(tempfile.mkdtemp(prefix="audit-bench-"))
    print(machine(), flush=True)
    results = {}
    try:
        for count in counts:
            results[count] = measure_all(work / f"n{count}", count)
            if not args.keep:
                shutil.rmtree(work / f"n{count}")
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    table(results)


def table(results: dict[int, dict[str, Measured]]) -> None:
    counts = sorted(results)
    small, large = counts[0], counts[-1]
    print()
    print("| measure | " + " | ".join(f"{count:,}: s / CPU s / MB" for count in counts) + " |")
    print("|---|" + "---|" * len(counts))
    for label in results[small]:
        cells = [
            f"{results[c][label].seconds:.2f} / {results[c][label].cpu:.2f} / {results[c][label].rss_mb:.0f}"
            for c in counts
        ]
        print(f"| {label} | " + " | ".join(cells) + " |")
    if large == small:
        return
    print()
    print(f"ratios {large:,} / {small:,} (the counts: {large / small:.1f}):")
    for label in results[small]:
        a, b = results[small][label], results[large][label]
        print(
            f"  {label}: time {b.seconds / a.seconds:.2f}, CPU {b.cpu / max(a.cpu, 1e-9):.2f},"
            f" RSS {b.rss_mb / a.rss_mb:.2f}"
        )


if __name__ == "__main__":
    main()

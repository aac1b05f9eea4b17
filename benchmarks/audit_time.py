"""``invoicectl verify`` and ``export`` on a journal of N sent invoices: time and peak RSS.

    python benchmarks/audit_time.py --count 10000 [--work DIR]

The journal is built fast but through the journal's own write paths, so its chain is the one
a real run leaves: ``invoicectl scan`` of an outbox from ``outbox.py`` (about 10 KB an
invoice), then, in one process and without HTTP, each invoice's key claimed, its attempt
written before the (imagined) request and answered ``Accepted`` after it, by the lifecycle's
own ``claim_key`` / ``begin_attempt`` / ``record_answer``, with the body hash the sender
would compute. Then, each in its own process (``/usr/bin/time``-style RSS from
``resource.getrusage(RUSAGE_CHILDREN)``): ``verify``, ``verify --read-data-subset 10%``,
``export`` to an empty directory, ``verify-export``.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from outbox import write_outbox  # noqa: E402


def build(work: Path, count: int) -> Path:
    from invoicectl.goroute.client import build_send_body
    from invoicectl.goroute.outcomes import Accepted
    from invoicectl.journal import Journal
    from invoicectl.lifecycle.sending import begin_attempt, claim_key, record_answer
    from invoicectl.ubl.encoding import document_text

    outbox = work / "outbox"
    write_outbox(outbox, count)
    journal_path = work / "journal.db"
    timed(
        "scan (build)",
        [sys.executable, "-m", "invoicectl", "scan", str(outbox), "--journal", str(journal_path)],
    )
    started = time.perf_counter()
    with Journal(journal_path) as journal:
        run_id = journal.begin_run("send", {"benchmark": True})
        for invoice_id in journal.never_sent():
            item = claim_key(journal, invoice_id, replay=False)
            body = build_send_body(
                document_text(journal.content(item.sha256)),
                item.receiver_scheme,
                item.receiver_id,
                {"invoice_id": invoice_id, "sha256": item.sha256},
            )
            attempt = begin_attempt(journal, run_id, item, hashlib.sha256(body).hexdigest())
            record_answer(
                journal,
                attempt,
                item,
                Accepted(http_status=202, duration=0.01, transaction_id=f"tx-{invoice_id}"),
            )
        journal.finish_run(run_id, 0, {})
    print(f"send (build, in-process): {time.perf_counter() - started:.1f} s")
    return journal_path


# Runs one command and reports its own peak RSS and CPU (a fresh parent for each, so the
# figure is that command's alone).
_MEASURE = (
    "import resource, subprocess, sys\n"
    "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
    "usage = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "last = (done.stdout.strip().splitlines() or [''])[-1][:110]\n"
    "print(usage.ru_maxrss, usage.ru_utime + usage.ru_stime, done.returncode, last)\n"
)


def timed(label: str, command: list[str]) -> None:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, *command], capture_output=True, text=True, check=True
    )
    elapsed = time.perf_counter() - started
    rss, cpu, code, last = done.stdout.strip().split(" ", 3)
    print(
        f"{label}: {elapsed:.2f} s wall, {float(cpu):.2f} s CPU,"
        f" peak RSS {int(rss) / 1024:.0f} MB, exit {code}: {last}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="audit-bench-"))
    journal = build(work, args.count)
    print(f"journal: {journal.stat().st_size / 1e6:.0f} MB")
    cli = [sys.executable, "-m", "invoicectl"]
    timed("verify", [*cli, "verify", "--journal", str(journal)])
    timed(
        "verify --read-data-subset 10%",
        [*cli, "verify", "--journal", str(journal), "--read-data-subset", "10%"],
    )
    timed("export", [*cli, "export", str(work / "export"), "--journal", str(journal)])
    timed("verify-export", [*cli, "verify-export", str(work / "export")])


if __name__ == "__main__":
    main()

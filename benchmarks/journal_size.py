"""What a cron run and an operator's look cost as the journal grows: 10k, 100k, 1M invoices.

    .venv/bin/python benchmarks/journal_size.py [--sizes 10000,100000,1000000] [--rounds 3]
                                               [--work DIR] [--keep]

For each size it builds a journal of that many invoices, every one sent and delivered, then
times, as subprocesses of the real CLI against the emulator (``invoicectl sandbox`` on
loopback, no latency, no limit):

    send        ``send`` of 10 new files (a new outbox each round)
    reconcile   ``reconcile`` with 10 invoices to look up (the 10 just sent, delivered by then)
    status      ``status --limit 0``: the counts and the exit code
    json        ``status --format json`` to a file (every invoice)
    show        ``show ID`` of an invoice in the middle of the journal
    by hand     the same rows as ``json`` written by a plain ``sqlite3`` + ``json`` script

and prints each command's seconds (median of ``--rounds``) and peak RSS at each size, then the
largest/smallest ratios side by side, and ``json`` / ``by hand``. Targets (issue 13): every
ratio at most 1.3, except ``json``, which must stay under 100 MB RSS at 1M and within 2x of
writing the same rows by hand.

How a journal is built, fast and through the journal's own write paths: 1,000 files from
``outbox.py`` go through one real scan (``scan_directory``); each is then marked sent (its
run, its attempt begun and finished, the invoice saved as accepted and delivered); the rest
are clones of those, in transactions of 20,000: each clone's bytes are its template's with
the invoice ID replaced (so every clone has content, a sha256 and a stored copy of its own),
stored with ``store_found`` and inserted with ``insert_invoice``, its attempt with
``begin_attempt``/``finish_attempt`` (with the sha256 of the body a send would make, so that
``verify`` finds the journal whole), one run per 100 invoices. Building 1M takes a few
minutes and about 8 GB of disk (each invoice keeps a copy of its exact bytes).

Run it with another checkout's invoicectl first on ``PYTHONPATH`` (and from that directory)
to measure that one: the journal is built and the CLI run with whatever ``invoicectl``
imports. Lines ``sizes:``/``row:`` at the end are for comparing two runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from hashlib import sha256
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).parent))
from outbox import write_outbox  # noqa: E402

from invoicectl.goroute.client import build_send_body  # noqa: E402
from invoicectl.journal import Journal  # noqa: E402
from invoicectl.journal.audit import receiver_of  # noqa: E402
from invoicectl.journal.packing import pack  # noqa: E402
from invoicectl.journal.records import AttemptAnswer, Invoice, InvoiceState  # noqa: E402
from invoicectl.scan.ingest import scan_directory  # noqa: E402
from invoicectl.ubl.encoding import document_text  # noqa: E402

TEMPLATES = 1000
PER_TRANSACTION = 20_000
PER_RUN = 100
COMMANDS = ("send", "reconcile", "status", "json", "show")


class Clone(NamedTuple):
    """A ``FoundFile`` for ``store_found``: a clone's bytes and revision, no stat."""

    path: str
    name: str
    sha256: str
    size: int
    invoice_id: str
    facts_json: str
    columns: None
    stored: bytes
    codec: str | None
    reason: None
    stat: None


@contextmanager
def emulator() -> Iterator[tuple[str, str]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "invoicectl", "sandbox", "--port", "0", "--tier", "enterprise"]
        + ["--rate", "100000000", "--concurrency", "1000"],
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


def body_sha256(data: bytes, invoice_id: str, facts: dict[str, Any]) -> str:
    """The sha256 of the body a send of ``data`` makes: what ``verify`` rebuilds and checks."""
    receiver = receiver_of(json.dumps(facts))
    assert receiver is not None, invoice_id
    metadata = {"invoice_id": invoice_id, "sha256": sha256(data).hexdigest()}
    return sha256(build_send_body(document_text(data), *receiver, metadata)).hexdigest()


def mark_sent(journal: Journal, invoice: Invoice, run_id: int, at: str, body: str) -> Invoice:
    """What a send's 202 of the body whose sha256 is ``body`` leaves: an attempt begun and
    finished; the invoice accepted and, after a reconcile, delivered."""
    key = f"invoice-{invoice.invoice_id}"
    txn = "txn-" + sha256(invoice.invoice_id.encode()).hexdigest()[:24]
    attempt = journal.begin_attempt(
        run_id, invoice.invoice_id, invoice.current_sha256, key, body, at
    )
    journal.finish_attempt(
        attempt, AttemptAnswer("accepted", http_status=202, transaction_id=txn, duration=0.05)
    )
    return replace(
        invoice,
        state=InvoiceState.accepted,
        idempotency_key=key,
        key_sha256=invoice.current_sha256,
        key_first_used_at=at,
        transaction_id=txn,
        remote_status="delivered",
        remote_checked_at=at,
        accepted_at=at,
        updated_at=at,
    )


def build(path: Path, size: int, work: Path, base_url: str) -> float:
    """A journal of ``size`` invoices at ``path``, bound to ``base_url``; seconds taken."""
    started = time.monotonic()
    outbox = work / "templates"
    write_outbox(outbox, min(TEMPLATES, size), prefix="TPL")
    with Journal(path) as journal:
        scan_directory(journal, outbox)
        journal.bind_base_url(base_url)
        templates = journal.invoices()
        facts = {t.invoice_id: journal.facts(t.invoice_id, t.current_sha256) for t in templates}
        data = {t.invoice_id: (outbox / f"{t.invoice_id}.xml").read_bytes() for t in templates}
        # Sent two days ago: the rate limiter counts the last minute's requests, and a key's
        # 24-hour window has closed, as for nearly every invoice in a journal of years.
        at = (journal.clock() - timedelta(days=2)).isoformat()
        run_id = journal.begin_run("send", {}, base_url=base_url)
        with journal.bulk_writes(), journal.transaction():
            for template in templates:
                body = body_sha256(
                    data[template.invoice_id], template.invoice_id, facts[template.invoice_id]
                )
                journal.save(mark_sent(journal, template, run_id, at, body), was=template)
        journal.begin_scan()
        made = len(templates)
        while made < size:
            with journal.bulk_writes(), journal.transaction():
                made = _clone_batch(journal, templates, facts, data, made, size, base_url, at)
                journal.begin_scan()  # store_found's rows of temp.scan: not a scan's
            print(f"  built {made:,} of {size:,} invoices", file=sys.stderr, flush=True)
    with Journal(path):  # any migration of a freshly built journal, before timing
        pass
    return time.monotonic() - started


def _clone_batch(
    journal: Journal,
    templates: list[Invoice],
    facts: dict[str, dict[str, Any]],
    data: dict[str, bytes],
    made: int,
    size: int,
    base_url: str,
    at: str,
) -> int:
    end = min(size, made + PER_TRANSACTION)
    found: list[Clone] = []
    invoices: list[tuple[Invoice, str]] = []
    for number in range(made, end):
        template = templates[number % len(templates)]
        invoice_id = f"HIST-{number:07d}"
        body = data[template.invoice_id].replace(
            f"<cbc:ID>{template.invoice_id}</cbc:ID>".encode(),
            f"<cbc:ID>{invoice_id}</cbc:ID>".encode(),
            1,
        )
        content = sha256(body).hexdigest()
        codec, stored = pack(body)
        source = f"/srv/outbox/{invoice_id}.xml"
        record = {**facts[template.invoice_id], "invoice_id": invoice_id}
        found.append(
            Clone(
                source,
                f"{invoice_id}.xml",
                content,
                len(body),
                invoice_id,
                json.dumps(record),
                None,
                stored,
                codec,
                None,
                None,
            )
        )
        clone = replace(template, invoice_id=invoice_id, current_sha256=content, source_path=source)
        invoices.append((clone, body_sha256(body, invoice_id, record)))
    journal.store_found(found, at)
    run_id = 0
    for number, (invoice, body) in enumerate(invoices, start=made):
        if number % PER_RUN == 0 or not run_id:
            run_id = journal.begin_run("send", {}, base_url=base_url)
        journal.insert_invoice(mark_sent(journal, invoice, run_id, at, body))
    return end


class Timed(NamedTuple):
    seconds: float
    rss_mb: float
    stdout: str


def timed(command: list[str], env: dict[str, str], stdout: Path | None = None) -> Timed:
    """One subprocess: its wall time and its own peak RSS.

    The RSS comes from GNU time (a process of 2 MB): a child's ``ru_maxrss`` on Linux
    starts from its parent's RSS at the fork, which here would be this script's."""
    rss_file = Path(tempfile.mkstemp(prefix="rss-")[1])
    out = open(stdout, "wb") if stdout else subprocess.PIPE  # noqa: SIM115
    try:
        started = time.perf_counter()
        result = subprocess.run(
            ["/usr/bin/time", "-f", "%M", "-o", str(rss_file), *command],
            env=env,
            stdout=out,
            stderr=subprocess.PIPE,
        )
        seconds = time.perf_counter() - started
        rss_kb = int(rss_file.read_text().split()[-1])
    finally:
        rss_file.unlink()
        if stdout:
            out.close()  # type: ignore[union-attr]
    captured = result.stdout or b""
    if result.returncode not in (0, 3, 4, 75):  # the exit codes of a run that did its work
        raise SystemExit(
            f"{command} exited {result.returncode}: {(captured + result.stderr).decode()[-2000:]}"
        )
    return Timed(seconds, rss_kb / 1024, captured.decode())


BY_HAND = """
import json, sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
out = open(sys.argv[2], "w")
columns = ("invoice_id", "document_type", "state", "reason", "current_sha256", "receiver_scheme",
    "receiver_id", "idempotency_key", "transaction_id", "existing_transaction_id",
    "remote_status", "issue_date", "currency", "payable_amount", "source_path", "updated_at",
    "hold", "hold_reason", "verdict")
rows = conn.execute(f"SELECT {', '.join(columns)} FROM invoices ORDER BY invoice_id")
out.write("[")
first = True
for row in rows:
    out.write("\\n" if first else ",\\n")
    out.write(json.dumps(dict(zip(columns, row)), ensure_ascii=False))
    first = False
out.write("\\n]\\n")
"""


def measure(size: int, work: Path, rounds: int, base_url: str, key: str) -> dict[str, Any]:
    path = work / f"journal-{size}.db"
    built = build(path, size, work / f"build-{size}", base_url)
    print(
        f"{size:,} invoices built in {built:.0f} s ({path.stat().st_size / 1e6:.0f} MB)", flush=True
    )
    env = {**os.environ, "GOROUTE_BASE_URL": base_url, "GOROUTE_API_KEY": key}
    cli = [sys.executable, "-m", "invoicectl"]
    journal = ["--journal", str(path)]
    fast = ["--rate", "100000", "--concurrency", "50"]
    samples: dict[str, list[Timed]] = {name: [] for name in (*COMMANDS, "by hand")}
    # An invoicectl from before --limit lists every invoice after the counts: that is its
    # "status" (piped).
    helped = subprocess.run([*cli, "status", "--help"], capture_output=True, text=True, env=env)
    counts_only = ["--limit", "0"] if "--limit" in helped.stdout else []
    for round_number in range(rounds):
        outbox = work / f"new-{size}-{round_number}"
        # One emulator serves every size: each size's new invoices need IDs of their own.
        write_outbox(outbox, 10, seed=round_number + 7, prefix=f"NEW{size}x{round_number}")
        sent = timed([*cli, "send", str(outbox), *journal, *fast, "--json"], env)
        sent_at = time.monotonic()
        summary = json.loads(sent.stdout)
        assert summary["counts"].get("accepted") == 10, summary["counts"]
        samples["send"].append(sent)
        samples["status"].append(timed([*cli, "status", *counts_only, *journal], env))
        export = work / "status.json"
        samples["json"].append(timed([*cli, "status", "--format", "json", *journal], env, export))
        by_hand = work / "by-hand.json"
        samples["by hand"].append(
            timed([sys.executable, "-c", BY_HAND, str(path), str(by_hand)], env)
        )
        if round_number == 0:
            exported = json.loads(export.read_text())
            assert len(exported) == size + 10 * (round_number + 1), len(exported)
            del exported
        middle = f"HIST-{size // 2:07d}" if size > TEMPLATES else "TPL-000000"
        samples["show"].append(timed([*cli, "show", middle, *journal], env))
        # The emulator delivers a transaction 6 s after it is made: then reconcile finds the
        # 10 delivered (from one page of the transactions list, or 10 GETs), records them,
        # and the next round has only its own 10 to look up.
        time.sleep(max(0.0, sent_at + 6.5 - time.monotonic()))
        looked = timed([*cli, "reconcile", *journal, *fast, "--format", "json"], env)
        requests = json.loads(looked.stdout)["requests"]
        assert 1 <= requests <= 10, f"reconcile made {requests} requests for 10 invoices"
        samples["reconcile"].append(looked)
    figures = {
        name: (
            statistics.median(t.seconds for t in timings),
            max(t.rss_mb for t in timings),
        )
        for name, timings in samples.items()
    }
    shutil.rmtree(work / f"build-{size}", ignore_errors=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", type=Path, default=None, help="keep journals here")
    parser.add_argument("--keep", action="store_true", help="leave the journals behind")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    work = args.work or Path(tempfile.mkdtemp(prefix="invoicectl-journal-size-"))
    work.mkdir(parents=True, exist_ok=True)
    results: dict[int, dict[str, tuple[float, float]]] = {}
    try:
        with emulator() as (base_url, key):
            for size in sizes:
                results[size] = measure(size, work, args.rounds, base_url, key)
                if not args.keep:
                    for leftover in work.glob(f"journal-{size}.db*"):
                        leftover.unlink()
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    report(results)


def report(results: dict[int, dict[str, tuple[float, float]]]) -> None:
    sizes = sorted(results)
    small, large = sizes[0], sizes[-1]
    head = "".join(f"{f'{size:,}':>20}" for size in sizes)
    print(f"\n{'command':<11}{head}{f'{large:,}/{small:,}':>14}")
    for name in (*COMMANDS, "by hand"):
        cells = "".join(
            f"{results[size][name][0]:>9.2f} s {results[size][name][1]:>5.0f} MB" for size in sizes
        )
        ratio = results[large][name][0] / results[small][name][0]
        print(f"{name:<11}{cells}{ratio:>13.2f}x")
    print(
        "json / by hand: "
        + ", ".join(
            f"{size:,}: {results[size]['json'][0] / results[size]['by hand'][0]:.2f}x"
            for size in sizes
        )
    )
    print("sizes: " + json.dumps(sizes))
    for name in (*COMMANDS, "by hand"):
        print("row: " + json.dumps([name, [results[size][name] for size in sizes]]))


if __name__ == "__main__":
    main()

"""What reconcile shows while it looks things up: a bar on a terminal, a few plain lines in a
log (bounded however many invoices), a line when a long wait starts. Real rich, a real
reconcile against the emulator; no timing targets."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import pytest
from reconcile_staging import run_reconcile, sent
from rich.console import Console
from ublfactory import write_invoice

from invoicectl.goroute.limiter import Wait
from invoicectl.journal import Journal
from invoicectl.reconcile.progress import LookupProgress
from invoicectl.render.reconcile_progress import ReconcileProgress
from invoicectl.sandbox import Sandbox, SandboxConfig
from invoicectl.scan.ingest import scan_directory

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
RECEIVER = "9915:phase4-test-receiver"


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    with Journal(tmp_path / "journal.db") as opened:
        yield opened


def stage(journal: Journal, outbox: Path, sandbox: Sandbox, accepted: int, reused: int) -> None:
    """``accepted`` invoices just accepted (their delivery on its way: the list answers them a
    page at a time) and ``reused`` 422s naming their transaction (a GET each)."""
    ids = [f"INV-{n:05d}" for n in range(accepted + reused)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id, receiver=RECEIVER)
    scan_directory(journal, outbox, workers=1)
    for n, invoice_id in enumerate(ids):
        sha256 = journal.invoice(invoice_id).current_sha256  # type: ignore[union-attr]
        txn = sandbox.add_transaction(
            invoice_id, receiver=RECEIVER, status="sending", metadata={"sha256": sha256}
        ).id
        if n < accepted:
            sent(journal, invoice_id, "accepted", http_status=202, outcome="accepted",
                 transaction_id=txn)  # fmt: skip
        else:
            sent(journal, invoice_id, "key_reused", http_status=422, outcome="key_reused",
                 existing_transaction_id=txn)  # fmt: skip


@pytest.mark.slow
def test_a_large_reconcile_writes_a_few_progress_lines_not_one_per_invoice(
    journal: Journal, outbox: Path
) -> None:
    sandbox = Sandbox(SandboxConfig(rate_per_minute=1_000_000, max_concurrent=100, seed=7))
    stage(journal, outbox, sandbox, accepted=300, reused=60)
    lines: list[str] = []
    progress = ReconcileProgress(lines.append, every=50, seconds=10.0)

    started = time.monotonic()
    report = run_reconcile(journal, sandbox.transport(), on_progress=progress.looked)
    elapsed = time.monotonic() - started

    assert len(report.cases) == 360
    assert report.requests >= 60  # a GET each for the 422s, pages for the rest
    assert lines[-1] == f"reconcile: checked 360 of 360 invoices; {report.requests:,} requests"
    # One every 50 invoices or every 10 s, whichever comes first, and the last one: a
    # handful for 360 invoices and 60-odd requests, not one per invoice or per request.
    assert len(lines) <= 360 // 50 + 1 + int(elapsed / 10) + 1, lines
    checked = [int(re.search(r"checked ([\d,]+)", line)[1].replace(",", "")) for line in lines]  # type: ignore[index]
    # A count repeats only in a line that says requests went on (10 s apart) or the last one.
    assert checked == sorted(checked)
    assert len(checked) - len(set(checked)) <= 1 + int(elapsed / 10), lines


def test_the_bar_shows_invoices_checked_requests_and_the_wait() -> None:
    out = StringIO()
    console = Console(file=out, force_terminal=True, width=160, markup=False)
    progress = ReconcileProgress(lambda line: pytest.fail(line), console=console)

    progress.looked(LookupProgress(checked=30, total=100, requests=2))
    progress.waited(Wait("retry_after", 30.0))
    assert progress._progress is not None
    progress._progress.refresh()
    drawn = ANSI.sub("", out.getvalue())
    progress.finished()

    assert "30/100" in drawn
    assert "2 requests" in drawn
    assert "waiting 30 s (Retry-After)" in drawn


def test_a_long_wait_gets_one_plain_line_and_a_short_one_none() -> None:
    lines: list[str] = []
    progress = ReconcileProgress(lines.append, rate_per_minute=100)

    progress.waited(Wait("rate", 0.6))  # its pace at 100/min
    progress.waited(Wait("retry_after", 30.0))
    progress.waited(Wait("retry_after", 29.5))  # another 429 of the same hold

    assert lines == [
        "reconcile: waiting 30 s (Retry-After from the API: it answered 429, too many requests)"
    ]


@pytest.mark.parametrize("quiet", [False, True])
def test_reconcile_progress_says_nothing_under_quiet(
    quiet: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from invoicectl.cli.send_lines import reconcile_progress
    from invoicectl.settings import resolve

    settings = resolve(journal=tmp_path / "journal.db", sandbox=True, need_key=False)
    with reconcile_progress(settings, quiet=quiet) as shown:
        shown.waited(Wait("retry_after", 30.0))
        for checked in range(0, 1001, 50):
            shown.looked(LookupProgress(checked=checked, total=1000, requests=checked // 100))

    said = capsys.readouterr().err
    if quiet:
        assert said == ""
    else:  # not a terminal: the wait's line and a few counts
        assert "waiting 30 s" in said and "checked 1,000 of 1,000 invoices" in said


def test_requests_after_every_invoice_is_checked_still_get_a_line_and_the_last_count() -> None:
    """The list answers 1,500 invoices in 15 pages; the GETs that confirm its failed rows come
    after "1,500 of 1,500": a log that then went silent for minutes would look hung."""
    now = [0.0]
    lines: list[str] = []
    progress = ReconcileProgress(lines.append, every=250, seconds=10.0, clock=lambda: now[0])
    for page in range(1, 16):
        now[0] += 1.0
        progress.looked(LookupProgress(checked=100 * page, total=1500, requests=page))
    assert lines[-1] == "reconcile: checked 1,500 of 1,500 invoices; 15 requests"
    told = len(lines)
    for request in range(16, 26):  # a GET every 2 s, no invoice newly checked
        now[0] += 2.0
        progress.looked(LookupProgress(checked=1500, total=1500, requests=request))
    assert len(lines) > told  # alive: at most every 10 s while requests go on
    assert len(lines) <= told + 2
    progress.finished()
    assert lines[-1] == "reconcile: checked 1,500 of 1,500 invoices; 25 requests"

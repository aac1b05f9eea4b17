"""What send shows while it works: the bar's fields on a terminal, the wait lines in a log.

Real rich (a Console on a StringIO, forced to be a terminal) and a real send over loopback
HTTP to the emulator; no timing targets.
"""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path

from rich.console import Console
from sendkit import FAST_RETRY, emulator, settings_for
from ublfactory import write_invoice

from invoicectl.goroute.limiter import Wait
from invoicectl.journal.records import InvoiceState
from invoicectl.render.send import SendOutput
from invoicectl.sandbox import BackgroundServer
from invoicectl.scan.ingest import scanning
from invoicectl.send import runner
from invoicectl.send.options import SendOptions
from invoicectl.send.summary import InvoiceResult, SendSummary

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def terminal() -> tuple[Console, StringIO]:
    out = StringIO()
    return Console(file=out, force_terminal=True, width=200, markup=False), out


def result(invoice_id: str, state: InvoiceState) -> InvoiceResult:
    return InvoiceResult(invoice_id=invoice_id, state=state, key=f"invoice-{invoice_id}")


def test_the_bar_shows_the_counts_the_wait_and_an_eta_from_the_rate_limit():
    console, out = terminal()
    output = SendOutput(console, interactive=True, quiet=False, batch_size=10, rate_per_minute=60)
    summary = SendSummary(run_id=1, planned=10)
    output.started(summary)
    for n in range(3):
        summary.results.append(result(f"A-{n}", InvoiceState.accepted))
    summary.results.append(result("R-1", InvoiceState.rejected))
    summary.retrying.add("T-1")
    output.progressed(summary.results[-1], summary)
    output.waited(Wait("retry_after", 30.0))
    assert output._progress is not None
    output._progress.refresh()
    drawn = ANSI.sub("", out.getvalue())

    assert "waiting 30 s (Retry-After)" in drawn
    assert "4/10" in drawn
    assert "accepted 3 · retrying 1 · failed 1" in drawn
    # 6 left at the limit's 60 a minute (1 s each: faster than anything observed yet), plus
    # what is left of the 30 s hold: about 36 s, whatever the last few seconds did.
    assert re.search(r"ETA 0:00:3[56]", drawn), drawn

    output.finished(summary)


def test_the_bar_says_when_it_waits_on_the_rate_limit_and_not_for_its_pacing():
    console, out = terminal()
    output = SendOutput(console, interactive=True, quiet=False, batch_size=10, rate_per_minute=100)
    summary = SendSummary(run_id=1, planned=5)
    output.started(summary)
    assert output._progress is not None
    output.waited(Wait("rate", 0.6))  # one start's slot at 100/min: just sending
    output._progress.refresh()
    assert "sending" in ANSI.sub("", out.getvalue())
    assert "waiting on the rate limit" not in ANSI.sub("", out.getvalue())
    output.waited(Wait("rate", 20.0))  # the last run's minute is still full
    output._progress.refresh()
    assert "waiting on the rate limit" in ANSI.sub("", out.getvalue())
    output.finished(summary)


def test_a_retry_after_wait_gets_a_plain_line_in_a_log(outbox: Path, tmp_path: Path):
    for n in range(3):
        write_invoice(outbox, f"INV-{n:02d}")
    # One request at a time on the server: the client's others get 429 with Retry-After: 1.
    sandbox = emulator(max_concurrent=1, latency_ms=100)
    out = StringIO()
    console = Console(file=out, force_terminal=False, soft_wrap=True, markup=False)
    # Waits of half a second and more get a line here (five in a real run), so that the
    # emulator's one-second Retry-After is a long wait.
    output = SendOutput(
        console, interactive=False, quiet=False, batch_size=3, rate_per_minute=6000, long_wait=0.5
    )
    with BackgroundServer(sandbox) as server:
        _, summary = runner.send(
            settings_for(tmp_path / "journal.db", base_url=server.base_url),
            scanning(outbox),
            SendOptions(rate_per_minute=6000, concurrency=3, policy=FAST_RETRY, outbox=outbox),
            on_start=output.started,
            on_progress=output.progressed,
            on_wait=output.waited,
        )
    output.finished(summary)
    lines = out.getvalue().splitlines()

    assert summary.counts() == {"accepted": 3}
    assert summary.rate_limited_answers > 0
    waits = [line for line in lines if line.startswith("waiting ")]
    assert waits, lines
    assert all(re.fullmatch(r"waiting \d+ s \(Retry-After from the API.*\)", w) for w in waits)
    # Holds that several 429s extend together are told once, not once per 429.
    assert len(waits) <= summary.rate_limited_answers
    assert all("\x1b" not in line for line in lines)  # no bar, no control codes in a log

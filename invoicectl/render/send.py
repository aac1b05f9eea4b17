"""What ``invoicectl send`` shows while it works and when it ends.

On a terminal: a progress bar (sent / total; accepted, retrying, failed; what the run waits
for; rate, ETA: ``render.send_bar``) and a summary table. Not on a terminal (cron): one plain
line per batch, one line when a wait of more than ``PLAIN_WAIT_SHOWN`` seconds starts (so a
log explains its gap), and one summary line. ``--json``: nothing while it
works, one JSON document at the end. Data goes to stdout, diagnostics to stderr.
"""

from __future__ import annotations

from collections import Counter
from itertools import groupby
from typing import TYPE_CHECKING

from invoicectl.journal.records import InvoiceState
from invoicectl.loglines import tag
from invoicectl.render.status import print_scan_report
from invoicectl.render.waits import PLAIN_WAIT_SHOWN, WaitLines
from invoicectl.scan.report import ScanReport
from invoicectl.send.summary import LOCK_LOST, DryRun, InvoiceResult, SendSummary
from invoicectl.text import first_few, one_line

if TYPE_CHECKING:  # the bar and the table are drawn on a terminal only: imported there
    from rich.console import Console
    from rich.progress import Progress, TaskID
    from rich.table import Table

    from invoicectl.goroute.limiter import Wait
    from invoicectl.render.send_bar import BarState


class SendOutput:
    def __init__(
        self,
        console: Console,
        *,
        interactive: bool,
        quiet: bool,
        batch_size: int,
        rate_per_minute: int = 100,
        long_wait: float = PLAIN_WAIT_SHOWN,
    ):
        self.console = console
        self.rate_per_minute = rate_per_minute
        self._bar: BarState | None = None
        self._wait_lines = WaitLines(rate_per_minute, long_wait)
        self.interactive = interactive
        self.quiet = quiet
        self.batch_size = max(1, batch_size)
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._batch: Counter[str] = Counter()
        self._batches = 0

    def scanned(self, report: ScanReport) -> None:
        if not self.quiet:
            print_scan_report(self.console, report)

    def started(self, summary: SendSummary) -> None:
        if self.quiet:
            return
        held = f", {len(summary.held)} held for reconcile" if summary.held else ""
        tag("send.start", run_id=summary.run_id, planned=summary.planned, replays=summary.replays)
        self.console.print(
            f"sending {summary.planned} invoices ({summary.replays} replays{held})",
            highlight=False,
        )
        if self.interactive and summary.planned:
            from invoicectl.render.send_bar import BarState, send_bar

            self._bar = BarState(summary, self.rate_per_minute)
            self._progress = send_bar(self.console, self._bar)
            self._progress.start()
            self._task = self._progress.add_task("send", total=summary.planned)

    def waited(self, wait: Wait) -> None:
        """A wait is about to start (``goroute.limiter.Wait``): the bar says so; without a terminal,
        a long one gets a line, once (a hold that several 429s extend is told again only
        when it ends well after the one told)."""
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.waiting(wait)
            return
        line = None if self.interactive else self._wait_lines.line(wait)
        if line is not None:
            self.console.print(line, highlight=False)

    def progressed(self, result: InvoiceResult, summary: SendSummary) -> None:
        if self.quiet:
            return
        done = len(summary.results)
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=done)
            return
        self._batch[result.state] += 1
        if sum(self._batch.values()) >= self.batch_size or done == summary.planned:
            self._batches += 1
            counts = ", ".join(f"{state} {n}" for state, n in sorted(self._batch.items()))
            tag(
                "send.batch",
                run_id=summary.run_id,
                batch=self._batches,
                done=done,
                planned=summary.planned,
                counts=dict(self._batch),
            )
            self.console.print(
                f"batch {self._batches}: {done}/{summary.planned} done ({counts})",
                highlight=False,
            )
            self._batch.clear()

    def finished(self, summary: SendSummary) -> None:
        if self._progress is not None:
            self._progress.stop()
        if self.quiet:
            return
        if self.interactive:
            self.console.print(summary_table(summary))
        tag(
            "send.summary",
            run_id=summary.run_id,
            exit_code=int(summary.exit_code),
            counts=summary.counts(),
            not_started=summary.unsent,
            requests=summary.requests,
        )
        self.console.print(summary_line(summary), highlight=False)

    def dry_run(self, report: ScanReport, plan: DryRun) -> None:
        print_scan_report(self.console, report)
        skipped = ", ".join(f"{state} {n}" for state, n in sorted(plan.skipped.items()))
        self.console.print(
            f"dry run: would send {len(plan.would_send)}, replay {len(plan.would_replay)} "
            f"(same key, same bytes), hold {len(plan.held)} for reconcile; "
            + (f"{plan.on_hold} on hold; " if plan.on_hold else "")
            + f"skipped: {skipped or 'none'}; about {plan.estimated_seconds:.0f} s at "
            f"{plan.rate_per_minute}/min",
            highlight=False,
        )
        if plan.would_send:
            shown = first_few(plan.would_send, 10)
            self.console.print(f"  order ({plan.order}): {shown}", highlight=False)
        for invoice_id, due in plan.late:
            self.console.print(
                f"  late     {one_line(invoice_id)}: due {due}, would go out after it at this rate",
                highlight=False,
            )


def summary_line(summary: SendSummary) -> str:
    """One line for the whole run; an interrupted run's ends with the command that goes on."""
    counts = summary.counts()
    # What went out without a final answer is no outcome yet: the next run replays it.
    counts.pop(InvoiceState.unknown, None)
    shown = ", ".join(f"{state} {n}" for state, n in sorted(counts.items()))
    if summary.unanswered:
        shown += (", " if shown else "") + f"{summary.unanswered} {UNANSWERED}"
    timing = summary.to_dict()["timing"]
    latency = timing["request_latency"]
    to_accept = timing["ingest_to_accept"]
    parts = [
        f"run {summary.run_id}: {shown or 'nothing sent'}",
        f"{summary.unsent} not started" if summary.unsent else "",
        f"{len(summary.held)} held for reconcile" if summary.held else "",
        f"{len(summary.held_for_receiver)} held for their receiver"
        if summary.held_for_receiver
        else "",
        f"{summary.receiver_lookups} receiver lookups" if summary.receiver_lookups else "",
        f"{summary.receivers_unchecked} receivers unchecked (lookup failed; sent anyway)"
        if summary.receivers_unchecked
        else "",
        f"{len(summary.held_for_validation)} held as invalid (validation)"
        if summary.held_for_validation
        else "",
        f"{summary.validations} validations" if summary.validations else "",
        f"{len(summary.held_for_damage)} held: stored copy damaged "
        "(rescan the file or restore the journal)"
        if summary.held_for_damage
        else "",
        f"{len(summary.held_at_replay)} held: not the key or request that went out before "
        "(`invoicectl show ID` says why)"
        if summary.held_at_replay
        else "",
        f"{summary.unvalidated} unvalidated (validation failed; sent anyway)"
        if summary.unvalidated
        else "",
        f"stopped by {_stops(summary.stops)}" if summary.stops else "",
        f"{summary.requests} requests in {summary.elapsed:.1f} s",
        f"latency median {_s(latency['median'])} p95 {_s(latency['p95'])}",
        f"ingest-to-accept median {_s(to_accept['median'])} p95 {_s(to_accept['p95'])}",
        f"waited {summary.waited_for_rate:.1f} s on the rate limit, "
        f"{summary.waited_for_retry_after:.1f} s on Retry-After "
        f"({summary.rate_limited_answers} answers 429)",
        f"exit {int(summary.exit_code)}",
        _continue(summary),
    ]
    return "; ".join(part for part in parts if part)


# What the summary, the table and the stop line call an invoice left ``unknown`` by this run.
UNANSWERED = "unanswered, will be replayed"


def _stops(stops: tuple[str, ...]) -> str:
    """``deadline then SIGINT twice``: every reason, in order, repeats counted."""
    counted = [(stop, len(list(repeats))) for stop, repeats in groupby(stops)]
    return " then ".join(
        stop + {1: "", 2: " twice"}.get(count, f" {count} times") for stop, count in counted
    )


def _continue(summary: SendSummary) -> str:
    if summary.interrupted and summary.continue_with:
        return f"continue with: {summary.continue_with}"
    return ""


def stop_line(summary: SendSummary, *, deadline: float | None, outage_after: int) -> str | None:
    """The one stderr line that says what stopped an interrupted run (None if nothing did,
    or refused credentials did: the CLI reports those as an error)."""
    stops = summary.stops
    signals = summary.signals
    if signals:
        errors = ("credentials", "wrong_url")  # the CLI reports those as errors
        after = [stop for stop in stops[: stops.index(signals[0])] if stop not in errors]
        what = f"stopped by {signals[0]}" + (f" (after the {' and '.join(after)})" if after else "")
    elif "deadline" in stops:
        what = f"stopped at the deadline ({deadline or 0:g} s, scan included)"
    elif "outage" in stops:
        what = (
            f"GoRoute did not answer {outage_after} invoices in a row, even after retries "
            f"({summary.outage_reason}); stopped"
        )
    elif "rate_limit" in stops:
        what = "GoRoute kept answering 429 (rate limited) beyond --max-wait; stopped"
    elif "lock_lost" in stops:
        what = f"the journal's run lock file was {LOCK_LOST}; stopped taking work"
    else:
        return None
    parts = [f"invoicectl: {what}"]
    if summary.abandoned:
        if summary.abandoned_by == "deadline":
            by = "the deadline's grace ran out"
        elif summary.grace_ran_out:
            by = f"the grace after {summary.abandoned_by} ran out"
        else:
            by = f"a second {summary.abandoned_by}"
        parts.append(f"{summary.abandoned} requests in flight abandoned ({by})")
    if summary.unanswered:
        parts.append(f"{summary.unanswered} {UNANSWERED} under the same keys")
    parts.append("state saved")
    parts.append(_continue(summary))
    return "; ".join(part for part in parts if part)


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def summary_table(summary: SendSummary) -> Table:
    from rich.table import Table

    table = Table(title=f"run {summary.run_id}", title_justify="left")
    table.add_column("outcome")
    table.add_column("invoices", justify="right")
    for state, count in sorted(summary.counts().items()):
        if state != InvoiceState.unknown:
            table.add_row(state, str(count))
    if summary.unanswered:
        table.add_row(UNANSWERED, str(summary.unanswered))
    if summary.unsent:
        table.add_row("not started", str(summary.unsent))
    if summary.held:
        table.add_row("held for reconcile", str(len(summary.held)))
    return table

"""Metrics for a monitor, in the Prometheus text format, for node_exporter's textfile collector.

``send``, ``reconcile`` and ``status`` take ``--metrics-file PATH`` (or the config key
``metrics_file``): after the run, the journal's figures (invoices per state, the age of the
oldest work waiting, the last runs, closing key windows, delivery failures) and, for a send,
the run's own (requests by outcome, 429s, time waited, latency histograms) are written to PATH
through ``prometheus_client.write_to_textfile``: a temporary file beside it, then a rename, so
the collector never reads half a file. Each write has a registry of its own, never the
process-wide one. Every sample carries ``writer`` (the command that wrote the file) and
``profile`` (the profile it ran as, "" without one), so that one file per command and profile
can sit in the collector's directory without two files exposing the same series
(node_exporter refuses duplicates, and drops one file's samples).

prometheus_client is imported here only, and this module only when a metrics file is asked
for: ``status`` without one starts as fast as before. A file that cannot be written is one
line for stderr, never a changed exit code (``write``'s return value).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from invoicectl.journal.records import Hold, InvoiceState

if TYPE_CHECKING:
    from collections.abc import Callable

    from prometheus_client import CollectorRegistry, Gauge

    from invoicectl.journal.interface import JournalBackend
    from invoicectl.send.summary import SendSummary

# The commands whose runs the runs table records.
RUN_COMMANDS = ("send", "reconcile")
WAITING = (InvoiceState.pending,)
UNRESOLVED = (InvoiceState.unknown, InvoiceState.key_reused, InvoiceState.amended)
KEY_WINDOW = timedelta(hours=24)  # lifecycle.window's; a key's replays are safe inside it
CLOSING_WITHIN = timedelta(hours=2)
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# Every sample's labels: the command that wrote the file, and the profile it ran as.
LABELS = ("writer", "profile")
INGEST_BUCKETS = (1.0, 10.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 24 * 3600.0)


@dataclass(frozen=True)
class JournalFigures:
    """What the journal says now, as plain data (each from an index: journal/monitoring.py)."""

    states: Mapping[str, int]
    on_hold: int
    oldest_waiting_seconds: float  # 0 when nothing waits
    oldest_unresolved_seconds: float
    keys_closing: int
    delivery_failures: int
    last_run: Mapping[str, float]  # command -> unix time its last run started
    last_success: Mapping[str, float]  # command -> unix time its last exit-0 run finished


@dataclass(frozen=True)
class RunFigures:
    """One send run's own figures (``SendSummary``, and its attempts' outcomes)."""

    elapsed: float
    outcomes: Mapping[str, int] = field(default_factory=dict)
    rate_limited: int = 0
    waited_for_rate: float = 0.0
    waited_for_retry_after: float = 0.0
    request_latencies: tuple[float, ...] = ()
    ingest_to_accept: tuple[float, ...] = ()


def journal_figures(journal: JournalBackend, now: datetime) -> JournalFigures:
    oldest = journal.oldest_unfinished()

    def age(states: tuple[InvoiceState, ...]) -> float:
        found = [datetime.fromisoformat(oldest[state]) for state in states if state in oldest]
        return max(0.0, (now - min(found)).total_seconds()) if found else 0.0

    closing_after = (now - KEY_WINDOW).isoformat()
    closing_until = (now - KEY_WINDOW + CLOSING_WITHIN).isoformat()
    runs = journal.last_runs(RUN_COMMANDS)
    return JournalFigures(
        states={str(state): count for state, count in journal.state_counts().items()},
        on_hold=journal.hold_counts()[Hold.held],
        oldest_waiting_seconds=age(WAITING),
        oldest_unresolved_seconds=age(UNRESOLVED),
        keys_closing=journal.keys_first_used_between(closing_after, closing_until),
        delivery_failures=journal.delivery_failure_count(),
        last_run={
            command: datetime.fromisoformat(started).timestamp()
            for command, (started, _) in runs.items()
            if started is not None
        },
        last_success={
            command: datetime.fromisoformat(succeeded).timestamp()
            for command, (_, succeeded) in runs.items()
            if succeeded is not None
        },
    )


def send_figures(journal: JournalBackend, summary: SendSummary) -> RunFigures:
    return RunFigures(
        elapsed=summary.elapsed,
        outcomes=journal.run_outcomes(summary.run_id),
        rate_limited=summary.rate_limited_answers,
        waited_for_rate=summary.waited_for_rate,
        waited_for_retry_after=summary.waited_for_retry_after,
        request_latencies=tuple(summary.request_latencies),
        ingest_to_accept=tuple(summary.ingest_to_accept),
    )


def registry_of(
    writer: str,
    figures: JournalFigures | None,
    run: RunFigures | None,
    exit_code: int | None = None,
    profile: str | None = None,
) -> CollectorRegistry:
    """A registry of this write's own, holding every metric (README, "Metrics"): the run's
    exit code, the journal's figures unless it could not be read (None), and a send's own
    figures; each sample labelled with ``writer`` and ``profile`` ("" for none)."""
    from prometheus_client import CollectorRegistry, Gauge, disable_created_metrics

    # A ``_created`` series per histogram says when this process made it: noise in a file
    # that is rewritten by every run.
    disable_created_metrics()  # type: ignore[no-untyped-call]
    registry = CollectorRegistry(auto_describe=True)

    def gauge(name: str, doc: str, *names: str) -> Gauge:
        return Gauge(f"invoicectl_{name}", doc, (*LABELS, *names), registry=registry)

    labels = (writer, profile or "")
    if exit_code is not None:
        gauge("run_exit_code", "The run's exit code.").labels(*labels).set(exit_code)
    if figures is not None:
        _journal_metrics(gauge, labels, figures)
    if run is not None:
        _run_metrics(registry, labels, run)
    return registry


def _journal_metrics(
    gauge: Callable[..., Gauge], labels: tuple[str, str], figures: JournalFigures
) -> None:
    states = gauge("invoices", "Invoices in the journal per state.", "state")
    for state, count in figures.states.items():
        states.labels(*labels, state).set(count)
    gauge("invoices_on_hold", "Invoices held by a person or reconcile.").labels(*labels).set(
        figures.on_hold
    )
    gauge(
        "oldest_waiting_age_seconds",
        "Age of the oldest pending invoice (since its content was first seen); 0 when none.",
    ).labels(*labels).set(figures.oldest_waiting_seconds)
    gauge(
        "oldest_unresolved_age_seconds",
        "Age of the oldest unknown, key_reused or amended invoice; 0 when none.",
    ).labels(*labels).set(figures.oldest_unresolved_seconds)
    gauge(
        "keys_window_closing",
        "Unanswered sends whose key's 24-hour replay window closes within 2 hours.",
    ).labels(*labels).set(figures.keys_closing)
    gauge("delivery_failures", "Accepted invoices whose delivery GoRoute reported failed.").labels(
        *labels
    ).set(figures.delivery_failures)
    last = gauge("last_run_timestamp_seconds", "When the last run started.", "command")
    for command, when in figures.last_run.items():
        last.labels(*labels, command).set(when)
    good = gauge("last_success_timestamp_seconds", "When the last exit-0 run ended.", "command")
    for command, when in figures.last_success.items():
        good.labels(*labels, command).set(when)


def _run_metrics(registry: CollectorRegistry, labels: tuple[str, str], run: RunFigures) -> None:
    from prometheus_client import Gauge, Histogram

    def gauge(name: str, doc: str, *names: str) -> Gauge:
        return Gauge(f"invoicectl_run_{name}", doc, (*LABELS, *names), registry=registry)

    gauge("duration_seconds", "How long the run's sending took.").labels(*labels).set(run.elapsed)
    outcomes = gauge("requests", "The run's send requests per outcome.", "outcome")
    for outcome, count in run.outcomes.items():
        outcomes.labels(*labels, outcome).set(count)
    gauge("rate_limited_answers", "429 answers the run got.").labels(*labels).set(run.rate_limited)
    gauge("waited_rate_limit_seconds", "Time the run waited on its own rate limiter.").labels(
        *labels
    ).set(run.waited_for_rate)
    gauge("waited_retry_after_seconds", "Time the run waited out Retry-After.").labels(*labels).set(
        run.waited_for_retry_after
    )
    for name, doc, values, buckets in (
        ("request_latency_seconds", "Send request latency.", run.request_latencies,
         LATENCY_BUCKETS),
        ("ingest_to_accept_seconds", "From first seen to accepted, per invoice accepted.",
         run.ingest_to_accept, INGEST_BUCKETS),
    ):  # fmt: skip
        histogram = Histogram(
            f"invoicectl_run_{name}", doc, LABELS, buckets=buckets, registry=registry
        ).labels(*labels)
        for value in values:
            histogram.observe(value)


def write(path: Path, registry: CollectorRegistry) -> str | None:
    """Write ``registry`` to ``path`` atomically; the one line to say when that fails.

    Mode 0644 whatever the umask: readable by all (contrib's service has UMask=0077, and
    node_exporter runs as another user; metrics hold no secret), writable by none but its
    owner (under umask 000 it was 0666). The umask is 022 only for this write, so the
    temporary file is born 0644 and the rename never shows a file of another mode."""
    import os

    from prometheus_client import write_to_textfile

    from invoicectl.journal.sqlite_open import not_regular

    # The rename replaces what stands at the path: a link is followed to its file, and what
    # is no regular file (``/dev/null`` given to turn metrics off) is never replaced.
    from invoicectl.text import one_line

    shown = one_line(str(path))  # a line break in the path would start a line of its own
    try:
        path = path.resolve()
    except (OSError, RuntimeError):  # links that loop
        return f"invoicectl: cannot write the metrics file {shown}: its links loop"
    if kind := not_regular(path):
        return f"invoicectl: the metrics file {shown} is {kind}, not a file; nothing written"
    strict = os.umask(0o022)
    try:
        write_to_textfile(str(path), registry)
    except OSError as error:
        return f"invoicectl: cannot write the metrics file {shown}: {error.strerror or error}"
    except ValueError as error:  # a label the text format cannot hold (UnicodeEncodeError)
        return f"invoicectl: cannot write the metrics file {shown}: {one_line(str(error), 120)}"
    finally:
        os.umask(strict)
    return None

"""What the run commands tell a monitor after the run: the metrics file (``metrics``).

Kept apart from the commands so that each command adds two lines, and so that nothing of
prometheus_client is imported unless a metrics file is asked for.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from invoicectl.cli.consoles import say

if TYPE_CHECKING:
    from pathlib import Path

    from invoicectl.locations import Location
    from invoicectl.send.summary import SendSummary
    from invoicectl.settings import Settings


def write_metrics(settings: Settings, writer: str, summary: SendSummary | None = None) -> None:
    """The metrics file, when one is asked for; a failure is one line on stderr, and the
    run's exit code stays the run's."""
    if settings.metrics_file is None:
        return
    refused = write_after_run(settings.metrics_file, settings.journal, writer, summary)
    if refused is not None:
        say(refused)


def write_after_run(
    path: Path, journal_path: Location, writer: str, summary: SendSummary | None = None
) -> str | None:
    """After a run (or a status): the journal's figures, and a send's own, written to
    ``path``; None when written, else the one line to say on stderr. Never raises for a
    journal or a file it cannot read or write: the run's exit code is the run's."""
    import sqlite3

    from invoicectl import metrics
    from invoicectl.errors import InvoicectlError
    from invoicectl.journal import opened_journal

    try:
        with opened_journal(journal_path) as journal:
            figures = metrics.journal_figures(journal, journal.clock())
            run = None if summary is None else metrics.send_figures(journal, summary)
    except (InvoicectlError, sqlite3.Error, OSError) as error:
        return f"invoicectl: metrics not written to {path}: cannot read the journal ({error})"
    return metrics.write(path, metrics.registry_of(writer, figures, run))


class AfterRun:
    """What the run came to, when it came to an end of its own (a send's summary)."""

    summary: SendSummary | None = None


@contextmanager
def metrics_after(settings: Settings, writer: str) -> Iterator[AfterRun]:
    """The metrics file written when the run ends, however it ends (an error, a signal)."""
    after = AfterRun()
    try:
        yield after
    finally:
        write_metrics(settings, writer, after.summary)

"""What the run commands tell a monitor after the run: the metrics file (``metrics``).

Kept apart from the commands so that each command adds two lines, and so that nothing of
prometheus_client is imported unless a metrics file is asked for.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from invoicectl.cli.consoles import say
from invoicectl.cli.endings import at_end, begun
from invoicectl.text import one_line

if TYPE_CHECKING:
    from pathlib import Path

    from invoicectl.locations import Location
    from invoicectl.send.summary import SendSummary
    from invoicectl.settings import Settings


def write_run_metrics(
    path: Path,
    journal_path: Location,
    writer: str,
    summary: SendSummary | None = None,
    exit_code: int | None = None,
    *,
    profile: str | None = None,
) -> str | None:
    """After a run (or a status): its exit code, the journal's figures, and a send's own,
    written to ``path``; None when written, else the one line to say on stderr. Never raises
    for a journal or a file it cannot read or write: the run's exit code is the run's. A
    journal it cannot read leaves the exit code written all the same, so that the file never
    shows the last good run's. ``profile``: the one the command ran as, a label of every
    sample."""
    import sqlite3

    from invoicectl import metrics
    from invoicectl.errors import InvoicectlError
    from invoicectl.journal import opened_journal

    figures = run = None
    unreadable = None
    try:
        with opened_journal(journal_path) as journal:
            figures = metrics.journal_figures(journal, journal.clock())
            run = None if summary is None else metrics.send_figures(journal, summary)
    except (InvoicectlError, sqlite3.Error, OSError) as error:
        unreadable = f"cannot read the journal ({error})"
    refused = metrics.write(path, metrics.registry_of(writer, figures, run, exit_code, profile))
    if refused is not None:
        return refused
    if unreadable is not None:
        shown = one_line(str(path))
        return f"invoicectl: metrics written to {shown} without the journal's figures: {unreadable}"
    return None


class AfterRun:
    """What the run came to, when it came to an end of its own (a send's summary)."""

    summary: SendSummary | None = None


@contextmanager
def metrics_after(settings: Settings, writer: str) -> Iterator[AfterRun]:
    """The metrics file, written when the command has ended, however it ended (an error, a
    signal, the journal locked), with its exit code (``endings``)."""
    begun()  # what the group would write for a command that never got here is not written
    after = AfterRun()
    path = settings.metrics_file
    if path is not None:

        def write(exit_code: int) -> None:
            # The profile labels every sample: two profiles' files never expose one series.
            refused = write_run_metrics(
                path, settings.journal, writer, after.summary, exit_code, profile=settings.profile
            )
            if refused is not None:  # the path is the operator's: it may hold anything
                from invoicectl.known_keys import hide_keys  # every key, not only the run's

                say(hide_keys(settings.api_key.redact(refused) if settings.api_key else refused))

        at_end(write)
    yield after

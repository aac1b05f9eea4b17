"""Lines ``send`` and ``reconcile`` say besides their reports: at a first signal, the command
that goes on, reconcile's progress."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from invoicectl.cli.consoles import say, stderr_bar_console
from invoicectl.defaults import OUTAGE_AFTER
from invoicectl.locations import JournalURL, journal_location

if TYPE_CHECKING:
    from invoicectl.render.reconcile_progress import ReconcileProgress
    from invoicectl.send.summary import SendSummary
    from invoicectl.settings import Settings


def reconcile_progress(settings: Settings, *, quiet: bool) -> ReconcileProgress:
    """Reconcile's progress on stderr: a bar on a terminal, else plain lines through ``say``
    (stdout is the report's); nothing with ``--quiet``. A context manager: the bar goes when
    the lookups end."""
    from invoicectl.render.reconcile_progress import ReconcileProgress

    if quiet:
        return ReconcileProgress(lambda line: None, rate_per_minute=settings.rate_per_minute)
    return ReconcileProgress(
        say, console=stderr_bar_console(), rate_per_minute=settings.rate_per_minute
    )


def say_stopping(signal_name: str, in_flight: int) -> None:
    """At a first signal, at once: what is left, and how to stop sooner, in the words of
    what sent it (cron's or systemd's SIGTERM is no Ctrl-C; nothing in flight, nothing to
    abandon)."""
    line = f"invoicectl: {signal_name}: stopping: "
    if in_flight == 0:
        say(line + "nothing in flight")
        return
    sooner = "Ctrl-C again to abandon them"
    if signal_name != "SIGINT":
        sooner = f"a second {signal_name} abandons them"
    say(f"{line}{in_flight} in flight; {sooner}")


def continue_command(
    directory: Path,
    recursive: bool,
    journal: str | None,
    sandbox: bool,
    api_key_file: Path | None,
    profile: str | None = None,
) -> str:
    """The ``send`` that continues this one: the same outbox, profile, journal and key file."""
    import shlex

    words = ["invoicectl", "send", str(directory)]
    if profile is not None and not sandbox:
        words[1:1] = ["--profile", profile]
    if recursive:
        words.append("--recursive")
    if journal is not None:  # a PostgreSQL URL without its password, which libpq finds
        location = journal_location(journal)
        shown = location.without_password() if isinstance(location, JournalURL) else location
        words += ["--journal", str(shown)]
    if sandbox:
        words.append("--sandbox")
    if api_key_file is not None:
        words += ["--api-key-file", str(api_key_file)]
    return shlex.join(words)


def outage_after(summary: SendSummary) -> int:
    """For the line of an outage stop."""
    return OUTAGE_AFTER if "outage" in summary.stops else 0

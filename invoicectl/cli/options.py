"""Every option and argument more than one command takes, declared once as an ``Annotated`` alias.

``send`` and ``reconcile`` share the run options (journal, sandbox, API key file, tier, rate,
concurrency, retries, environment change); ``status`` and ``reconcile`` share ``--format``;
``scan`` and ``send`` share the outbox argument and ``--recursive``. Defaults shown in help
text come from ``invoicectl.settings``, which states each of them once.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from invoicectl.cli.numbers import number, whole
from invoicectl.defaults import DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_WAIT, DEFAULT_TIER, TIERS
from invoicectl.errors import UsageError

if TYPE_CHECKING:
    from invoicectl.locations import Location


class OutputFormat(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


class StatusFormat(StrEnum):
    """``status``'s: OutputFormat's, and JSON Lines for a journal too large for one array."""

    table = "table"
    json = "json"
    jsonl = "jsonl"
    csv = "csv"


# The tiers' names, from the one table of tiers.
Tier = StrEnum("Tier", {name: name for name in TIERS})  # type: ignore[misc]


def tier_help() -> str:
    """``standard = 100/min, 10 concurrent (the default); professional = ...``, from TIERS."""
    tiers = [
        f"{name} = {limits.rate_per_minute}/min, {limits.concurrency} concurrent"
        + (" (the default)" if name == DEFAULT_TIER else "")
        for name, limits in TIERS.items()
    ]
    return f"Account tier: {'; '.join(tiers)}."


def _outbox(value: str) -> Path:
    """DIRECTORY as given. ``""`` (``"$OUTBOX"`` in a crontab, the variable unset) is no
    directory: ``Path("")`` is the working directory, and its *.xml were sent."""
    if not str(value):
        raise typer.BadParameter("empty (an unset variable?); name the outbox directory")
    return Path(value)


OutboxArgument = Annotated[
    Path, typer.Argument(parser=_outbox, help="Directory of UBL *.xml files.")
]
RecursiveOption = Annotated[
    bool, typer.Option("--recursive", "-r", help="Descend into subdirectories.")
]
JournalOption = Annotated[
    str | None,
    typer.Option(
        "--journal",
        help="Journal file, or a postgresql:// URL. Default: $INVOICECTL_JOURNAL, else "
        "~/.local/state/invoicectl/journal.db.",
        show_default=False,
    ),
]
SandboxOption = Annotated[
    bool,
    typer.Option(
        "--sandbox",
        help="Use the built-in GoRoute emulator in this process, with a journal of its own "
        "(sandbox.db beside the default journal). No account, no network.",
    ),
]
FormatOption = Annotated[
    OutputFormat | None,
    typer.Option(
        "--format", help="table (the default), json (as --json) or csv.", show_default=False
    ),
]
ApiKeyFileOption = Annotated[
    Path | None,
    typer.Option(help="File holding the API key (mode 0600). Default: $GOROUTE_API_KEY."),
]
TierOption = Annotated[Tier | None, typer.Option(help=tier_help())]
RateOption = Annotated[
    int | None,
    typer.Option(click_type=whole(min=1), help="Requests per minute (overrides --tier)."),
]
ConcurrencyOption = Annotated[
    int | None,
    typer.Option(click_type=whole(min=1), help="Requests in flight at most (overrides --tier)."),
]
MaxAttemptsOption = Annotated[
    int | None,
    typer.Option(
        click_type=whole(min=1),
        help=f"Tries per request on 5xx/timeouts in one run. Default {DEFAULT_MAX_ATTEMPTS}.",
    ),
]
MaxWaitOption = Annotated[
    float | None,
    typer.Option(
        click_type=number(min=0),
        help=f"Longest Retry-After to wait out, seconds. Default {DEFAULT_MAX_WAIT:g}.",
    ),
]
# A plain flag, off unless given: a --no-... twin only widened every command's help.
AllowEnvironmentChangeOption = Annotated[
    bool,
    typer.Option(
        "--allow-environment-change", help="Allow this journal to be used with a new base URL."
    ),
]


def journal_path(journal: str | None, sandbox: bool = False) -> Location:
    """The journal a command that needs no API key opens: ``--journal``, else the settings'."""
    from invoicectl.settings import resolve

    return resolve(journal=journal, sandbox=sandbox, need_key=False).journal


def check_verdict(verdict: str) -> None:
    """A ``--verdict`` filter names one of reconcile's verdicts, or is a usage error."""
    from invoicectl.reconcile.verdicts import Verdict

    known = [str(known) for known in Verdict]
    if verdict not in known:
        raise UsageError(f"unknown verdict {verdict!r}; choose from {', '.join(known)}")


# Text, not a Path: typer would make "" the current directory; settings checks the text.
MetricsFileOption = Annotated[
    str | None,
    typer.Option(
        "--metrics-file",
        metavar="PATH",
        help="Write Prometheus metrics to PATH (atomically; for node_exporter's textfile "
        "collector, a *.prom file). Config key metrics_file.",
        show_default=False,
    ),
]
PingUrlOption = Annotated[
    str | None,
    typer.Option(
        "--ping-url",
        metavar="URL",
        help="Health-check URL (healthchecks.io style): URL/start at the start, URL/<exit "
        "code> at the end with the output's tail. A secret, never shown. Config key ping_url, "
        "or $INVOICECTL_PING_URL.",
        show_default=False,
    ),
]


# The output contract every command keeps (issue 12): ``--json`` gives one JSON document on
# stdout, errors included; ``--quiet`` only the errors and the data asked for.
JsonOption = Annotated[
    bool,
    typer.Option(
        "--json", help="One JSON document on stdout, errors too (the README's keys, stable)."
    ),
]
QuietOption = Annotated[
    bool,
    typer.Option(
        "--quiet",
        "-q",
        help="Print only errors and the data asked for (--json, --format); the exit code "
        "says the rest.",
    ),
]


_Format = TypeVar("_Format", OutputFormat, StatusFormat)


def chosen_format(output_format: _Format | None, as_json: bool, table: _Format) -> _Format:
    """The one format of a command that takes both ``--format`` and ``--json``: ``--json``
    is ``--format json``; both given and different is a usage error, said once."""
    if not as_json:
        return table if output_format is None else output_format
    wanted = type(table)("json")
    if output_format is not None and output_format != wanted:
        raise UsageError(
            f"--json and --format {output_format} ask for two outputs; give one of them"
        )
    return wanted

"""The command line: options in, one library call, rendered result out, an exit code.

No SQL and no HTTP here. Library errors (``errors.InvoicectlError``) reach the user at one
point, ``main``; ``INVOICECTL_DEBUG=1`` re-raises them with a traceback instead.
"""

from __future__ import annotations

import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import click
import typer
import typer.core
from rich.console import Console

from invoicectl import __version__
from invoicectl.errors import ExitCode, InvoicectlError, UsageError, worst

EXIT_CODES_HELP = """
Exit codes (the highest-ranked that applies):
0 done, nothing needs attention;
75 incomplete for a transient reason (rate limit, outage, deadline), the next run continues;
3 some invoices are invalid or rejected: a person must fix them;
4 some invoices need reconciliation (key_reused, unknown outside the 24 h window, amended);
6 another run holds the journal;
5 the API refused the credentials (401/403);
1 could not run (configuration, journal unreadable, bug);
2 usage error;
130 interrupted, state saved.
"""


class _Commands(typer.core.TyperGroup):
    """Turns library errors into a message on stderr and their exit code, in one place."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except InvoicectlError as error:
            if os.environ.get("INVOICECTL_DEBUG") == "1":
                raise
            _stderr().print(f"invoicectl: error: {error}", highlight=False, markup=False)
            raise typer.Exit(int(error.exit_code)) from None


app = typer.Typer(
    name="invoicectl",
    cls=_Commands,
    help="Send UBL e-invoices to the GoRoute Peppol API; never lose one, never send one twice."
    + EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

JournalOption = Annotated[
    Path | None,
    typer.Option(
        "--journal",
        help="Journal file. Default: $INVOICECTL_JOURNAL, else "
        "~/.local/state/invoicectl/journal.db.",
        show_default=False,
    ),
]
RecursiveOption = Annotated[
    bool, typer.Option("--recursive", "-r", help="Descend into subdirectories.")
]


class OutputFormat(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


def _stdout() -> Console:
    return Console(soft_wrap=not sys.stdout.isatty())


def _stderr() -> Console:
    return Console(stderr=True)


def _journal_path(journal: Path | None) -> Path:
    from invoicectl.journal import default_journal_path

    return journal.expanduser() if journal is not None else default_journal_path()


def _version_callback(value: bool) -> None:
    if value:
        print(f"invoicectl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version_callback, is_eager=True, help="Show version."),
    ] = False,
) -> None:
    """Send UBL e-invoices to the GoRoute Peppol API."""


@app.command()
def scan(
    directory: Annotated[Path, typer.Argument(help="Directory of UBL *.xml files.")],
    recursive: RecursiveOption = False,
    journal: JournalOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Record every *.xml in DIRECTORY in the journal (nothing is sent).

    Exit 3 when a file is invalid; 0 otherwise."""
    from invoicectl.ingest import scan_directory
    from invoicectl.journal import Journal
    from invoicectl.render import print_scan_report, to_json

    with Journal(_journal_path(journal)) as opened:
        report = scan_directory(opened, directory, recursive=recursive)
    if as_json:
        print(to_json(report.to_dict()))
    else:
        print_scan_report(_stdout(), report)
    raise typer.Exit(ExitCode.NEEDS_FIX if report.invalid else ExitCode.OK)


@app.command()
def status(
    state: Annotated[
        str | None, typer.Option("--state", help="Only invoices in this state.")
    ] = None,
    output_format: Annotated[
        OutputFormat, typer.Option("--format", help="table, json or csv.")
    ] = OutputFormat.table,
    journal: JournalOption = None,
) -> None:
    """Counts per state and the invoices in the journal.

    Exit 3 if any invoice is invalid or rejected, 4 if any needs reconciliation."""
    from invoicectl.journal import STATES, Journal
    from invoicectl.render import (
        STATUS_FIELDS,
        print_state_counts,
        print_status_table,
        status_records,
        to_csv,
        to_json,
    )

    if state is not None and state not in STATES:
        raise UsageError(f"unknown state {state!r}; choose from {', '.join(STATES)}")
    with Journal(_journal_path(journal)) as opened:
        counts = opened.state_counts()
        records = status_records(opened, state)
    if output_format is OutputFormat.json:
        print(to_json(records))
    elif output_format is OutputFormat.csv:
        sys.stdout.write(to_csv(records, STATUS_FIELDS))
    else:
        console = _stdout()
        print_state_counts(console, counts)
        if records:
            print_status_table(console, records)
    raise typer.Exit(_attention_code(counts))


def _attention_code(counts: dict[str, int]) -> ExitCode:
    codes = [ExitCode.OK]
    if counts.get("invalid") or counts.get("rejected"):
        codes.append(ExitCode.NEEDS_FIX)
    if counts.get("key_reused") or counts.get("amended") or counts.get("unknown"):
        codes.append(ExitCode.NEEDS_RECONCILE)
    return worst(*codes)


@app.command()
def show(
    invoice_id: Annotated[str, typer.Argument(metavar="ID", help="The invoice ID.")],
    journal: JournalOption = None,
) -> None:
    """One invoice: its current state, every revision, every attempt."""
    from invoicectl.journal import Journal
    from invoicectl.render import print_invoice

    with Journal(_journal_path(journal)) as opened:
        invoice = opened.invoice(invoice_id)
        if invoice is None:
            raise UsageError(f"no invoice {invoice_id!r} in the journal {opened.path}")
        print_invoice(
            _stdout(),
            invoice,
            opened.revisions(invoice_id),
            opened.attempts(invoice_id),
            opened.events(invoice_id),
        )


def main() -> None:
    app(prog_name="invoicectl")

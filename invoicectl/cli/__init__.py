"""The command line: options in, one library call, rendered result out, an exit code.

No SQL and no HTTP here. Library errors (``errors.InvoicectlError``) reach the user at one
point, ``_Commands.invoke``: one line on stderr and the error's exit code;
``INVOICECTL_DEBUG=1`` re-raises them with a traceback instead.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.core
from typer._click.exceptions import UsageError as ClickUsageError  # typer vendors click

from invoicectl import __version__
from invoicectl.errors import ExitCode, InvoicectlError, JournalError, UsageError

if TYPE_CHECKING:
    from rich.console import Console

EXIT_CODES_HELP = """

\b
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
    """Turns library errors into a message on stderr and their exit code, in one place. With
    ``--json``, every error, a usage error included, is instead one JSON document on stdout
    (``{"error": ..., "exit_code": ...}``) and nothing else: what a cron job parses."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # Noted before the command's own options are parsed: a usage error in them must
        # still answer in JSON. (Past "--", "--json" would be an argument, not the option.)
        options = args[: args.index("--")] if "--" in args else args
        ctx.meta["json"] = "--json" in options
        return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:  # typer's own (vendored) click Context
        try:
            return super().invoke(ctx)
        except ClickUsageError as error:
            if not _json_error(ctx, error.format_message(), ExitCode.USAGE):
                raise  # typer prints the usage and the message on stderr, and exits 2
            raise typer.Exit(int(ExitCode.USAGE)) from None
        except (InvoicectlError, sqlite3.DatabaseError, OSError) as error:
            # A closed stdout (BrokenPipeError) is typer's to handle.
            if isinstance(error, BrokenPipeError) or os.environ.get("INVOICECTL_DEBUG") == "1":
                raise
            failure = _as_invoicectl_error(error)
            if not _json_error(ctx, str(failure), failure.exit_code):
                _stderr().print(f"invoicectl: error: {failure}", highlight=False, markup=False)
            raise typer.Exit(int(failure.exit_code)) from None


def _as_invoicectl_error(error: Exception) -> InvoicectlError:
    """An error from below the library, as one line a person can act on."""
    if isinstance(error, InvoicectlError):
        return error
    if isinstance(error, sqlite3.DatabaseError):
        # Mid-run: the disk filled up, or the file was damaged. SQLite commits whole or not
        # at all, so what was committed stays, and the next run goes on from there.
        return JournalError(
            f"the journal could not be written or read ({error}); everything committed "
            "before is kept: fix the cause (free disk space, say) and run again"
        )
    # The system's own words and the path: a directory that cannot be made, a file system
    # gone read-only.
    assert isinstance(error, OSError)
    where = f" {error.filename}" if error.filename else ""
    return InvoicectlError(f"cannot use{where}: {error.strerror or error}")


def _json_error(ctx: Any, message: str, exit_code: ExitCode) -> bool:
    """Print the error as the command's JSON document, if it was asked for (``--json``)."""
    if not ctx.meta.get("json"):
        return False
    from invoicectl.goroute.jsontext import to_json

    print(to_json({"error": message, "exit_code": int(exit_code)}))
    return True


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
SandboxOption = Annotated[
    bool,
    typer.Option(
        "--sandbox",
        help="Use the built-in GoRoute emulator in this process, with a journal of its own "
        "(sandbox.db beside the default journal). No account, no network.",
    ),
]
RecursiveOption = Annotated[
    bool, typer.Option("--recursive", "-r", help="Descend into subdirectories.")
]


class OutputFormat(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


# Invoice IDs, file names and API answers are data, never rich markup or emoji codes: an ID
# such as "[/b]INV-1" stopped `scan` with a MarkupError, and "[red]INV-2" showed as "INV-2".
def _stdout() -> Console:
    from rich.console import Console  # here: scan prints plain lines and never needs rich

    return Console(soft_wrap=not sys.stdout.isatty(), markup=False, emoji=False)


def _stderr() -> Console:
    from rich.console import Console

    return Console(stderr=True, markup=False, emoji=False)


def _journal_path(journal: Path | None, sandbox: bool = False) -> Path:
    from invoicectl.settings import resolve

    return resolve(journal=journal, sandbox=sandbox, need_key=False).journal


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


@app.command(epilog=EXIT_CODES_HELP)
def scan(
    directory: Annotated[Path, typer.Argument(help="Directory of UBL *.xml files.")],
    recursive: RecursiveOption = False,
    journal: JournalOption = None,
    sandbox: SandboxOption = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Record every *.xml in DIRECTORY in the journal (nothing is sent).

    Exit 3 when a file is invalid; 0 otherwise."""
    from invoicectl.goroute.jsontext import to_json
    from invoicectl.journal.runlock import locked_journal
    from invoicectl.scan.ingest import OpenScan

    path = _journal_path(journal, sandbox)
    # The scan opens first: a large first scan starts reading while the journal opens.
    with (
        OpenScan(directory, recursive=recursive, journal_path=path) as scan,
        locked_journal(path, "scan") as opened,
    ):
        report = scan.into(opened)
    if as_json:
        print(to_json(report.to_dict()))
    else:
        # Plain lines, not rich: a scan that imports no rich starts 20 ms sooner.
        print("\n".join(report.summary_lines()))
    raise typer.Exit(ExitCode.NEEDS_FIX if report.invalid else ExitCode.OK)


@app.command(epilog=EXIT_CODES_HELP)
def status(
    state: Annotated[
        str | None, typer.Option("--state", help="Only invoices in this state.")
    ] = None,
    output_format: Annotated[
        OutputFormat, typer.Option("--format", help="table, json or csv.")
    ] = OutputFormat.table,
    journal: JournalOption = None,
    sandbox: SandboxOption = False,
) -> None:
    """Counts per state and the invoices in the journal.

    Exit 3 if any invoice is invalid or rejected, 4 if any needs reconciliation, 75 if an
    unanswered send waits for the next run's replay."""
    from invoicectl.goroute.jsontext import to_json
    from invoicectl.journal import STATES, Journal
    from invoicectl.lifecycle.plan import attention
    from invoicectl.render.status import (
        STATUS_FIELDS,
        print_state_counts,
        print_status_table,
        status_records,
        to_csv,
        to_tsv,
    )

    if state is not None and state not in STATES:
        raise UsageError(f"unknown state {state!r}; choose from {', '.join(STATES)}")
    with Journal(_journal_path(journal, sandbox)) as opened:
        counts = opened.state_counts()
        records = status_records(opened, state)
        attention_code = attention(opened, opened.clock())
    if output_format is OutputFormat.json:
        print(to_json(records))
    elif output_format is OutputFormat.csv:
        sys.stdout.write(to_csv(records, STATUS_FIELDS))
    else:
        console = _stdout()
        print_state_counts(console, counts)
        if records and sys.stdout.isatty():
            print_status_table(console, records)
        elif records:
            sys.stdout.write(to_tsv(records))
    raise typer.Exit(attention_code)


@app.command()
def show(
    invoice_id: Annotated[str, typer.Argument(metavar="ID", help="The invoice ID.")],
    journal: JournalOption = None,
    sandbox: SandboxOption = False,
) -> None:
    """One invoice: its current state, every revision, every attempt."""
    from invoicectl.journal import Journal
    from invoicectl.render.status import print_invoice

    with Journal(_journal_path(journal, sandbox)) as opened:
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


class Tier(StrEnum):
    standard = "standard"
    professional = "professional"


ApiKeyFileOption = Annotated[
    Path | None,
    typer.Option(help="File holding the API key (mode 0600). Default: $GOROUTE_API_KEY."),
]
TierOption = Annotated[
    Tier | None,
    typer.Option(
        help="Account tier: standard = 100/min, 10 concurrent (the default); "
        "professional = 500/min, 50 concurrent."
    ),
]
RateOption = Annotated[
    int | None, typer.Option(min=1, help="Requests per minute (overrides --tier).")
]
ConcurrencyOption = Annotated[
    int | None, typer.Option(min=1, help="Requests in flight at most (overrides --tier).")
]
MaxAttemptsOption = Annotated[
    int | None,
    typer.Option(min=1, help="Tries per request on 5xx/timeouts in one run. Default 5."),
]
MaxWaitOption = Annotated[
    float | None,
    typer.Option(min=0, help="Longest Retry-After to wait out, seconds. Default 300."),
]
AllowEnvironmentChangeOption = Annotated[
    bool, typer.Option(help="Allow this journal to be used with a new base URL.")
]


@app.command(epilog=EXIT_CODES_HELP)
def send(
    directory: Annotated[Path, typer.Argument(help="Directory of UBL *.xml files.")],
    recursive: RecursiveOption = False,
    journal: JournalOption = None,
    sandbox: SandboxOption = False,
    api_key_file: ApiKeyFileOption = None,
    tier: TierOption = None,
    rate: RateOption = None,
    concurrency: ConcurrencyOption = None,
    batch_size: Annotated[
        int | None, typer.Option(min=1, help="Invoices per progress line. Default 50.")
    ] = None,
    max_attempts: MaxAttemptsOption = None,
    max_wait: MaxWaitOption = None,
    deadline: Annotated[
        float | None,
        typer.Option(min=0, help="Stop taking new work after this many seconds (exit 75)."),
    ] = None,
    new_version: Annotated[
        list[str] | None,
        typer.Option(
            "--new-version",
            metavar="ID",
            help="Send this invoice's current content under its next key, invoice-<id>-v<n> "
            "(an amended, key_reused, unknown or rejected invoice). Repeatable; logged.",
        ),
    ] = None,
    allow_environment_change: AllowEnvironmentChangeOption = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Scan and plan; send nothing.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON summary on stdout (errors too).")
    ] = False,
) -> None:
    """Scan DIRECTORY, then send every pending invoice to GoRoute, paced under the limit.

    Each request is journalled before it leaves and its answer as soon as it arrives; a run
    that dies is resumed by the next one, replaying unanswered sends under the same key with
    the same bytes while the key's 24-hour window is open. One run at a time per journal.
    """
    from invoicectl.goroute.jsontext import to_json
    from invoicectl.goroute.retry import RetryPolicy
    from invoicectl.render.send import SendOutput
    from invoicectl.send import runner
    from invoicectl.send.sender import OUTAGE_AFTER, SendOptions
    from invoicectl.settings import resolve

    settings = resolve(
        journal=journal,
        sandbox=sandbox,
        api_key_file=api_key_file,
        tier=tier.value if tier else None,
        rate=rate,
        concurrency=concurrency,
        batch_size=batch_size,
        max_attempts=max_attempts,
        max_wait=max_wait,
        need_key=not dry_run,
    )
    output = SendOutput(
        _stdout(),
        interactive=sys.stdout.isatty(),
        quiet=as_json,
        batch_size=settings.batch_size,
    )
    if dry_run:
        report, plan = runner.dry_run(settings, directory, recursive=recursive)
        if as_json:
            print(to_json({"scan": report.to_dict(), **plan.to_dict()}))
        else:
            output.dry_run(report, plan)
        raise typer.Exit(plan.exit_code)
    options = SendOptions(
        rate_per_minute=settings.rate_per_minute,
        concurrency=settings.concurrency,
        policy=RetryPolicy(max_attempts=settings.max_attempts, max_wait=settings.max_wait),
        deadline=deadline,
        new_versions=tuple(new_version or ()),
    )
    report, summary = runner.send(
        settings,
        directory,
        options,
        recursive=recursive,
        allow_environment_change=allow_environment_change,
        run_options={
            "directory": str(directory),
            "rate": settings.rate_per_minute,
            "concurrency": settings.concurrency,
            "sandbox": settings.sandbox,
            "new_version": list(new_version or ()),
            "deadline": deadline,
        },
        on_scanned=output.scanned,
        on_start=output.started,
        on_progress=output.progressed,
    )
    output.finished(summary)
    if summary.stopped_by == "credentials":
        _stderr().print(
            f"invoicectl: error: the API refused the credentials ({summary.auth_message}); "
            "nothing changed state",
            highlight=False,
            markup=False,
        )
    if summary.stopped_by == "outage":
        _stderr().print(
            f"invoicectl: GoRoute did not answer {OUTAGE_AFTER} invoices in a row, even after "
            f"retries ({summary.outage_reason}); stopped. The next run continues, replaying "
            "unanswered sends under the same keys",
            highlight=False,
            markup=False,
        )
    if as_json:
        print(to_json({"scan": report.to_dict(), **summary.to_dict()}))
    raise typer.Exit(summary.exit_code)


@app.command(epilog=EXIT_CODES_HELP)
def reconcile(
    apply: Annotated[
        bool,
        typer.Option(
            "--apply",
            help="Record the unambiguous verdicts (adopt the transaction the API holds); "
            "everything needing a person stays as it is.",
        ),
    ] = False,
    output_format: Annotated[
        OutputFormat, typer.Option("--format", help="table, json or csv.")
    ] = OutputFormat.table,
    output: Annotated[
        Path | None, typer.Option(help="Write the report to FILE (atomically), not stdout.")
    ] = None,
    journal: JournalOption = None,
    sandbox: SandboxOption = False,
    api_key_file: ApiKeyFileOption = None,
    tier: TierOption = None,
    rate: RateOption = None,
    concurrency: ConcurrencyOption = None,
    max_attempts: MaxAttemptsOption = None,
    max_wait: MaxWaitOption = None,
    allow_environment_change: AllowEnvironmentChangeOption = False,
) -> None:
    """What really happened to every refused, unanswered or amended send, and what to do next.

    Looks each one up at GoRoute (key_reused: the existing transaction; unknown: the
    transactions list), refreshes delivery status, and never resends anything.
    Exit 0 when nothing needs a person, 4 when something does, 75 when lookups must be
    retried later."""
    from invoicectl.render.reconcile import Format, print_report, render, write_output
    from invoicectl.send import runner
    from invoicectl.settings import resolve

    settings = resolve(
        journal=journal,
        sandbox=sandbox,
        api_key_file=api_key_file,
        tier=tier.value if tier else None,
        rate=rate,
        concurrency=concurrency,
        max_attempts=max_attempts,
        max_wait=max_wait,
    )
    report = runner.reconcile(
        settings, apply=apply, allow_environment_change=allow_environment_change
    )
    fmt: Format = output_format.value
    if output is not None:
        write_output(output, render(report, fmt))
        _stderr().print(f"report written to {output}", highlight=False)
    elif output_format is OutputFormat.table:
        print_report(_stdout(), report)
    else:
        sys.stdout.write(render(report, fmt))
    raise typer.Exit(int(report.exit_code))


@app.command()
def sandbox(
    host: Annotated[str, typer.Option(help="Address to bind (loopback unless told).")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(help="Port; 0 picks a free one.")] = 8080,
    tier: Annotated[str, typer.Option(help="standard, professional or enterprise.")] = ("standard"),
    rate: Annotated[int | None, typer.Option(help="Requests per minute (overrides tier).")] = None,
    concurrency: Annotated[
        int | None, typer.Option(help="Concurrent requests (overrides tier).")
    ] = None,
    latency_ms: Annotated[float | None, typer.Option(help="Delay every API answer.")] = None,
    error_rate: Annotated[
        float | None, typer.Option(help="Fraction of sends answered 5xx.")
    ] = None,
    drop_rate: Annotated[
        float | None,
        typer.Option(help="Fraction of sends recorded, then answered with a dropped connection."),
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed for reproducible faults.")] = None,
) -> None:
    """Serve a local GoRoute emulator over HTTP (for tests and trials; state in memory)."""
    from invoicectl.sandbox import Sandbox, serve
    from invoicectl.sandbox.config import config_from_options

    config = config_from_options(
        tier,
        rate=rate,
        concurrency=concurrency,
        latency_ms=latency_ms,
        error_rate=error_rate,
        drop_rate=drop_rate,
        seed=seed,
    )
    emulator = Sandbox(config)

    def ready(base_url: str) -> None:
        print(f"GoRoute sandbox on {base_url}", flush=True)
        print(f"GOROUTE_BASE_URL={base_url}", flush=True)
        print(f"GOROUTE_API_KEY={emulator.api_key}", flush=True)

    serve(emulator, host, port, on_ready=ready)


def main() -> None:
    # SIGTERM outside the send loop (which handles both signals itself) ends like Ctrl-C:
    # every journal write is its own transaction, so stopping between them loses nothing.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        app(prog_name="invoicectl")
    except KeyboardInterrupt:
        _stderr().print("invoicectl: interrupted; state saved", highlight=False)
        sys.exit(int(ExitCode.INTERRUPTED))


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt

"""The commands that talk to GoRoute: ``send`` (scan, then send what is pending),
``reconcile`` (look up what really happened; never resend) and ``validate`` (GoRoute's
validation of what is pending; nothing sent). All take the run options of
``cli.options`` and resolve them once into ``Settings``, which builds the run objects."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from invoicectl.cli.app import app
from invoicectl.cli.consoles import say, say_error, stdout_console, warn_if_empty
from invoicectl.cli.monitoring import metrics_after
from invoicectl.cli.options import (
    AllowEnvironmentChangeOption,
    ApiKeyFileOption,
    ConcurrencyOption,
    FormatOption,
    JournalOption,
    JsonOption,
    MaxAttemptsOption,
    MaxWaitOption,
    MetricsFileOption,
    OutboxArgument,
    OutputFormat,
    PingUrlOption,
    QuietOption,
    RateOption,
    RecursiveOption,
    SandboxOption,
    TierOption,
    chosen_format,
)
from invoicectl.cli.pinging import start_pings
from invoicectl.cli.send_lines import (
    continue_command,
    outage_after,
    reconcile_progress,
    say_stopping,
)
from invoicectl.cli.send_options import (
    AllProfilesOption,
    BatchSizeOption,
    DeadlineOption,
    DryRunOption,
    NewVersionOption,
    NoReceiverCheckOption,
    OrderOption,
    ProfileSetOption,
    RefreshReceiversOption,
    RoutedNamesOption,
    SendOrderChoice,
    SkipInvoiceOption,
    SupplierOption,
    TrustNewJournalOption,
    ValidateOption,
)
from invoicectl.errors import worst
from invoicectl.loglines import explain_exit

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    import httpx

    from invoicectl.runs import Session
    from invoicectl.scan.report import ScanReport
    from invoicectl.settings import Settings

# Where a journal is named outside the command line (``Settings.sources``).
_NAMED_ELSEWHERE = ("$INVOICECTL_JOURNAL", "config file")


@app.command()
def send(
    directory: OutboxArgument,
    recursive: RecursiveOption = False,
    journal: JournalOption = None,
    sandbox: SandboxOption = False,
    api_key_file: ApiKeyFileOption = None,
    tier: TierOption = None,
    rate: RateOption = None,
    concurrency: ConcurrencyOption = None,
    batch_size: BatchSizeOption = None,
    max_attempts: MaxAttemptsOption = None,
    max_wait: MaxWaitOption = None,
    deadline: DeadlineOption = None,
    new_version: NewVersionOption = None,
    allow_environment_change: AllowEnvironmentChangeOption = False,
    order: OrderOption = SendOrderChoice.due,
    no_receiver_check: NoReceiverCheckOption = False,
    refresh_receivers: RefreshReceiversOption = False,
    validate: ValidateOption = False,
    trust_new_journal: TrustNewJournalOption = False,
    dry_run: DryRunOption = False,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
    metrics_file: MetricsFileOption = None,
    ping_url: PingUrlOption = None,
    supplier: SupplierOption = None,
    all_profiles: AllProfilesOption = False,
    profile_set: ProfileSetOption = None,
    skip_invoice: SkipInvoiceOption = None,
    routed_names: RoutedNamesOption = None,
) -> None:
    """Scan DIRECTORY, then send what is pending, under the limit.

    Each request is journalled before it leaves and its answer as soon as it arrives; a run
    that dies is resumed by the next one, replaying unanswered sends under the same key with
    the same bytes while the key's 24-hour window is open. One run at a time per journal.

    \b
    Examples:
      invoicectl send ./outbox --dry-run        # what would go, in what order
      invoicectl send ./outbox --tier professional
      invoicectl send ./outbox --deadline 240 --json   # cron, every 5 minutes
    """
    from invoicectl.cli.routed_send import say_supplier_filter, send_routed
    from invoicectl.journal.records import SendOrder
    from invoicectl.profiles import supplier_of_send
    from invoicectl.render.formats import to_json
    from invoicectl.render.send import SendOutput, stop_line
    from invoicectl.scan.ingest import outbox_root, scanning
    from invoicectl.send import runner
    from invoicectl.send.outbox_turns import outboxes_of
    from invoicectl.settings import resolve

    if all_profiles or profile_set is not None:
        send_routed(directory, profile_set, as_json=as_json, quiet=quiet)
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
        metrics_file=metrics_file,
        ping_url=ping_url,
    )
    output = SendOutput(
        stdout_console(),
        interactive=sys.stdout.isatty(),
        quiet=as_json or quiet,
        batch_size=settings.batch_size,
        rate_per_minute=settings.rate_per_minute,
    )
    supplier = supplier_of_send(supplier, settings.sender, settings.profile)
    skip = skip_invoice or ()
    scan = scanning(
        directory, recursive=recursive, supplier=supplier, skip=skip, names=routed_names
    )
    if dry_run:
        outboxes = outboxes_of(directory, recursive)
        report, plan = runner.dry_run(settings, scan, SendOrder(order.value), outboxes=outboxes)
        warn_if_empty(report.files + report.left_for_others, directory, recursive)
        if as_json:
            print(to_json({"scan": report.to_dict(), **plan.to_dict()}))
        elif not quiet:
            output.dry_run(report, plan)
        explain_exit(plan.exit_code, plan.exit_cause)
        raise typer.Exit(plan.exit_code)

    def scanned(found: ScanReport) -> None:
        output.scanned(found)
        warn_if_empty(found.files + found.left_for_others, directory, recursive)

    with metrics_after(settings, "send") as after:  # first: an outbox gone ends the run too
        start_pings(settings)
        outbox_root(directory)  # before any journal is opened (or made) for the run
        report, summary = runner.send(
            settings,
            scan,
            settings.send_options(
                deadline=deadline,
                new_versions=tuple(new_version or ()),
                order=order.value,
                check_receivers=not no_receiver_check,
                refresh_receivers=refresh_receivers,
                validate=validate,
                history={
                    "outbox": directory,
                    "recursive": recursive,
                    "trust_new_journal": trust_new_journal,
                    "warn": say,
                },
                supplier=supplier,
                skip_invoices=skip,
            ),
            allow_environment_change=allow_environment_change,
            run_options=settings.send_run_options(
                directory, deadline=deadline, new_versions=tuple(new_version or ())
            ),
            on_scanned=scanned,
            on_start=output.started,
            on_progress=output.progressed,
            on_wait=output.waited,
            on_stopping=say_stopping,
            session=_session(settings),
        )
        after.summary = summary
    # A journal named by the environment or the config file is named in the line too: a
    # person runs it from a shell without cron's or the unit's environment (helper-104).
    named = journal or (
        str(settings.journal) if settings.sources["journal"] in _NAMED_ELSEWHERE else None
    )
    summary.continue_with = continue_command(
        directory, recursive, named, sandbox, api_key_file, settings.profile
    )
    output.finished(summary)
    say_supplier_filter(report, supplier, quiet=as_json or quiet)
    if "credentials" in summary.stops:
        say_error(
            f"the API refused the credentials ({summary.auth_message}); nothing changed state"
        )
    if "wrong_url" in summary.stops:
        say_error(str(summary.endpoint_message))
    stopped = stop_line(summary, deadline=deadline, outage_after=outage_after(summary))
    if stopped is not None:
        say(stopped)
    if as_json:
        print(to_json({"scan": report.to_dict(), **summary.to_dict()}))
    explain_exit(
        summary.exit_code, summary.exit_cause, run_id=summary.run_id, counts=summary.counts()
    )
    raise typer.Exit(summary.exit_code)


@app.command()
def reconcile(
    apply: Annotated[
        bool,
        typer.Option(
            "--apply",
            help="Record the unambiguous verdicts (adopt the transaction the API holds); "
            "everything needing a person stays as it is.",
        ),
    ] = False,
    output_format: FormatOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
    output: Annotated[
        Path | None, typer.Option(help="Write the report to FILE (atomically), not stdout.")
    ] = None,
    every: Annotated[
        bool, typer.Option("--all", help="List every case, those that need no person too.")
    ] = False,
    journal: JournalOption = None,
    sandbox: SandboxOption = False,
    api_key_file: ApiKeyFileOption = None,
    tier: TierOption = None,
    rate: RateOption = None,
    concurrency: ConcurrencyOption = None,
    max_attempts: MaxAttemptsOption = None,
    max_wait: MaxWaitOption = None,
    allow_environment_change: AllowEnvironmentChangeOption = False,
    metrics_file: MetricsFileOption = None,
    ping_url: PingUrlOption = None,
) -> None:
    """What happened to refused or unanswered sends; what next.

    Looks each one up at GoRoute (key_reused: the existing transaction; unknown: the
    transactions list), lists amended files, refreshes delivery status, and never resends
    anything. Exit 0 when nothing needs a person, 4 when something does, 75 when lookups
    must be retried later.

    \b
    Examples:
      invoicectl reconcile
      invoicectl reconcile --apply             # adopt what is unambiguous
      invoicectl reconcile --json --output report.json
    """
    from invoicectl.reconcile.runner import reconcile as run_reconcile
    from invoicectl.render.reconcile import Format, print_report, render, write_output
    from invoicectl.settings import resolve

    output_format = chosen_format(output_format, as_json, OutputFormat.table)
    settings = resolve(
        journal=journal,
        sandbox=sandbox,
        api_key_file=api_key_file,
        tier=tier.value if tier else None,
        rate=rate,
        concurrency=concurrency,
        max_attempts=max_attempts,
        max_wait=max_wait,
        metrics_file=metrics_file,
        ping_url=ping_url,
    )
    with metrics_after(settings, "reconcile"), reconcile_progress(settings, quiet=quiet) as shown:
        start_pings(settings)  # in the metrics' block: a signal in this ping ends the run too
        report = run_reconcile(
            settings,
            apply=apply,
            allow_environment_change=allow_environment_change,
            session=_session(settings),
            on_progress=shown.looked,
            on_wait=shown.waited,
        )
    fmt: Format = output_format.value
    if output is not None:
        write_output(output, render(report, fmt))
        if not quiet:
            say(f"report written to {output}")
    elif output_format is OutputFormat.table:
        if not quiet:
            print_report(stdout_console(), report, every=every)
    else:
        sys.stdout.write(render(report, fmt))
    explain_exit(report.exit_code, report.exit_cause, counts=report.counts)
    raise typer.Exit(int(report.exit_code))


@app.command()
def validate(
    directory: OutboxArgument,
    recursive: RecursiveOption = False,
    journal: JournalOption = None,
    sandbox: SandboxOption = False,
    api_key_file: ApiKeyFileOption = None,
    tier: TierOption = None,
    rate: RateOption = None,
    concurrency: ConcurrencyOption = None,
    max_attempts: MaxAttemptsOption = None,
    max_wait: MaxWaitOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Have GoRoute validate what is pending in DIRECTORY.

    Scans DIRECTORY, then asks GoRoute's validation about each pending invoice's current
    revision (once per content: the result is kept in the journal) and holds what it finds
    invalid. One line per invoice; exit 3 when any is invalid, 75 when one went unvalidated.

    \b
    Examples:
      invoicectl validate ./outbox
      invoicectl validate ./outbox --json
    """
    from invoicectl.render.formats import to_json
    from invoicectl.scan.ingest import scanning
    from invoicectl.send.outbox_turns import outboxes_of
    from invoicectl.send.validate_run import validate as run_validate
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
    scan, outboxes = scanning(directory, recursive=recursive), outboxes_of(directory, recursive)
    report, summary = run_validate(settings, scan, _session(settings), outboxes=outboxes)
    warn_if_empty(report.files, directory, recursive)
    summary.exit_code = worst(summary.exit_code, report.input_code)
    if as_json:
        print(to_json({"scan": report.to_dict(), **summary.to_dict()}))
    elif not quiet:
        for checked in summary.checked:
            print(checked.line())
        print(f"{summary.requests} validations asked; exit {int(summary.exit_code)}")
    explain_exit(summary.exit_code, summary.exit_cause(report))
    raise typer.Exit(summary.exit_code)


def _session(settings: Settings) -> Session:
    """With ``--sandbox``, a run's requests go to the built-in emulator in this process."""
    from invoicectl.runs import no_session

    if not settings.sandbox:
        return no_session

    def sandbox() -> AbstractContextManager[httpx.AsyncBaseTransport | None]:
        from invoicectl.sandbox.session import sandbox_session  # a send with no work: never

        return sandbox_session(settings.journal)

    return sandbox

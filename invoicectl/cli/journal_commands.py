"""The commands that read or fill the journal and never talk to the API: ``scan``,
``status``, ``show``, ``receivers`` and ``backup``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from invoicectl.cli.app import app
from invoicectl.cli.consoles import stdout_console, warn_if_empty
from invoicectl.cli.monitoring import metrics_after
from invoicectl.cli.numbers import whole
from invoicectl.cli.options import (
    FormatOption,
    JournalOption,
    JsonOption,
    MetricsFileOption,
    OutboxArgument,
    OutputFormat,
    QuietOption,
    RecursiveOption,
    SandboxOption,
    StatusFormat,
    check_verdict,
    chosen_format,
    journal_path,
)
from invoicectl.errors import UsageError, explain, worst
from invoicectl.locations import sqlite_file
from invoicectl.loglines import explain_exit, tag

_MOST_LISTED = 1_000_000_000  # status --limit: more than any journal holds


@app.command()
def scan(
    directory: OutboxArgument,
    recursive: RecursiveOption = False,
    journal: JournalOption = None,
    sandbox: SandboxOption = False,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Record every *.xml of DIRECTORY in the journal.

    Nothing is sent. New content becomes a revision; a changed file under a known ID a new
    revision (or amended, if its invoice was sent); two files with one ID and different
    content make that ID invalid. Exit 3 when a file is invalid, 66 when DIRECTORY holds no
    *.xml.

    \b
    Examples:
      invoicectl scan ./outbox
      invoicectl scan ./outbox --recursive --json
    """
    from invoicectl.journal import locked_journal
    from invoicectl.render.formats import to_json
    from invoicectl.scan.ingest import OpenScan
    from invoicectl.send.history_ahead import leave_check_to_next_send
    from invoicectl.send.outbox_turns import outboxes_of
    from invoicectl.settings import resolve

    settings = resolve(journal=journal, sandbox=sandbox, need_key=False)
    path = settings.journal
    # The scan opens first: a large first scan starts reading while the journal opens.
    with (
        OpenScan(
            directory, recursive=recursive, journal_path=path if isinstance(path, Path) else None
        ) as scan,
        locked_journal(path, "scan", create=True) as opened,
    ):
        outboxes = outboxes_of(directory, recursive)
        leave_check_to_next_send(opened, outboxes, settings.base_url, settings.profile)
        report = scan.into(opened)
    causes = report.exit_causes()
    code = worst(*(cause.code for cause in causes))
    if as_json:
        print(to_json({**report.to_dict(), "exit_code": code}))  # as every object document
    elif not quiet:
        # Plain lines, not rich: a scan that imports no rich starts 20 ms sooner.
        tag("scan.done", files=report.files, counts=report.file_counts)
        print("\n".join(report.summary_lines()))
    warn_if_empty(report.files, directory, recursive)
    explain_exit(code, explain(code, causes), files=report.files, counts=report.file_counts)
    raise typer.Exit(code)


@app.command()
def status(
    state: Annotated[
        str | None, typer.Option("--state", help="Only invoices in this state.")
    ] = None,
    verdict: Annotated[
        str | None,
        typer.Option("--verdict", help="Only invoices whose last reconcile verdict is this."),
    ] = None,
    output_format: Annotated[
        StatusFormat | None,
        typer.Option(
            "--format",
            help="table (the default), json (as --json), jsonl (one invoice a line) or csv.",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            click_type=whole(min=0, max=_MOST_LISTED),  # 2**63 reached islice, a traceback
            help="List at most N invoices (0: the counts alone). Default on a terminal: a "
            "screenful, those that need a person first; otherwise every one.",
            show_default=False,
        ),
    ] = None,
    every: Annotated[
        bool, typer.Option("--all", help="List every invoice (through a pager on a terminal).")
    ] = False,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="DATE",
            help="A period report from this day (YYYY-MM-DD, UTC): invoices per state per day.",
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            "--until", metavar="DATE", help="The period report's last day (default today)."
        ),
    ] = None,
    journal: JournalOption = None,
    sandbox: SandboxOption = False,
    metrics_file: MetricsFileOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Counts per state, and what needs a person first.

    Exit 3 if any invoice is invalid or rejected, 4 if any needs reconciliation, is held or
    its delivery failed, 75 while invoices wait for the next send; a monitor can run it.

    \b
    Examples:
      invoicectl status
      invoicectl status --state unknown --format json
      invoicectl status --format csv > invoices.csv
      invoicectl status --since 2026-03-01 --until 2026-03-31 --format csv
    """
    from invoicectl.cli.status_output import write_period, write_status
    from invoicectl.journal import opened_journal
    from invoicectl.journal.records import InvoiceState
    from invoicectl.lifecycle.plan import attention_causes, left_to_next_send, plan
    from invoicectl.settings import resolve

    chosen = chosen_format(output_format, as_json, StatusFormat.table)
    states = [str(known) for known in InvoiceState]
    if state is not None and state not in states:
        raise UsageError(f"unknown state {state!r}; choose from {', '.join(states)}")
    if verdict is not None:
        check_verdict(verdict)
    if every and limit is not None:
        raise UsageError("--all lists every invoice; give it or --limit, not both")
    choosing = {"--state": state is not None, "--verdict": verdict is not None}
    choosing |= {"--limit": limit is not None, "--all": every}
    listing = [name for name, given in choosing.items() if given]
    if (since is not None or until is not None) and listing:
        raise UsageError(
            "the period report (--since/--until) counts every invoice per state and day, and "
            f"takes no {' or '.join(listing)}"
        )
    settings = resolve(journal=journal, sandbox=sandbox, need_key=False, metrics_file=metrics_file)
    with metrics_after(settings, "status"), opened_journal(settings.journal) as opened:
        counts = opened.state_counts()
        holds = opened.hold_counts()
        causes = attention_causes(opened, opened.clock())
        attention_code = worst(*(cause.code for cause in causes))
        explain_exit(attention_code, explain(attention_code, causes), counts=counts)
        unanswered = len(left_to_next_send(opened, plan(opened, opened.clock()))[0].replays)
        failed = opened.delivery_failure_count()
        if since is not None or until is not None:
            write_period(opened, chosen, since, until, quiet)
            raise typer.Exit(attention_code)
        # Written while the journal is open: read row by row as they are written out.
        if not (quiet and chosen is StatusFormat.table):
            tag("status.counts", counts=counts, delivery_failed=failed, unanswered=unanswered)
            write_status(
                opened, chosen, (counts, holds, unanswered, failed), state, verdict, limit, every
            )
    raise typer.Exit(attention_code)


@app.command()
def show(
    invoice_id: Annotated[str, typer.Argument(metavar="ID", help="The invoice ID.")],
    journal: JournalOption = None,
    sandbox: SandboxOption = False,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """One invoice: its state, every revision, attempt and event.

    \b
    Examples:
      invoicectl show INV-1042
      invoicectl show INV-1042 --json | jq '.attempts[-1].outcome'
    """
    from invoicectl.journal import opened_journal
    from invoicectl.render.status import invoice_record, print_invoice

    with opened_journal(journal_path(journal, sandbox)) as opened:
        invoice = opened.invoice(invoice_id)
        if invoice is None:
            raise UsageError(f"no invoice {invoice_id!r} in the journal {opened.path}")
        found = (
            opened.revisions(invoice_id),
            opened.attempts(invoice_id),
            opened.events(invoice_id),
        )
    if as_json:
        from invoicectl.render.documents import invoice_document
        from invoicectl.render.formats import to_json

        document = invoice_document(invoice_record(invoice), invoice, *found)
        print(to_json({**document, "exit_code": 0}))  # as every object document
    elif not quiet:
        print_invoice(stdout_console(), invoice, *found)


@app.command()
def receivers(
    output_format: FormatOption = None,
    journal: JournalOption = None,
    sandbox: SandboxOption = False,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """What the participant lookups said of each receiver.

    A send looks a receiver up before its first invoice, and again after a day.

    \b
    Examples:
      invoicectl receivers
      invoicectl receivers --json
      invoicectl receivers --format csv > receivers.csv
    """
    from invoicectl.journal import opened_journal
    from invoicectl.render.formats import to_csv, to_json
    from invoicectl.render.status import receiver_line, receiver_record

    chosen = chosen_format(output_format, as_json, OutputFormat.table)
    with opened_journal(journal_path(journal, sandbox)) as opened:
        records = [receiver_record(check) for check in opened.receiver_checks()]
    if chosen is OutputFormat.json:
        print(to_json(records))
    elif chosen is OutputFormat.csv:
        from invoicectl.render.documents import RECEIVER_FIELDS, receiver_row

        sys.stdout.write(to_csv([receiver_row(record) for record in records], RECEIVER_FIELDS))
    elif not quiet:
        print("\n".join(map(receiver_line, records)) or "no receiver looked up yet")


@app.command()
def backup(
    destination: Annotated[
        Path, typer.Argument(metavar="DEST", help="The file to write the copy to.")
    ],
    journal: JournalOption = None,
    sandbox: SandboxOption = False,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Copy the journal to DEST, safely beside a running send.

    SQLite's online backup, written to a temporary file, integrity-checked, fsynced and
    renamed over DEST. One line; exit 0 when the copy is good, 1 when no copy could be made
    (DEST is then as it was).

    \b
    Example:
      invoicectl backup /var/backups/invoicectl/journal-$(date +%F).db
    """
    from invoicectl.journal.backup import backup as copy_journal

    source = sqlite_file(
        journal_path(journal, sandbox),
        "backup",
        "back the database up with pg_dump or the server's own backups",
    )
    from invoicectl.known_keys import hide_keys_in

    copied = copy_journal(source, destination)
    if as_json:
        from invoicectl.render.documents import backup_document
        from invoicectl.render.formats import to_json

        print(to_json(hide_keys_in(backup_document(copied))))  # DEST as typed: a key pasted?
    elif not quiet:
        print(hide_keys_in(copied.line()))

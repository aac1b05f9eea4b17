"""The operator's decisions: ``hold``, ``release`` and ``abandon``, one invoice or a filtered
set at a time.

Each takes the run lock, so two operators (or an operator and a cron run) act one after the
other, and records who (the OS user), when and why as an event that ``show`` lists. A bulk
form (``--state``, ``--verdict``) says how many invoices it would change and asks first;
``--yes`` answers for a script, ``--dry-run`` changes nothing.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from invoicectl.cli.app import app
from invoicectl.cli.consoles import ask, say_error
from invoicectl.cli.options import (
    JournalOption,
    JsonOption,
    QuietOption,
    SandboxOption,
    check_verdict,
    journal_path,
)
from invoicectl.errors import ExitCode, UsageError
from invoicectl.locations import Location
from invoicectl.text import one_line

IdsArgument = Annotated[
    list[str] | None, typer.Argument(metavar="ID...", help="Invoice IDs.", show_default=False)
]
ReasonOption = Annotated[str, typer.Option("--reason", help="Why; kept in the journal.")]
ForceOption = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Also lift a hold that says GoRoute may hold a delivery already (you know it "
        "does not).",
    ),
]
AbandonForceOption = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Also abandon an invoice whose send may have been delivered and that no reconcile "
        "has looked up since (you know what GoRoute holds).",
    ),
]
StateFilter = Annotated[
    list[str] | None,
    typer.Option("--state", help="All invoices in this state (repeatable).", show_default=False),
]
VerdictFilter = Annotated[
    str | None,
    typer.Option("--verdict", help="All invoices whose last reconcile verdict is this."),
]
YesOption = Annotated[bool, typer.Option("--yes", help="Do not ask before a bulk change.")]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Say what would change; change nothing.")
]


@app.command()
def hold(
    reason: ReasonOption,
    ids: IdsArgument = None,
    state: StateFilter = None,
    verdict: VerdictFilter = None,
    yes: YesOption = False,
    dry_run: DryRunOption = False,
    journal: JournalOption = None,
    sandbox: SandboxOption = False,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Never send or replay these invoices until released.

    Their state, key and 24-hour window stay as they are; the decision is logged with who
    and why.

    \b
    Examples:
      invoicectl hold INV-1042 --reason "customer asked to wait"
      invoicectl hold --verdict unknown_sent_earlier --reason "ask GoRoute" --yes
    """
    _decide(
        "hold",
        ids,
        reason,
        state,
        verdict,
        yes,
        dry_run,
        journal_path(journal, sandbox),
        _output(as_json, quiet),
    )


@app.command()
def release(
    ids: IdsArgument = None,
    state: StateFilter = None,
    verdict: VerdictFilter = None,
    yes: YesOption = False,
    dry_run: DryRunOption = False,
    journal: JournalOption = None,
    sandbox: SandboxOption = False,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
    force: ForceOption = False,
) -> None:
    """Lift a hold: the rules of the invoice's state apply again.

    An unknown send is replayed under its key inside its 24-hour window, and left for
    reconcile after it. A hold saying GoRoute already holds a transaction for the invoice
    is lifted only with --force.

    \b
    Examples:
      invoicectl release INV-1042
      invoicectl release --state unknown --dry-run
    """
    _decide(
        "release",
        ids,
        None,
        state,
        verdict,
        yes,
        dry_run,
        journal_path(journal, sandbox),
        _output(as_json, quiet),
        force,
    )


@app.command()
def abandon(
    reason: ReasonOption,
    ids: IdsArgument = None,
    state: StateFilter = None,
    verdict: VerdictFilter = None,
    yes: YesOption = False,
    dry_run: DryRunOption = False,
    journal: JournalOption = None,
    sandbox: SandboxOption = False,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
    force: AbandonForceOption = False,
) -> None:
    """Settled outside invoicectl: never send these again.

    They stay in the journal and the reports; the decision is logged with who and why. An
    invoice whose send may have been delivered (unknown, key_reused, a 409) is abandoned
    only once reconcile has looked it up, or with --force.

    \b
    Example:
      invoicectl abandon INV-1042 --reason "sent by post on 3 May"
    """
    _decide(
        "abandon",
        ids,
        reason,
        state,
        verdict,
        yes,
        dry_run,
        journal_path(journal, sandbox),
        _output(as_json, quiet),
        force,
    )


def _decide(
    action: str,
    ids: list[str] | None,
    reason: str | None,
    states: list[str] | None,
    verdict: str | None,
    yes: bool,
    dry_run: bool,
    path: Location,
    output: str,
    force: bool = False,
) -> None:
    from invoicectl.journal import locked_journal
    from invoicectl.journal.records import InvoiceState
    from invoicectl.lifecycle import bulk, holds

    if ids and (states or verdict):
        raise UsageError(f"give invoice IDs or --state/--verdict to {action}, not both")
    if not ids and not (states or verdict):
        raise UsageError(f"name the invoices to {action}: IDs, --state or --verdict")
    known = [str(known) for known in InvoiceState]
    for name in states or ():
        if name not in known:
            raise UsageError(f"unknown state {name!r}; choose from {', '.join(known)}")
    if verdict is not None:
        check_verdict(verdict)
    by = _operator()
    wanted = tuple(InvoiceState(name) for name in states or ())
    asked: list[str] | None = None
    if not ids and not (yes or dry_run):
        # The question is asked with the journal free: a person who takes an hour to answer
        # must not keep every cron send out for that hour. The answer stands for exactly
        # the invoices it was asked about.
        with locked_journal(path, action, shared=True) as opened:
            asked = bulk.candidates(opened, action, wanted, verdict)
        _confirm(action, len(asked))
    # Beside send workers (a PostgreSQL journal): an invoice one holds is refused, one line.
    with locked_journal(path, action, shared=True) as opened:
        # Every ID known before any is changed: half a command is worse than none.
        if missing := [name for name in ids or () if opened.invoice(name) is None]:
            raise UsageError(
                f"no invoice {', '.join(map(repr, missing))} in the journal {path}; nothing changed"
            )
        chosen = list(ids or ()) or bulk.candidates(opened, action, wanted, verdict)
        if asked is not None and chosen != asked:
            raise UsageError(
                f"the invoices to {action} changed while you answered ({len(asked)} then, "
                f"{len(chosen)} now); nothing changed: run the command again"
            )
        decisions = [
            holds.decide(
                opened, action, invoice_id, by, reason=reason or "", dry_run=dry_run, force=force
            )
            for invoice_id in chosen
        ]
    refused = [decision for decision in decisions if not decision.done]
    exit_code = ExitCode.USAGE if refused else ExitCode.OK
    if output == "json":
        from invoicectl.render.documents import decisions_document
        from invoicectl.render.formats import to_json

        print(to_json(decisions_document(action, dry_run, decisions, int(exit_code))))
    elif output == "quiet":  # what was refused explains the exit code: said on stderr
        for decision in refused:
            say_error(one_line(f"{decision.invoice_id}: {decision.message}"))
    else:
        prefix = "would be " if dry_run else ""
        for decision in decisions:
            shown = decision.message if not decision.done else prefix + decision.message
            print(one_line(f"{decision.invoice_id}: {shown}"))
        if not decisions:
            print(f"nothing to {action}")
    raise typer.Exit(exit_code)


def _output(as_json: bool, quiet: bool) -> str:
    """json, quiet or plain: ``--json`` wins, its document being the data asked for."""
    return "json" if as_json else "quiet" if quiet else "plain"


def _confirm(action: str, count: int) -> None:
    if count == 0:
        return
    if sys.stdin is None or not sys.stdin.isatty():  # None: stdin closed (``<&-``)
        raise UsageError(f"{count} invoices match; add --yes to {action} them")
    if not ask(f"{action} {count} invoices?"):
        raise typer.Exit(ExitCode.OK)


def _operator() -> str:
    """The OS user deciding, as the audit trail names them."""
    import getpass  # here: every command's start would pay for it
    import os

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid
        return f"uid {os.getuid()}"

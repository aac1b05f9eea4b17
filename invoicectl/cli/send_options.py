"""The options only ``send`` takes, declared here so that the command reads as its steps."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from invoicectl.cli.numbers import number, whole
from invoicectl.defaults import DEFAULT_BATCH_SIZE, STOP_GRACE


class SendOrderChoice(StrEnum):
    due = "due"
    issue = "issue"
    scan = "scan"


BatchSizeOption = Annotated[
    int | None,
    typer.Option(
        click_type=whole(min=1), help=f"Invoices per progress line. Default {DEFAULT_BATCH_SIZE}."
    ),
]


def _deadline(value: float | None) -> float | None:
    """Checked as a send's options check it (nan, inf, past 31 days), for ``--dry-run`` too,
    which makes none: a cron line tried with ``--dry-run`` fails as the real one would."""
    from invoicectl import config_values

    return None if value is None else config_values.seconds("deadline", value, "option")


DeadlineOption = Annotated[
    float | None,
    typer.Option(
        click_type=number(min=0),
        callback=_deadline,
        help=f"Stop after this many seconds, scan included: no new work, and requests "
        f"still in flight get {STOP_GRACE:g} s more, then are abandoned (unknown, replayed "
        "by the next run under the same key). Exit 75.",
    ),
]
NewVersionOption = Annotated[
    list[str] | None,
    typer.Option(
        "--new-version",
        metavar="ID",
        help="Send this invoice's current content under its next key, invoice-<id>-v<n> "
        "(an amended, key_reused, unknown or rejected invoice). Repeatable; logged.",
    ),
]
OrderOption = Annotated[
    SendOrderChoice,
    typer.Option(
        "--order",
        help="New sends soonest due first (due: the due date, else the issue date), "
        "oldest issued first (issue), or as scanned (scan). Replays always go first.",
    ),
]
SupplierOption = Annotated[
    str | None,
    typer.Option(
        "--supplier",
        metavar="SCHEME:ID",
        help="Only this supplier's invoices.",
        show_default=False,
    ),
]
AllProfilesOption = Annotated[
    bool, typer.Option("--all-profiles", help="Each invoice by its supplier's profile.")
]
# Given by ``send --all-profiles`` to a profile's send, never by a person (hidden).
SkipInvoiceOption = Annotated[list[str] | None, typer.Option("--skip-invoice", hidden=True)]
# From send --all-profiles to each profile's send: a file naming the outbox's files routed to it.
RoutedNamesOption = Annotated[Path | None, typer.Option("--routed-names", hidden=True)]
ProfileSetOption = Annotated[
    str | None,
    typer.Option("--profiles", metavar="A,B", help="As --all-profiles, these only.",
                 show_default=False),
]  # fmt: skip
NoReceiverCheckOption = Annotated[
    bool,
    typer.Option(
        "--no-receiver-check",
        help="Send without looking receivers up first (the participant lookup).",
    ),
]
RefreshReceiversOption = Annotated[
    bool,
    typer.Option(
        "--refresh-receivers", help="Look every receiver up again, however fresh its check."
    ),
]
ValidateOption = Annotated[
    bool,
    typer.Option(
        "--validate",
        help="Have GoRoute validate each new revision before its first send; hold what it "
        "finds invalid (a failed validation does not stop the send).",
    ),
]
TrustNewJournalOption = Annotated[
    bool,
    typer.Option(
        "--trust-new-journal",
        help="Send from a journal with no history at this base URL (or one that lost it) "
        "without first checking GoRoute's transactions for what it already holds. Only "
        "when no other journal ever sent these invoices.",
    ),
]
DryRunOption = Annotated[
    bool,
    typer.Option(
        "--dry-run", help="Scan and plan (the order, and what would be late); send nothing."
    ),
]

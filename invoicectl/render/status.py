"""Turning results into what people and machines read: rich tables, plain lines, JSON, CSV.
(What ``status`` lists of every invoice is ``listing``'s.)

Nothing here decides anything; it takes plain data and writes it to a console or a string.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from invoicectl.journal.records import (
    Attempt,
    Event,
    Hold,
    Invoice,
    InvoiceState,
    ReceiverCheck,
    Revision,
)
from invoicectl.scan.report import ScanReport
from invoicectl.text import one_line

if TYPE_CHECKING:
    from rich.console import Console

    from invoicectl.render.plain import PlainLines


def invoice_record(invoice: Invoice) -> dict[str, Any]:
    return {
        "invoice_id": invoice.invoice_id,
        "document_type": invoice.document_type,
        "state": invoice.state,
        "reason": invoice.reason,
        "sha256": invoice.current_sha256,
        "receiver": invoice.receiver,
        "idempotency_key": invoice.idempotency_key,
        "transaction_id": invoice.transaction_id,
        "existing_transaction_id": invoice.existing_transaction_id,
        "remote_status": invoice.remote_status,
        "issue_date": invoice.issue_date,
        "currency": invoice.currency,
        "payable_amount": invoice.payable_amount,
        "path": invoice.source_path,
        "updated_at": invoice.updated_at,
        "hold": invoice.hold,
        "hold_reason": invoice.hold_reason,
        "verdict": invoice.verdict,
    }


def print_state_counts(
    console: Console | PlainLines,
    counts: Mapping[InvoiceState, int],
    holds: Mapping[Hold, int],
    unanswered: int = 0,
    delivery_failed: int = 0,
) -> str:
    """The counts per state (the line printed is returned); ``unanswered``: sends that went
    out without a final answer and that the next send replays (inside their key's window),
    said as such; ``delivery_failed``: accepted invoices whose delivery GoRoute reports
    failed, said beside ``accepted``."""

    def count(state: InvoiceState) -> str:
        shown = f"{state} {counts.get(state, 0)}"
        if state is InvoiceState.accepted and delivery_failed:
            shown += f" ({delivery_failed} delivery failed: a person must decide)"
        return shown

    shown = ", ".join(count(state) for state in InvoiceState)
    if any(holds.values()):  # holds sit beside the states: counted apart
        shown += "; " + ", ".join(f"{hold} {holds.get(hold, 0)}" for hold in Hold)
    if unanswered:
        shown += f"; {unanswered} unanswered, will be replayed by the next send"
    line = f"{sum(counts.values())} invoices: {shown}"
    console.print(line, highlight=False)
    return line


def print_scan_report(console: Console, report: ScanReport) -> None:
    for line in report.summary_lines():
        console.print(line, highlight=False)


def print_invoice(
    console: Console,
    invoice: Invoice,
    revisions: Sequence[Revision],
    attempts: Sequence[Attempt],
    events: Sequence[Event],
) -> None:
    # Here: ``show`` draws tables; the status counts and a send's lines never do.
    from rich.table import Table
    from rich.text import Text

    record = invoice_record(invoice)
    title = (one_line(record["invoice_id"]), "bold")
    console.print(Text.assemble(title, f"  {one_line(record['document_type'])}"))
    for label, key in (
        ("state", "state"),
        ("reason", "reason"),
        ("receiver", "receiver"),
        ("amount", "payable_amount"),
        ("currency", "currency"),
        ("issue date", "issue_date"),
        ("file", "path"),
        ("content", "sha256"),
        ("key", "idempotency_key"),
        ("transaction", "transaction_id"),
        ("existing transaction", "existing_transaction_id"),
        ("delivery", "remote_status"),
        ("hold", "hold"),
        ("hold reason", "hold_reason"),
        ("last verdict", "verdict"),
        ("updated", "updated_at"),
    ):
        if record[key] is not None:
            console.print(f"  {label:<21} {one_line(str(record[key]))}", highlight=False)
    if invoice.key_sha256 and invoice.key_sha256 != invoice.current_sha256:
        console.print(f"  {'content sent':<21} {invoice.key_sha256}", highlight=False)

    table = Table(title="revisions", title_justify="left")
    for column in ("#", "sha256", "size", "first seen", "file"):
        table.add_column(column, overflow="fold")
    for number, revision in enumerate(revisions, start=1):
        current = " (current)" if revision.sha256 == invoice.current_sha256 else ""
        table.add_row(
            f"{number}{current}",
            revision.sha256,
            str(revision.size),
            revision.first_seen,
            one_line(revision.source_path),
        )
    console.print(table)

    if attempts:
        table = Table(title="attempts", title_justify="left")
        for column in ("run", "started", "key", "outcome", "http", "detail"):
            table.add_column(column, overflow="fold")
        for attempt in attempts:
            detail = (
                attempt.transaction_id or attempt.existing_transaction_id or attempt.message or ""
            )
            table.add_row(
                str(attempt.run_id),
                attempt.started_at,
                one_line(attempt.idempotency_key),
                one_line(attempt.outcome or "no answer"),
                str(attempt.http_status or ""),
                one_line(detail),
            )
        console.print(table)
    else:
        console.print("  no attempts yet")
    for event in events:
        detail = one_line(event.detail or "")
        console.print(f"  {event.at}  {event.kind}: {detail}", highlight=False)


def receiver_record(check: ReceiverCheck) -> dict[str, Any]:
    """One receiver's check as plain data: what ``invoicectl receivers`` lists."""
    from invoicectl.goroute.participants import takes  # here: status needs none of goroute

    kinds = [kind for kind in ("Invoice", "CreditNote") if takes(check.document_types, kind)]
    return {
        "receiver": check.peppol_id,
        "registered": check.registered,
        "takes": kinds if check.registered else [],
        "document_types": list(check.document_types),
        "checked_at": check.checked_at,
    }


def receiver_line(record: dict[str, Any]) -> str:
    registered = "registered" if record["registered"] else "not registered"
    kinds = ", ".join(record["takes"]) or "-"
    return f"{record['receiver']}\t{registered}\t{kinds}\t{record['checked_at']}"

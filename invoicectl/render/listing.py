"""What ``status`` lists: one plain record per invoice, streamed from the journal as it is
written out, so that a journal of a million invoices lists in flat memory.

``status_records`` gives them by invoice ID (JSON, JSON Lines, CSV, the plain lines of a pipe),
then the files that yield no invoice ID; ``attention_first`` gives a terminal's bounded page:
the invoices that need a person first (key reused, amended, unknown, accepted whose delivery
failed, rejected, invalid), then
the pending, then the accepted, each by ID, reading no more rows than it shows.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import IO, Any

from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import InvoiceState, Listed, UnidentifiedFile, peppol_id
from invoicectl.render.formats import while_read
from invoicectl.text import one_line

STATUS_FIELDS = (
    "invoice_id",
    "document_type",
    "state",
    "reason",
    "sha256",
    "receiver",
    "idempotency_key",
    "transaction_id",
    "existing_transaction_id",
    "remote_status",
    "issue_date",
    "currency",
    "payable_amount",
    "path",
    "updated_at",
    "hold",
    "hold_reason",
    "verdict",
)

# A terminal's page, in this order: what a person must act on, then what a send will do.
ATTENTION_ORDER = (
    InvoiceState.key_reused,
    InvoiceState.amended,
    InvoiceState.unknown,
    InvoiceState.rejected,
    InvoiceState.invalid,
    InvoiceState.pending,
    InvoiceState.accepted,
)


def status_records(
    journal: JournalBackend,
    state: str | None = None,
    verdict: str | None = None,
    limit: int | None = None,
) -> Iterator[dict[str, Any]]:
    """One plain record per invoice (in ``state``, with last ``verdict``) by ID, then one
    per file that yields no invoice ID; at most ``limit``, all when None."""
    chosen = None if state is None else InvoiceState(state)
    records: Iterator[dict[str, Any]] = map(status_record, journal.listed(chosen, verdict, limit))
    if state in (None, InvoiceState.invalid) and verdict is None:
        files = map(_unidentified_record, journal.unidentified_files())
        records = _chain(records, files)
    return records if limit is None else islice(records, limit)


def attention_first(
    journal: JournalBackend, limit: int, state: str | None = None, verdict: str | None = None
) -> Iterator[dict[str, Any]]:
    """At most ``limit`` records: those that need a person first (``ATTENTION_ORDER``), each
    state by ID, the files without an ID with the invalid invoices."""
    left = limit
    failed = 0  # accepted invoices whose delivery failed, listed with those to reconcile
    for each in ATTENTION_ORDER if state is None else (InvoiceState(state),):
        if left <= 0:
            return
        records: Iterable[dict[str, Any]] = map(status_record, journal.listed(each, verdict, left))
        if each is InvoiceState.accepted and state is None:
            # Listed already (all of them, or the page ended before here): read past them.
            listed = journal.listed(each, verdict, left + failed)
            kept = (record for record in map(status_record, listed) if not failed_delivery(record))
            records = islice(kept, left)
        if each is InvoiceState.unknown and state is None:
            failures = map(status_record, journal.delivery_failures(left))
            records = _chain(records, (r for r in failures if _chosen(r, verdict)))
        if each is InvoiceState.invalid and verdict is None:
            files = map(_unidentified_record, journal.unidentified_files())
            records = islice(_chain(records, files), left)
        for record in records:
            left -= 1
            failed += failed_delivery(record)
            yield record


def failed_delivery(record: dict[str, Any]) -> bool:
    return bool(record["state"] == InvoiceState.accepted and record["remote_status"] == "failed")


def shown_reason(record: dict[str, Any]) -> str:
    """The reason shown; an accepted invoice whose delivery failed says so (its state stays
    ``accepted``: GoRoute took it, the receiver did not), and a held or abandoned one says
    that first, with the operator's reason (its state's reason is from before)."""
    hold, why = record.get("hold"), record.get("hold_reason")
    decided = (f"{hold}: {why}" if why else hold) if hold else None
    if failed_delivery(record):
        if hold == "abandoned":  # settled outside invoicectl: nothing to do
            return f"delivery failed; {decided}"
        return "delivery failed: run `invoicectl reconcile` for what to do"
    return "; ".join(part for part in (decided, record["reason"]) if part)


def _chosen(record: dict[str, Any], verdict: str | None) -> bool:
    return verdict is None or record["verdict"] == verdict


def _chain(*parts: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for part in parts:
        yield from part


def status_record(listed: Listed) -> dict[str, Any]:
    """The record ``status --format json`` writes of an invoice (keys: STATUS_FIELDS)."""
    return {
        "invoice_id": listed.invoice_id,
        "document_type": listed.document_type,
        "state": listed.state,
        "reason": listed.reason,
        "sha256": listed.current_sha256,
        "receiver": peppol_id(listed.receiver_scheme, listed.receiver_id),
        "idempotency_key": listed.idempotency_key,
        "transaction_id": listed.transaction_id,
        "existing_transaction_id": listed.existing_transaction_id,
        "remote_status": listed.remote_status,
        "issue_date": listed.issue_date,
        "currency": listed.currency,
        "payable_amount": listed.payable_amount,
        "path": listed.source_path,
        "updated_at": listed.updated_at,
        "hold": listed.hold,
        "hold_reason": listed.hold_reason,
        "verdict": listed.verdict,
    }


def _unidentified_record(file: UnidentifiedFile) -> dict[str, Any]:
    record: dict[str, Any] = dict.fromkeys(STATUS_FIELDS)
    record.update(
        state=InvoiceState.invalid,
        reason=file.reason,
        sha256=file.sha256,
        path=file.path,
        updated_at=file.updated_at,
    )
    return record


def write_tsv(stream: IO[str], records: Iterable[dict[str, Any]]) -> int:
    """One plain line per invoice, for a pipe or a log: id, state, receiver, transaction,
    reason (or the path of a file without an ID), written as they come."""
    count = 0
    for record in while_read(stream, records):
        fields = (
            record["invoice_id"] or record["path"],
            record["state"],
            record["receiver"] or "-",
            record["transaction_id"] or record["existing_transaction_id"] or "-",
            shown_reason(record),
        )
        # A path or a server's text may hold a tab, a line break or an escape sequence.
        stream.write("\t".join(map(one_line, fields)) + "\n")
        count += 1
    return count

"""A journal with years of history, fast: invoices sent and delivered long ago, and a way to
count the work SQLite does for a call (no timing: the machine is shared).

``add_history`` writes what a journal of years holds (a revision and its stored bytes, one
run per 100 invoices, an attempt begun and finished, the invoice accepted and delivered)
through the journal's own write paths, as ``benchmarks/journal_size.py`` does at scale.
``sqlite_steps`` counts the virtual-machine steps a call costs on the journal's connection:
a query that reads every row of a table costs steps in proportion to the rows, one that
answers from an index what it was asked does not.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable
from typing import Any, NamedTuple

from invoicectl.journal import Journal
from invoicectl.journal.packing import pack
from invoicectl.journal.records import AttemptAnswer, Invoice, InvoiceState

SENT_AT = "2020-01-01T00:00:00+00:00"
_STEP = 100  # VM instructions between two calls of the progress handler


class _Copy(NamedTuple):  # a FoundFile: bytes and a revision, no stat
    path: str
    name: str
    sha256: str
    size: int
    invoice_id: str
    facts_json: str
    columns: None
    stored: bytes
    codec: str | None
    reason: None
    stat: None


def history_invoice(invoice_id: str, sha256: str, **changes: Any) -> Invoice:
    values: dict[str, Any] = dict(
        invoice_id=invoice_id,
        document_type="Invoice",
        receiver_scheme="0088",
        receiver_id="7300010000001",
        sender_endpoint="0088:7300010000002",
        issue_date="2020-01-01",
        currency="EUR",
        payable_amount="100.00",
        current_sha256=sha256,
        source_path=f"/srv/old/{invoice_id}.xml",
        state=InvoiceState.accepted,
        reason=None,
        key_version=1,
        idempotency_key=f"invoice-{invoice_id}",
        key_sha256=sha256,
        key_first_used_at=SENT_AT,
        state_before_amend=None,
        transaction_id=f"txn-{invoice_id}",
        existing_transaction_id=None,
        remote_status="delivered",
        remote_checked_at=SENT_AT,
        ingested_at=SENT_AT,
        accepted_at=SENT_AT,
        created_at=SENT_AT,
        updated_at=SENT_AT,
    )
    values.update(changes)
    return Invoice(**values)


def add_history(
    journal: Journal, count: int, *, start: int = 0, base_url: str = "https://old.example"
) -> None:
    """``count`` invoices (``OLD-<n>``) sent and delivered in 2020, in one transaction."""
    with journal.transaction():
        copies = []
        for number in range(start, start + count):
            invoice_id = f"OLD-{number:07d}"
            body = f"<Invoice><ID>{invoice_id}</ID></Invoice>".encode()
            sha256 = hashlib.sha256(body).hexdigest()
            codec, stored = pack(body)
            facts = json.dumps({"document_type": "Invoice", "invoice_id": invoice_id})
            copies.append(
                _Copy(f"/srv/old/{invoice_id}.xml", f"{invoice_id}.xml", sha256, len(body),
                      invoice_id, facts, None, stored, codec, None, None)
            )  # fmt: skip
        journal.begin_scan()
        journal.store_found(copies, SENT_AT)
        run_id = 0
        for position, copy in enumerate(copies):
            if position % 100 == 0:
                run_id = journal.begin_run("send", {}, base_url=base_url)
            invoice = history_invoice(copy.invoice_id, copy.sha256)
            attempt = journal.begin_attempt(
                run_id, invoice.invoice_id, copy.sha256, f"invoice-{invoice.invoice_id}",
                "0" * 64, SENT_AT,
            )  # fmt: skip
            journal.finish_attempt(
                attempt, AttemptAnswer("accepted", 202, transaction_id=invoice.transaction_id)
            )
            journal.insert_invoice(invoice)


def sqlite_steps(conn: sqlite3.Connection, call: Callable[[], Any]) -> int:
    """Roughly how many SQLite VM instructions ``call`` runs on ``conn``."""
    calls = 0

    def count() -> int:
        nonlocal calls
        calls += 1
        return 0

    conn.set_progress_handler(count, _STEP)
    try:
        result = call()
        if hasattr(result, "__next__"):  # a stream: its rows are read as it is consumed
            for _ in result:
                pass
    finally:
        conn.set_progress_handler(None, _STEP)
    return calls * _STEP


def steps_at_two_sizes(
    journal: Journal, call: Callable[[], Any], small: int = 300, large: int = 1500
) -> tuple[int, int]:
    """The SQLite steps of ``call`` with ``small`` invoices of history, then with ``large``."""
    add_history(journal, small)
    at_small = sqlite_steps(journal.db.conn, call)
    add_history(journal, large - small, start=small)
    at_large = sqlite_steps(journal.db.conn, call)
    return at_small, at_large


def flat(steps: tuple[int, int]) -> bool:
    """Steps that did not follow the history (5x the invoices): at most 20 % and 2,000
    instructions more. A full read of the history costs 5x, tens of thousands more."""
    at_small, at_large = steps
    return at_large <= at_small * 1.2 + 2000

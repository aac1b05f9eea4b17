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
        _consumed(call())
    finally:
        conn.set_progress_handler(None, _STEP)
    return calls * _STEP


def _consumed(result: Any) -> None:
    if hasattr(result, "__next__"):  # a stream: its rows are read as it is consumed
        for _ in result:
            pass


# The rows a PostgreSQL backend read from the journal's tables in its current transaction:
# rows of sequential scans and rows fetched through an index, counted by the server itself,
# at once, for this backend. (An index-only scan fetches no row: turned off while counting.)
_PG_ROWS_READ = (
    "SELECT coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0)), 0)"
    " FROM pg_stat_xact_user_tables"
)


def pg_rows_read(journal: Any, call: Callable[[], Any]) -> int:
    """How many rows a PostgreSQL journal's server read for ``call`` (in one transaction,
    where the server counts each backend's reads as they happen)."""
    with journal.transaction():
        journal.db.execute("SET LOCAL enable_indexonlyscan = off")
        (before,) = journal.db.execute(_PG_ROWS_READ).fetchone()
        _consumed(call())
        (after,) = journal.db.execute(_PG_ROWS_READ).fetchone()
    return int(after - before)


class Cost(NamedTuple):
    """What a call cost with ``small`` invoices of history and with ``large``: SQLite's VM
    steps, or the rows PostgreSQL read."""

    at_small: int
    at_large: int
    unit: str


def read_cost(journal: Any, call: Callable[[], Any]) -> tuple[int, str]:
    """The work ``call`` costs the journal's database, and its unit."""
    if isinstance(journal.db.conn, sqlite3.Connection):
        return sqlite_steps(journal.db.conn, call), "steps"
    return pg_rows_read(journal, call), "rows"


def steps_at_two_sizes(
    journal: Journal, call: Callable[[], Any], small: int = 300, large: int = 1500
) -> Cost:
    """The cost of ``call`` with ``small`` invoices of history, then with ``large``."""
    add_history(journal, small)
    _analyzed(journal)
    at_small, unit = read_cost(journal, call)
    add_history(journal, large - small, start=small)
    _analyzed(journal)
    at_large, _ = read_cost(journal, call)
    return Cost(at_small, at_large, unit)


def _analyzed(journal: Any) -> None:
    """PostgreSQL's planner figures for the tables as they now are, as autovacuum keeps them
    on a live server (a table that grew fivefold is analysed within the minute)."""
    if not isinstance(journal.db.conn, sqlite3.Connection):
        journal.db.execute("ANALYZE")


def flat(cost: Cost) -> bool:
    """A cost that did not follow the history (5x the invoices): at most 20 % more, and
    2,000 SQLite instructions (or 100 rows PostgreSQL read) more. A full read of the
    history costs 5x: tens of thousands of instructions, or 1,200 rows, more."""
    allowance = 2000 if cost.unit == "steps" else 100
    return cost.at_large <= cost.at_small * 1.2 + allowance


def cheap(cost: tuple[int, str]) -> bool:
    """What one row read by its key costs: under 2,000 SQLite steps, or 20 rows read."""
    amount, unit = cost
    return amount < (2000 if unit == "steps" else 20)


def query_plan(journal: Any, sql: str) -> tuple[str, bool]:
    """The plan of ``sql`` on the journal's database as one line, and whether it sorts
    rather than read an index in order (SQLite's TEMP B-TREE, PostgreSQL's Sort)."""
    if isinstance(journal.db.conn, sqlite3.Connection):
        details = " ".join(row[3] for row in journal.db.execute(f"EXPLAIN QUERY PLAN {sql}"))
        return details, "TEMP B-TREE" in details
    _analyzed(journal)
    lines = [row[0] for row in journal.db.execute(f"EXPLAIN {sql}")]
    return " ".join(lines), any(line.strip().startswith(("Sort", "->  Sort")) for line in lines)

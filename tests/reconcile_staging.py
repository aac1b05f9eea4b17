"""Puts real journal rows into the states reconcile works on, the way a sender leaves them.

Invoices come from real files through a real scan; the send's bookkeeping (key, window start,
one attempt row per request, the state it ended in) is written as ``send`` would write it.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from journalkit import force
from ublfactory import write_invoice

from invoicectl.goroute.apikey import ApiKey
from invoicectl.goroute.client import GoRouteClient
from invoicectl.goroute.limiter import RateLimiter
from invoicectl.goroute.retry import RetryPolicy
from invoicectl.journal import Journal
from invoicectl.lifecycle.keys import idempotency_key
from invoicectl.reconcile import ReconcileReport, reconcile
from invoicectl.sandbox import DEFAULT_API_KEY
from invoicectl.scan.ingest import scan_directory

NOW = datetime.now(UTC).replace(microsecond=0)
FAST_RETRIES = RetryPolicy(max_attempts=3, max_wait=5.0, backoff_initial=0.01, backoff_max=0.02)


def add_invoice(journal: Journal, outbox: Path, invoice_id: str, **kwargs: Any) -> None:
    write_invoice(outbox, invoice_id, **kwargs)
    scan_directory(journal, outbox, workers=1)


def sent(
    journal: Journal,
    invoice_id: str,
    state: str,
    *,
    hours_ago: float = 1.0,
    http_status: int | None = None,
    outcome: str | None = None,
    transaction_id: str | None = None,
    existing_transaction_id: str | None = None,
    remote_status: str | None = None,
) -> None:
    """Record one send of the current content under the invoice's first key."""
    row = journal.invoice(invoice_id)
    assert row is not None
    at = (NOW - timedelta(hours=hours_ago)).isoformat()
    key = idempotency_key(invoice_id)
    run_id = _run(journal, at)
    journal.db.execute(
        "INSERT INTO attempts (run_id, invoice_id, revision_sha256, idempotency_key, body_sha256,"
        " started_at, finished_at, outcome, http_status, transaction_id, existing_transaction_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (run_id, invoice_id, row.current_sha256, key, "b" * 64, at, at, outcome, http_status)
        + (transaction_id, existing_transaction_id),
    )
    force(
        journal,
        invoice_id,
        state=state,
        idempotency_key=key,
        key_sha256=row.current_sha256,
        key_first_used_at=at,
        transaction_id=transaction_id,
        existing_transaction_id=existing_transaction_id,
        remote_status=remote_status,
    )


def _run(journal: Journal, at: str) -> int:
    cursor = journal.db.execute(
        "INSERT INTO runs (command, options, pid, host, started_at) VALUES (?, ?, ?, ?, ?)",
        ("send", json.dumps({}), os.getpid(), "test", at),
    )
    return int(cursor.lastrowid or 0)


def snapshot(journal: Journal) -> dict[str, dict[str, Any]]:
    return {row.invoice_id: row for row in journal.invoices()}


def run_reconcile(
    journal: Journal,
    transport: httpx.AsyncBaseTransport | None = None,
    *,
    base_url: str = "http://sandbox.test/peppol-api",
    api_key: str = DEFAULT_API_KEY,
    now: Callable[[], datetime] = lambda: NOW,
    **options: Any,
) -> ReconcileReport:
    async def main() -> ReconcileReport:
        async with GoRouteClient(base_url, ApiKey(api_key), transport=transport) as client:
            return await reconcile(
                journal,
                client,
                limiter=RateLimiter(options.pop("rate", 6000)),
                policy=options.pop("policy", FAST_RETRIES),
                now=now,
                **options,
            )

    return asyncio.run(main())

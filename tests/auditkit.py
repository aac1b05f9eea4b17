"""Journals of many sent invoices made fast for the audit tests: plain SQL rows, then the chain.

``fill`` writes ``count`` invoices, each with its revision, its stored bytes and one answered
attempt whose body hash is the one a send would have computed, into a new journal by plain
SQL, then takes the chain away as a journal from before m009 was (``strip_chain``). Opening
it with ``Journal`` then runs m009 and m011, which chain every row: the journal verifies
clean, and is the journal of years an upgrade meets.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from datetime import datetime
from pathlib import Path

from sendkit import at, emulator, send, settings_for
from ublfactory import write_invoice

from invoicectl.goroute.client import build_send_body
from invoicectl.journal import Journal

AT = "2026-01-15T10:00:00+00:00"


def document(invoice_id: str) -> bytes:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Invoice><ID>'
        f"{invoice_id}</ID><Note>{'x' * 200}</Note></Invoice>\n"
    ).encode()


def fill(path: Path, count: int) -> None:
    """``count`` sent invoices in a journal without a chain (``strip_chain``)."""
    Journal(path).close()
    receiver = {"scheme": "0088", "id": "5790000000001"}
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO runs (id, command, options, pid, host, started_at) VALUES"
            " (1, 'send', '{}', 1, 'here', ?)",
            (AT,),
        )
        for number in range(count):
            invoice_id = f"INV-{number:06d}"
            data = document(invoice_id)
            sha256 = hashlib.sha256(data).hexdigest()
            text = data.decode()
            meta = {"invoice_id": invoice_id, "sha256": sha256}
            body = hashlib.sha256(build_send_body(text, "0088", "5790000000001", meta))
            conn.execute(
                "INSERT INTO blobs (sha256, size, data) VALUES (?, ?, ?)",
                (sha256, len(data), data),
            )
            conn.execute(
                "INSERT INTO invoices (invoice_id, document_type, current_sha256, source_path,"
                " state, idempotency_key, transaction_id, ingested_at, created_at, updated_at)"
                " VALUES (?, 'Invoice', ?, ?, 'accepted', ?, ?, ?, ?, ?)",
                (invoice_id, sha256, f"/outbox/{invoice_id}.xml", f"invoice-{invoice_id}",
                 f"tx-{number}", AT, AT, AT),
            )  # fmt: skip
            conn.execute(
                "INSERT INTO revisions (invoice_id, sha256, size, source_path, facts, first_seen)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (invoice_id, sha256, len(data), f"/outbox/{invoice_id}.xml",
                 json.dumps({"customer_endpoint": receiver}), AT),
            )  # fmt: skip
            conn.execute(
                "INSERT INTO attempts (run_id, invoice_id, revision_sha256, idempotency_key,"
                " body_sha256, started_at, finished_at, outcome, http_status, transaction_id)"
                " VALUES (1, ?, ?, ?, ?, ?, ?, 'accepted', 202, ?)",
                (invoice_id, sha256, f"invoice-{invoice_id}", body.hexdigest(), AT, AT,
                 f"tx-{number}"),
            )  # fmt: skip
    strip_chain(path)


# What m010 and later made, beside the chain (m009, m011): an index or a table each (m016's
# invoices_existing_transaction the last).
_LATER_INDEXES = (
    "invoices_state_id", "invoices_held", "invoices_in_delivery", "attempts_started",
    "attempts_run", "runs_base_url", "invoices_delivery_failed", "invoices_created",
    "invoices_unfinished", "runs_command_started", "runs_command_ended", "invoices_transaction",
    "invoices_existing_transaction",
)  # fmt: skip
_LATER_TABLES = ("workers", "claims", "rate_starts")


def strip_chain(path: Path) -> None:
    """The journal as it was at m008, before the chain: the same rows, no chain, and none of
    what later migrations made (a journal whose chain alone was taken away is refused)."""
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE chain")
        conn.execute("ALTER TABLE runs DROP COLUMN chain_seq")
        conn.execute("ALTER TABLE runs DROP COLUMN chain_head")
        for index in _LATER_INDEXES:
            conn.execute(f"DROP INDEX {index}")
        for table in _LATER_TABLES:
            conn.execute(f"DROP TABLE {table}")
        conn.execute("CREATE INDEX invoices_state ON invoices(state)")  # m010 replaced it
        conn.execute("DELETE FROM _sqlite_migrations WHERE name >= 'm009'")


def sent_on(path: Path, outbox: Path, sends: tuple[tuple[str, datetime], ...]) -> Path:
    """The journal at ``path`` with each invoice sent at its moment, in a run of its own,
    each to an emulator of its own, seeded apart (one seed gives the same transaction ids,
    and a 202 naming another invoice's is no acceptance)."""
    for seed, (invoice_id, moment) in enumerate(sends):
        write_invoice(outbox, invoice_id)
        send(settings_for(path), outbox, emulator(seed=seed).transport(), clocks=at(moment))
    return path


def sent_journal(tmp_path: Path, outbox: Path, invoice_ids: list[str]) -> Path:
    """A journal that sent ``invoice_ids`` to the emulator, one file each, under ``tmp_path``."""
    path = tmp_path / "state" / "journal.db"
    for number, invoice_id in enumerate(invoice_ids):
        write_invoice(outbox, invoice_id, name=f"file-{number}.xml")
    send(settings_for(path), outbox, emulator().transport())
    return path

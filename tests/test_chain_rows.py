"""A scan chains its new revisions and invoices from rows read in one query (issue 13: a
query a row was half the chain's cost at a first scan's 20,000 invoices): the events are
those ``chain.append_rows`` writes for the same rows, one query each."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from ublfactory import write_invoice

from invoicectl.journal import Journal
from invoicectl.journal.chain import append_rows
from invoicectl.scan.ingest import scan_directory


def _chain(conn: sqlite3.Connection) -> list[tuple[object, ...]]:
    return [tuple(row) for row in conn.execute("SELECT * FROM chain ORDER BY seq")]


def test_a_scan_s_rows_are_chained_as_append_rows_chains_them(outbox: Path, tmp_path: Path) -> None:
    for invoice_id in ("B-2", "A-1", "C-3", "a-0"):
        write_invoice(outbox, invoice_id)
    with Journal(tmp_path / "journal.db") as journal:
        assert sorted(scan_directory(journal, outbox, workers=1).new) == [
            "A-1",
            "B-2",
            "C-3",
            "a-0",
        ]
        conn = journal.db.conn
        scanned = _chain(conn)
        kinds = [row[1] for row in scanned]
        first = kinds.index("revision")
        assert kinds[first:] == ["revision"] * 4 + ["invoice"] * 4
        events = [json.loads(row[3]) for row in scanned[first:]]
        keys = {"revision": [], "invoice": []}
        for event in events:
            keys[event["kind"]].append(event["key"])
        assert keys["invoice"] == ["A-1", "B-2", "C-3", "a-0"]  # in key order, as SQLite sorts

        with journal.transaction():  # the same events again, one query a row
            conn.execute("DELETE FROM chain WHERE seq >= ?", (scanned[first][0],))
            append_rows(conn, "revisions", keys["revision"], events[0]["at"])
            append_rows(conn, "invoices", keys["invoice"], events[4]["at"])
            assert _chain(conn) == scanned


def _fresh_invoices(journal: Journal, count: int) -> None:
    """``count`` new invoices found by a scan, stored, grouped, not yet admitted."""
    import hashlib

    from invoicectl.journal.packing import pack
    from invoicectl.journal.records import fact_columns
    from invoicectl.scan.scanned import ScannedFile

    found = []
    for number in range(count):
        invoice_id = f"NEW-{number:06d}"
        body = f"<Invoice><ID>{invoice_id}</ID></Invoice>".encode()
        codec, stored = pack(body)
        record = {"document_type": "Invoice", "invoice_id": invoice_id, "currency": "EUR"}
        found.append(
            ScannedFile(f"/srv/out/{invoice_id}.xml", f"{invoice_id}.xml",
                        hashlib.sha256(body).hexdigest(), len(body), invoice_id,
                        json.dumps(record), fact_columns(record), stored, codec)
        )  # fmt: skip
    journal.begin_scan()
    with journal.transaction():
        journal.store_found(found, "2026-12-01T00:00:00+00:00")
    journal.name_known_content()
    journal.group_by_id()


def test_admitting_a_scan_s_new_invoices_takes_flat_memory(tmp_path: Path) -> None:
    """Their rows are read and chained a batch at a time: admitting four times as many new
    invoices takes about the same memory at its peak (all at once, a first scan of 20,000
    files peaked at 155 MB against 68 MB at 5,000)."""
    import tracemalloc

    from invoicectl.journal.records import InvoiceState

    peaks = []
    for count in (1000, 4000):
        with Journal(tmp_path / f"journal-{count}.db") as journal:
            _fresh_invoices(journal, count)
            tracemalloc.start()
            with journal.transaction():
                new, _ = journal.insert_fresh(InvoiceState.pending, InvoiceState.invalid)
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
            assert len(new) == count
    assert peaks[1] < 1.5 * peaks[0], peaks

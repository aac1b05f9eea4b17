"""The chain's events for many rows at once (``journal.chain_rows``) are the events
``chain.append_rows`` writes for the same rows: a scan's new invoices, chained either way,
leave the same chain."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from ublfactory import write_invoice

from invoicectl.journal import Journal
from invoicectl.journal.chain import append_rows
from invoicectl.journal.chain_rows import append_selected
from invoicectl.scan.ingest import scan_directory


def _chain(conn: sqlite3.Connection) -> list[tuple[object, ...]]:
    return [tuple(row) for row in conn.execute("SELECT * FROM chain ORDER BY seq")]


def test_a_scan_s_new_invoices_are_chained_as_append_rows_chains_them(
    outbox: Path, tmp_path: Path
) -> None:
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
        invoices = [row for row in scanned if row[1] == "invoice"]
        first = invoices[0][0]
        at = json.loads(invoices[0][3])["at"]
        keys = [row[2] for row in invoices]
        assert keys == ["A-1", "B-2", "C-3", "a-0"]  # in the key's order, as SQLite sorts it

        with journal.transaction():  # the same events again, one query a row
            conn.execute("DELETE FROM chain WHERE seq >= ?", (first,))
            append_rows(conn, "invoices", keys, at)
            assert _chain(conn) == scanned

            conn.execute("DELETE FROM chain WHERE seq >= ?", (first,))
            where = "invoice_id IN (SELECT value FROM json_each(:keys))"
            assert append_selected(conn, "invoices", where, {"keys": json.dumps(keys)}, at) == keys
            assert _chain(conn) == scanned

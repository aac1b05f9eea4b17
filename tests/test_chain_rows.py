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

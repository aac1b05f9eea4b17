"""Reading a journal for an audit: read-only, unmigrated, row by row, whatever its damage.

``AuditReader`` opens the file with ``mode=ro``: ``invoicectl verify`` and ``export`` must
neither change nor create a journal, nor migrate one (a migration would start a new chain
over whatever it finds). Every read streams, so a journal of 100,000 invoices is checked in
flat memory; a damaged file raises ``sqlite3.DatabaseError`` from the read that meets the
damage, which the caller reports as one finding and goes on.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from invoicectl.journal.chain import COVERED
from invoicectl.journal.chain import head as chain_head
from invoicectl.journal.packing import unpack


class ChainRow(NamedTuple):
    seq: int
    kind: str
    invoice_id: str | None
    payload: str
    hash: str


class RunHead(NamedTuple):
    run_id: int
    seq: int
    hash: str


class AuditReader:
    """One journal, opened read-only for ``verify`` and ``export``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> AuditReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the file and its chain -----------------------------------------------------------

    def integrity_problems(self) -> list[str]:
        """SQLite's own integrity check: [] when it says ok."""
        lines = [str(line) for (line,) in self.conn.execute("PRAGMA integrity_check")]
        return [] if lines == ["ok"] else lines

    def has_chain(self) -> bool:
        row = self.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'chain'"
        ).fetchone()
        return row is not None

    def chain(self, *, after: int = 0, invoice_ids: set[str] | None = None) -> Iterator[ChainRow]:
        """The chain's events in order, from ``after`` on (all of them, or those of
        ``invoice_ids`` and those of no invoice)."""
        rows = self.conn.execute(
            "SELECT seq, kind, invoice_id, payload, hash FROM chain WHERE seq > ? ORDER BY seq",
            (after,),
        )
        for row in rows:
            event = ChainRow(*row)
            if invoice_ids is None or event.invoice_id is None or event.invoice_id in invoice_ids:
                yield event

    def head(self) -> tuple[int, str]:
        return chain_head(self.conn)

    def chain_event(self, seq: int) -> ChainRow | None:
        row = self.conn.execute(
            "SELECT seq, kind, invoice_id, payload, hash FROM chain WHERE seq = ?", (seq,)
        ).fetchone()
        return None if row is None else ChainRow(*row)

    def chain_hash(self, seq: int) -> str | None:
        """The hash of event ``seq`` (``seq`` 0: the zeros before the first)."""
        if seq == 0:
            return "0" * 64
        row = self.conn.execute("SELECT hash FROM chain WHERE seq = ?", (seq,)).fetchone()
        return None if row is None else str(row[0])

    def run_heads(self) -> list[RunHead]:
        """The chain head each run recorded (at its end, or at its start if it never ended)."""
        rows = self.conn.execute(
            "SELECT id, chain_seq, chain_head FROM runs WHERE chain_seq IS NOT NULL ORDER BY id"
        )
        return [RunHead(*row) for row in rows]

    # ---- the rows the chain covers --------------------------------------------------------

    def covered_rows(self, table: str) -> Iterator[tuple[Any, dict[str, Any]]]:
        """(key, the whole row as a dict) of every row of a table the chain covers."""
        key_column = COVERED[table][1]
        cursor = self.conn.execute(f"SELECT * FROM {table} ORDER BY {key_column}")
        names = [column[0] for column in cursor.description]
        for values in cursor:
            row = dict(zip(names, values, strict=True))
            yield row[key_column], row

    def invoice_rows(self, invoice_ids: set[str] | None = None) -> Iterator[dict[str, Any]]:
        for invoice_id, row in self.covered_rows("invoices"):
            if invoice_ids is None or invoice_id in invoice_ids:
                yield row

    def invoice_row(self, invoice_id: str) -> dict[str, Any] | None:
        cursor = self.conn.execute("SELECT * FROM invoices WHERE invoice_id = ?", (invoice_id,))
        names = [column[0] for column in cursor.description]
        values = cursor.fetchone()
        return None if values is None else dict(zip(names, values, strict=True))

    def known_invoices(self, invoice_ids: list[str]) -> set[str]:
        found = set()
        for invoice_id in invoice_ids:
            row = self.conn.execute(
                "SELECT 1 FROM invoices WHERE invoice_id = ?", (invoice_id,)
            ).fetchone()
            if row is not None:
                found.add(invoice_id)
        return found

    def rows_of(self, table: str, invoice_id: str) -> list[dict[str, Any]]:
        """The rows of ``attempts``, ``events`` or ``revisions`` of one invoice, in order."""
        assert table in ("attempts", "events", "revisions")
        cursor = self.conn.execute(
            f"SELECT * FROM {table} WHERE invoice_id = ? ORDER BY id", (invoice_id,)
        )
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, values, strict=True)) for values in cursor]

    def journal_id(self) -> str | None:
        row = self.conn.execute("SELECT journal_id FROM identity WHERE id = 1").fetchone()
        return None if row is None else str(row[0])

    def sent_invoice_ids(self, since: str | None, until: str | None) -> list[str]:
        """Every invoice with an attempt that started in [since, until), by ID."""
        rows = self.conn.execute(
            "SELECT DISTINCT invoice_id FROM attempts WHERE started_at >= coalesce(?, '')"
            " AND (? IS NULL OR started_at < ?) ORDER BY invoice_id",
            (since, until, until),
        )
        return [invoice_id for (invoice_id,) in rows]

    def changed_after(self, seq: int) -> set[str]:
        """The invoices with a chain event after ``seq``."""
        rows = self.conn.execute(
            "SELECT DISTINCT invoice_id FROM chain WHERE seq > ? AND invoice_id IS NOT NULL",
            (seq,),
        )
        return {invoice_id for (invoice_id,) in rows}

    def first_event_of(self, invoice_ids: list[str]) -> int | None:
        """The first chain event of any of ``invoice_ids``."""
        first = None
        for invoice_id in invoice_ids:
            (seq,) = self.conn.execute(
                "SELECT min(seq) FROM chain WHERE invoice_id = ?", (invoice_id,)
            ).fetchone()
            if seq is not None and (first is None or seq < first):
                first = int(seq)
        return first

    # ---- stored bytes ---------------------------------------------------------------------

    def blob_count(self) -> int:
        (count,) = self.conn.execute("SELECT count(*) FROM blobs").fetchone()
        return int(count)

    def blob_names(self) -> list[str]:
        return [str(sha256) for (sha256,) in self.conn.execute("SELECT sha256 FROM blobs")]

    def blob(self, sha256: str) -> tuple[int, bytes] | None:
        """(recorded size, the bytes as unpacked) of one blob; None when there is none.
        ``ValueError`` or ``RuntimeError`` when its packed bytes cannot be unpacked."""
        row = self.conn.execute(
            "SELECT size, codec, data FROM blobs WHERE sha256 = ?", (sha256,)
        ).fetchone()
        if row is None:
            return None
        return int(row[0]), unpack(row[1], bytes(row[2]))

    def revisions_without_blob(self) -> list[tuple[str, str]]:
        rows = self.conn.execute(
            "SELECT r.invoice_id, r.sha256 FROM revisions r"
            " LEFT JOIN blobs b ON b.sha256 = r.sha256 WHERE b.sha256 IS NULL ORDER BY r.id"
        )
        return [(invoice_id, sha256) for invoice_id, sha256 in rows]

    def invoices_of_content(self, sha256: str) -> list[str]:
        rows = self.conn.execute(
            "SELECT invoice_id FROM revisions WHERE sha256 = ? ORDER BY invoice_id", (sha256,)
        )
        return [invoice_id for (invoice_id,) in rows]

    def sent_bodies(self) -> Iterator[tuple[int, str, str, str, str]]:
        """(attempt id, invoice ID, revision sha256, body sha256, receiver facts JSON) of
        every attempt, for rebuilding its body from the stored bytes."""
        rows = self.conn.execute(
            "SELECT a.id, a.invoice_id, a.revision_sha256, a.body_sha256,"
            " json_extract(r.facts, '$.customer_endpoint')"
            " FROM attempts a LEFT JOIN revisions r"
            " ON r.invoice_id = a.invoice_id AND r.sha256 = a.revision_sha256 ORDER BY a.id"
        )
        yield from rows


def receiver_of(facts_json: str | None) -> tuple[str, str] | None:
    """(scheme, id) from a revision's ``customer_endpoint`` facts; None when it has none."""
    if facts_json is None:
        return None
    endpoint = json.loads(facts_json)
    if not isinstance(endpoint, dict):
        return None
    return str(endpoint.get("scheme")), str(endpoint.get("id"))

"""What an export chooses to hold: the invoices sent in a range, and the chain events it reads.

The ``attempts`` table, its ``attempts_started`` index and the chain's ``kind`` and
``invoice_id`` columns are covered by no hash: an edited start time, a damaged index or a
relabelled event would take a sent invoice out of the table's answer without a trace. So the
choice is made twice, from the table (fast, by its index) and from the attempt events' own
payloads, which the hashes cover; the export holds both, and an invoice the table no longer
shows as the chain recorded it is then refused by the row checks, named.

The chain has no index on time. Its events are written in time order (each ``at`` is the
journal's clock at the write, and an attempt's ``started_at`` is taken just before its first
event), so the events of attempts started from ``since`` on lie from the first event at or
after ``since``, which a bisection of the chain's ``at`` finds in a few dozen reads: a dated
export reads the chain from there to its head (the part's own segment reaches the head too),
not the whole of it. A clock set back across ``since`` between two writes could put an
attempt before that point, where this pass does not look: only the table's choice holds it.
"""

from __future__ import annotations

import sqlite3
from typing import Any


def _sent_event(since: str | None, until: str | None) -> tuple[str, list[str]]:
    """SQL for an event's invoice when its payload is an attempt started in [since, until),
    else NULL, and its parameters: the payload's own kind, never the ``kind`` column."""
    started = "json_extract(payload, '$.row.started_at')"
    bounded = "" if until is None else f" AND {started} < ?"
    return (
        "CASE WHEN json_valid(payload) AND json_extract(payload, '$.kind') = 'attempt'"
        f" AND {started} >= ?{bounded} THEN json_extract(payload, '$.row.invoice_id') END",
        [since or "", *([] if until is None else [until])],
    )


class ChoiceReads:
    """The reads of ``AuditReader`` that choose an export's invoices and its chain segment."""

    conn: sqlite3.Connection

    def sent_invoice_ids(self, since: str | None, until: str | None) -> list[str]:
        """Every invoice with an attempt that started in [since, until), by ID: those the
        ``attempts`` table names and those its attempt events in the chain name."""
        # A bound only when given, so that the range is a search of attempts_started (an
        # "? IS NULL OR" in SQL made it a walk of every attempt).
        where, bounds = "started_at >= ?", [since or ""]
        if until is not None:
            where, bounds = where + " AND started_at < ?", [*bounds, until]
        rows = self.conn.execute(f"SELECT invoice_id FROM attempts WHERE {where}", bounds)
        return sorted({invoice_id for (invoice_id,) in rows} | self.chained_sent(since, until))

    def chained_sent(self, since: str | None, until: str | None) -> set[str]:
        """The invoices whose attempt events, as the chain's payloads hold them, started in
        [since, until): the events from the first at or after ``since`` to the head."""
        first = 1 if since is None else self.first_at_or_after(since)
        selected, bounds = _sent_event(since, until)
        rows = self.conn.execute(f"SELECT {selected} FROM chain WHERE seq >= ?", [*bounds, first])
        return {str(invoice_id) for (invoice_id,) in rows if invoice_id is not None}

    def sent_among(self, invoice_ids: list[str], since: str | None, until: str | None) -> list[str]:
        """Those of ``invoice_ids`` with an attempt that started in [since, until), as the
        ``attempts`` table or the invoice's attempt events say, in order: a look at each
        one's attempts and events (a top-up's new invoices, not every one sent)."""
        where, bounds = "invoice_id = ? AND started_at >= ?", [since or ""]
        if until is not None:
            where, bounds = where + " AND started_at < ?", [*bounds, until]
        in_table = f"SELECT 1 FROM attempts WHERE {where} LIMIT 1"
        selected, chained = _sent_event(since, until)
        in_chain = f"SELECT 1 FROM chain WHERE invoice_id = ? AND {selected} IS NOT NULL LIMIT 1"
        return [
            invoice_id
            for invoice_id in invoice_ids
            if self.conn.execute(in_table, [invoice_id, *bounds]).fetchone() is not None
            or self.conn.execute(in_chain, [invoice_id, *chained]).fetchone() is not None
        ]

    def first_at_or_after(self, moment: str) -> int:
        """A sequence number before which every event's ``at`` is before ``moment`` (the
        chain being in time order): a bisection, each step one event read by its key. An
        event whose time cannot be read counts as at or after: the answer only moves back."""
        low, high = 1, self._last_seq() + 1
        while low < high:
            middle = (low + high) // 2
            row = self.conn.execute(
                "SELECT seq, CASE WHEN json_valid(payload) THEN json_extract(payload, '$.at')"
                " END FROM chain WHERE seq >= ? ORDER BY seq LIMIT 1",
                (middle,),
            ).fetchone()
            if row is None or not isinstance(row[1], str) or row[1] >= moment:
                high = middle
            else:
                low = int(row[0]) + 1
        return low

    def _last_seq(self) -> int:
        (seq,) = self.conn.execute("SELECT coalesce(max(seq), 0) FROM chain").fetchone()
        return int(seq) if isinstance(seq, int) else 0

    def first_not_as_payload(self, after: int) -> tuple[int, str, Any, Any, Any] | None:
        """The first chain event after ``after`` whose ``kind`` or ``invoice_id`` column,
        which its hash does not cover, is not what its payload says: (seq, the column, its
        value, the payload's, the payload's invoice). The export reads events by these
        columns."""
        row = self.conn.execute(
            "SELECT seq, kind, json_extract(payload, '$.kind'), invoice_id,"
            " json_extract(payload, '$.row.invoice_id') FROM chain WHERE seq > ?"
            " AND CASE WHEN json_valid(payload) THEN kind IS NOT json_extract(payload, '$.kind')"
            " OR invoice_id IS NOT json_extract(payload, '$.row.invoice_id') ELSE 0 END"
            " ORDER BY seq LIMIT 1",
            (after,),
        ).fetchone()
        if row is None:
            return None
        seq, kind, payload_kind, invoice_id, payload_invoice = row
        if kind != payload_kind:
            return int(seq), "kind", kind, payload_kind, payload_invoice
        return int(seq), "invoice_id", invoice_id, payload_invoice, payload_invoice

    def changed_after(self, seq: int) -> set[str]:
        """The invoices with a chain event after ``seq``."""
        # No DISTINCT: with it SQLite walked the whole chain_invoice index, not the range of
        # seq after ``seq`` (0.2 s at a million invoices, against 0.2 ms).
        rows = self.conn.execute(
            "SELECT invoice_id FROM chain WHERE seq > ? AND invoice_id IS NOT NULL", (seq,)
        )
        return {invoice_id for (invoice_id,) in rows}

    def first_event_of(self, invoice_ids: list[str]) -> int | None:
        """The first chain event of any of ``invoice_ids``."""
        query = "SELECT min(seq) FROM chain WHERE invoice_id = ?"
        firsts = [
            self.conn.execute(query, (invoice_id,)).fetchone()[0] for invoice_id in invoice_ids
        ]
        return min((int(seq) for seq in firsts if seq is not None), default=None)

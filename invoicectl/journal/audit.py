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

from invoicectl.journal.audit_choice import ChoiceReads
from invoicectl.journal.chain import COVERED
from invoicectl.journal.chain import head as chain_head
from invoicectl.journal.migrations import NewerJournal, up_to_date
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


# A blob's columns as the checks read them: its data as bytes, and a size that is no whole
# number as -1, whatever a hand edit stored: the blob fails its check, named, and no other.
_BLOB_COLUMNS = (
    "sha256, CASE typeof(size) WHEN 'integer' THEN size ELSE -1 END, codec, CAST(data AS BLOB)"
)


class AuditReader(ChoiceReads):
    """One journal, opened read-only for ``verify`` and ``export``.

    Every read happens in one read transaction: the journal as it was at the first read,
    whatever a ``send`` running meanwhile commits. Without it, rows written after the chain
    was read would look like rows written outside invoicectl, and an export's evidence could
    run ahead of its chain segment. (Its own temporary tables are not the journal's.)
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = sqlite3.connect(
            f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None
        )
        self.conn.execute("BEGIN")

    def close(self) -> None:
        try:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # a damaged file may refuse even that; closing is all that is left
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

    def chain(self, *, after: int = 0, upto: int | None = None) -> Iterator[ChainRow]:
        """The chain's events in order, from ``after`` on (up to ``upto``, when given)."""
        rows = self.conn.execute(
            "SELECT seq, kind, invoice_id, payload, hash FROM chain"
            " WHERE seq > ? AND (? IS NULL OR seq <= ?) ORDER BY seq",
            (after, upto, upto),
        )
        for row in rows:
            yield ChainRow(*row)

    def invoice_snapshots(self, invoice_id: str, first: int, upto: int) -> Iterator[str]:
        """The payloads of an invoice's row events from event ``first`` to ``upto``."""
        rows = self.conn.execute(
            "SELECT payload FROM chain WHERE invoice_id = ? AND kind = 'invoice'"
            " AND seq BETWEEN ? AND ? ORDER BY seq",
            (invoice_id, first, upto),
        )
        for (payload,) in rows:
            yield str(payload)

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

    def run_heads(self) -> Iterator[RunHead]:
        """The chain head each run recorded (at its end, or at its start if it never ended)."""
        rows = self.conn.execute(
            "SELECT id, chain_seq, chain_head FROM runs WHERE chain_seq IS NOT NULL ORDER BY id"
        )
        for row in rows:
            yield RunHead(*row)

    def up_to_date(self) -> bool:
        """Whether every migration of this invoicectl is applied (False: an older one wrote
        the journal, and the next command that opens it to write upgrades it)."""
        try:
            return up_to_date(self.conn)
        except NewerJournal as newer:
            raise newer.at(self.path) from None

    def lacking(self) -> list[str]:
        """What of this version's schema (``table`` or ``table.column``) a journal brought
        up to date lacks: dropped by hand, its rows and their record went with it."""
        if not self.up_to_date():  # an older one lacks what its next open adds
            return []
        from invoicectl.journal.sqlite_open import lacking_schema

        return lacking_schema(self.conn)

    def has_table(self, name: str) -> bool:
        row = self.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
        ).fetchone()
        return row is not None

    # ---- each row's last event, kept on disk (a temporary table), not in memory -----------

    def begin_last_events(self) -> None:
        """A temporary table of each covered row's last event: (table, key, seq, digest).
        SQLite keeps it in its temporary file, so a journal of any size is checked in the
        memory of its page cache."""
        self.conn.execute(
            "CREATE TEMP TABLE IF NOT EXISTS last_event (tbl TEXT NOT NULL, key NOT NULL,"
            " seq INTEGER NOT NULL, digest BLOB NOT NULL, PRIMARY KEY (tbl, key)) WITHOUT ROWID"
        )
        self.conn.execute("DELETE FROM temp.last_event")

    def record_last_events(self, events: list[tuple[str, Any, int, bytes]]) -> None:
        """Events in chain order: a later event of a row replaces the one before."""
        self.conn.executemany("INSERT OR REPLACE INTO temp.last_event VALUES (?, ?, ?, ?)", events)

    def rows_and_last_events(
        self, table: str
    ) -> Iterator[tuple[Any, dict[str, Any], int | None, bytes | None]]:
        """(key, the whole row, its last event's seq and digest, or None) of every row."""
        key_column = COVERED[table][1]
        # ``+t.key``: an expression without affinity, so that SQLite compares the key as it
        # is and finds it by the temporary table's primary key (a column's INTEGER affinity
        # would make it scan every entry of the table for each row).
        cursor = self.conn.execute(
            f"SELECT t.*, l.seq, l.digest FROM main.{table} t LEFT JOIN temp.last_event l"
            f" ON l.tbl = ? AND l.key = +t.{key_column} ORDER BY t.{key_column}",
            (table,),
        )
        names = [column[0] for column in cursor.description][:-2]
        for values in cursor:
            row = dict(zip(names, values[:-2], strict=True))
            yield row[key_column], row, values[-2], values[-1]

    def rows_deleted(self, table: str) -> Iterator[tuple[Any, int]]:
        """(key, seq of its last event) of rows the chain holds and the table does not."""
        key_column = COVERED[table][1]
        yield from self.conn.execute(
            f"SELECT l.key, l.seq FROM temp.last_event l WHERE l.tbl = ? AND NOT EXISTS"
            f" (SELECT 1 FROM main.{table} t WHERE t.{key_column} = l.key) ORDER BY l.seq",
            (table,),
        )

    # ---- the rows the chain covers --------------------------------------------------------

    def first_row_gone(self, after: int) -> tuple[int, str, Any, str | None] | None:
        """(seq, kind, key, invoice) of the first row event after ``after`` whose row is not in
        its table (rows are never deleted by invoicectl), or None: one pass over those events,
        each looked up by its table's key."""
        gone = " OR ".join(
            f"(c.kind = '{kind}' AND NOT EXISTS (SELECT 1 FROM main.{table} t"
            f" WHERE t.{key_column} = json_extract(c.payload, '$.key')))"
            for table, (kind, key_column) in COVERED.items()
            if self.has_table(table)
        )
        row = self.conn.execute(
            "SELECT c.seq, c.kind, json_extract(c.payload, '$.key'), c.invoice_id FROM chain c"
            f" WHERE c.seq > ? AND CASE WHEN json_valid(c.payload) THEN ({gone}) ELSE 0 END"
            " ORDER BY c.seq LIMIT 1",
            (after,),
        ).fetchone()
        return None if row is None else (int(row[0]), str(row[1]), row[2], row[3])

    def row_as_last_chained(self, invoice_id: str) -> bool:
        """Whether the invoice's row is, column for column, what its last chain event (by
        its payload's kind) says."""
        last = self.conn.execute(
            "SELECT payload FROM chain WHERE invoice_id = ?"
            " AND json_extract(payload, '$.kind') = 'invoice' ORDER BY seq DESC LIMIT 1",
            (invoice_id,),
        ).fetchone()
        row = self.invoice_row(invoice_id)
        return last is not None and json.loads(last[0]).get("row") == row

    def rows_not_as_chained(self, invoice_id: str) -> list[str]:
        """The invoice's attempts, revisions and audit-trail entries whose row is not, column
        for column, what its last chain event says, or that are gone: ``attempt 37`` each."""
        last: dict[tuple[str, Any], Any] = {}
        # The payload's kind, not the ``kind`` column: a deleted attempt's events relabelled
        # by hand ('attempt ') would hide that its row is gone.
        for kind, payload in self.conn.execute(
            "SELECT json_extract(payload, '$.kind') AS k, payload FROM chain"
            " WHERE invoice_id = ? AND k IN ('attempt', 'revision', 'event') ORDER BY seq",
            (invoice_id,),
        ):
            event = json.loads(payload)
            last[(kind, event.get("key"))] = event.get("row")
        differ = []
        for table, kind in (
            ("attempts", "attempt"),
            ("revisions", "revision"),
            ("events", "event"),
        ):
            for row in self.rows_of(table, invoice_id):
                if last.pop((kind, row["id"]), None) != row:
                    differ.append(f"{kind} {row['id']}")
        differ += [f"{kind} {key} (its row is gone)" for kind, key in last]
        return differ

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

    # ---- stored bytes ---------------------------------------------------------------------

    def blob_count(self) -> int:
        (count,) = self.conn.execute("SELECT count(*) FROM blobs").fetchone()
        return int(count)

    def blob_names(self) -> Iterator[str]:
        for (sha256,) in self.conn.execute("SELECT sha256 FROM blobs"):
            yield str(sha256)

    def stored_blobs(self) -> Iterator[tuple[str, int, str | None, bytes]]:
        """(sha256, recorded size, codec, packed bytes) of every blob, one at a time."""
        for sha256, size, codec, data in self.conn.execute(f"SELECT {_BLOB_COLUMNS} FROM blobs"):
            yield str(sha256), size, codec, data

    def stored_blob(self, sha256: str) -> tuple[str, int, str | None, bytes] | None:
        row = self.conn.execute(
            f"SELECT {_BLOB_COLUMNS} FROM blobs WHERE sha256 = ?", (sha256,)
        ).fetchone()
        return None if row is None else (str(row[0]), row[1], row[2], row[3])

    def blob(self, sha256: str) -> tuple[int, bytes] | None:
        """(recorded size, the bytes as unpacked) of one blob; None when there is none.
        ``ValueError`` or ``RuntimeError`` when its packed bytes cannot be unpacked."""
        stored = self.stored_blob(sha256)
        if stored is None:
            return None
        return stored[1], unpack(stored[2], stored[3])

    def revisions_without_blob(self) -> Iterator[tuple[str, str]]:
        yield from self.conn.execute(
            "SELECT r.invoice_id, r.sha256 FROM revisions r"
            " LEFT JOIN blobs b ON b.sha256 = r.sha256 WHERE b.sha256 IS NULL ORDER BY r.id"
        )

    def attempts_without_revision(self) -> Iterator[tuple[int, str, str]]:
        """(attempt id, invoice ID, revision sha256) of attempts whose revision is gone."""
        yield from self.conn.execute(
            "SELECT a.id, a.invoice_id, a.revision_sha256 FROM attempts a"
            " WHERE NOT EXISTS (SELECT 1 FROM revisions r"
            "   WHERE r.invoice_id = a.invoice_id AND r.sha256 = a.revision_sha256) ORDER BY a.id"
        )

    def invoices_of_content(self, sha256: str) -> list[str]:
        rows = self.conn.execute(
            "SELECT invoice_id FROM revisions WHERE sha256 = ? ORDER BY invoice_id", (sha256,)
        )
        return [invoice_id for (invoice_id,) in rows]

    def revisions_of_content(self, sha256: str) -> list[tuple[str, Any]]:
        """(invoice ID, facts as stored) of each revision with this content."""
        rows = self.conn.execute(
            "SELECT invoice_id, facts FROM revisions WHERE sha256 = ? ORDER BY invoice_id",
            (sha256,),
        )
        return [(invoice_id, facts) for invoice_id, facts in rows]

    def attempt_bodies(self, invoice_id: str, sha256: str) -> list[tuple[int, str]]:
        """(attempt id, body sha256) of each attempt that carried this revision."""
        rows = self.conn.execute(
            "SELECT id, body_sha256 FROM attempts WHERE invoice_id = ? AND revision_sha256 = ?"
            " ORDER BY id",
            (invoice_id, sha256),
        )
        return [(attempt_id, body_sha256) for attempt_id, body_sha256 in rows]


def receiver_of(facts_json: Any) -> tuple[str, str] | None:
    """(scheme, id) from a revision's facts (``customer_endpoint``); None when it has none,
    or the facts are not what a scan writes."""
    try:
        facts = json.loads(facts_json)
    except (TypeError, ValueError):
        return None
    endpoint = facts.get("customer_endpoint") if isinstance(facts, dict) else None
    if not isinstance(endpoint, dict):
        return None
    return str(endpoint.get("scheme")), str(endpoint.get("id"))

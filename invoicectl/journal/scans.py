"""What a scan stores and reads: bytes, revisions, file stats, and the scan's own grouping.

A scan (``invoicectl.scan.ingest``) first stores what it found, in bounded write transactions
(``store_found``); then it settles each invoice ID seen. For that it works on two temporary
tables: ``temp.scan``, one row per file found, and ``temp.ids``, one row per invoice ID seen,
with whether it came in one content and the journal's current content and state for it.
The common cases (new and unchanged) are answered set-wise from these, so memory stays flat
and a re-scan stays cheap; the rest come back one ID at a time (``unsettled_files``).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager

from invoicectl.journal.contents import StoredContents, has_stats_under
from invoicectl.journal.database import JournalBase
from invoicectl.journal.records import FACT_COLUMNS, FoundFile, InvoiceState, ScannedCopy

_COLUMNS = ", ".join(FACT_COLUMNS)
_CHAIN_BATCH = 1000
# A file's stat as just taken (json_each's key: its path, value: "size:mtime:ctime:inode")
# is the one recorded, and was recorded long enough after the file's last change.
_SAME_STAT = (
    "j.value = f.size || ':' || f.mtime_ns || ':' || f.ctime_ns || ':' || f.inode"
    " AND f.checked_at_ns - f.ctime_ns > :racy_ns"
)


class ScanRecords(JournalBase):
    # ---- what the journal already knows ---------------------------------------------------

    def stored_contents(self, unless: Collection[str] = frozenset()) -> StoredContents:
        """Whether the journal holds a revision of a content (``sha256 in ...``), but for
        the contents ``unless``: asked of each file a scan hashes, one lookup each."""
        return StoredContents(self.path, self.db.conn, unless)

    def take_unchanged(
        self, prefix: str, found: Mapping[str, str], racy_ns: int, unless: Collection[str] = ()
    ) -> set[str]:
        """Of ``found`` (path under ``prefix`` -> ``"size:mtime_ns:ctime_ns:inode"`` as just
        taken), each file whose stat the journal recorded as the same, more than ``racy_ns``
        after its last change, and whose content is not one of ``unless``, goes into this
        scan as found unchanged (temp.scan, with its recorded sha256 and invoice ID). Returns
        the paths of the others, to be read. In SQL, a window of files per statement: an
        unchanged file costs no Python object, and a second statement is asked only when a
        file of the window changed."""
        same, params = _SAME_STAT, {"found": json.dumps(found), "racy_ns": racy_ns}
        if unless:
            same += " AND f.sha256 NOT IN (SELECT value FROM json_each(:unless))"
            params["unless"] = json.dumps([*unless])
        cursor = self.db.conn.execute(
            "INSERT INTO temp.scan (invoice_id, sha256, name, path)"
            " SELECT f.invoice_id, f.sha256, substr(f.path, :name_at), f.path"
            f" FROM json_each(:found) AS j JOIN file_stats AS f ON f.path = j.key WHERE {same}",
            {**params, "name_at": len(prefix) + 1},
        )
        if cursor.rowcount == len(found):
            return set()
        rows = self.db.conn.execute(
            "SELECT j.key FROM json_each(:found) AS j WHERE NOT EXISTS"
            f" (SELECT 1 FROM file_stats AS f WHERE f.path = j.key AND {same})",
            params,
        )
        return {path for (path,) in rows}

    def has_stats_under(self, directory: str) -> bool:
        """Whether a file under ``directory`` (a path as stored) was hashed before."""
        return has_stats_under(self.db.conn, directory)

    def remember_stats(
        self, entries: Iterable[tuple[str, tuple[int, ...], str, str | None]]
    ) -> None:
        """Record each file's stat as it was hashed: (path, stat, sha256, the content's
        invoice ID or None when not at hand). A content the journal already held (read
        again, not parsed) gets the ID of its revision, so that the next re-scan of the
        file need not look it up."""
        self.db.conn.executemany(
            "INSERT OR REPLACE INTO file_stats"
            " (path, size, mtime_ns, ctime_ns, inode, checked_at_ns, sha256, invoice_id)"
            " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, coalesce(?8,"
            " (SELECT invoice_id FROM revisions WHERE sha256 = ?7 LIMIT 1)))",
            [(path, *key, sha, invoice_id) for path, key, sha, invoice_id in entries],
        )

    # ---- storing what a scan found --------------------------------------------------------

    def begin_scan(self) -> None:
        """A new temp.scan, emptied of an earlier scan's rows. A scan leaves its rows for the
        connection to drop when it closes, all at once: deleting 100,000 of them one by one
        cost a re-scan 0.3 µs a file."""
        self.db.execute(
            "CREATE TEMP TABLE IF NOT EXISTS scan"
            f" (invoice_id TEXT, sha256 TEXT, name TEXT, path TEXT, reason TEXT, {_COLUMNS})"
        )
        self.db.execute("DELETE FROM temp.scan")

    @contextmanager
    def bulk_writes(self) -> Iterator[None]:
        """Storing what a scan found commits without waiting for the disk (WAL with
        ``synchronous=NORMAL`` never corrupts; a power cut can only lose the last commits).
        Losing them means the next scan reads those files again: no state changes here, so
        nothing is sent twice. Settling commits with the journal's usual ``FULL``, which
        makes everything before it durable too."""
        if self.db.conn.in_transaction:  # SQLite refuses the change inside one
            yield
            return
        (before,) = self.db.execute("PRAGMA synchronous").fetchone()
        self.db.execute("PRAGMA synchronous = NORMAL")
        try:
            yield
        finally:
            self.db.execute(f"PRAGMA synchronous = {int(before)}")

    def store_found(self, batch: Sequence[FoundFile], now: str) -> None:
        """New bytes and revisions, the stats of files read, and every file in temp.scan."""
        new = [item for item in batch if item.stored is not None]
        # Bytes just read and hashed replace a stored copy that differs from them: that copy
        # was damaged (a rescan of the file is how it is repaired).
        self.db.conn.executemany(
            "INSERT INTO blobs (sha256, size, codec, data) VALUES (?, ?, ?, ?)"
            " ON CONFLICT(sha256) DO UPDATE SET size = excluded.size, codec = excluded.codec,"
            " data = excluded.data"
            " WHERE blobs.data IS NOT excluded.data OR blobs.codec IS NOT excluded.codec",
            [(item.sha256, item.size, item.codec, item.stored) for item in new],
        )
        (last,) = self.db.execute("SELECT coalesce(max(id), 0) FROM revisions").fetchone()
        self.db.conn.executemany(
            "INSERT OR IGNORE INTO revisions"
            " (invoice_id, sha256, size, source_path, facts, first_seen)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [
                (item.invoice_id, item.sha256, item.size, item.path, item.facts_json, now)
                for item in new
            ],
        )
        # Their chain events from the rows read in one query, not one query a row.
        added = self.plain_cursor().execute(
            "SELECT * FROM revisions WHERE id > ? ORDER BY id", (last,)
        )
        names = [column[0] for column in added.description]
        self.chained_values("revisions", names, added.fetchall())
        self.remember_stats(
            (item.path, item.stat, item.sha256, item.invoice_id)
            for item in batch
            if item.stat is not None and item.sha256 is not None and item.reason is None
        )
        self.db.conn.executemany(
            f"INSERT INTO temp.scan (invoice_id, sha256, name, path, reason, {_COLUMNS})"
            f" VALUES (?, ?, ?, ?, ?, {', '.join('?' * len(FACT_COLUMNS))})",
            [
                (item.invoice_id, item.sha256, item.name, item.path, item.reason) + item.columns
                for item in batch
                if item.columns is not None
            ],
        )
        # Files known or refused carry no invoice columns (a re-scan's every file).
        self.db.conn.executemany(
            "INSERT INTO temp.scan (invoice_id, sha256, name, path, reason) VALUES (?, ?, ?, ?, ?)",
            [
                (item.invoice_id, item.sha256, item.name, item.path, item.reason)
                for item in batch
                if item.columns is None
            ],
        )

    def files_found(self) -> int:
        """Files of this scan so far: one temp.scan row each."""
        (count,) = self.db.execute("SELECT count(*) FROM temp.scan").fetchone()
        return int(count)

    # ---- grouping by invoice ID -----------------------------------------------------------

    def name_known_content(self) -> None:
        """Content the journal already held carries no ID from the worker: look it up."""
        self.db.execute(
            "UPDATE temp.scan SET invoice_id ="
            " (SELECT invoice_id FROM revisions WHERE revisions.sha256 = scan.sha256)"
            " WHERE invoice_id IS NULL AND reason IS NULL"
        )

    def group_by_id(self) -> None:
        """One row per invoice ID seen (temp.ids): whether it came in one content, the row
        of temp.scan that stands for it (``scan_row``: its content, path and columns),
        whether that content is the journal's current one (``same``: NULL for an ID the
        journal never saw) and the invoice's state. Every settling step reads this one
        grouping instead of grouping again; its rows are narrow (no hashes, no paths), so
        that a re-scan of 100,000 files writes a third of the bytes it did."""
        self.db.execute(
            "CREATE TEMP TABLE IF NOT EXISTS ids (invoice_id TEXT PRIMARY KEY,"
            " one_content INTEGER, scan_row INTEGER, same INTEGER, state TEXT) WITHOUT ROWID"
        )
        self.db.execute(
            "CREATE TEMP VIEW IF NOT EXISTS fresh AS"
            " SELECT i.invoice_id, s.sha256, s.path, i.scan_row FROM temp.ids i"
            " JOIN temp.scan s ON s.rowid = i.scan_row WHERE i.one_content AND i.same IS NULL"
        )
        self.db.execute("DELETE FROM temp.ids")
        # Nearly every ID is in one file: take each row as it is (a third of the time a
        # GROUP BY takes), then group the IDs that turn out to be in several files.
        self.db.execute(
            "INSERT INTO temp.ids SELECT s.invoice_id, 1, s.rowid,"
            " s.sha256 = i.current_sha256, i.state"
            " FROM temp.scan s LEFT JOIN invoices i ON i.invoice_id = s.invoice_id"
            " WHERE s.invoice_id IS NOT NULL ON CONFLICT DO NOTHING"
        )
        (files,) = self.db.execute(
            "SELECT count(*) FROM temp.scan WHERE invoice_id IS NOT NULL"
        ).fetchone()
        (ids,) = self.db.execute("SELECT count(*) FROM temp.ids").fetchone()
        if files == ids:
            return
        # An ID in several files stands for the one named first (with one content, any of
        # its rows has its columns). min = max, not count(DISTINCT): that builds a
        # throwaway index for every ID. A bare rowid beside one min() is that min's row.
        several = (
            "invoice_id IN (SELECT invoice_id FROM temp.scan"
            " WHERE invoice_id IS NOT NULL GROUP BY invoice_id HAVING count(*) > 1)"
        )
        self.db.execute(
            "REPLACE INTO temp.ids SELECT g.invoice_id, g.one_content, p.scan_row,"
            " g.sha256 = i.current_sha256, i.state FROM"
            " (SELECT invoice_id, min(sha256) = max(sha256) AS one_content,"
            f"   min(sha256) AS sha256 FROM temp.scan WHERE {several} GROUP BY invoice_id) g"
            " JOIN (SELECT invoice_id, rowid AS scan_row, min(path) FROM temp.scan"
            f"   WHERE {several} GROUP BY invoice_id) p ON p.invoice_id = g.invoice_id"
            " LEFT JOIN invoices i ON i.invoice_id = g.invoice_id"
        )

    # ---- settling set-wise ----------------------------------------------------------------

    def fresh_without_columns(self) -> list[tuple[str, str, int]]:
        """New IDs whose content the journal already held (a scan stopped before settling
        it), so they came without their columns: (invoice ID, sha256, scan row)."""
        rows = self.db.execute(
            "SELECT f.invoice_id, f.sha256, f.scan_row FROM temp.fresh f"
            " JOIN temp.scan s ON s.rowid = f.scan_row WHERE s.document_type IS NULL"
        )
        return [(invoice_id, sha256, scan_row) for invoice_id, sha256, scan_row in rows]

    def fill_columns(self, scan_row: int, columns: tuple[str | None, ...]) -> None:
        self.db.execute(
            f"UPDATE temp.scan SET ({_COLUMNS}) = ({', '.join('?' * len(columns))})"
            " WHERE rowid = ?",
            (*columns, scan_row),
        )

    def insert_fresh(
        self, valid: InvoiceState, invalid: InvoiceState
    ) -> tuple[list[str], list[tuple[str, str]]]:
        """IDs the journal has never seen, in exactly one content, inserted in one go: in
        state ``valid``, or ``invalid`` with the parser's reason. Returns the new IDs, and
        (ID, reason) for the invalid ones."""
        now = self.now()
        self.db.execute(
            """
            INSERT INTO invoices (
                invoice_id, document_type, receiver_scheme, receiver_id, sender_endpoint,
                issue_date, currency, payable_amount, due_date, current_sha256, source_path,
                state, reason, ingested_at, created_at, updated_at)
            SELECT f.invoice_id, s.document_type, s.receiver_scheme, s.receiver_id,
                s.sender_endpoint, s.issue_date, s.currency, s.payable_amount, s.due_date,
                f.sha256, f.path,
                CASE WHEN s.problem IS NULL THEN :valid ELSE :invalid END, s.problem,
                :now, :now, :now
            FROM temp.fresh f JOIN temp.scan s ON s.rowid = f.scan_row
            ORDER BY f.invoice_id
            """,
            {"now": now, "valid": valid, "invalid": invalid},
        )
        # Their chain events from rows read in one query (a query a row was half the chain's
        # cost at a first scan's 20,000 invoices), a batch at a time: memory stays flat.
        new: list[str] = []
        inserted = self.plain_cursor().execute(
            "SELECT * FROM invoices WHERE invoice_id IN (SELECT invoice_id FROM temp.fresh)"
            " ORDER BY invoice_id"
        )
        names = [column[0] for column in inserted.description]
        id_at = names.index("invoice_id")
        while rows := inserted.fetchmany(_CHAIN_BATCH):
            self.chained_values("invoices", names, rows)
            new.extend(row[id_at] for row in rows)
        refused = self.db.execute(
            "SELECT invoice_id, reason FROM invoices WHERE state = ?"
            " AND invoice_id IN (SELECT invoice_id FROM temp.fresh) ORDER BY invoice_id",
            (invalid,),
        )
        return new, [(invoice_id, reason) for invoice_id, reason in refused]

    def count_unchanged(self, unless: InvoiceState) -> int:
        """IDs seen in one content, the journal's current one, and not in state ``unless``."""
        (count,) = self.db.execute(
            "SELECT count(*) FROM temp.ids WHERE one_content AND same AND state != ?",
            (unless,),
        ).fetchone()
        return int(count)

    def unsettled_files(self, recheck: InvoiceState) -> list[ScannedCopy]:
        """The files of IDs settled one at a time: changed content, several contents, or
        an unchanged ID in state ``recheck``. By invoice ID, then file name."""
        rows = self.db.execute(
            "SELECT s.invoice_id, s.sha256, s.name, s.path FROM temp.scan s"
            " WHERE s.invoice_id IN (SELECT invoice_id FROM temp.ids WHERE NOT one_content"
            "   OR NOT same OR state = ?)"
            " ORDER BY s.invoice_id, s.name",
            (recheck,),
        )
        return [ScannedCopy(*row) for row in rows]

    def found_in_one_content(self, invoice_id: str) -> bool:
        """Whether this scan found ``invoice_id``, in one content only (in one file, or in
        several that are byte for byte the same)."""
        row = self.db.execute(
            "SELECT one_content FROM temp.ids WHERE invoice_id = ?", (invoice_id,)
        ).fetchone()
        return row is not None and bool(row[0])

    def files_of_shared_ids(self) -> dict[str, int]:
        """The IDs this scan found in more than one file, with how many files each: {}, from
        two counts, when every ID was in one file, as nearly always."""
        (files,) = self.db.execute(
            "SELECT count(*) FROM temp.scan WHERE invoice_id IS NOT NULL"
        ).fetchone()
        (ids,) = self.db.execute("SELECT count(*) FROM temp.ids").fetchone()
        if files == ids:
            return {}
        rows = self.db.execute(
            "SELECT invoice_id, count(*) FROM temp.scan WHERE invoice_id IS NOT NULL"
            " GROUP BY invoice_id HAVING count(*) > 1"
        )
        return {invoice_id: int(count) for invoice_id, count in rows}

    def record_unidentified(self, directory_prefix: str) -> list[tuple[str, str]]:
        """Files of this scan that yield no invoice ID, kept by path; those of an earlier
        scan under ``directory_prefix`` that are gone or fixed, forgotten. Returns (file
        name, reason) for this scan's, by name."""
        now = self.now()
        refused = self.db.execute(
            "SELECT name, reason FROM temp.scan WHERE reason IS NOT NULL ORDER BY name"
        ).fetchall()
        self.db.execute(
            "INSERT INTO unidentified_files (path, sha256, reason, first_seen, updated_at)"
            " SELECT path, sha256, reason, :now, :now FROM temp.scan WHERE reason IS NOT NULL"
            " ON CONFLICT(path) DO UPDATE SET sha256 = excluded.sha256,"
            " reason = excluded.reason, updated_at = excluded.updated_at",
            {"now": now},
        )
        self.db.execute(
            "DELETE FROM unidentified_files WHERE substr(path, 1, :n) = :prefix"
            " AND path NOT IN (SELECT path FROM temp.scan WHERE reason IS NOT NULL)",
            {"n": len(directory_prefix), "prefix": directory_prefix},
        )
        return [(name, reason) for name, reason in refused]

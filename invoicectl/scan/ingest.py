"""Scanning an outbox into the journal: the rules behind ``invoicectl scan``.

Every file gets an answer. New content becomes a revision (and its bytes are stored once);
then each invoice ID seen in the scan is settled as design.md says: new IDs become
``pending`` (or ``invalid`` with a reason), a change to an unsent invoice replaces the content
to send, a change to a sent one is ``amended``, and two different files with one ID make that
ID ``invalid``. The common cases (new and unchanged) are settled in a few set-wise SQL
statements so that memory stays flat and a re-scan stays cheap; the rest, one ID at a time.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

from invoicectl.errors import ConfigError
from invoicectl.journal import Journal, peek_known_sha256
from invoicectl.scan.candidates import find_candidates
from invoicectl.scan.facts_record import INVOICE_COLUMNS, invoice_columns
from invoicectl.scan.reader import HeadStart, scan_files, start_reading
from invoicectl.scan.scanned import ScannedFile, as_text
from invoicectl.ubl import one_line

# A write transaction stores at most this many files, or about this many bytes of them.
_COMMIT_EVERY = 500
_COMMIT_BYTES = 16 * 1024 * 1024
# A directory with fewer files is scanned in well under a second: no head start.
_HEAD_START_FILES = 1000
# temp.scan carries the invoice columns of new content, so new IDs settle without JSON.
_COLUMNS = ", ".join(INVOICE_COLUMNS)


@dataclass(frozen=True)
class Problem:
    subject: str  # an invoice ID, or a file name when the file yields no ID
    reason: str


@dataclass
class ScanReport:
    files: int = 0
    new: list[str] = field(default_factory=list)
    unchanged: int = 0
    changed: list[str] = field(default_factory=list)
    amended: list[str] = field(default_factory=list)
    invalid: list[Problem] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary_lines(self) -> list[str]:
        """What ``scan`` prints: the counts, then one line per invalid or amended invoice."""
        lines = [
            f"scanned {self.files} files: {len(self.new)} new, {self.unchanged} unchanged, "
            f"{len(self.changed)} changed, {len(self.amended)} amended, "
            f"{len(self.invalid)} invalid"
        ]
        lines += [f"  invalid  {problem.subject}: {problem.reason}" for problem in self.invalid]
        lines += [
            f"  amended  {invoice_id}: changed after it was sent; "
            f"see `invoicectl show {invoice_id}`"
            for invoice_id in self.amended
        ]
        return lines


def scan_directory(
    journal: Journal, directory: Path, *, recursive: bool = False, workers: int | None = None
) -> ScanReport:
    """Hash, parse and record every ``*.xml`` under ``directory``."""
    with OpenScan(directory, recursive=recursive, workers=workers) as scan:
        return scan.into(journal)


class OpenScan:
    """One scan of one directory, from listing its files to the report.

    Given the journal's path, it is opened before the journal is. Then a first scan of a
    large directory (the journal holds no stats under it) hands its first files to the worker
    processes at once, and they read and parse while the journal's libraries load and the run
    lock is taken: most of a scan's start-up is imports, with one core idle. What the journal
    holds is read for that without the lock, read-only (``peek_known_sha256``); content
    stored since is recognised when settling, as for any file.
    """

    def __init__(
        self,
        directory: Path,
        *,
        recursive: bool = False,
        workers: int | None = None,
        journal_path: Path | None = None,
    ) -> None:
        self.root = directory.expanduser().absolute()
        if not self.root.is_dir():
            raise ConfigError(f"the outbox {directory} is not a directory")
        self.workers = workers
        self.unlisted: list[ScannedFile] = []
        self.names = find_candidates(self.root, recursive, self.unlisted)
        self.head: HeadStart | None = None
        if journal_path is not None and len(self.names) >= _HEAD_START_FILES:
            known = peek_known_sha256(journal_path, as_text(str(self.root)))
            if known is not None:
                self.head = start_reading(self.names, self.root, known, workers)

    def __enter__(self) -> OpenScan:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.head is not None:  # never handed on: the journal could not be opened
            self.head.reader.close()

    def into(self, journal: Journal) -> ScanReport:
        # A directory never scanned into this journal has no stats to look up (a first scan).
        has_stats = journal.has_stats_under(as_text(str(self.root)))
        head, self.head = self.head, None  # scan_files closes its reader
        scanned = scan_files(
            self.names,
            self.root,
            journal.known_sha256,
            journal.cached_stats if has_stats else None,
            workers=self.workers,
            head=head,
        )
        return Ingest(journal, self.root).run(chain(self.unlisted, scanned))


@dataclass(frozen=True)
class _Found:
    sha256: str
    name: str
    path: str


class Ingest:
    """One scan of one directory into the journal."""

    def __init__(self, journal: Journal, root: Path) -> None:
        self.journal = journal
        self.db = journal.db
        self.root = root
        self.report = ScanReport()

    def run(self, scanned: Iterable[ScannedFile]) -> ScanReport:
        self.db.execute(
            "CREATE TEMP TABLE IF NOT EXISTS scan"
            f" (invoice_id TEXT, sha256 TEXT, name TEXT, path TEXT, reason TEXT, {_COLUMNS})"
        )
        self.db.execute("DELETE FROM temp.scan")
        with self._bulk_writes():
            self._store(scanned)
        with self.journal.transaction():
            self._name_known_content()
            self._group_by_id()
            self._settle_new()
            self._count_unchanged()
            self._settle_the_rest()
            self._record_unidentified()
        self.db.execute("DELETE FROM temp.scan")
        return self.report

    # ---- storing what was found -----------------------------------------------------------

    @contextmanager
    def _bulk_writes(self) -> Iterator[None]:
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

    def _store(self, scanned: Iterable[ScannedFile]) -> None:
        now = self.journal.now()
        batch: list[ScannedFile] = []
        held = 0
        for item in scanned:
            self.report.files += 1
            batch.append(item)
            held += len(item.stored) if item.stored is not None else 0
            if len(batch) >= _COMMIT_EVERY or held >= _COMMIT_BYTES:
                # Bounded write transactions keep the WAL and memory small; a crash mid-scan
                # leaves only revisions, which the next scan settles.
                with self.journal.transaction():
                    self._store_batch(batch, now)
                batch.clear()
                held = 0
        with self.journal.transaction():
            self._store_batch(batch, now)

    def _name_known_content(self) -> None:
        """Content the journal already held carries no ID from the worker: look it up."""
        self.db.execute(
            "UPDATE temp.scan SET invoice_id ="
            " (SELECT invoice_id FROM revisions WHERE revisions.sha256 = scan.sha256)"
            " WHERE invoice_id IS NULL AND reason IS NULL"
        )

    def _store_batch(self, batch: list[ScannedFile], now: str) -> None:
        new = [item for item in batch if item.stored is not None]
        self.db.conn.executemany(
            "INSERT OR IGNORE INTO blobs (sha256, size, codec, data) VALUES (?, ?, ?, ?)",
            [(item.sha256, item.size, item.codec, item.stored) for item in new],
        )
        self.db.conn.executemany(
            "INSERT OR IGNORE INTO revisions"
            " (invoice_id, sha256, size, source_path, facts, first_seen)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [
                (item.invoice_id, item.sha256, item.size, item.path, item.facts_json, now)
                for item in new
            ],
        )
        self.journal.remember_stats(
            (item.path, item.stat, item.sha256, item.invoice_id)
            for item in batch
            if item.stat is not None and item.sha256 is not None and item.reason is None
        )
        self.db.conn.executemany(
            f"INSERT INTO temp.scan (invoice_id, sha256, name, path, reason, {_COLUMNS})"
            f" VALUES (?, ?, ?, ?, ?, {', '.join('?' * len(INVOICE_COLUMNS))})",
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

    # ---- settling each invoice ID ---------------------------------------------------------

    def _group_by_id(self) -> None:
        """One row per invoice ID seen (temp.ids): whether it came in one content, and the
        journal's current content and state for it (NULL for an ID the journal never saw).
        Every settling step below reads this one grouping instead of grouping again."""
        self.db.execute(
            "CREATE TEMP TABLE IF NOT EXISTS ids (invoice_id TEXT PRIMARY KEY,"
            " one_content INTEGER, sha256 TEXT, path TEXT, scan_row INTEGER,"
            " current_sha256 TEXT, state TEXT) WITHOUT ROWID"
        )
        self.db.execute(
            "CREATE TEMP VIEW IF NOT EXISTS fresh AS SELECT invoice_id, sha256, path, scan_row"
            " FROM temp.ids WHERE one_content AND current_sha256 IS NULL"
        )
        self.db.execute("DELETE FROM temp.ids")
        # Nearly every ID is in one file: take each row as it is (a third of the time a
        # GROUP BY takes), then group the IDs that turn out to be in several files.
        self.db.execute(
            "INSERT INTO temp.ids SELECT s.invoice_id, 1, s.sha256, s.path, s.rowid,"
            " i.current_sha256, i.state"
            " FROM temp.scan s LEFT JOIN invoices i ON i.invoice_id = s.invoice_id"
            " WHERE s.invoice_id IS NOT NULL ON CONFLICT DO NOTHING"
        )
        (files,) = self.db.execute(
            "SELECT count(*) FROM temp.scan WHERE invoice_id IS NOT NULL"
        ).fetchone()
        (ids,) = self.db.execute("SELECT count(*) FROM temp.ids").fetchone()
        if files == ids:
            return
        # With one content, any of the ID's rows in temp.scan (scan_row) has its columns.
        # (min = max, not count(DISTINCT): that builds a throwaway index for every ID.)
        self.db.execute(
            "REPLACE INTO temp.ids SELECT s.invoice_id, min(s.sha256) = max(s.sha256),"
            " min(s.sha256), min(s.path), min(s.rowid), i.current_sha256, i.state"
            " FROM temp.scan s LEFT JOIN invoices i ON i.invoice_id = s.invoice_id"
            " WHERE s.invoice_id IN (SELECT invoice_id FROM temp.scan"
            "   WHERE invoice_id IS NOT NULL GROUP BY invoice_id HAVING count(*) > 1)"
            " GROUP BY s.invoice_id"
        )

    def _settle_new(self) -> None:
        """IDs the journal has never seen, in exactly one content: insert them in one go."""
        self._fill_known_columns()
        now = self.journal.now()
        self.db.execute(
            """
            INSERT INTO invoices (
                invoice_id, document_type, receiver_scheme, receiver_id, sender_endpoint,
                issue_date, currency, payable_amount, current_sha256, source_path, state,
                reason, ingested_at, created_at, updated_at)
            SELECT f.invoice_id, s.document_type, s.receiver_scheme, s.receiver_id,
                s.sender_endpoint, s.issue_date, s.currency, s.payable_amount, f.sha256, f.path,
                CASE WHEN s.problem IS NULL THEN 'pending' ELSE 'invalid' END, s.problem,
                :now, :now, :now
            FROM temp.fresh f JOIN temp.scan s ON s.rowid = f.scan_row
            ORDER BY f.invoice_id
            """,
            {"now": now},
        )
        self.report.new.extend(
            invoice_id for (invoice_id,) in self.db.execute("SELECT invoice_id FROM temp.fresh")
        )
        invalid = self.db.execute(
            "SELECT invoice_id, reason FROM invoices WHERE state = 'invalid'"
            " AND invoice_id IN (SELECT invoice_id FROM temp.fresh) ORDER BY invoice_id"
        )
        self.report.invalid.extend(Problem(*row) for row in invalid)

    def _fill_known_columns(self) -> None:
        """A new ID whose content the journal already held (a scan stopped before settling
        it) came without its columns: take them from the revision's facts."""
        rows = self.db.execute(
            "SELECT f.invoice_id, f.sha256, f.scan_row FROM temp.fresh f"
            " JOIN temp.scan s ON s.rowid = f.scan_row WHERE s.document_type IS NULL"
        ).fetchall()
        for invoice_id, sha256, scan_row in rows:
            columns = invoice_columns(self.journal.facts(invoice_id, sha256))
            self.db.execute(
                f"UPDATE temp.scan SET ({_COLUMNS}) = ({', '.join('?' * len(columns))})"
                " WHERE rowid = ?",
                (*columns, scan_row),
            )

    def _count_unchanged(self) -> None:
        (count,) = self.db.execute(
            "SELECT count(*) FROM temp.ids WHERE one_content AND sha256 = current_sha256"
            " AND state != 'invalid'"
        ).fetchone()
        self.report.unchanged += count

    def _settle_the_rest(self) -> None:
        """Changed content, duplicates, and invalid invoices that may have been fixed."""
        rows = self.db.execute(
            "SELECT s.invoice_id, s.sha256, s.name, s.path FROM temp.scan s"
            " WHERE s.invoice_id IN (SELECT invoice_id FROM temp.ids WHERE NOT one_content"
            "   OR sha256 != current_sha256 OR state = 'invalid')"
            " ORDER BY s.invoice_id, s.name"
        ).fetchall()
        found: dict[str, dict[str, _Found]] = {}
        for invoice_id, sha256, name, path in rows:
            found.setdefault(invoice_id, {}).setdefault(sha256, _Found(sha256, name, path))
        for invoice_id, distinct in found.items():
            self._settle_one(invoice_id, list(distinct.values()))

    def _settle_one(self, invoice_id: str, distinct: list[_Found]) -> None:
        row = self.journal.invoice(invoice_id)
        if len(distinct) > 1:
            self._settle_duplicate(invoice_id, row, distinct)
            return
        (found,) = distinct
        if row is None:  # pragma: no cover - new single-content IDs are settled set-wise
            raise AssertionError(f"{invoice_id} should have been inserted with the new ones")
        if row["current_sha256"] == found.sha256:
            self.report.unchanged += 1
            self._recheck_invalid(row)
        else:
            self.report.changed.append(invoice_id)
            self._settle_change(row, found)

    def _settle_duplicate(
        self, invoice_id: str, row: sqlite3.Row | None, distinct: list[_Found]
    ) -> None:
        # File names may hold line breaks; a reason is one line.
        names = sorted(one_line(found.name) for found in distinct)
        reason = (
            f"invoice ID {one_line(invoice_id, 80)} is in {len(names)} files with different "
            f"content ({', '.join(names)}); keep one file per invoice ID"
        )
        self.report.invalid.append(Problem(invoice_id, reason))
        if row is None:
            first = min(distinct, key=lambda found: found.name)
            self._insert(invoice_id, first, "invalid", reason)
            self.report.new.append(invoice_id)
        elif row["idempotency_key"] is None:
            self.journal.update_invoice(invoice_id, state="invalid", reason=reason)
        elif row["state"] != "invalid":
            # Already sent: held until the clash is resolved, then restored.
            self.journal.update_invoice(
                invoice_id, state="invalid", reason=reason, state_before_amend=row["state"]
            )

    def _recheck_invalid(self, row: sqlite3.Row) -> None:
        """An unchanged file may stop being invalid: the duplicate it clashed with is gone."""
        invoice_id = row["invoice_id"]
        if row["idempotency_key"] is not None:
            restored = row["state_before_amend"] or "pending"
            self.journal.update_invoice(
                invoice_id, state=restored, reason=None, state_before_amend=None
            )
            return
        state, reason = _local_verdict(self.journal.facts(invoice_id, row["current_sha256"]))
        if (row["state"], row["reason"]) != (state, reason):
            self.journal.update_invoice(invoice_id, state=state, reason=reason)
        if state == "invalid":
            self.report.invalid.append(Problem(invoice_id, reason or ""))

    def _settle_change(self, row: sqlite3.Row, found: _Found) -> None:
        invoice_id = row["invoice_id"]
        facts = self.journal.facts(invoice_id, found.sha256)
        if row["idempotency_key"] is None:
            # Never sent: the new content simply replaces the old as the one to send.
            state, reason = _local_verdict(facts)
            self._set_content(invoice_id, found, facts, new_content=True)
            self.journal.update_invoice(invoice_id, state=state, reason=reason)
            if state == "invalid":
                self.report.invalid.append(Problem(invoice_id, reason or ""))
        elif row["state"] == "rejected":
            # Refused, so nothing was delivered; the fix goes out under a key of its own.
            state, reason = _local_verdict(facts)
            version = row["key_version"] + 1
            self._set_content(invoice_id, found, facts, new_content=True)
            self.journal.update_invoice(
                invoice_id,
                state=state,
                reason=reason,
                key_version=version,
                idempotency_key=None,
                key_sha256=None,
                key_first_used_at=None,
                transaction_id=None,
            )
            self.journal.add_event(
                invoice_id, "new_version", f"corrected after rejection; next key is v{version}"
            )
        elif found.sha256 == row["key_sha256"]:
            # The file went back to exactly what was sent.
            self._set_content(invoice_id, found, facts)
            restored = row["state_before_amend"] or row["state"]
            self.journal.update_invoice(
                invoice_id, state=restored, reason=None, state_before_amend=None
            )
        else:
            self._set_content(invoice_id, found, facts)
            reason = (
                f"content changed after key {row['idempotency_key']} carried other content "
                f"(sent {row['key_sha256'][:12]}, now {found.sha256[:12]}); "
                "it will not be sent under that key"
            )
            before = row["state_before_amend"] if row["state"] == "amended" else row["state"]
            self.journal.update_invoice(
                invoice_id, state="amended", reason=reason, state_before_amend=before
            )
            self.report.amended.append(invoice_id)

    def _record_unidentified(self) -> None:
        now = self.journal.now()
        rows = self.db.execute(
            "SELECT name, reason FROM temp.scan WHERE reason IS NOT NULL ORDER BY name"
        ).fetchall()
        for name, reason in rows:
            self.report.invalid.append(Problem(name, reason))
        self.db.execute(
            "INSERT INTO unidentified_files (path, sha256, reason, first_seen, updated_at)"
            " SELECT path, sha256, reason, :now, :now FROM temp.scan WHERE reason IS NOT NULL"
            " ON CONFLICT(path) DO UPDATE SET sha256 = excluded.sha256,"
            " reason = excluded.reason, updated_at = excluded.updated_at",
            {"now": now},
        )
        # A file fixed or removed since the last scan of this directory is no longer a problem.
        prefix = as_text(str(self.root).rstrip("/")) + "/"  # as the files' paths were stored
        self.db.execute(
            "DELETE FROM unidentified_files WHERE substr(path, 1, :n) = :prefix"
            " AND path NOT IN (SELECT path FROM temp.scan WHERE reason IS NOT NULL)",
            {"n": len(prefix), "prefix": prefix},
        )

    # ---- writing one invoice --------------------------------------------------------------

    def _insert(self, invoice_id: str, found: _Found, state: str, reason: str | None) -> None:
        now = self.journal.now()
        facts = self.journal.facts(invoice_id, found.sha256)
        self.db.execute(
            "INSERT INTO invoices (invoice_id, document_type, current_sha256, source_path,"
            " state, reason, ingested_at, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (invoice_id, facts["document_type"], found.sha256, found.path, state, reason)
            + (now, now, now),
        )
        self._set_content(invoice_id, found, facts)

    def _set_content(
        self, invoice_id: str, found: _Found, facts: dict[str, Any], new_content: bool = False
    ) -> None:
        values: dict[str, Any] = dict(zip(INVOICE_COLUMNS, invoice_columns(facts), strict=True))
        del values["problem"]  # the caller decides the state and reason
        values.update(current_sha256=found.sha256, source_path=found.path)
        if new_content:
            values["ingested_at"] = self.journal.now()
        self.journal.update_invoice(invoice_id, **values)


def _local_verdict(facts: dict[str, Any]) -> tuple[str, str | None]:
    problem = facts.get("problem")
    return ("invalid", problem) if problem else ("pending", None)

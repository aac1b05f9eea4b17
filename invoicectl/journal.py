"""The journal: one SQLite file that holds every invoice, revision, byte, attempt and run.

It is the only place invoicectl keeps state, and the reason a crash loses nothing: WAL mode,
``synchronous=FULL``, and every state change committed before the program moves on. The
schema lives in ``migrations.py``; ingest rules (design.md, "The journal" and "Idempotency")
live here.
"""

from __future__ import annotations

import json
import os
import sqlite3
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from invoicectl import ubl
from invoicectl.errors import JournalError
from invoicectl.migrations import migrations
from invoicectl.scanner import ScannedFile

STATES = ("pending", "invalid", "accepted", "rejected", "key_reused", "unknown", "amended")

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def default_journal_path(environ: dict[str, str] | None = None) -> Path:
    """``$INVOICECTL_JOURNAL``, else the user's state directory (XDG on Linux)."""
    environ = dict(os.environ) if environ is None else environ
    if explicit := environ.get("INVOICECTL_JOURNAL"):
        return Path(explicit).expanduser()
    state_home = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "invoicectl" / "journal.db"


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
        data = asdict(self)
        data["invalid"] = [asdict(problem) for problem in self.invalid]
        return data


@dataclass
class _Seen:
    """The files of one scan that carry one invoice ID."""

    files: list[ScannedFile] = field(default_factory=list)

    @property
    def distinct(self) -> dict[str, ScannedFile]:
        by_sha: dict[str, ScannedFile] = {}
        for scanned in self.files:
            assert scanned.sha256 is not None
            by_sha.setdefault(scanned.sha256, scanned)
        return by_sha


class Journal:
    def __init__(self, path: Path, clock: Clock = utc_now) -> None:
        self.path = path
        self.clock = clock
        self.db = _open_database(path)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now(self) -> str:
        return self.clock().isoformat()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self.db.atomic():
            yield

    # ---- ingest -------------------------------------------------------------------------

    def known_contents(self) -> dict[str, str]:
        """sha256 -> invoice ID for every revision the journal holds."""
        rows = self.db.execute("SELECT sha256, invoice_id FROM revisions")
        return dict(rows.fetchall())

    def ingest(self, scanned: Iterable[ScannedFile], root: Path) -> ScanReport:
        """Record one scan of ``root``: new content as revisions, then each ID's state."""
        report = ScanReport()
        known = self.known_contents()
        by_id: dict[str, _Seen] = {}
        unidentified: list[ScannedFile] = []
        with self.transaction():
            for count, item in enumerate(scanned, start=1):
                report.files += 1
                invoice_id = self._store_content(item, known)
                if invoice_id is None:
                    unidentified.append(item)
                else:
                    by_id.setdefault(invoice_id, _Seen()).files.append(item)
                if count % 1000 == 0:  # keep the write transaction (and WAL) bounded
                    self.db.commit()
                    self.db.begin()
            for invoice_id, seen in by_id.items():
                self._settle(invoice_id, seen, report)
            self._record_unidentified(unidentified, root, report)
        return report

    def _store_content(self, item: ScannedFile, known: dict[str, str]) -> str | None:
        """Store new bytes and their revision; return the invoice ID the content belongs to."""
        if item.reason is not None or item.sha256 is None:
            return None
        if item.known:
            return known[item.sha256]
        assert item.facts is not None and item.data is not None
        invoice_id = item.facts.invoice_id
        self.db.execute(
            "INSERT OR IGNORE INTO blobs (sha256, size, data) VALUES (?, ?, ?)",
            (item.sha256, len(item.data), zlib.compress(item.data, 6)),
        )
        self.db.execute(
            "INSERT OR IGNORE INTO revisions"
            " (invoice_id, sha256, size, source_path, facts, first_seen)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (
                invoice_id,
                item.sha256,
                item.size,
                str(item.path),
                json.dumps(_facts_to_dict(item.facts)),
                self.now(),
            ),
        )
        known[item.sha256] = invoice_id
        return invoice_id

    def _settle(self, invoice_id: str, seen: _Seen, report: ScanReport) -> None:
        row = self.invoice(invoice_id)
        distinct = seen.distinct
        if len(distinct) > 1:
            self._settle_duplicate(invoice_id, row, distinct, report)
            return
        ((sha256, item),) = distinct.items()
        if row is None:
            facts = self._facts(invoice_id, sha256)
            state, reason = _local_verdict(facts)
            self._insert_invoice(invoice_id, sha256, item, facts, state, reason)
            report.new.append(invoice_id)
            if state == "invalid":
                report.invalid.append(Problem(invoice_id, reason or ""))
        elif row["current_sha256"] == sha256:
            report.unchanged += 1
            if row["state"] == "invalid":
                self._recheck_invalid(row, report)
        else:
            report.changed.append(invoice_id)
            self._settle_change(row, sha256, item, self._facts(invoice_id, sha256), report)

    def _settle_duplicate(
        self,
        invoice_id: str,
        row: sqlite3.Row | None,
        distinct: dict[str, ScannedFile],
        report: ScanReport,
    ) -> None:
        names = sorted(item.name for item in distinct.values())
        reason = (
            f"invoice ID {invoice_id} is in {len(names)} files with different content "
            f"({', '.join(names)}); keep one file per invoice ID"
        )
        report.invalid.append(Problem(invoice_id, reason))
        if row is None:
            sha256, item = min(distinct.items(), key=lambda pair: pair[1].name)
            facts = self._facts(invoice_id, sha256)
            self._insert_invoice(invoice_id, sha256, item, facts, "invalid", reason)
            report.new.append(invoice_id)
        elif row["idempotency_key"] is None:
            self._update(invoice_id, state="invalid", reason=reason)
        elif row["state"] != "invalid":
            # Already sent: keep what the journal knows; the clash is reported and held.
            self._update(
                invoice_id, state="invalid", reason=reason, state_before_amend=row["state"]
            )

    def _settle_change(
        self,
        row: sqlite3.Row,
        sha256: str,
        item: ScannedFile,
        facts: dict[str, Any],
        report: ScanReport,
    ) -> None:
        invoice_id = row["invoice_id"]
        now = self.now()
        if row["idempotency_key"] is None:
            # Never sent: the new content simply replaces the old as the one to send.
            state, reason = _local_verdict(facts)
            self._update_content(invoice_id, sha256, item, facts, ingested_at=now)
            self._update(invoice_id, state=state, reason=reason)
            if state == "invalid":
                report.invalid.append(Problem(invoice_id, reason or ""))
        elif row["state"] == "rejected":
            # Refused, so nothing was delivered; the fix goes out under a key of its own.
            state, reason = _local_verdict(facts)
            version = row["key_version"] + 1
            self._update_content(invoice_id, sha256, item, facts, ingested_at=now)
            self._update(
                invoice_id,
                state=state,
                reason=reason,
                key_version=version,
                idempotency_key=None,
                key_sha256=None,
                key_first_used_at=None,
                transaction_id=None,
            )
            self.add_event(invoice_id, "new_version", f"corrected after rejection; key v{version}")
        elif sha256 == row["key_sha256"]:
            # The file went back to exactly what was sent.
            self._update_content(invoice_id, sha256, item, facts)
            restored = row["state_before_amend"] or row["state"]
            self._update(invoice_id, state=restored, reason=None, state_before_amend=None)
        else:
            self._update_content(invoice_id, sha256, item, facts)
            reason = (
                f"content changed after key {row['idempotency_key']} carried other content "
                f"(sent {row['key_sha256'][:12]}, now {sha256[:12]}); "
                f"it will not be sent under that key"
            )
            before = row["state_before_amend"] if row["state"] == "amended" else row["state"]
            self._update(invoice_id, state="amended", reason=reason, state_before_amend=before)
            report.amended.append(invoice_id)

    def _recheck_invalid(self, row: sqlite3.Row, report: ScanReport) -> None:
        """An unchanged file may stop being invalid: the duplicate it clashed with is gone."""
        invoice_id = row["invoice_id"]
        if row["idempotency_key"] is not None:
            # A sent invoice held by a duplicate goes back to what it was.
            restored = row["state_before_amend"] or "pending"
            self._update(invoice_id, state=restored, reason=None, state_before_amend=None)
            return
        state, reason = _local_verdict(self._facts(invoice_id, row["current_sha256"]))
        if (row["state"], row["reason"]) != (state, reason):
            self._update(invoice_id, state=state, reason=reason)
        if state == "invalid":
            report.invalid.append(Problem(invoice_id, reason or ""))

    def _facts(self, invoice_id: str, sha256: str) -> dict[str, Any]:
        row = self.db.execute(
            "SELECT facts FROM revisions WHERE invoice_id = ? AND sha256 = ?",
            (invoice_id, sha256),
        ).fetchone()
        return dict(json.loads(row[0]))

    def _insert_invoice(
        self,
        invoice_id: str,
        sha256: str,
        item: ScannedFile,
        facts: dict[str, Any],
        state: str,
        reason: str | None,
    ) -> None:
        now = self.now()
        self.db.execute(
            "INSERT INTO invoices (invoice_id, document_type, current_sha256, source_path,"
            " state, reason, ingested_at, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                invoice_id,
                facts["document_type"],
                sha256,
                str(item.path),
                state,
                reason,
                now,
                now,
                now,
            ),
        )
        self._update_content(invoice_id, sha256, item, facts)

    def _update_content(
        self,
        invoice_id: str,
        sha256: str,
        item: ScannedFile,
        facts: dict[str, Any],
        ingested_at: str | None = None,
    ) -> None:
        customer = facts.get("customer_endpoint") or {}
        supplier = facts.get("supplier_endpoint")
        values: dict[str, Any] = {
            "current_sha256": sha256,
            "source_path": str(item.path),
            "document_type": facts["document_type"],
            "receiver_scheme": customer.get("scheme"),
            "receiver_id": customer.get("id"),
            "sender_endpoint": f"{supplier['scheme']}:{supplier['id']}" if supplier else None,
            "issue_date": facts.get("issue_date"),
            "currency": facts.get("currency"),
            "payable_amount": facts.get("payable_amount"),
        }
        if ingested_at is not None:
            values["ingested_at"] = ingested_at
        self._update(invoice_id, **values)

    def _record_unidentified(
        self,
        unidentified: list[ScannedFile],
        root: Path,
        report: ScanReport,
    ) -> None:
        now = self.now()
        for item in unidentified:
            assert item.reason is not None
            report.invalid.append(Problem(item.name, item.reason))
            self.db.execute(
                "INSERT INTO unidentified_files (path, sha256, reason, first_seen, updated_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT(path) DO UPDATE SET"
                " sha256 = excluded.sha256, reason = excluded.reason,"
                " updated_at = excluded.updated_at",
                (str(item.path), item.sha256, item.reason, now, now),
            )
        # A file that was fixed or removed since the last scan of this directory is no longer
        # a problem to list.
        still_bad = {str(item.path) for item in unidentified}
        prefix = str(root).rstrip("/") + "/"
        for (path,) in self.db.execute(
            "SELECT path FROM unidentified_files WHERE substr(path, 1, ?) = ?",
            (len(prefix), prefix),
        ).fetchall():
            if path not in still_bad:
                self.db.execute("DELETE FROM unidentified_files WHERE path = ?", (path,))

    # ---- reading ------------------------------------------------------------------------

    def invoice(self, invoice_id: str) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self.db.execute(
            "SELECT * FROM invoices WHERE invoice_id = ?", (invoice_id,)
        ).fetchone()
        return row

    def invoices(self, state: str | None = None) -> list[sqlite3.Row]:
        sql = "SELECT * FROM invoices"
        params: tuple[str, ...] = ()
        if state is not None:
            sql += " WHERE state = ?"
            params = (state,)
        return list(self.db.execute(sql + " ORDER BY invoice_id", params).fetchall())

    def unidentified_files(self) -> list[sqlite3.Row]:
        return list(self.db.execute("SELECT * FROM unidentified_files ORDER BY path").fetchall())

    def state_counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STATES, 0)
        for state, count in self.db.execute(
            "SELECT state, count(*) FROM invoices GROUP BY state"
        ).fetchall():
            counts[state] = count
        unidentified = self.db.execute("SELECT count(*) FROM unidentified_files").fetchone()
        counts["invalid"] += unidentified[0]
        return counts

    def revisions(self, invoice_id: str) -> list[sqlite3.Row]:
        return list(
            self.db.execute(
                "SELECT * FROM revisions WHERE invoice_id = ? ORDER BY id", (invoice_id,)
            ).fetchall()
        )

    def attempts(self, invoice_id: str) -> list[sqlite3.Row]:
        return list(
            self.db.execute(
                "SELECT * FROM attempts WHERE invoice_id = ? ORDER BY id", (invoice_id,)
            ).fetchall()
        )

    def events(self, invoice_id: str) -> list[sqlite3.Row]:
        return list(
            self.db.execute(
                "SELECT * FROM events WHERE invoice_id = ? ORDER BY id", (invoice_id,)
            ).fetchall()
        )

    def content(self, sha256: str) -> bytes:
        """The exact bytes stored for one revision."""
        row = self.db.execute("SELECT data FROM blobs WHERE sha256 = ?", (sha256,)).fetchone()
        if row is None:
            raise JournalError(f"the journal has no stored bytes for content {sha256[:12]}")
        return zlib.decompress(row[0])

    # ---- writing ------------------------------------------------------------------------

    def _update(self, invoice_id: str, **values: Any) -> None:
        values["updated_at"] = self.now()
        assignments = ", ".join(f"{column} = :{column}" for column in values)
        self.db.execute(
            f"UPDATE invoices SET {assignments} WHERE invoice_id = :invoice_id",
            {**values, "invoice_id": invoice_id},
        )

    def update_invoice(self, invoice_id: str, **values: Any) -> None:
        self._update(invoice_id, **values)

    def add_event(
        self, invoice_id: str | None, kind: str, detail: str, run_id: int | None = None
    ) -> None:
        self.db.execute(
            "INSERT INTO events (invoice_id, run_id, at, kind, detail) VALUES (?, ?, ?, ?, ?)",
            (invoice_id, run_id, self.now(), kind, detail),
        )


def _local_verdict(facts: dict[str, Any]) -> tuple[str, str | None]:
    problem = facts.get("problem")
    return ("invalid", problem) if problem else ("pending", None)


def _facts_to_dict(facts: ubl.InvoiceFacts) -> dict[str, Any]:
    return asdict(facts)


def _open_database(path: Path) -> Database:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        # Created 0600 before SQLite writes a byte: the journal holds invoices.
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    try:
        db = Database(path, execute_plugins=False)
        db.conn.row_factory = sqlite3.Row
        db.execute("PRAGMA busy_timeout = 10000")
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = FULL")
        _check_schema_is_ours(db)
        migrations.apply(db)
    except sqlite3.DatabaseError as error:
        raise JournalError(f"cannot open the journal {path}: {error}") from None
    for suffix in ("-wal", "-shm"):
        sidecar = Path(f"{path}{suffix}")
        if sidecar.exists():
            sidecar.chmod(0o600)
    return db


def _check_schema_is_ours(db: Database) -> None:
    if not db["_sqlite_migrations"].exists():
        return
    ours = {migration.name for migration in migrations._migrations}
    applied = {
        row[0]
        for row in db.execute(
            "SELECT name FROM _sqlite_migrations WHERE migration_set = ?", (migrations.name,)
        ).fetchall()
    }
    if unknown := applied - ours:
        raise JournalError(
            "the journal was written by a newer invoicectl "
            f"(unknown migrations: {', '.join(sorted(unknown))}); upgrade invoicectl"
        )

"""The write-ahead side of the journal: attempts, runs and the environment binding.

An attempt row is committed before its request leaves (``begin_attempt``) and completed when
the answer arrives (``finish_attempt``); a row left without an answer is what a dead run leaves
behind (``unanswered_attempts``). Which order these happen in, and what they mean for an
invoice's state, is the lifecycle's business (``invoicectl.lifecycle``).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Collection
from typing import Any

from invoicectl.journal.database import JournalBase
from invoicectl.journal.records import (
    Attempt,
    AttemptAnswer,
    LiveClaims,
    ReceiverCheck,
    Validated,
)


class SendingRecords(JournalBase):
    # ---- the environment binding ----------------------------------------------------------

    def bound_base_url(self) -> str | None:
        """The base URL this journal sends to; None before its first run."""
        row = self.db.execute("SELECT base_url FROM environment WHERE id = 1").fetchone()
        return None if row is None else str(row[0])

    def last_key_fingerprint(self) -> str | None:
        """The API key fingerprint of the last run that recorded one (this run's is not yet)."""
        row = self.db.execute(
            "SELECT key_fingerprint FROM runs WHERE key_fingerprint IS NOT NULL"
            " ORDER BY id DESC LIMIT 1"
        ).fetchone()
        return None if row is None else str(row[0])

    def bind_base_url(self, base_url: str) -> None:
        """Bind the journal to ``base_url``; a change of binding is an event."""
        bound = self.bound_base_url()
        with self.transaction():
            self.db.execute(
                "INSERT INTO environment (id, base_url, bound_at) VALUES (1, ?, ?)"
                " ON CONFLICT(id) DO UPDATE SET base_url = excluded.base_url,"
                " bound_at = excluded.bound_at",
                (base_url, self.now()),
            )
            self.chained("environment", [1])
            if bound is not None:
                self.add_event(None, "environment_change", f"{bound} -> {base_url}")

    # ---- runs -----------------------------------------------------------------------------

    def begin_run(
        self,
        command: str,
        options: dict[str, Any],
        *,
        base_url: str | None = None,
        key_fingerprint: str | None = None,
    ) -> int:
        with self.transaction():
            cursor = self.db.execute(
                "INSERT INTO runs (command, options, base_url, key_fingerprint, pid, host,"
                " started_at, chain_seq, chain_head) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " RETURNING id",
                (
                    command,
                    json.dumps(options, sort_keys=True, default=str),
                    base_url,
                    key_fingerprint,
                    os.getpid(),
                    socket.gethostname(),
                    self.now(),
                    *self.chain_head(),
                ),
            )
            (run_id,) = cursor.fetchone()
            self.chained("runs", [run_id])
        return int(run_id)

    def finish_run(self, run_id: int, exit_code: int, summary: dict[str, Any]) -> None:
        """The run's end, with the chain's head then: a later change to the chain before
        it shows as a head no longer in the chain (``invoicectl verify``)."""
        with self.transaction():
            self.db.execute(
                "UPDATE runs SET finished_at = ?, exit_code = ?, summary = ?, chain_seq = ?,"
                " chain_head = ? WHERE id = ?",
                (
                    self.now(),
                    exit_code,
                    json.dumps(summary, default=str),
                    *self.chain_head(),
                    run_id,
                ),
            )
            self.chained("runs", [run_id])

    # ---- attempts -------------------------------------------------------------------------

    def begin_attempt(
        self,
        run_id: int,
        invoice_id: str,
        revision_sha256: str,
        idempotency_key: str,
        body_sha256: str,
        started_at: str,
    ) -> int:
        """The write-ahead row of one request, before it leaves."""
        with self.transaction():
            rows = self.db.execute(
                "INSERT INTO attempts (run_id, invoice_id, revision_sha256, idempotency_key,"
                " body_sha256, started_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING *",
                (run_id, invoice_id, revision_sha256, idempotency_key, body_sha256, started_at),
            )
            written = [dict(row) for row in rows]
            self.chained_rows("attempts", written)
        return int(written[0]["id"])

    def finish_attempt(self, attempt_id: int, answer: AttemptAnswer) -> None:
        with self.transaction():
            self.chained_rows("attempts", self._finish_attempt(attempt_id, answer))

    def _finish_attempt(self, attempt_id: int, answer: AttemptAnswer) -> list[dict[str, Any]]:
        """The answer on its attempt row; the row as written."""
        rows = self.db.execute(
            "UPDATE attempts SET finished_at = ?, outcome = ?, http_status = ?, error_code = ?,"
            " message = ?, transaction_id = ?, existing_transaction_id = ?, retry_after = ?,"
            " request_id = ?, raw_body = ?, duration = ? WHERE id = ? RETURNING *",
            (
                self.now(),
                answer.outcome,
                answer.http_status,
                answer.error_code,
                answer.message,
                answer.transaction_id,
                answer.existing_transaction_id,
                answer.retry_after,
                answer.request_id,
                answer.raw_body,
                answer.duration,
                attempt_id,
            ),
        )
        return [_as_stored(dict(row)) for row in rows]

    def unanswered_attempts(self) -> list[Attempt]:
        """Attempts without a recorded answer, oldest first: what a dead run left."""
        rows = self.db.execute("SELECT * FROM attempts WHERE outcome IS NULL ORDER BY id")
        return [Attempt(**dict(row)) for row in rows]

    def claimed_elsewhere(self) -> LiveClaims | None:
        """Who else holds invoices still to send (``pg_workers.claimed_elsewhere``): on a SQLite
        journal, which one run at a time holds, the send of another process holding its run
        lock now (what ``status`` says beside it is not "waiting" nor "unanswered": that send
        has them, in flight or next), else nobody."""
        from invoicectl.journal.runlock import send_elsewhere

        holder = send_elsewhere(self.path)
        if holder is None:
            return None
        who = f"in the hands of the send running now ({holder.describe()})"
        who += ", or of the next send if it stops first"
        return LiveClaims(frozenset(), who, whole_plan=True)

    def attempt_starts_since(self, since: str) -> list[str]:
        """When each request that started at or after ``since`` started."""
        rows = self.db.execute("SELECT started_at FROM attempts WHERE started_at >= ?", (since,))
        return [started for (started,) in rows]

    def count_attempts(
        self, invoice_id: str, idempotency_key: str, *, except_outcomes: Collection[str]
    ) -> int:
        """Attempts under a key, unanswered ones included, but for ``except_outcomes``."""
        excluded = tuple(except_outcomes)
        (count,) = self.db.execute(
            "SELECT count(*) FROM attempts WHERE invoice_id = ? AND idempotency_key = ?"
            f" AND (outcome IS NULL OR outcome NOT IN ({', '.join('?' * len(excluded))}))",
            (invoice_id, idempotency_key, *excluded),
        ).fetchone()
        return int(count)

    # ---- receivers ------------------------------------------------------------------------

    def receiver_check(self, peppol_id: str) -> ReceiverCheck | None:
        row = self.db.execute(
            "SELECT peppol_id, registered, document_types, checked_at FROM receivers"
            " WHERE peppol_id = ?",
            (peppol_id,),
        ).fetchone()
        return None if row is None else _receiver_check(row)

    def receiver_checks(self) -> list[ReceiverCheck]:
        rows = self.db.execute(
            "SELECT peppol_id, registered, document_types, checked_at FROM receivers"
            " ORDER BY peppol_id"
        )
        return [_receiver_check(row) for row in rows]

    def remember_receiver(self, check: ReceiverCheck) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO receivers (peppol_id, registered, document_types, checked_at)"
            " VALUES (?, ?, ?, ?)",
            (
                check.peppol_id,
                int(check.registered),
                json.dumps(list(check.document_types)),
                check.checked_at,
            ),
        )

    # ---- validations ----------------------------------------------------------------------

    def validation(self, sha256: str) -> Validated | None:
        """What the validation said of the content ``sha256``; None if it was never asked."""
        row = self.db.execute(
            "SELECT sha256, valid, errors, checked_at FROM validations WHERE sha256 = ?",
            (sha256,),
        ).fetchone()
        if row is None:
            return None
        return Validated(row[0], bool(row[1]), tuple(json.loads(row[2])), row[3])

    def remember_validation(self, validated: Validated) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO validations (sha256, valid, errors, checked_at)"
            " VALUES (?, ?, ?, ?)",
            (
                validated.sha256,
                int(validated.valid),
                json.dumps(list(validated.errors), ensure_ascii=False),
                validated.checked_at,
            ),
        )


def _receiver_check(row: Any) -> ReceiverCheck:
    peppol_id, registered, document_types, checked_at = row
    return ReceiverCheck(peppol_id, bool(registered), tuple(json.loads(document_types)), checked_at)


_REAL_COLUMNS = ("retry_after", "duration")


def _as_stored(row: dict[str, Any]) -> dict[str, Any]:
    """A row from ``RETURNING`` as ``SELECT`` reads it back, which the chain's event must be
    (``invoicectl verify`` compares them): SQLite keeps a whole-number REAL as an integer and
    ``RETURNING`` hands it back so (1, not 1.0), whatever was bound."""
    for column in _REAL_COLUMNS:
        if row.get(column) is not None:
            row[column] = float(row[column])
    return row

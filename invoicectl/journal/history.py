"""What the journal knows of its own history: its identity, its sends, its history checks.

A journal that was lost and made anew (its file truncated, its directory removed, its -wal
deleted before a checkpoint) is an empty journal that does not know what it sent; one rolled
back (an older backup restored, a -wal lost after a checkpoint) has forgotten its last runs.
The send's history check (``send/history.py``) asks these questions before it trusts the
journal's picture of what was never sent.
"""

from __future__ import annotations

import json
from typing import Any

from invoicectl.errors import JournalError
from invoicectl.journal.database import JournalBase
from invoicectl.journal.failures import explain_lost_row
from invoicectl.journal.records import JournalIdentity

# The outcome a check records before its search (``record_history_check``), as stored.
BEGUN = json.dumps({"begun": True})


class HistoryRecords(JournalBase):
    def identity(self) -> JournalIdentity:
        """This journal's random id and when it was made (m008)."""
        row = self.db.execute("SELECT journal_id, created_at FROM identity WHERE id = 1").fetchone()
        if row is None:  # written by its migration, never deleted: the file was edited
            raise JournalError(explain_lost_row(self.path, "its identity (table identity)"))
        return JournalIdentity(str(row[0]), str(row[1]))

    def has_sent_to(self, base_url: str) -> bool:
        """Whether any request was ever recorded here by a run against ``base_url``."""
        row = self.db.execute(
            "SELECT 1 FROM attempts JOIN runs ON runs.id = attempts.run_id"
            " WHERE runs.base_url = ? LIMIT 1",
            (base_url,),
        ).fetchone()
        return row is not None

    def transactions_by_key(self, invoice_id: str) -> set[tuple[str | None, str]]:
        """(idempotency key, transaction) of every transaction the invoice has known as its
        own or its key's: named by an answer to one of its attempts, or held by its row at
        any time (the chain keeps each version of the row: one reconcile adopted or judged
        is there, though no answer named it)."""
        known: set[tuple[str | None, str]] = set()
        for key, *named in self.db.execute(
            "SELECT idempotency_key, transaction_id, existing_transaction_id FROM attempts"
            " WHERE invoice_id = ?",
            (invoice_id,),
        ):
            known.update((key, str(txn)) for txn in named if txn)
        for (payload,) in self.db.execute(
            "SELECT payload FROM chain WHERE invoice_id = ? AND kind = 'invoice'", (invoice_id,)
        ):
            try:
                row = json.loads(payload).get("row") or {}
            except (ValueError, AttributeError):  # a damaged event: verify names it
                continue
            named = (row.get("transaction_id"), row.get("existing_transaction_id"))
            known.update((row.get("idempotency_key"), txn) for txn in named if isinstance(txn, str))
        return known

    def transaction_owner(
        self, transaction_id: str, other_than: str, key: str | None = None
    ) -> str | None:
        """The invoice other than ``other_than`` that holds ``transaction_id`` as its own, or
        as the one a 422 or a history check named for it, if any (by the indexes of m015 and
        m016). One a 422 named to a request of that invoice under ``key`` (its attempts say)
        is that key's send, so not another invoice's to a request under the same key (two
        invoice IDs may share one: "A" at version 2 and "A-v2" at version 1)."""
        named = "existing_transaction_id = ?"
        values: tuple[str, ...] = (transaction_id,)
        if key is not None:
            named += (
                " AND NOT EXISTS (SELECT 1 FROM attempts WHERE attempts.invoice_id ="
                " invoices.invoice_id AND attempts.existing_transaction_id = ?"
                " AND attempts.idempotency_key = ?)"
            )
            values = (transaction_id, transaction_id, key)
        for condition, parameters in (("transaction_id = ?", (transaction_id,)), (named, values)):
            row = self.db.execute(
                f"SELECT invoice_id FROM invoices WHERE {condition} AND invoice_id != ? LIMIT 1",
                (*parameters, other_than),
            ).fetchone()
            if row is not None:
                return str(row[0])
        return None

    def last_request_at(self) -> str | None:
        """When the last request recorded here started, by any run to any base URL."""
        (started,) = self.db.execute("SELECT max(started_at) FROM attempts").fetchone()
        return None if started is None else str(started)

    def sent_elsewhere_than(self, base_url: str) -> str | None:
        """A base URL other than ``base_url`` a run of this journal sent a request to that
        GoRoute may have taken, if any: a request never sent, or answered as by no GoRoute
        (a wrong path) or with the key refused, binds nothing and counts for nothing here.
        (Runs by their index on base_url; a journal has a handful of base URLs.)"""
        row = self.db.execute(
            "SELECT r.base_url FROM runs r WHERE r.base_url IS NOT NULL AND r.base_url != ?"
            " AND EXISTS (SELECT 1 FROM attempts a WHERE a.run_id = r.id AND (a.outcome IS NULL"
            "   OR a.outcome NOT IN ('not_sent', 'wrong_endpoint', 'auth_refused'))) LIMIT 1",
            (base_url,),
        ).fetchone()
        return None if row is None else str(row[0])

    def history_checked(self, base_url: str) -> bool:
        """Whether a send already checked GoRoute's transactions from this journal (or
        skipped the check on purpose): a check only begun is none."""
        row = self.db.execute(
            "SELECT 1 FROM history_checks WHERE base_url = ? AND outcome != ? LIMIT 1",
            (base_url, BEGUN),
        ).fetchone()
        return row is not None

    def check_underway(self) -> bool:
        """Whether another host's history check runs (``pg_journal.CheckTurn``): never on a
        SQLite journal, which one run at a time holds."""
        return False

    def unfinished_history_check(self) -> str | None:
        """The last history check begun (``BEGUN``) that recorded no end after it, by any
        run (its run stopped, refused, out of time, or its process gone), as "run N at T";
        None when every one ended. A silence probe's rows are no end."""
        row = self.db.execute(
            "SELECT b.run_id, b.checked_at FROM history_checks b WHERE b.id ="
            " (SELECT max(id) FROM history_checks WHERE outcome = ?) AND NOT EXISTS"
            " (SELECT 1 FROM history_checks e WHERE e.id > b.id AND e.outcome != ?"
            "  AND e.outcome NOT LIKE '{\"seen_elsewhere\"%')",
            (BEGUN, BEGUN),
        ).fetchone()
        if row is None:
            return None
        return f"a send at {row[1]}" if row[0] is None else f"run {row[0]} at {row[1]}"

    def history_check_outcomes(self, why: str, since: str) -> list[dict[str, Any]]:
        """The outcomes of the checks recorded for ``why`` at ``since`` or later."""
        rows = self.db.execute(
            "SELECT outcome FROM history_checks WHERE why = ? AND checked_at >= ? ORDER BY id",
            (why, since),
        )
        return [json.loads(outcome) for (outcome,) in rows]

    def record_history_check(
        self, base_url: str, run_id: int | None, why: str, outcome: dict[str, Any]
    ) -> None:
        """A check made, skipped on purpose, or ``{"begun": true}`` (``BEGUN``) before its
        search: a check that never records its end leaves that row the last."""
        with self.transaction():
            cursor = self.db.execute(
                "INSERT INTO history_checks (base_url, run_id, checked_at, why, outcome)"
                " VALUES (?, ?, ?, ?, ?) RETURNING id",
                (base_url, run_id, self.now(), why, json.dumps(outcome, sort_keys=True)),
            )
            self.chained("history_checks", [cursor.fetchone()[0]])

    def last_attempt_of(self, run_id: int) -> int | None:
        """The id of run ``run_id``'s last attempt this journal holds; None for none."""
        (last,) = self.db.execute(
            "SELECT max(id) FROM attempts WHERE run_id = ?", (run_id,)
        ).fetchone()
        return None if last is None else int(last)

    def run_started_at(self, run_id: int) -> str | None:
        """When run ``run_id`` started; None when this journal holds no such run."""
        row = self.db.execute("SELECT started_at FROM runs WHERE id = ?", (run_id,)).fetchone()
        return None if row is None else str(row[0])

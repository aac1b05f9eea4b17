"""Invoices, their revisions, their stored bytes and their events: reads, and the one write.

``save`` is the only way an invoice row changes after it is created, and only the lifecycle
(``invoicectl.lifecycle``) calls it: it writes a whole ``Invoice`` record back, on condition
that the row still holds the state and key it was read with.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import fields
from functools import cache
from typing import Any

from invoicectl.errors import JournalError, StoredCopyDamaged
from invoicectl.journal.database import JournalBase
from invoicectl.journal.failures import explain_lost_row, explain_never_written
from invoicectl.journal.monitoring_schema import DELIVERY_FAILED
from invoicectl.journal.packing import unpack
from invoicectl.journal.records import (
    Attempt,
    Event,
    Hold,
    Invoice,
    InvoiceState,
    Listed,
    Revision,
    SendOrder,
    UnidentifiedFile,
)

_FIELDS = tuple(field.name for field in fields(Invoice))
_INVOICE_COLUMNS = _FIELDS[1:]  # every column but the key
# A credit note is not "due": it goes by its issue date, as an undated invoice does.
_DUE = "CASE WHEN document_type = 'Invoice' THEN coalesce(due_date, issue_date) ELSE issue_date END"
_ORDER_BY = {
    SendOrder.due: f"({_DUE}) IS NULL, {_DUE}, ",
    SendOrder.issue: "issue_date IS NULL, issue_date, ",
    SendOrder.scan: "",
}
# What reconcile follows of the accepted: delivery not known to be final. Exactly the WHERE of
# the partial index invoices_in_delivery (m010), so that SQLite uses it.
IN_DELIVERY = "state = 'accepted' AND remote_status IS NOT 'delivered'"
assert InvoiceState.accepted == "accepted"
_LISTED = ", ".join(Listed._fields)
_WHERE_STILL = " WHERE invoice_id = ? AND state = ? AND idempotency_key IS ?"
_STILL_SQL = "SELECT 1 FROM invoices" + _WHERE_STILL


# A save that places or lifts a hold also needs the hold it read to be the row's still (by its
# kind and when it was placed): two operators at once must not undo each other's decision, a
# release writing over an abandon made since it read the row.
_WHERE_HOLD_STILL = " AND hold IS ? AND held_at IS ?"
_HOLD_COLUMNS = frozenset(("hold", "held_at", "held_by", "hold_reason"))


@cache
def _save_sql(columns: tuple[str, ...]) -> str:
    return (
        "UPDATE invoices SET "
        + ", ".join(f"{c} = ?" for c in columns)
        + _WHERE_STILL
        + (_WHERE_HOLD_STILL if _HOLD_COLUMNS & set(columns) else "")
        + " RETURNING *"
    )


def _filtered(states: Sequence[str], verdict: str | None) -> tuple[str, list[Any]]:
    """The WHERE (and its parameters) of invoices in ``states`` (any, when none) with that
    last ``verdict`` (any, when None)."""
    conditions = [f"state IN ({', '.join('?' * len(states))})"] if states else []
    params: list[Any] = [*states]
    if verdict is not None:
        conditions.append("verdict = ?")
        params.append(verdict)
    return (f" WHERE {' AND '.join(conditions)}" if conditions else ""), params


def _invoice(row: Any) -> Invoice:
    """``Invoice.from_row``; a state or hold invoicectl never writes is one line."""
    try:
        return Invoice.from_row(row)
    except ValueError as error:  # the journal changed by hand
        raise JournalError(explain_never_written(row["invoice_id"], error)) from None


class InvoiceRecords(JournalBase):
    # ---- reading ------------------------------------------------------------------------

    def invoice(self, invoice_id: str) -> Invoice | None:
        row = self.db.execute(
            "SELECT * FROM invoices WHERE invoice_id = ?", (invoice_id,)
        ).fetchone()
        return None if row is None else _invoice(row)

    def invoices(self, *states: InvoiceState, verdict: str | None = None) -> list[Invoice]:
        """Every invoice, or those in ``states`` (and with that last ``verdict``), by ID."""
        where, params = _filtered(states, verdict)
        rows = self.db.execute(f"SELECT * FROM invoices{where} ORDER BY invoice_id", params)
        return [_invoice(row) for row in rows]

    def listed(
        self,
        state: InvoiceState | None = None,
        verdict: str | None = None,
        limit: int | None = None,
    ) -> Iterator[Listed]:
        """What ``status`` lists of each invoice (in ``state``, with last ``verdict``), by ID,
        at most ``limit`` (None: all), read as they are written out: memory stays flat for a
        journal of any size, and a page of one state reads only that page (invoices_state_id).
        """
        where, params = _filtered(() if state is None else (state,), verdict)
        where += " ORDER BY invoice_id"
        if limit is not None:
            where += " LIMIT ?"
            params.append(limit)
        return self._listing(f"SELECT {_LISTED} FROM invoices{where}", params)

    def delivery_failures(self, limit: int | None = None) -> Iterator[Listed]:
        """Accepted invoices whose delivery failed, by ID, at most ``limit``, read by their own
        index (invoices_delivery_failed): what ``status`` lists first among the accepted."""
        sql = f"SELECT {_LISTED} FROM invoices WHERE {DELIVERY_FAILED} ORDER BY invoice_id"
        if limit is None:
            return self._listing(sql, ())
        return self._listing(f"{sql} LIMIT ?", (limit,))

    def _listing(self, sql: str, params: Sequence[Any]) -> Iterator[Listed]:
        """The rows of ``sql`` as ``Listed``, read as they are written out, on a cursor of its
        own: the caller may read other things between two rows."""
        cursor = self.db.conn.cursor()
        cursor.row_factory = None
        cursor.execute(sql, params)
        try:
            for row in cursor:
                yield Listed._make(row)
        finally:
            # A reader that stopped early: the cursor let go (PostgreSQL's is the server's). A
            # listing stopped by a signal is finalised after its journal closed, and the
            # connection let go of it then.
            if not self.closed:
                cursor.close()

    def in_delivery(self) -> list[Invoice]:
        """Accepted invoices whose delivery is not known to be final (not ``delivered``), by
        ID: what reconcile follows. One found delivered needs nothing more, and is not read."""
        rows = self.db.execute(f"SELECT * FROM invoices WHERE {IN_DELIVERY} ORDER BY invoice_id")
        return [_invoice(row) for row in rows]

    def sent_without_answer(self) -> list[tuple[str, str | None]]:
        """(invoice ID, key first used at) of every ``unknown`` invoice and every ``pending``
        one whose key has been used, by first use, but those on hold: what a send may
        replay."""
        rows = self.db.execute(
            "SELECT invoice_id, key_first_used_at FROM invoices WHERE hold IS NULL AND"
            " (state = ? OR (state = ? AND key_first_used_at IS NOT NULL))"
            " ORDER BY key_first_used_at, invoice_id",
            (InvoiceState.unknown, InvoiceState.pending),
        )
        return [(invoice_id, first_used_at) for invoice_id, first_used_at in rows]

    def requested_before(
        self, invoice_ids: Sequence[str], undelivered: Sequence[str]
    ) -> dict[str, str | None]:
        """Those of ``invoice_ids`` with a request that may have delivered them (no answer
        recorded, or an outcome not in ``undelivered``), each with the last transaction id
        one was given (or None)."""
        found: dict[str, str | None] = {}
        for start in range(0, len(invoice_ids), 500):
            chunk = invoice_ids[start : start + 500]
            rows = self.db.execute(
                "SELECT invoice_id, max(transaction_id) FROM attempts"
                f" WHERE invoice_id IN ({_marks(chunk)})"
                f" AND (outcome IS NULL OR outcome NOT IN ({_marks(undelivered)}))"
                " GROUP BY invoice_id",
                (*chunk, *undelivered),
            )
            found.update({invoice_id: txn for invoice_id, txn in rows})
        return found

    def marked(
        self, invoice_ids: Sequence[str], verdicts: Sequence[str], event_kinds: Sequence[str]
    ) -> set[str]:
        """Those of ``invoice_ids`` with one of ``verdicts``, or an event of ``event_kinds``:
        a query a few hundred of them, never a read of each (a send plans every run)."""
        found: set[str] = set()
        for start in range(0, len(invoice_ids), 500):
            chunk = invoice_ids[start : start + 500]
            rows = self.db.execute(
                f"SELECT i.invoice_id FROM invoices i WHERE i.invoice_id IN ({_marks(chunk)})"
                f" AND (i.verdict IN ({_marks(verdicts)}) OR EXISTS (SELECT 1 FROM events e"
                f"   WHERE e.invoice_id = i.invoice_id AND e.kind IN ({_marks(event_kinds)})))",
                (*chunk, *verdicts, *event_kinds),
            )
            found.update(invoice_id for (invoice_id,) in rows)
        return found

    def keys_left_pending(self) -> list[tuple[str, str]]:
        """(invoice ID, key) of each ``pending`` invoice holding a key with no request under
        it open: a run stopped between two of its tries left it so."""
        rows = self.db.execute(
            "SELECT invoice_id, idempotency_key FROM invoices i WHERE state = ?"
            " AND idempotency_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM attempts a"
            "   WHERE a.invoice_id = i.invoice_id AND a.outcome IS NULL)"
            f"{self._not_claimed('i')} ORDER BY invoice_id",
            (InvoiceState.pending,),
        )
        return [(invoice_id, key) for invoice_id, key in rows]

    def _not_claimed(self, alias: str) -> str:
        """A condition that leaves out invoices a live send worker holds: none on SQLite."""
        return ""

    def never_sent(self, order: SendOrder = SendOrder.scan) -> list[str]:
        """Every ``pending`` invoice whose key was never used and that is not on hold, in
        ``order``; undated ones after the dated, then in the order they arrived."""
        rows = self.db.execute(
            "SELECT invoice_id FROM invoices WHERE state = ? AND key_first_used_at IS NULL"
            f" AND hold IS NULL ORDER BY {_ORDER_BY[order]}ingested_at, invoice_id",
            (InvoiceState.pending,),
        )
        return [invoice_id for (invoice_id,) in rows]

    def unidentified_files(self) -> list[UnidentifiedFile]:
        rows = self.db.execute("SELECT * FROM unidentified_files ORDER BY path")
        return [UnidentifiedFile(**dict(row)) for row in rows]

    def revisions(self, invoice_id: str) -> list[Revision]:
        rows = self.db.execute(
            "SELECT * FROM revisions WHERE invoice_id = ? ORDER BY id", (invoice_id,)
        )
        return [Revision(**dict(row)) for row in rows]

    def attempts(self, invoice_id: str) -> list[Attempt]:
        rows = self.db.execute(
            "SELECT * FROM attempts WHERE invoice_id = ? ORDER BY id", (invoice_id,)
        )
        return [Attempt(**dict(row)) for row in rows]

    def events(self, invoice_id: str) -> list[Event]:
        rows = self.db.execute(
            "SELECT * FROM events WHERE invoice_id = ? ORDER BY id", (invoice_id,)
        )
        return [Event(**dict(row)) for row in rows]

    def facts(self, invoice_id: str, sha256: str) -> dict[str, Any]:
        """What the parser found in one revision."""
        row = self.db.execute(
            "SELECT facts FROM revisions WHERE invoice_id = ? AND sha256 = ?",
            (invoice_id, sha256),
        ).fetchone()
        if row is None:  # a revision the journal's own rows name (file stats, an invoice)
            what = f"the revision {sha256[:12]} of invoice {invoice_id} (table revisions)"
            raise JournalError(explain_lost_row(self.path, what))
        return dict(json.loads(row[0]))

    def content(self, sha256: str) -> bytes:
        """The exact bytes stored for one revision, checked against their sha256;
        ``StoredCopyDamaged`` when they are missing, unreadable or no longer match."""
        row = self.db.execute(
            "SELECT codec, data FROM blobs WHERE sha256 = ?", (sha256,)
        ).fetchone()
        if row is None:
            raise StoredCopyDamaged(
                sha256, f"the journal has no stored bytes for content {sha256[:12]}"
            )
        try:
            data = unpack(row[0], bytes(row[1]))
        except (ValueError, RuntimeError) as error:  # lz4 reports a broken frame as either
            raise StoredCopyDamaged(
                sha256,
                f"the journal's stored bytes for content {sha256[:12]} cannot be read back "
                f"({error}); the journal file is damaged",
            ) from None
        if hashlib.sha256(data).hexdigest() != sha256:
            raise StoredCopyDamaged(
                sha256,
                f"the journal's stored bytes for content {sha256[:12]} no longer match their "
                "sha256; the journal file is damaged",
            )
        return data

    def held_by(self, by: str) -> list[Invoice]:
        """Every invoice on hold (not abandoned) whose hold ``by`` set."""
        rows = self.db.execute(
            "SELECT * FROM invoices WHERE hold = ? AND held_by = ? ORDER BY invoice_id",
            (Hold.held, by),
        )
        return [_invoice(row) for row in rows]

    def invoice_ids(
        self, states: Sequence[InvoiceState], verdict: str | None, holds: Sequence[Hold | None]
    ) -> list[str]:
        """IDs, in order, of the invoices in ``states`` (any, when none) with that last
        ``verdict`` whose hold is one of ``holds`` (None: not on hold): what a bulk action
        acts on, never a whole row. Invoices on hold are found by invoices_held (a state's
        index would read a million accepted to find the few held); the others by
        invoices_state_id, for the states asked for."""
        named = [hold for hold in holds if hold is not None]
        marks = ", ".join("?" * len(named))
        if None not in holds:
            rows = self.db.execute(
                "SELECT invoice_id, state, verdict FROM invoices"
                f" WHERE hold IN ({marks}) ORDER BY invoice_id",
                named,
            )
            return [
                invoice_id
                for invoice_id, state, last in rows
                if (not states or state in states) and (verdict is None or last == verdict)
            ]
        where, params = _filtered(states, verdict)
        chosen = ["hold IS NULL", *([f"hold IN ({marks})"] if named else [])]
        joined = " AND" if where else " WHERE"
        sql = f"SELECT invoice_id FROM invoices{where}{joined} ({' OR '.join(chosen)})"
        rows = self.db.execute(f"{sql} ORDER BY invoice_id", [*params, *named])
        return [invoice_id for (invoice_id,) in rows]

    def failed_deliveries(self, verdict: str | None, holds: Sequence[Hold | None]) -> list[str]:
        """IDs, in order, of the accepted invoices whose delivery failed (by the index
        ``invoices_delivery_failed``), with that last ``verdict``, whose hold is one of
        ``holds``: the accepted invoices an ``abandon`` may settle."""
        where, params = _filtered((), verdict)
        rows = self.db.execute(
            "SELECT invoice_id, hold FROM invoices WHERE state = 'accepted'"
            f" AND remote_status = 'failed'{where.replace(' WHERE', ' AND')} ORDER BY invoice_id",
            params,
        )
        wanted = {None if hold is None else str(hold) for hold in holds}
        return [invoice_id for invoice_id, hold in rows if hold in wanted]

    # ---- writing (the lifecycle's) --------------------------------------------------------

    def save(self, invoice: Invoice, *, was: Invoice, touch: bool = True) -> bool:
        """Write ``invoice`` over its row if the row still holds ``was``'s state and key;
        False, and nothing written, when it has moved on since. ``touch``: set its
        ``updated_at`` to now.

        Only the columns that differ from ``was`` are written: an unchanged state leaves its
        index alone, so a send's commits touch the pages they did before records."""
        changed = {
            name: value
            for name in _INVOICE_COLUMNS
            if (value := getattr(invoice, name)) != getattr(was, name)
        }
        if touch:
            changed["updated_at"] = self.now()
        where: tuple[Any, ...] = (invoice.invoice_id, was.state, was.idempotency_key)
        if not changed:
            row = self.db.execute(_STILL_SQL, where).fetchone()
            return row is not None
        if changed.keys() & _HOLD_COLUMNS:
            where = (*where, was.hold, was.held_at)
        with self.transaction():
            rows = self.db.execute(_save_sql(tuple(changed)), (*changed.values(), *where))
            saved = [dict(row) for row in rows]
            if len(saved) != 1:
                return False
            self.chained_rows("invoices", saved)
        return True

    def insert_invoice(self, invoice: Invoice) -> None:
        """A new invoice ID (the lifecycle's ``admit``)."""
        names = ("invoice_id", *_INVOICE_COLUMNS)
        with self.transaction():
            rows = self.db.execute(
                f"INSERT INTO invoices ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
                " RETURNING *",
                _values(invoice),
            )
            self.chained_rows("invoices", [dict(row) for row in rows])


def _values(invoice: Invoice) -> tuple[Any, ...]:
    return tuple(getattr(invoice, name) for name in _FIELDS)


def _marks(values: Sequence[Any]) -> str:
    return ", ".join("?" * len(values))

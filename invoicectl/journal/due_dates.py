"""Facts a newer version reads from what an older one stored: due dates, read once from the
stored bytes of invoices scanned before due dates were (migration m005 leaves that work)."""

from __future__ import annotations

from invoicectl.journal.database import JournalBase
from invoicectl.journal.records import InvoiceState


class DueDateRecords(JournalBase):
    def unfinished(self, name: str) -> bool:
        """Whether a migration left work ``name`` for the code to finish."""
        row = self.db.execute("SELECT 1 FROM unfinished WHERE name = ?", (name,)).fetchone()
        return row is not None

    def finished(self, name: str) -> None:
        self.db.execute("DELETE FROM unfinished WHERE name = ?", (name,))

    def undated(self, state: InvoiceState) -> list[tuple[str, str]]:
        """(invoice ID, sha256) of each invoice in ``state`` whose current content was read
        before due dates were (its facts have no ``due_date`` at all, not even null)."""
        rows = self.db.execute(
            "SELECT i.invoice_id, i.current_sha256 FROM invoices i JOIN revisions r"
            " ON r.invoice_id = i.invoice_id AND r.sha256 = i.current_sha256"
            f" WHERE i.state = ? AND i.due_date IS NULL AND {self._NO_DUE_DATE_IN_FACTS}",
            (state,),
        )
        return [(invoice_id, sha256) for invoice_id, sha256 in rows]

    def record_due_date(self, invoice_id: str, sha256: str, due_date: str | None) -> None:
        """The due date read again from a revision's stored bytes: in its facts (so it is
        read once), and on the invoice while that content is its current one."""
        with self.transaction():
            self._record_due_date(invoice_id, sha256, due_date)

    def _record_due_date(self, invoice_id: str, sha256: str, due_date: str | None) -> None:
        self.chained("revisions", self._date_revisions(invoice_id, sha256, due_date))
        cursor = self.db.execute(
            "UPDATE invoices SET due_date = ? WHERE invoice_id = ? AND current_sha256 = ?",
            (due_date, invoice_id, sha256),
        )
        if cursor.rowcount:
            self.chained("invoices", [invoice_id])

    # SQLite's JSON functions, here and below (PostgreSQL's journal replaces both).
    _NO_DUE_DATE_IN_FACTS = "json_type(r.facts, '$.due_date') IS NULL"

    def _date_revisions(self, invoice_id: str, sha256: str, due_date: str | None) -> list[int]:
        """The ids of ``invoice_id``'s revisions of ``sha256``, ``due_date`` now in their facts."""
        updated = self.db.execute(
            "UPDATE revisions SET facts = json_set(facts, '$.due_date', ?)"
            " WHERE invoice_id = ? AND sha256 = ? RETURNING id",
            (due_date, invoice_id, sha256),
        ).fetchall()
        return [revision_id for (revision_id,) in updated]

"""A file whose invoice number changed: sending both numbers may deliver one invoice twice.

Asked by a scan (``invoicectl.scan.ingest``) of its own ``temp.scan`` and ``temp.ids``
(``invoicectl.journal.scans``), by path: the file where the journal last found an invoice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from invoicectl.journal.database import JournalBase
from invoicectl.journal.records import InvoiceState

_SENT_UNSETTLED = (InvoiceState.unknown, InvoiceState.key_reused, InvoiceState.amended)


class RenumberingRecords(JournalBase):
    def renumbered_after_sending(self) -> list[tuple[str, str, str, str]]:
        """(new ID, file name, sent ID, its state) for each invoice never sent nor held whose
        file held an invoice sent but not accepted nor abandoned, found in no file now: a
        number corrected after a send of unknown fate (sending both may deliver it twice).

        Three reads, each by index or in one pass, in proportion to the files found and the
        sends unsettled: as one join, both SQLite and PostgreSQL (its row estimates stale
        after a first scan) read every pending invoice or every file for each of the other:
        18 s of a first scan of 10,000 files."""
        sent: dict[str, list[tuple[str, str]]] = {}
        for path, invoice_id, state in self.db.execute(
            "SELECT source_path, invoice_id, state FROM invoices"
            " WHERE (state IN (?, ?, ?) OR (state = ? AND key_first_used_at IS NOT NULL))"
            " AND hold IS NOT 'abandoned' AND invoice_id NOT IN (SELECT invoice_id FROM temp.ids)",
            (*_SENT_UNSETTLED, InvoiceState.pending),
        ):
            sent.setdefault(path, []).append((invoice_id, str(state)))
        if not sent:
            return []
        found = self._files_at(sent)
        unsent = {
            invoice_id
            for (invoice_id,) in self.db.execute(
                "SELECT invoice_id FROM invoices"
                " WHERE invoice_id IN (SELECT value FROM json_each(?)) AND state = ?"
                " AND key_first_used_at IS NULL AND hold IS NULL",
                (json.dumps([invoice_id for _, _, invoice_id in found]), InvoiceState.pending),
            )
        }
        return sorted(
            (new, name, *old) for path, name, new in found if new in unsent for old in sent[path]
        )

    def replaced_in_place(self) -> list[tuple[str, str, str]]:
        """(invoice ID, file name, the ID now in that file) for each pending, unheld invoice
        whose file this scan found holding another invoice ID, while no file of this scan
        holds its own: an invoice number corrected in the file, say, where sending both
        would deliver one invoice twice. Asked before this scan's new IDs are admitted.

        Two reads: the pending invoices this scan did not find (an index, most often none:
        then nothing more), then this scan's files at their paths, in one pass. As one join,
        SQLite read every file of the scan for each of those invoices: a scan of 500 files
        renumbered before their send read 2.3 million steps in it."""
        missing: dict[str, list[str]] = {}
        for path, invoice_id in self.db.execute(
            "SELECT source_path, invoice_id FROM invoices WHERE state = ? AND hold IS NULL"
            " AND invoice_id NOT IN (SELECT invoice_id FROM temp.ids)",
            (InvoiceState.pending,),
        ):
            missing.setdefault(path, []).append(invoice_id)
        if not missing:
            return []
        return sorted(
            (invoice_id, name, other)
            for path, name, other in self._files_at(missing)
            for invoice_id in missing[path]
            if other != invoice_id
        )

    def _files_at(self, paths: Iterable[str]) -> list[tuple[str, str, str]]:
        """(path, name, invoice ID) of this scan's files at ``paths`` that yield an ID: one
        pass over them, each path looked up in a set of those given. (Not the plain ``IN
        (SELECT value FROM json_each(?))``, which PostgreSQL is given as an array to look up
        by index: here it would compare each file's path with each path given.)"""
        rows = self.db.execute(
            "SELECT path, name, invoice_id FROM temp.scan"
            " WHERE path IN (SELECT p.value FROM json_each(?) AS p) AND invoice_id IS NOT NULL",
            (json.dumps(list(paths)),),
        )
        return [(path, name, invoice_id) for path, name, invoice_id in rows]

"""``Journal``: the SQLite journal, its parts (each a mixin over ``database.JournalBase``)
assembled into one class. The PostgreSQL journal (``pg_journal``) is the same parts over
another connection."""

from __future__ import annotations

from pathlib import Path

from invoicectl.journal.database import Clock, utc_now
from invoicectl.journal.due_dates import DueDateRecords
from invoicectl.journal.history import HistoryRecords
from invoicectl.journal.invoices import InvoiceRecords
from invoicectl.journal.monitoring import MonitoringRecords
from invoicectl.journal.renumbering import RenumberingRecords
from invoicectl.journal.scans import ScanRecords
from invoicectl.journal.sending import SendingRecords
from invoicectl.journal.sqlite_open import open_database


class Journal(
    InvoiceRecords,
    SendingRecords,
    ScanRecords,
    RenumberingRecords,
    DueDateRecords,
    HistoryRecords,
    MonitoringRecords,
):
    """One open journal. ``with Journal(path) as journal: ...`` closes it at the end."""

    def __init__(self, path: Path, clock: Clock = utc_now) -> None:
        super().__init__(path, clock, open_database(path))

    def __enter__(self) -> Journal:
        return self

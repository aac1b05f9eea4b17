"""What every part of the journal shares: the connection, the clock and transactions.

The journal is one class, ``Journal``, assembled from one part per concern (``invoices``,
``sending``, ``scans``); each part is a mixin over ``JournalBase``. Together their public
methods are the journal's whole interface: the seam a second backend would implement.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from invoicectl.journal.database import Database, open_database

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


class JournalBase:
    def __init__(self, path: Path, clock: Clock = utc_now) -> None:
        self.path = path
        self.clock = clock
        self.db: Database = open_database(path)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> JournalBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now(self) -> str:
        return self.clock().isoformat()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One SQLite transaction; inside another, a savepoint."""
        with self.db.atomic():
            yield

    def add_event(
        self, invoice_id: str | None, kind: str, detail: str, run_id: int | None = None
    ) -> None:
        """An event of the audit trail: an operator decision or a change worth keeping."""
        self.db.execute(
            "INSERT INTO events (invoice_id, run_id, at, kind, detail) VALUES (?, ?, ?, ?, ?)",
            (invoice_id, run_id, self.now(), kind, detail),
        )

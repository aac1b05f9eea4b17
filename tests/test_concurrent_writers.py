"""Two connections writing one journal: a transaction that reads before it writes must not
fail with "database is locked" because another connection wrote in between (SQLite cannot
upgrade such a transaction, and says so at once, without waiting). Seen as a first send's
``begin_run`` failing while another process opened the new journal."""

from __future__ import annotations

import threading
from pathlib import Path

from invoicectl.journal import Journal


def test_a_transaction_that_reads_first_waits_for_the_other_writer(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    Journal(path).close()  # created and migrated before either writer opens it
    read_done, other_tried = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def other_writer() -> None:
        read_done.wait(10)
        try:
            with Journal(path) as other:
                other_tried.set()
                other.add_event(None, "test", "the other writer")
        except BaseException as error:  # noqa: BLE001 - reported below
            failures.append(error)
        finally:
            other_tried.set()

    thread = threading.Thread(target=other_writer)
    thread.start()
    with Journal(path) as journal, journal.transaction():
        journal.chain_head()  # a read: the transaction's snapshot starts here
        read_done.set()
        other_tried.wait(10)
        threading.Event().wait(0.3)  # the other writer commits now, if it can
        journal.add_event(None, "test", "this writer")
    thread.join(30)

    assert failures == []
    with Journal(path) as journal:
        rows = journal.db.execute("SELECT detail FROM events WHERE kind = 'test'").fetchall()
    assert sorted(row[0] for row in rows) == ["the other writer", "this writer"]

"""The journal's connection: what commits when, and what opening a journal costs.

Each statement outside a transaction commits on its own, a transaction commits whole or not
at all, and a transaction inside another is a savepoint. A second connection to the same
file is the witness: it sees only what was committed.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from backends import witness_rows
from sendkit import committed_events
from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

from invoicectl.journal import open_journal
from invoicectl.journal.migrations import MIGRATION_SET, MIGRATIONS
from invoicectl.journal.pg_database import PG_MIGRATIONS
from invoicectl.locations import JournalURL, Location


def test_a_statement_outside_a_transaction_commits_at_once(journal_at: Location) -> None:
    path = journal_at
    with open_journal(path) as journal:
        journal.add_event(None, "note", "alone")
        assert not journal.db.conn.in_transaction
        assert committed_events(path) == ["alone"]


def test_a_transaction_commits_whole_or_not_at_all(journal_at: Location) -> None:
    path = journal_at
    with open_journal(path) as journal:
        with journal.transaction():
            journal.add_event(None, "note", "first")
            assert committed_events(path) == []  # not yet
            journal.add_event(None, "note", "second")
        with pytest.raises(RuntimeError), journal.transaction():
            journal.add_event(None, "note", "lost")
            raise RuntimeError("stopped half-way")
        assert not journal.db.conn.in_transaction
    assert committed_events(path) == ["first", "second"]


def test_a_failed_inner_transaction_undoes_only_itself(journal_at: Location) -> None:
    path = journal_at
    with open_journal(path) as journal, journal.transaction():
        journal.add_event(None, "note", "outer")
        with pytest.raises(RuntimeError), journal.transaction():
            journal.add_event(None, "note", "inner")
            raise RuntimeError("inner failed")
        with journal.transaction():
            journal.add_event(None, "note", "inner again")
    assert committed_events(path) == ["outer", "inner again"]


def test_an_up_to_date_journal_opens_without_sqlite_utils(tmp_path: Path) -> None:
    """sqlite-utils applies migrations; a journal that needs none opens without importing it
    (every run but the first after an upgrade)."""
    path = tmp_path / "journal.db"
    probe = (
        "import sys; from pathlib import Path; from invoicectl.journal import Journal;"
        "Journal(Path(sys.argv[1])).close(); print('sqlite_utils' in sys.modules)"
    )

    def imports_sqlite_utils() -> bool:
        run = subprocess.run(
            [sys.executable, "-c", probe, str(path)], capture_output=True, text=True, check=True
        )
        return run.stdout.strip() == "True"

    assert imports_sqlite_utils()  # a new journal: every migration applied
    assert not imports_sqlite_utils()
    with sqlite3.connect(path) as conn:
        applied = [row[0] for row in conn.execute("SELECT name FROM _sqlite_migrations")]
    assert applied == [migration.__name__ for migration in MIGRATIONS]


def _open_after(path: Location, barrier: Any, answers: Any) -> None:
    barrier.wait()  # every process opens at the same moment
    try:
        open_journal(path).close()
        answers.put("ok")
    except Exception as error:  # reported to the test, which names it
        answers.put(f"{type(error).__name__}: {error}")


def _journal_before_m003(path: Path) -> None:
    with sqlite3.connect(path) as conn:  # as invoicectl 0.2 left it: m001 and m002 applied
        old = Migrations(MIGRATION_SET)
        for migration in MIGRATIONS[:2]:
            old()(migration)
        old.apply(Database(conn))


def _database_before_m003(location: JournalURL) -> None:
    """A PostgreSQL journal with m001 and m002 applied, the rest not (as if its first
    opening had been stopped between two transactions)."""
    import psycopg

    from invoicectl.journal.pg_connection import PgConnection
    from invoicectl.journal.pg_database import _apply

    with psycopg.connect(location.connection_url(), autocommit=True) as raw:
        raw.execute(
            "CREATE TABLE journal_migrations"
            ' (name TEXT COLLATE "C" PRIMARY KEY, applied_at TEXT NOT NULL)'
        )
        applied = {migration.__name__ for migration in MIGRATIONS[2:]}
        applied |= {migration.__name__ for migration in PG_MIGRATIONS}
        _apply(PgConnection(raw), applied)


@pytest.mark.slow
@pytest.mark.parametrize(
    "journal_before", ["none", "from 0.2", "none (postgresql)", "half made (postgresql)"]
)
def test_processes_opening_one_journal_at_once_all_open_it(
    tmp_path: Path, journal_before: str, request: pytest.FixtureRequest
) -> None:
    """A cron run and a person opening a new journal, or one an upgrade must migrate, at
    the same moment: one sets it up, the others wait for it. (Before: "table blobs already
    exists", "duplicate column name", "database is locked" in most rounds.) On PostgreSQL:
    a new database, and one whose first opening died after its first migrations."""
    fork = multiprocessing.get_context("fork")
    for round_ in range(8):
        path: Any = tmp_path / f"journal-{round_}.db"
        if journal_before == "from 0.2":
            _journal_before_m003(path)
        if journal_before.endswith("(postgresql)"):
            path = JournalURL(request.getfixturevalue("pg_server").new_database())
            if journal_before.startswith("half made"):
                _database_before_m003(path)
        barrier, answers = fork.Barrier(4), fork.Queue()
        processes = [
            fork.Process(target=_open_after, args=(path, barrier, answers)) for _ in range(4)
        ]
        for process in processes:
            process.start()
        results = [answers.get(timeout=60) for _ in processes]
        for process in processes:
            process.join()
        assert results == ["ok"] * 4, results
        if isinstance(path, JournalURL):
            applied = [row[0] for row in witness_rows(path, "SELECT name FROM journal_migrations")]
            ours = [migration.__name__ for migration in (*MIGRATIONS, *PG_MIGRATIONS)]
            assert sorted(applied) == sorted(ours)
            continue
        with sqlite3.connect(path) as conn:
            applied = [row[0] for row in conn.execute("SELECT name FROM _sqlite_migrations")]
        assert applied == [migration.__name__ for migration in MIGRATIONS]

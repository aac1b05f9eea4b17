"""The journal's schema, as numbered, append-only migrations, applied by sqlite-utils.

A shipped migration is never edited; a change to the schema is a new function below, added
at the end of ``MIGRATIONS``. sqlite-utils records what it applied in ``_sqlite_migrations``
under the set name ``invoicectl``, and is imported only when a journal lacks a migration:
an up-to-date journal (every run but the first after an upgrade) opens without it, 50 ms
sooner, which every command and every cron run pays.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from invoicectl.errors import JournalError
from invoicectl.journal.chain import CHAIN_SCHEMA
from invoicectl.journal.chain import extend as extend_chain
from invoicectl.journal.chain import start as start_chain
from invoicectl.journal.initial_schema import INITIAL_SCHEMA, WORKER_SCHEMA
from invoicectl.journal.monitoring_schema import MONITORING_INDEXES

if TYPE_CHECKING:
    from sqlite_utils import Database

MIGRATION_SET = "invoicectl"


def m001_initial(db: Database) -> None:
    db.executescript(INITIAL_SCHEMA)


def m002_packed_blobs(db: Database) -> None:
    db.executescript(
        """
        -- How blobs.data holds the bytes: NULL as read, 'lz4' an LZ4 frame of them
        -- (invoicectl/packing.py). Rows written before this migration are as read.
        ALTER TABLE blobs ADD COLUMN codec TEXT;
        """
    )


def m003_file_stats_invoice_id(db: Database) -> None:
    db.executescript(
        """
        -- The invoice ID of the content a file held when its stat was recorded, so that a
        -- re-scan names an unchanged file without looking its content up in revisions.
        -- NULL when unknown: the scan then looks it up.
        ALTER TABLE file_stats ADD COLUMN invoice_id TEXT;
        UPDATE file_stats SET invoice_id =
            (SELECT invoice_id FROM revisions r WHERE r.sha256 = file_stats.sha256 LIMIT 1);
        """
    )


def m004_holds_and_verdicts(db: Database) -> None:
    db.executescript(
        """
        -- An operator's hold, beside the state and never instead of it: 'held' (never sent
        -- or replayed until released; the state is as it was) or 'abandoned' (settled
        -- outside invoicectl; never sent again). Who, when and why; NULL when not held.
        ALTER TABLE invoices ADD COLUMN hold TEXT;
        ALTER TABLE invoices ADD COLUMN hold_reason TEXT;
        ALTER TABLE invoices ADD COLUMN held_at TEXT;
        ALTER TABLE invoices ADD COLUMN held_by TEXT;
        -- The last verdict reconcile reached for the invoice, and when.
        ALTER TABLE invoices ADD COLUMN verdict TEXT;
        ALTER TABLE invoices ADD COLUMN verdict_at TEXT;
        """
    )


def m005_due_date(db: Database) -> None:
    db.executescript(
        """
        -- When payment is due, from the current revision's facts: a send takes the soonest
        -- due first. NULL for invoices first scanned before due dates were read, and for
        -- documents that carry none.
        ALTER TABLE invoices ADD COLUMN due_date TEXT;
        -- Work a migration leaves for the code to finish: the due dates of invoices read
        -- before this one are in their stored bytes, which only the reader can parse.
        CREATE TABLE unfinished (name TEXT PRIMARY KEY);
        INSERT INTO unfinished (name) SELECT 'due_dates' WHERE EXISTS (SELECT 1 FROM invoices);
        """
    )


def m006_receivers(db: Database) -> None:
    db.executescript(
        """
        -- What the participant lookup said of each receiver, and when: a send checks a
        -- receiver once a day, not once an invoice.
        CREATE TABLE receivers (
            peppol_id TEXT PRIMARY KEY,     -- scheme:id
            registered INTEGER NOT NULL,
            document_types TEXT NOT NULL,   -- JSON list of the document type ids it declares
            checked_at TEXT NOT NULL
        );
        """
    )


def m007_validations(db: Database) -> None:
    db.executescript(
        """
        -- What GoRoute's validation said of each revision's content: a content is validated
        -- once, whatever the runs that meet it.
        CREATE TABLE validations (
            sha256 TEXT PRIMARY KEY,        -- the revision's content
            valid INTEGER NOT NULL,
            errors TEXT NOT NULL,           -- JSON list of "rule at location: message" lines
            checked_at TEXT NOT NULL
        );
        """
    )


def m008_identity_and_history_checks(db: Database) -> None:
    db.executescript(
        """
        -- Who this journal is: a random id made when the journal is created (or upgraded to
        -- this migration). The marker a send leaves in its outbox names the journal and the
        -- run that last sent from it; a journal that does not find itself and that run there
        -- has lost history (send/history.py).
        CREATE TABLE identity (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            journal_id TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        INSERT INTO identity (id, journal_id, created_at)
            VALUES (1, lower(hex(randomblob(16))), strftime('%Y-%m-%dT%H:%M:%SZ', 'now'));
        -- Each check of GoRoute's transactions a send made before sending from a journal
        -- with no history there (or one that lost it); a journal checked for a base URL is
        -- not checked again for it unless an outbox marker says it lost history since.
        CREATE TABLE history_checks (
            id INTEGER PRIMARY KEY,
            base_url TEXT NOT NULL,
            run_id INTEGER,
            checked_at TEXT NOT NULL,
            why TEXT NOT NULL,
            outcome TEXT NOT NULL           -- JSON: what was found, held, not checked
        );
        """
    )


def m009_audit_chain(db: Database) -> None:
    """The hash chain (``chain``), started with a genesis event that commits to everything
    the journal holds, then one event per invoice, attempt and event row it already has."""
    db.executescript(CHAIN_SCHEMA)
    start_chain(db.conn, datetime.now(UTC).isoformat())


def m010_indexes_for_large_journals(db: Database) -> None:
    db.executescript(
        """
        -- A journal of years holds a million invoices, nearly all accepted and delivered; a
        -- command costs what its own work costs only if it finds that work by an index.
        -- Invoices of one state in ID order: a page of them, or all of them streamed,
        -- without sorting the rest (status, reconcile). It replaces invoices_state, a prefix.
        CREATE INDEX invoices_state_id ON invoices(state, invoice_id);
        DROP INDEX invoices_state;
        -- Invoices on hold, counted and found (a scan's damaged copies) without the rest.
        CREATE INDEX invoices_held ON invoices(hold, held_by) WHERE hold IS NOT NULL;
        -- Accepted invoices whose delivery is not known to be final: what reconcile follows.
        -- The query repeats this WHERE exactly (journal/invoices.py, IN_DELIVERY). Its columns
        -- are invoices_state_id's, and made after it: SQLite then prefers it for that query
        -- even before ANALYZE (tests/test_journal_size.py checks the plan).
        CREATE INDEX invoices_in_delivery ON invoices(state, invoice_id)
            WHERE state = 'accepted' AND remote_status IS NOT 'delivered';
        -- Requests by start: the rate limiter's last minute.
        CREATE INDEX attempts_started ON attempts(started_at);
        -- Whether the journal ever sent to a base URL (the history check's question).
        CREATE INDEX attempts_run ON attempts(run_id);
        CREATE INDEX runs_base_url ON runs(base_url);
        """
    )


# The tables m011 adds to what the chain covers (chain.COVERED, in this order).
_COVERED_FROM_M011 = ("revisions", "runs", "history_checks", "environment")


def m011_chain_covers_revisions_and_runs(db: Database) -> None:
    """The chain covers more than invoices, attempts and events from here on: every
    revision (what each content was, where it came from, its facts), every run, every
    history check and the environment binding. A ``coverage`` event names them, then one
    event per row they already hold, so that ``verify`` names an edited revision or run."""
    extend_chain(db.conn, _COVERED_FROM_M011, datetime.now(UTC).isoformat())


def m012_index_delivery_failures(db: Database) -> None:
    # DELIVERY_FAILED's WHERE (monitoring_schema), on invoices_state_id's columns as m010's.
    where = "WHERE state = 'accepted' AND remote_status = 'failed'"
    db.execute(f"CREATE INDEX invoices_delivery_failed ON invoices(state, invoice_id) {where}")
    db.execute("CREATE INDEX invoices_created ON invoices(created_at)")


def m013_indexes_for_monitoring(db: Database) -> None:
    db.executescript(MONITORING_INDEXES)  # journal/monitoring.py says why; never edited


def m014_workers_and_claims(db: Database) -> None:
    """Several send workers on one PostgreSQL journal (``pg_workers`` says how they are used).

    ``workers``: one row a live send process, its lease in the database server's clock (epoch
    seconds, ``clock_timestamp()``: hosts' clocks differ, the server's is the one every worker
    compares against). ``claims``: which worker holds which invoice. ``rate_starts``: the
    request slots an API account (its key's fingerprint, never the key) has handed out in the
    last minute, shared by every process. None is evidence of what was sent (attempts are),
    so none is in the chain: leases are renewed every few seconds and would churn it. A SQLite
    journal gets the tables and never writes them (one run at a time holds it)."""
    db.executescript(WORKER_SCHEMA)


def m015_index_transaction_ids(db: Database) -> None:
    # A 202 naming a transaction the journal holds for another invoice is no acceptance
    # (send/answer_check.py): its owner found by the id, not by a walk of every invoice.
    db.execute(
        "CREATE INDEX invoices_transaction ON invoices(transaction_id)"
        " WHERE transaction_id IS NOT NULL"
    )


def m016_index_existing_transaction_ids(db: Database) -> None:
    # The same for an id a 422 (or a send's history check) named as another invoice's.
    db.execute(
        "CREATE INDEX invoices_existing_transaction ON invoices(existing_transaction_id)"
        " WHERE existing_transaction_id IS NOT NULL"
    )


# m014's tables: who works on what right now, no history (``journal copy`` leaves them out:
# a copied journal starts with no worker, claim or slot).
WORKER_TABLES = ("workers", "claims", "rate_starts")

MIGRATIONS = (
    m001_initial,
    m002_packed_blobs,
    m003_file_stats_invoice_id,
    m004_holds_and_verdicts,
    m005_due_date,
    m006_receivers,
    m007_validations,
    m008_identity_and_history_checks,
    m009_audit_chain,
    m010_indexes_for_large_journals,
    m011_chain_covers_revisions_and_runs,
    m012_index_delivery_failures,
    m013_indexes_for_monitoring,
    m014_workers_and_claims,
    m015_index_transaction_ids,
    m016_index_existing_transaction_ids,
)


def bring_up_to_date(conn: sqlite3.Connection) -> None:
    """Apply the migrations the journal on ``conn`` lacks, all in one transaction.

    JournalError when it holds migrations this version does not know: a newer invoicectl
    wrote it, and this one must not guess at its schema.
    """
    if up_to_date(conn):
        return
    # Under the write lock, and checked again: processes that open a new journal at once (a
    # cron run and a person, say) wait for the first to migrate it, then find nothing to do.
    conn.execute("BEGIN IMMEDIATE")
    try:
        if not up_to_date(conn):
            _apply(conn)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def refuse_foreign(conn: sqlite3.Connection) -> None:
    """JournalError for a database with tables and no migration of ours: another program's
    (it was made into a journal beside its own tables, silently)."""
    if _applied(conn):
        return
    if tables := user_tables(conn)[:4]:
        shown = ", ".join(tables[:3]) + (", ..." if len(tables) > 3 else "")
        raise JournalError(
            f"not an invoicectl journal: an SQLite database of another program (tables {shown}); "
            "nothing was changed. Name a file of its own with --journal or INVOICECTL_JOURNAL"
        )


def user_tables(conn: sqlite3.Connection) -> list[str]:
    """The database's own tables, by name: SQLite's are left out."""
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'"
        " AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
    )
    return [str(name) for (name,) in rows]


class NewerJournal(JournalError):
    """A journal that holds migrations this version does not know (``all_applied``);
    ``at`` names it, which that check cannot (helper-83: a cron host with several journals
    was told "the journal", not which)."""

    def __init__(self, unknown: set[str], journal: str = "the journal") -> None:
        super().__init__(
            f"{journal} was written by a newer invoicectl "
            f"(unknown migrations: {', '.join(sorted(unknown))}); upgrade invoicectl"
        )
        self.unknown = unknown

    def at(self, location: object) -> NewerJournal:
        return NewerJournal(self.unknown, f"the journal {location}")


def up_to_date(conn: sqlite3.Connection) -> bool:
    return all_applied(_applied(conn), MIGRATIONS)


def all_applied(applied: set[str], migrations: Sequence[Callable[..., None]]) -> bool:
    """Whether every one of ``migrations`` is in ``applied`` (names); JournalError when
    ``applied`` holds one this version does not know (a newer invoicectl wrote the journal)."""
    ours = [migration.__name__ for migration in migrations]
    if unknown := applied - set(ours):
        raise NewerJournal(unknown)
    missing = [name for name in ours if name not in applied]
    for name in missing:
        if name in _CHAIN_MIGRATIONS and applied.intersection(ours[ours.index(name) + 1 :]):
            # Migrations apply in order: a chain migration missing before later ones is its
            # record removed by hand, and applying it again would start a new chain over rows
            # edited meanwhile.
            raise JournalError(
                f"the journal lacks migration {name} but records later ones: its hash chain was "
                "removed outside invoicectl, and nothing was changed now; restore a backup and "
                "run `invoicectl verify` on it"
            )
    return not missing


# The migrations that start the hash chain, or widen it, over the rows already there.
_CHAIN_MIGRATIONS = frozenset(("m009_audit_chain", "m011_chain_covers_revisions_and_runs"))


def _apply(conn: sqlite3.Connection) -> None:
    """Every pending migration, by sqlite-utils, in the transaction open on ``conn`` (each
    migration becomes a savepoint in it)."""
    from sqlite_utils import Database
    from sqlite_utils.migrations import Migrations

    class Scripts(Database):
        """sqlite-utils' ``Database``, a script in a transaction run statement by statement
        as it does, the statements found in one pass (``statements``). sqlite-utils joins
        the script again at every character: a new journal's migrations took 40 ms longer,
        in every first run and every test that makes a journal."""

        def executescript(self, sql: str) -> sqlite3.Cursor:
            if not self.conn.in_transaction:
                return super().executescript(sql)
            cursor = self.conn.cursor()
            for statement in statements(sql):
                cursor.execute(statement)
            return cursor

    migrations = Migrations(MIGRATION_SET)
    for migration in MIGRATIONS:
        migrations()(migration)
    migrations.apply(Scripts(conn, execute_plugins=False))


def statements(script: str) -> Iterator[str]:
    """The SQL statements of ``script``, each as SQLite would take it on its own: cut at a
    semicolon once what comes before it is complete (``sqlite3.complete_statement``, which
    knows a semicolon in a string, a comment or a trigger's body from one that ends a
    statement); what follows the last, if anything, as it is."""
    *pieces, last = script.split(";")
    pending = ""
    for piece in pieces:
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \t\r\n;"):
                yield pending.strip()
            pending = ""
    if rest := (pending + last).strip():
        yield rest


def _applied(conn: sqlite3.Connection) -> set[str]:
    """The names of this set's migrations the journal records as applied."""
    table = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_sqlite_migrations'"
    ).fetchone()
    if table is None:
        return set()
    rows = conn.execute(
        "SELECT name FROM _sqlite_migrations WHERE migration_set = ?", (MIGRATION_SET,)
    )
    return {row[0] for row in rows}

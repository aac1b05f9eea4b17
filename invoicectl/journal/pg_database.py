"""A PostgreSQL journal's connection: opening it, its schema, and its failures as one line.

The same numbered migrations as SQLite's (``migrations.MIGRATIONS``), their DDL translated
(``pg_dialect.translate_schema``) and recorded in ``journal_migrations``; all that a journal
lacks is applied in one transaction under the journal's write lock, so processes on several
hosts opening a new journal at once find it migrated once. Each statement commits on its own
outside ``atomic``, as SQLite's does; ``synchronous_commit`` stays on (the server's default:
a commit returns once the server has it on disk), which is SQLite's ``synchronous=FULL``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from invoicectl.errors import ExitCode, JournalError
from invoicectl.journal.database import Database
from invoicectl.journal.migrations import MIGRATIONS, NewerJournal, all_applied
from invoicectl.journal.pg_connection import (
    WRITE_LOCK,
    PgConnection,
    forget_cuts,
    network_limits,
    why_cut,
)
from invoicectl.journal.pg_dialect import translate_schema
from invoicectl.journal.shape import TABLES, refuse_lacking
from invoicectl.locations import JournalURL

# How long a statement may wait for a lock another journal user holds (a migration, a
# long write) before it fails; and how long connecting may take.
_LOCK_TIMEOUT = "60s"
_IDLE_IN_TRANSACTION = "15s"  # half of send/workers.DEFAULT_LEASE
_CONNECT_TIMEOUT_SECONDS = 10

# SQLite-only expressions in shipped migrations, as PostgreSQL says them (m008).
_MIGRATION_FUNCTIONS = (
    ("lower(hex(randomblob(16)))", "replace(gen_random_uuid()::text, '-', '')"),
    (
        "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')",
        "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')",
    ),
)


class JournalUnreachable(JournalError):
    """The PostgreSQL server could not be reached or refused the connection: nothing was
    read or changed, and a later run may succeed (exit 75, as a network failure)."""

    exit_code = ExitCode.INCOMPLETE


class PgDatabase(Database):
    """``Database`` over PostgreSQL: every write transaction takes the write lock first."""

    begin = ("BEGIN", f"SELECT pg_advisory_xact_lock({WRITE_LOCK})")


def open_pg_database(location: JournalURL) -> PgDatabase:
    """The PostgreSQL journal at ``location``, its schema brought up to date."""
    import psycopg

    forget_cuts()
    try:
        raw = psycopg.connect(
            location.connection_url(),
            autocommit=True,
            connect_timeout=_CONNECT_TIMEOUT_SECONDS,
            application_name="invoicectl",
            **network_limits(location.connection_url()),
        )
    except psycopg.Error as error:
        raise not_connected(error, location) from None
    conn = PgConnection(raw)
    try:
        conn.execute(f"SET lock_timeout = '{_LOCK_TIMEOUT}'")
        # A process frozen inside a transaction (SIGSTOP, a paused VM) before it became a
        # worker, or never one (a scan, reconcile, an operator's command, a copy) would hold
        # the journal's write lock as long as it stays frozen: the server ends such a session
        # after half a default lease, as it does a worker's after half its own.
        conn.execute(f"SET idle_in_transaction_session_timeout = '{_IDLE_IN_TRANSACTION}'")
        conn.execute("SET TIME ZONE 'UTC'")
        _bring_up_to_date(conn)
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
        found = {name for (name,) in tables}
        refuse_lacking(sorted({*TABLES, *PG_ONLY_TABLES}.difference(found)), location)
    except psycopg.Error as error:  # a connection lost here is as unreachable as before it
        conn.close()
        raise not_connected(error, location) from None
    except NewerJournal as newer:
        conn.close()
        raise newer.at(location) from None
    except BaseException:
        conn.close()
        raise
    return PgDatabase(conn)  # type: ignore[arg-type]


def explain_pg(error: Exception, location: JournalURL, *, opening: bool = True) -> str:
    """One line for a PostgreSQL error on the journal: which journal (no password), what the
    server or libpq said (any password it echoes masked), what to do. ``opening``: nothing
    was read or written yet (else requests may have left: ``pg_failure`` says what stays)."""
    said = _masked(
        location.without_secrets(
            str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        )
    )
    import psycopg

    if _refused_login(error):
        return (
            f"the journal {location} refused the login: {said}; check the URL's user and "
            "database, and the password (the URL's, PGPASSWORD or ~/.pgpass)"
            + ("; nothing was changed" if opening else "")
        )
    if isinstance(error, psycopg.OperationalError) and not _refused_option(error):
        advice = (
            "check that the server is running and reachable, and the URL's host, port, user "
            "and database (libpq reads PGPASSWORD, ~/.pgpass and PGSSL* for what the URL "
            "leaves out)" + ("; nothing was changed" if opening else "")
        )
        return f"the journal {location} cannot be reached: {said}; {advice}"
    return f"the journal {location}: {said}"


def not_connected(error: Exception, location: JournalURL) -> JournalError:
    """Why no connection was made, as the journal's one line: a server that could not be
    reached is exit 75 (a later run may do better); a URL libpq cannot read, or an option it
    refuses (``sslmode=bogus``, which it reports as a bad connection), exit 1: no later run
    will do better until the URL is fixed."""
    import psycopg

    if (
        isinstance(error, psycopg.OperationalError)
        and not _refused_option(error)
        and not _refused_login(error)
    ):
        return JournalUnreachable(explain_pg(error, location))
    return JournalError(explain_pg(error, location))


# The server's answer to a login it refuses (a wrong password, a user or database it does not
# have, pg_hba.conf): no later run does better until the URL or the password is fixed, so
# exit 1, not 75. By SQLSTATE when the server gave one, else by libpq's words.
_LOGIN_REFUSED_STATES = frozenset({"28P01", "28000", "3D000"})
_LOGIN_REFUSED_WORDS = re.compile(
    r"password authentication failed|no password supplied|pg_hba\.conf"
    r'|(?:database|role) "[^"]*" does not exist'
)


def _refused_login(error: Exception) -> bool:
    if getattr(error, "sqlstate", None) in _LOGIN_REFUSED_STATES:
        return True
    return _LOGIN_REFUSED_WORDS.search(str(error)) is not None


def _refused_option(error: Exception) -> bool:
    """libpq's words for an option of the URL it will not take (``invalid sslmode value``,
    ``invalid integer value "x" for connection option "port"``, ``invalid connection
    option``), which psycopg raises as a connection that went bad."""
    return re.search(r"\binvalid (?:\w+ value|connection option)", str(error)) is not None


def pg_failure(error: Exception, location: object) -> JournalError:
    """A PostgreSQL error that reached the command line mid-run, as the journal's one line:
    a transaction commits whole or not at all, so what was committed stays. A lost
    connection is exit 75 (run again); anything else exit 1."""
    import psycopg

    where = location if isinstance(location, JournalURL) else JournalURL("postgresql://")
    failure = JournalUnreachable if isinstance(error, psycopg.OperationalError) else JournalError
    said = explain_pg(error, where, opening=False)
    if failure is JournalUnreachable and (why := why_cut()) is not None:
        said = f"the journal {where}: {why}"  # not the server's fault: it stopped answering
    return failure(f"{said}; everything committed before is kept")


_SECRET_IN_MESSAGE = re.compile(r"(?i)(password[=:]\s*)\S+")


def _masked(message: str) -> str:
    message = re.sub(r"postgres(?:ql)?://[^\s\"']+", lambda m: str(JournalURL(m.group(0))), message)
    return _SECRET_IN_MESSAGE.sub(r"\1***", message)


# ---- the schema ---------------------------------------------------------------------------


class _Migrating:
    """What a migration function asks of sqlite-utils' ``Database``, over PostgreSQL."""

    def __init__(self, conn: PgConnection) -> None:
        self.conn = conn

    def executescript(self, script: str) -> None:
        for old, new in _MIGRATION_FUNCTIONS:
            script = script.replace(old, new)
        for statement in translate_schema(script):
            self.conn.raw.execute(statement)

    def execute(self, sql: str) -> None:
        self.executescript(sql)


def _bring_up_to_date(conn: PgConnection) -> None:
    applied = _applied(conn)
    if applied is not None and all_applied(applied, (*MIGRATIONS, *PG_MIGRATIONS)):
        return
    conn.execute("BEGIN")
    try:
        conn.execute(f"SELECT pg_advisory_xact_lock({WRITE_LOCK})")
        conn.raw.execute(
            "CREATE TABLE IF NOT EXISTS journal_migrations"
            ' (name TEXT COLLATE "C" PRIMARY KEY, applied_at TEXT NOT NULL)'
        )
        applied = _applied(conn) or set()
        if not all_applied(applied, (*MIGRATIONS, *PG_MIGRATIONS)):
            _apply(conn, applied)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def pg001_invoice_total(db: Any) -> None:
    """The number of invoices, kept by the server as rows come and go: SQLite counts a
    table's rows from its b-tree's pages, PostgreSQL reads every row (MVCC), and ``status``
    and every send's exit policy ask it (issue 16: a count that followed the history). Each
    write transaction holds the write lock, so the one row is never contended."""
    db.conn.raw.execute(_INVOICE_TOTAL)


_INVOICE_TOTAL = """
CREATE TABLE invoice_total (one BIGINT PRIMARY KEY CHECK (one = 1), total BIGINT NOT NULL);
INSERT INTO invoice_total SELECT 1, count(*) FROM invoices;
CREATE FUNCTION invoice_total_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN UPDATE invoice_total SET total = total + (SELECT count(*) FROM added); RETURN NULL; END
$$;
CREATE FUNCTION invoice_total_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN UPDATE invoice_total SET total = total - (SELECT count(*) FROM removed); RETURN NULL; END
$$;
CREATE TRIGGER invoices_added AFTER INSERT ON invoices REFERENCING NEW TABLE AS added
FOR EACH STATEMENT EXECUTE FUNCTION invoice_total_added();
CREATE TRIGGER invoices_removed AFTER DELETE ON invoices REFERENCING OLD TABLE AS removed
FOR EACH STATEMENT EXECUTE FUNCTION invoice_total_removed();
"""

# What only a PostgreSQL journal holds, applied after the shared migrations, recorded the same;
# and the tables they make, which a SQLite journal has no counterpart of (``journal copy``).
PG_MIGRATIONS = (pg001_invoice_total,)
PG_ONLY_TABLES = ("invoice_total",)


def _apply(conn: PgConnection, applied: set[str]) -> None:
    migrating: Any = _Migrating(conn)
    for migration in (*MIGRATIONS, *PG_MIGRATIONS):
        if migration.__name__ in applied:
            continue
        apply: Callable[[Any], None] = migration
        apply(migrating)
        conn.execute(
            "INSERT INTO journal_migrations (name, applied_at) VALUES (?, ?)",
            (migration.__name__, datetime.now(UTC).isoformat()),
        )


def _applied(conn: PgConnection) -> set[str] | None:
    """The migrations the journal records as applied; None before the first."""
    (table,) = conn.execute("SELECT to_regclass('journal_migrations') IS NOT NULL").fetchone()
    if not table:
        return None
    return {name for (name,) in conn.execute("SELECT name FROM journal_migrations")}

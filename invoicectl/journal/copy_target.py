"""The PostgreSQL journal a copy writes (``copying``): probed before it is migrated, then one
transaction that checks it is empty, copies every table with ``COPY``, moves the sequences,
reads every table back against the source, and commits only when all are equal."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from invoicectl.journal.copy_checks import (
    NOTHING_WRITTEN,
    BlobCheck,
    CopyMismatch,
    CopyRefused,
    RowDigest,
    TableCopy,
    listed,
    same_migrations,
)
from invoicectl.journal.copy_source import Source
from invoicectl.journal.migrations import WORKER_TABLES
from invoicectl.journal.pg_database import PG_MIGRATIONS, PG_ONLY_TABLES
from invoicectl.locations import JournalURL

# Rows per batch read back from PostgreSQL; blobs, which may be large, fewer.
BATCH = 1000
BLOB_BATCH = 64
# What a new journal's migrations write in these tables (its identity, its genesis): the
# copy replaces it. Anything else in the target makes it not empty.
_REPLACED = ("identity", "chain")


def probe_target(target: JournalURL) -> None:
    """Before the target is migrated: it holds no tables but a journal's, and no journal of
    another schema (a database of something else is never given a journal's tables)."""
    import psycopg

    from invoicectl.journal.pg_connection import network_limits
    from invoicectl.journal.pg_database import JournalUnreachable, explain_pg

    try:
        url = target.connection_url()
        raw = psycopg.connect(url, autocommit=True, connect_timeout=10, **network_limits(url))
    except psycopg.Error as error:
        raise JournalUnreachable(explain_pg(error, target)) from None
    with pg_errors(target), raw:
        tables = {
            name
            for (name,) in raw.execute(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = current_schema()"
            )
        }
        if tables and "journal_migrations" not in tables:
            named = ", ".join(sorted(tables)[:5])
            raise CopyRefused(
                f"the target {target} holds tables that are not a journal's ({named}): copy"
                f" into a new, empty database; {NOTHING_WRITTEN}"
            )
        if tables:
            applied = {name for (name,) in raw.execute("SELECT name FROM journal_migrations")}
            shared = applied - {migration.__name__ for migration in PG_MIGRATIONS}
            same_migrations(shared, f"the target {target}", upgrade=False)


@contextmanager
def pg_errors(target: JournalURL) -> Iterator[None]:
    """A PostgreSQL error as the journal's one line (the password never in it)."""
    import psycopg

    from invoicectl.journal.pg_database import JournalUnreachable, explain_pg

    try:
        yield
    except psycopg.OperationalError as error:
        raise JournalUnreachable(
            f"{explain_pg(error, target)}; the copy was rolled back, the target holds none of it"
        ) from None
    except psycopg.Error as error:
        raise CopyMismatch(
            f"{explain_pg(error, target)}; the copy was rolled back, the target holds none of it"
        ) from None


class Target:
    """The PostgreSQL journal's connection, for the copy's one transaction."""

    def __init__(self, raw: Any, target: JournalURL) -> None:
        self.raw = raw
        self.target = target

    def holds(self, journal_id: str | None, head: tuple[int, str]) -> bool:
        """Whether the target is this very journal already: the source's journal_id and
        chain head (a new target has an identity of its own and its genesis alone)."""
        row = self.raw.execute("SELECT journal_id FROM identity WHERE id = 1").fetchone()
        if journal_id is None or row is None or str(row[0]) != journal_id:
            return False
        row = self.raw.execute("SELECT seq, hash FROM chain ORDER BY seq DESC LIMIT 1").fetchone()
        return row is not None and (int(row[0]), str(row[1])) == head

    def copy_all(
        self, source: Source, tables: dict[str, tuple[list[str], str]], batch: int
    ) -> tuple[tuple[TableCopy, ...], int]:
        from invoicectl.journal.pg_connection import WRITE_LOCK

        self.raw.execute("BEGIN")
        try:
            self.raw.execute(f"SELECT pg_advisory_xact_lock({WRITE_LOCK})")
            self._check_tables(tables)
            self._check_empty(tables)
            for table in _REPLACED:
                self.raw.execute(f"DELETE FROM {table}")
            copied = []
            for table, (columns, key) in tables.items():
                size = BLOB_BATCH if table == "blobs" else batch
                digest = self._copy_table(table, columns, source.rows(table, columns, key, size))
                copied.append(TableCopy(table, digest.rows, digest.hexdigest()))
            self._move_sequences(tables)
            checked = self._check(copied, tables, source.head(), batch)
            self.raw.execute("COMMIT")
        except BaseException:
            self._roll_back()
            raise
        return tuple(copied), checked

    def _roll_back(self) -> None:
        if self.raw.closed:
            return
        # A lost connection cannot say ROLLBACK: the server rolls back what never committed.
        with suppress(Exception):
            self.raw.execute("ROLLBACK")

    def _check_tables(self, tables: dict[str, tuple[list[str], str]]) -> None:
        rows = self.raw.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name != 'journal_migrations'"
        ).fetchall()
        left_out = (*PG_ONLY_TABLES, *WORKER_TABLES)
        rows = [(table, column) for table, column in rows if table not in left_out]
        theirs: dict[str, set[str]] = {}
        for table, column in rows:
            theirs.setdefault(table, set()).add(column)
        ours = {table: set(columns) for table, (columns, _key) in tables.items()}
        if theirs != ours:
            differ = sorted(set(theirs) ^ set(ours)) or sorted(
                table for table in ours if ours[table] != theirs.get(table)
            )
            raise CopyRefused(
                f"the target {self.target}'s tables are not the source's (they differ in"
                f" {', '.join(differ)}); {NOTHING_WRITTEN}"
            )

    def _check_empty(self, tables: dict[str, tuple[list[str], str]]) -> None:
        holding = []
        for table in tables:
            where = " WHERE kind NOT IN ('genesis', 'coverage')" if table == "chain" else ""
            if table == "identity":
                continue
            (count,) = self.raw.execute(f"SELECT count(*) FROM {table}{where}").fetchone()
            if count:
                holding.append(f"{count} {table}")
        if holding:
            raise CopyRefused(
                f"the target {self.target} is not empty (it holds {', '.join(holding)}): a copy"
                f" goes into a new, empty database only; {NOTHING_WRITTEN}"
            )

    def _copy_table(
        self, table: str, columns: list[str], batches: Iterator[list[Any]]
    ) -> RowDigest:
        digest = RowDigest()
        with (
            self.raw.cursor() as cursor,
            cursor.copy(f"COPY {table} ({listed(columns)}) FROM STDIN") as copy,
        ):
            for rows in batches:
                for row in rows:
                    copy.write_row(row)
                    digest.add(row)
        return digest

    def _move_sequences(self, tables: dict[str, tuple[list[str], str]]) -> None:
        """Each identity column's next value past the copied ids."""
        rows = self.raw.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND is_identity = 'YES'"
        ).fetchall()
        for table, column in rows:
            self.raw.execute(
                f"SELECT setval(pg_get_serial_sequence(%s, %s), max({column}))"
                f" FROM {table} HAVING max({column}) IS NOT NULL",
                (table, column),
            )

    def _check(
        self,
        copied: list[TableCopy],
        tables: dict[str, tuple[list[str], str]],
        head: tuple[int, str],
        batch: int,
    ) -> int:
        """The copy read back against the source; the number of blobs checked."""
        blobs = BlobCheck(tables["blobs"][0]) if "blobs" in tables else None
        for each in copied:
            columns, key = tables[each.name]
            digest = RowDigest()
            size = BLOB_BATCH if each.name == "blobs" else batch
            for row in self._read_back(each.name, columns, key, size):
                digest.add(row)
                if blobs is not None and each.name == "blobs":
                    blobs.check(row, self.target)
            if (digest.rows, digest.hexdigest()) != (each.rows, each.digest):
                raise CopyMismatch(
                    f"the copy of table {each.name} in {self.target} does not match the source"
                    f" ({digest.rows:,} rows read back, {each.rows:,} copied; their digests"
                    " differ): the copy was rolled back, the target holds none of it"
                )
            if blobs is not None and each.name == "blobs":
                blobs.settle()
        row = self.raw.execute("SELECT seq, hash FROM chain ORDER BY seq DESC LIMIT 1").fetchone()
        theirs = (0, "0" * 64) if row is None else (int(row[0]), str(row[1]))
        if theirs != head:
            raise CopyMismatch(
                f"the copy's chain head in {self.target} ({theirs[0]}:{theirs[1][:16]}) is not"
                f" the source's ({head[0]}:{head[1][:16]}): the copy was rolled back, the"
                " target holds none of it"
            )
        return 0 if blobs is None else blobs.count

    def _read_back(self, table: str, columns: list[str], key: str, size: int) -> Iterator[Any]:
        with self.raw.cursor(name=f"read_back_{table}") as cursor:
            cursor.itersize = size
            cursor.execute(f"SELECT {listed(columns)} FROM {table} ORDER BY {key}")
            while rows := cursor.fetchmany(size):
                yield from rows

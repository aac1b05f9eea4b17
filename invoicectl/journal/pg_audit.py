"""Reading a PostgreSQL journal for ``invoicectl verify``: as ``AuditReader`` reads SQLite's.

The same reads in one snapshot (a ``REPEATABLE READ READ ONLY`` transaction: the journal as
it was at the first read, whatever sends commit meanwhile), never migrating or writing the
journal; only its own temporary table of each row's last event, made before the snapshot
begins (a read-only transaction may write a temporary table but not create one). Its key is
text (a row's key is an integer or text, and one column holds both), compared with the
table's key as text. The long reads (the chain, every row beside its last event, every blob)
stream through server-side cursors, so memory stays flat as it does on SQLite. SQLite's own
integrity check has no PostgreSQL form: the server checks its own pages (``verify`` says so).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from invoicectl.journal.audit import AuditReader, ChainRow
from invoicectl.journal.chain import COVERED
from invoicectl.journal.pg_connection import PgConnection, network_limits
from invoicectl.journal.shape import TABLES
from invoicectl.locations import JournalURL

_BATCH = 1000
_BLOB_BATCH = 64


class PgAuditReader(AuditReader):
    """One PostgreSQL journal, opened for ``verify``: read-only, in one snapshot."""

    def __init__(self, location: JournalURL) -> None:  # noqa: PLW0231 (not SQLite's opening)
        import psycopg

        from invoicectl.journal.pg_database import not_connected

        self.path = location  # type: ignore[assignment]
        try:
            raw = psycopg.connect(
                location.connection_url(),
                autocommit=True,
                connect_timeout=10,
                application_name="invoicectl verify",
                **network_limits(location.connection_url()),
            )
        except psycopg.Error as error:
            raise not_connected(error, location) from None
        self.conn = PgConnection(raw)  # type: ignore[assignment]
        self._cursors = 0
        raw.execute(
            'CREATE TEMP TABLE last_event (tbl TEXT COLLATE "C" NOT NULL,'
            ' key TEXT COLLATE "C" NOT NULL, seq BIGINT NOT NULL, digest BYTEA NOT NULL,'
            " PRIMARY KEY (tbl, key))"
        )
        raw.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")

    def lacking(self) -> list[str]:
        from invoicectl.journal.pg_database import PG_ONLY_TABLES

        tables = self._raw.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
        return sorted({*TABLES, *PG_ONLY_TABLES}.difference(name for (name,) in tables))

    @contextmanager
    def isolated(self) -> Iterator[None]:
        """One step of ``verify``: what fails in it is rolled back to its start, and the
        snapshot's transaction goes on for the steps after it (one failed statement, a
        table dropped by hand, aborted it for every check that came later)."""
        self._raw.execute("SAVEPOINT verify_step")
        try:
            yield
        except BaseException:
            self._raw.execute("ROLLBACK TO SAVEPOINT verify_step")
            raise
        self._raw.execute("RELEASE SAVEPOINT verify_step")

    @property
    def _raw(self) -> Any:
        return self.conn.raw  # type: ignore[attr-defined]

    def close(self) -> None:
        if not self._raw.closed:
            try:
                self._raw.execute("ROLLBACK")
            finally:
                self._raw.close()

    def _streamed(self, sql: str, parameters: Any = None, size: int = _BATCH) -> Iterator[Any]:
        """The rows of ``sql`` (PostgreSQL's own), through a server-side cursor."""
        self._cursors += 1
        with self._raw.cursor(name=f"audit_{self._cursors}") as cursor:
            cursor.itersize = size
            cursor.execute(sql, parameters)
            yield from cursor

    def integrity_problems(self) -> list[str]:
        """SQLite's check of its file has no PostgreSQL form: none to report here."""
        return []

    def chain(self, *, after: int = 0, upto: int | None = None) -> Iterator[ChainRow]:
        bound = "" if upto is None else " AND seq <= %(upto)s"
        for row in self._streamed(
            "SELECT seq, kind, invoice_id, payload, hash FROM chain WHERE seq > %(after)s"
            f"{bound} ORDER BY seq",
            {"after": after, "upto": upto},
        ):
            yield ChainRow(*row)

    def has_table(self, name: str) -> bool:
        (found,) = self._raw.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()
        return bool(found)

    def begin_last_events(self) -> None:
        self._raw.execute("DELETE FROM pg_temp.last_event")

    def record_last_events(self, events: list[tuple[str, Any, int, bytes]]) -> None:
        # Later events of a row replace earlier ones, in chain order; a batch may hold both.
        latest = {(table, str(key)): (seq, digest) for table, key, seq, digest in events}
        if not latest:
            return
        with self._raw.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO pg_temp.last_event VALUES (%s, %s, %s, %s) ON CONFLICT (tbl, key)"
                " DO UPDATE SET seq = EXCLUDED.seq, digest = EXCLUDED.digest",
                [(table, key, seq, digest) for (table, key), (seq, digest) in latest.items()],
            )

    def rows_and_last_events(
        self, table: str
    ) -> Iterator[tuple[Any, dict[str, Any], int | None, bytes | None]]:
        key_column = COVERED[table][1]
        self._cursors += 1
        with self._raw.cursor(name=f"audit_{self._cursors}") as cursor:
            cursor.itersize = _BATCH
            cursor.execute(
                f"SELECT t.*, l.seq, l.digest FROM {table} t LEFT JOIN pg_temp.last_event l"
                f" ON l.tbl = %s AND l.key = t.{key_column}::text ORDER BY t.{key_column}",
                (table,),
            )
            names: list[str] | None = None
            for values in cursor:
                if names is None:
                    names = [column.name for column in cursor.description][:-2]
                row = dict(zip(names, values[:-2], strict=True))
                digest = None if values[-1] is None else bytes(values[-1])
                yield row[key_column], row, values[-2], digest

    def rows_deleted(self, table: str) -> Iterator[tuple[Any, int]]:
        key_column = COVERED[table][1]
        rows = self._raw.execute(
            f"SELECT l.key, l.seq FROM pg_temp.last_event l WHERE l.tbl = %s AND NOT EXISTS"
            f" (SELECT 1 FROM {table} t WHERE t.{key_column}::text = l.key) ORDER BY l.seq",
            (table,),
        ).fetchall()
        integer_key = key_column == "id"
        for key, seq in rows:
            digits = key.removeprefix("-")  # "²" passes isdigit, and int() refuses it
            whole = integer_key and digits.isascii() and digits.isdigit()
            yield (int(key) if whole else key), seq

    def blob_names(self) -> Iterator[str]:
        for (sha256,) in self._streamed("SELECT sha256 FROM blobs"):
            yield str(sha256)

    def stored_blobs(self) -> Iterator[tuple[str, int, str | None, bytes]]:
        for sha256, size, codec, data in self._streamed(
            "SELECT sha256, size, codec, data FROM blobs", size=_BLOB_BATCH
        ):
            yield str(sha256), int(size), codec, bytes(data)

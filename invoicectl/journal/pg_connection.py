"""A PostgreSQL connection that the journal's parts use as they use SQLite's.

The journal's parts (``invoices``, ``sending``, ``scans``, ``chain``) speak to a
``sqlite3.Connection``: ``execute`` and ``executemany`` with SQLite's placeholders, rows read
by name or position, ``in_transaction``, a cursor whose rows are plain tuples. ``PgConnection``
gives them that over psycopg 3, each statement translated once (``pg_dialect``), so the
journal's statements are written once for both backends.

It is in autocommit mode, as the SQLite connection is: outside ``atomic`` each statement
commits on its own. ``PgDatabase.atomic`` opens a transaction and takes the journal's one
write lock first (a transaction-scoped advisory lock), which is what SQLite's
``BEGIN IMMEDIATE`` does: writers take turns, readers never wait. The chain's head, read once
a transaction has the lock, is then the head (``chain.py``), whatever other processes run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from invoicectl.journal.pg_dialect import translate

if TYPE_CHECKING:
    import psycopg

# The advisory lock every write transaction takes first: one number for the journal's
# database (pg_advisory_xact_lock's one-argument form).
WRITE_LOCK = 0x1A7C_0001


class PgRow(tuple):  # type: ignore[type-arg]
    """A row as ``sqlite3.Row`` reads: by position, by column name, and ``dict(row)``."""

    __slots__ = ()
    _index: dict[str, int]

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._index)


def _row_class(names: Sequence[str]) -> type[PgRow]:
    return type("Row", (PgRow,), {"__slots__": (), "_index": {n: i for i, n in enumerate(names)}})


def _named_rows(cursor: Any) -> Any:
    names = [column.name for column in cursor.description or ()]
    row_class = _row_class(names)
    return lambda values: row_class(values)


def _tuple_rows(cursor: Any) -> Any:
    return tuple


def _with_numbered(sql: str, parameters: Any) -> Any:
    """SQLite's ``?N`` placeholders, translated to ``%(pN)s``, read a dict."""
    if "%(p1)s" in sql and isinstance(parameters, Sequence) and not isinstance(parameters, str):
        return {f"p{index}": value for index, value in enumerate(parameters, start=1)}
    return parameters


def _bindable(parameters: Any) -> Any:
    """Parameters as psycopg binds them: a ``memoryview`` as bytes."""
    if isinstance(parameters, Mapping):
        return {name: _value(value) for name, value in parameters.items()}
    return [_value(value) for value in parameters]


def _value(value: Any) -> Any:
    return bytes(value) if isinstance(value, memoryview) else value


class PgCursor:
    """A cursor as the journal uses SQLite's: execute, fetch, iterate, ``description``,
    ``rowcount``, ``lastrowid`` (of an INSERT ... RETURNING id)."""

    def __init__(self, cursor: psycopg.Cursor[Any], *, named: bool = True) -> None:
        self._cursor = cursor
        self._named = named
        self.row_factory: Any = "named" if named else None

    def execute(self, sql: str, parameters: Any = ()) -> PgCursor:
        translated = translate(sql)
        self._cursor.row_factory = _named_rows if self.row_factory is not None else _tuple_rows
        bound = _bindable(_with_numbered(translated, parameters)) if parameters else None
        self._cursor.execute(translated, bound)
        return self

    def executemany(self, sql: str, rows: Any) -> PgCursor:
        translated = translate(sql)
        batch = [_bindable(_with_numbered(translated, row)) for row in rows]
        if batch:
            self._cursor.executemany(translated, batch)
        return self

    def fetchone(self) -> Any:
        return self._cursor.fetchone() if self._cursor.description else None

    def fetchall(self) -> list[Any]:
        return self._cursor.fetchall() if self._cursor.description else []

    def fetchmany(self, size: int) -> list[Any]:
        return self._cursor.fetchmany(size) if self._cursor.description else []

    def __iter__(self) -> Iterator[Any]:
        if self._cursor.description:
            yield from self._cursor

    @property
    def description(self) -> list[tuple[str, ...]]:
        return [(column.name,) for column in self._cursor.description or ()]

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def lastrowid(self) -> int | None:
        return None


class PgConnection:
    """``sqlite3.Connection``'s part the journal uses, over one psycopg connection."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.raw = conn

    def execute(self, sql: str, parameters: Any = ()) -> PgCursor:
        return PgCursor(self.raw.cursor()).execute(sql, parameters)

    def executemany(self, sql: str, rows: Any) -> PgCursor:
        return PgCursor(self.raw.cursor()).executemany(sql, rows)

    def cursor(self) -> PgCursor:
        return PgCursor(self.raw.cursor())

    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus

        return self.raw.info.transaction_status != TransactionStatus.IDLE

    def close(self) -> None:
        self.raw.close()

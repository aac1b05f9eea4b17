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

import contextlib
import itertools
import re
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


# Rows a streamed read fetches from the server at a time: few enough to keep memory flat,
# enough that a million rows are a thousand round trips, not a million.
STREAM_BATCH = 1000
_QUERY = re.compile(r"^\s*(SELECT|WITH)\b", re.IGNORECASE)
_cursor_names = itertools.count(1)


class PgCursor:
    """A cursor as the journal uses SQLite's: execute, fetch, iterate, ``description``,
    ``rowcount``, ``lastrowid`` (of an INSERT ... RETURNING id).

    A cursor the journal asked for by ``cursor()`` reads as SQLite's does, a batch of rows at
    a time as they are asked for (``streamed``), where psycopg's own cursor fetches the whole
    result at ``execute``: ``status --format json`` of a million invoices, a first scan's
    chain events. It is a server-side cursor, so the journal may run other statements between
    two rows, as it does on SQLite; outside a transaction one WITH HOLD (the server keeps the
    result when the statement's transaction ends, on its disk past ``work_mem``)."""

    def __init__(
        self, cursor: psycopg.Cursor[Any], *, streamed: psycopg.Connection[Any] | None = None
    ) -> None:
        self._cursor: Any = cursor
        self._streamed = streamed
        self.row_factory: Any = "named"

    def execute(self, sql: str, parameters: Any = ()) -> PgCursor:
        translated = translate(sql)
        bound = _bindable(_with_numbered(translated, parameters)) if parameters else None
        if self._streamed is not None and _QUERY.match(translated):
            self._server_cursor(self._streamed)
        self._cursor.row_factory = _named_rows if self.row_factory is not None else _tuple_rows
        self._cursor.execute(translated, bound)
        return self

    def _server_cursor(self, conn: psycopg.Connection[Any]) -> None:
        from psycopg.pq import TransactionStatus

        self.close()
        outside = conn.info.transaction_status == TransactionStatus.IDLE
        self._cursor = conn.cursor(name=f"invoicectl_{next(_cursor_names)}", withhold=outside)
        self._cursor.itersize = STREAM_BATCH

    def close(self) -> None:
        """The server's cursor let go (a WITH HOLD one holds its result until then)."""
        if not self._cursor.closed and not self._cursor.connection.closed:
            self._cursor.close()

    def executemany(self, sql: str, rows: Any) -> PgCursor:
        translated = translate(sql)
        batch = [_bindable(_with_numbered(translated, row)) for row in rows]
        if batch:
            self._cursor.executemany(translated, batch)
        return self

    def fetchone(self) -> Any:
        if not self._cursor.description:
            return None
        row = self._cursor.fetchone()
        if row is None:
            self._done()
        return row

    def fetchall(self) -> list[Any]:
        if not self._cursor.description:
            return []
        rows: list[Any] = self._cursor.fetchall()
        self._done()
        return rows

    def fetchmany(self, size: int) -> list[Any]:
        if not self._cursor.description:
            return []
        rows: list[Any] = self._cursor.fetchmany(size)
        if len(rows) < size:
            self._done()
        return rows

    def _done(self) -> None:
        """Every row read: a server-side cursor is let go at once."""
        if self._streamed is not None:
            self.close()

    def __iter__(self) -> Iterator[Any]:
        if not self._cursor.description:
            return
        try:
            yield from self._cursor
        finally:
            self._done()

    @property
    def description(self) -> list[tuple[str, ...]]:
        return [(column.name,) for column in self._cursor.description or ()]

    @property
    def rowcount(self) -> int:
        return int(self._cursor.rowcount)

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
        """A cursor whose reads stream (``PgCursor``), for what iterates a large result."""
        return PgCursor(self.raw.cursor(), streamed=self.raw)

    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus

        return self.raw.info.transaction_status != TransactionStatus.IDLE

    def close(self) -> None:
        self.raw.close()

    @property
    def busy(self) -> bool:
        """Whether a statement is under way on it (sent, not yet answered): read from any
        thread, without waiting on the connection."""
        from psycopg.pq import TransactionStatus

        return self.raw.info.transaction_status == TransactionStatus.ACTIVE

    def cut(self, why: str) -> None:
        """Its socket shut down, from any thread: a call waiting on a server that stopped
        answering (a network cut that drops packets, a frozen proxy) fails at once with the
        connection lost, where it would have waited for TCP to give up, hours later. ``why``
        is what the run's error line says then (``why_cut``)."""
        _cuts.append(why)
        cut_socket(self.raw)


# Why this process cut a connection (``PgConnection.cut``): the connection lost is then no
# server to check, and ``pg_database.pg_failure`` says this instead.
_cuts: list[str] = []


def why_cut() -> str | None:
    return _cuts[-1] if _cuts else None


def forget_cuts() -> None:
    """A new journal opened: a cut before it is no reason for what fails on it."""
    _cuts.clear()


# TCP's own checks on every connection, unless the URL sets them: a server across a network
# cut that drops packets is found gone in about a minute (an idle wait: keepalives; a write
# never acknowledged: tcp_user_timeout), not the two hours of the system's defaults.
_NETWORK_LIMITS = {
    "keepalives": "1",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
    "tcp_user_timeout": "60000",
}


def network_limits(url: str) -> dict[str, Any]:
    """``_NETWORK_LIMITS`` the connection URL ``url`` leaves unset, for ``psycopg.connect``."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        given = conninfo_to_dict(url)
    except Exception:  # the connection says what is wrong with the URL
        return {}
    if "service" in given:  # pg_service.conf may set them: an argument would override it
        return {}
    return {name: value for name, value in _NETWORK_LIMITS.items() if name not in given}


def cut_socket(conn: Any) -> None:
    """``conn``'s (a psycopg connection) socket shut down both ways; nothing if it is closed."""
    import os
    import socket

    try:
        fd = conn.pgconn.socket
    except Exception:  # closed, or never connected: nothing to cut
        return
    with contextlib.suppress(OSError):
        cutter = socket.socket(fileno=os.dup(fd))
        try:
            cutter.shutdown(socket.SHUT_RDWR)
        finally:
            cutter.close()

"""The hash chain: every change to a row the journal keeps as evidence, as one event.

Each event is a row of ``chain``: a sequence number, the canonical JSON payload and
``hash = sha256(previous hash || payload)``, where ``previous hash`` is the 32 raw bytes of
the event before (32 zero bytes before the first) and ``payload`` the payload's UTF-8 bytes.
Change one byte of any event, or delete one, and every hash from there on no longer follows.

The payload is a JSON object with ``seq``, ``at`` (ISO 8601), ``kind`` and, for a row
change, ``table``, ``key`` and ``row`` (the whole row after the change, every column):

    genesis   the first event: what the journal held when the chain began (``content``)
    coverage  the chain covers more tables from here on (``tables``); their rows follow
    invoice   an ``invoices`` row inserted or changed
    attempt   an ``attempts`` row written before its request, or completed after it
    event     an ``events`` row (an operator decision, a hold, an environment change)
    revision  a ``revisions`` row: a content seen under an invoice ID (its bytes are the
              blob of its ``sha256``)
    run       a ``runs`` row, when the run begins and when it ends
    history_check  a ``history_checks`` row: a check of GoRoute's transactions before a send
    environment    the ``environment`` row: the base URL the journal is bound to

Canonical form, exactly: ``json.dumps(payload, sort_keys=True, separators=(",", ":"),
ensure_ascii=False, allow_nan=False)`` encoded as UTF-8: object keys sorted by code point,
no white space outside strings, non-ASCII characters as themselves (not ``\\u`` escapes),
integers in decimal, floats in Python's shortest round-trip form, null for SQL NULL.

Every append happens inside the transaction of the change it records (the journal's own write
methods call ``append`` after their write, so the write lock is already held and the head
read here is the head): the chain cannot disagree with the rows it covers.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from operator import itemgetter
from typing import Any, NamedTuple

ZERO_HASH = "0" * 64

CHAIN_SCHEMA = """
    -- The hash chain (journal/chain.py): one row per change to invoices, attempts, events.
    CREATE TABLE chain (
        seq INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        invoice_id TEXT,                -- for finding an invoice's events; also in payload
        payload TEXT NOT NULL,          -- canonical JSON (see chain.py)
        hash TEXT NOT NULL              -- hex sha256(previous hash bytes || payload bytes)
    );
    CREATE INDEX chain_invoice ON chain(invoice_id);
    -- The chain's head when a run began, and when it finished.
    ALTER TABLE runs ADD COLUMN chain_seq INTEGER;
    ALTER TABLE runs ADD COLUMN chain_head TEXT;
"""

# The tables whose rows the chain covers: table -> (kind, key column). The first three from
# the genesis on (m009); the others from a ``coverage`` event on (m011).
COVERED = {
    "invoices": ("invoice", "invoice_id"),
    "attempts": ("attempt", "id"),
    "events": ("event", "id"),
    "revisions": ("revision", "id"),
    "runs": ("run", "id"),
    "history_checks": ("history_check", "id"),
    "environment": ("environment", "id"),
}
GENESIS_TABLES = ("invoices", "attempts", "events")


# Canonical form's encoder (the module docstring states the form).
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def canonical(payload: dict[str, Any]) -> bytes:
    """The payload's canonical bytes (the module docstring states the form)."""
    return _CANONICAL.encode(payload).encode("utf-8")


def link(previous: str, payload: bytes) -> str:
    """``sha256(previous hash bytes || payload bytes)`` in hex."""
    return hashlib.sha256(bytes.fromhex(previous) + payload).hexdigest()


_HASH = re.compile("[0-9a-f]{64}")


def head(conn: sqlite3.Connection) -> tuple[int, str]:
    """(sequence number, hash) of the last event; (0, zeros) before the first."""
    row = _last_event(conn)
    return (0, ZERO_HASH) if row is None else (int(row[0]), str(row[1]))


def _last_event(conn: sqlite3.Connection) -> tuple[Any, Any] | None:
    row = conn.execute("SELECT seq, hash FROM chain ORDER BY seq DESC LIMIT 1").fetchone()
    return None if row is None else (row[0], row[1])


def head_is_whole(conn: sqlite3.Connection) -> bool:
    """Whether the chain's last event reads as one: a positive sequence number and a hash. A
    file cut short or overwritten reads as rows of nothing, which nothing may be chained to."""
    row = _last_event(conn)
    if row is None:
        return True
    seq, digest = row
    return isinstance(seq, int) and seq > 0 and _whole(digest)


def head_links(conn: sqlite3.Connection) -> bool:
    """Whether the chain's last event follows from the one before it (its hash is the link
    of that hash and its payload): two rows read by key. Pages of two journals mixed (a
    write-ahead log read with a journal it is not of) rarely keep the two in step."""
    rows = conn.execute("SELECT seq, payload, hash FROM chain ORDER BY seq DESC LIMIT 2")
    events = rows.fetchall()
    if not events:
        return True
    seq, payload, digest = events[0]
    before, _, previous = events[1] if len(events) > 1 else (0, None, ZERO_HASH)
    return isinstance(seq, int) and before == seq - 1 and follows(previous, payload, digest)


def follows(previous: Any, payload: Any, digest: Any) -> bool:
    """Whether an event's ``digest`` is sha256(``previous`` hash || its ``payload``), for
    values read back from a journal that may hold anything."""
    if not (isinstance(payload, str) and _whole(previous) and _whole(digest)):
        return False
    return bool(link(previous, payload.encode("utf-8")) == digest)


def _whole(digest: object) -> bool:
    return isinstance(digest, str) and bool(_HASH.fullmatch(digest))


Head = tuple[int, str]  # (sequence number, hash) of the last event

_INSERT = "INSERT INTO chain (seq, kind, invoice_id, payload, hash) VALUES (?, ?, ?, ?, ?)"


def append(
    conn: sqlite3.Connection,
    table: str,
    rows: Iterable[dict[str, Any]],
    at: str,
    after: Head | None = None,
) -> Head:
    """One event per row of ``table``, each the whole row as it is now (every column, as
    ``SELECT *`` reads it); the new head. Called inside the transaction that wrote the rows,
    after the write. ``after``: the head as this transaction left it, known to the caller
    (read here when None)."""
    return _append(conn, table, ((tuple(row), tuple(row.values())) for row in rows), at, after)


def append_values(
    conn: sqlite3.Connection,
    table: str,
    names: Sequence[str],
    rows: Iterable[Sequence[Any]],
    at: str,
    after: Head | None = None,
) -> Head:
    """``append`` for rows as SQLite reads them: each a tuple of every column's value, in
    the order of ``names`` (a ``SELECT *``'s description), with no dict made of each."""
    columns = tuple(names)
    return _append(conn, table, ((columns, values) for values in rows), at, after)


def _append(
    conn: sqlite3.Connection,
    table: str,
    rows: Iterable[tuple[tuple[str, ...], Sequence[Any]]],
    at: str,
    after: Head | None,
) -> Head:
    """The events of ``rows`` (column names, values). A payload is its row's form
    (``_row_form``: canonical form's text with a place for each value) filled with the values,
    each written as canonical form writes it: the same bytes as ``canonical`` of the payload,
    in about half the time of encoding a dict with its keys sorted. The previous hash stays
    32 bytes from event to event instead of hex parsed again."""
    kind = COVERED[table][0]
    at_text = _json_value(at)
    seq, previous = head(conn) if after is None else after
    digest = bytes.fromhex(previous)
    events = []
    form_names: tuple[str, ...] | None = None
    for names, values in rows:
        if names is not form_names:  # append_values: one form for every row
            form, form_names = _row_form(table, names), names
        seq += 1
        texts = [
            _string(value)
            if value.__class__ is str
            else "null"
            if value is None
            else _json_value(value)
            for value in form.in_order(values)
        ]
        text = form.template % (at_text, _json_value(values[form.key_at]), *texts, seq)
        chained = hashlib.sha256(digest)
        chained.update(text.encode("utf-8"))
        digest = chained.digest()
        invoice_id = None if form.invoice_at is None else values[form.invoice_at]
        events.append((seq, kind, invoice_id, text, digest.hex()))
    if len(events) == 1:
        conn.execute(_INSERT, events[0])
    elif events:
        conn.executemany(_INSERT, events)
    return seq, events[-1][4] if events else previous


_string = json.encoder.encode_basestring  # what the encoder writes a str as, without ensure_ascii


class _RowForm(NamedTuple):
    """How a row of one table, its columns named in one order, becomes a payload."""

    # The payload with ``%s`` for "at", the key and each column's value, ``%d`` for the seq:
    # its keys in the order canonical form's sort gives, top level ("at" < "key" < "kind" <
    # "row" < "seq" < "table") and row (the columns sorted).
    template: str
    in_order: Callable[[Sequence[Any]], Sequence[Any]]  # the values, as the columns sorted
    key_at: int
    invoice_at: int | None


@functools.cache
def _row_form(table: str, names: tuple[str, ...]) -> _RowForm:
    kind, key_column = COVERED[table]
    order = sorted(range(len(names)), key=names.__getitem__)

    def literal(value: str) -> str:
        return _string(value).replace("%", "%%")

    row = ",".join(f"{literal(names[index])}:%s" for index in order)
    template = (
        f'{{"at":%s,"key":%s,"kind":{literal(kind)},"row":{{{row}}},'
        f'"seq":%d,"table":{literal(table)}}}'
    )
    # (itemgetter of one index gives the value, not a tuple)
    in_order = itemgetter(*order) if len(order) > 1 else lambda values: (values[order[0]],)
    invoice_at = names.index("invoice_id") if "invoice_id" in names else None
    return _RowForm(template, in_order, names.index(key_column), invoice_at)


def _json_value(value: Any) -> str:
    """A value as canonical form writes it: a str, None and an int here, anything else (a
    float, with its refusal of NaN and infinity) by the encoder."""
    if value is None:
        return "null"
    if value.__class__ is str:
        return _string(value)
    if value.__class__ is int:
        return int.__repr__(value)
    return _CANONICAL.encode(value)


def append_rows(
    conn: sqlite3.Connection, table: str, keys: Iterable[Any], at: str, after: Head | None = None
) -> Head:
    """``append`` for the rows of ``table`` named by ``keys``, read as they are now."""
    _kind, key_column = COVERED[table]
    rows = []
    for key in keys:
        cursor = conn.execute(f"SELECT * FROM {table} WHERE {key_column} = ?", (key,))
        names = [column[0] for column in cursor.description]
        values = cursor.fetchone()
        if values is not None:
            rows.append(dict(zip(names, values, strict=True)))
    if not rows:
        return head(conn) if after is None else after
    return append(conn, table, rows, at, after)


# ---- starting the chain of a journal that holds rows, and widening what it covers ------
#
# ``start`` (m009) writes the genesis event, which commits to everything the journal held
# (how many rows of each kind, and one digest over every blob's sha256 and every covered
# row), then one event per row already there; ``extend`` (m011) a ``coverage`` event naming
# tables covered from then on, then one event per row they hold. Both read the journal a
# batch at a time in key order: upgrading a journal of years costs memory for one batch.
# The events have append_rows' form (tests/test_audit_chain.py holds the two to one form).

_BATCH = 1000


def start(conn: sqlite3.Connection, at: str) -> None:
    """The genesis event, then one event per row of the tables it covers (m009)."""
    digest = hashlib.sha256()
    counts: dict[str, int] = {"blobs": 0}
    for (sha256,) in conn.execute("SELECT sha256 FROM blobs ORDER BY sha256"):
        digest.update(f"blob {sha256}\n".encode())
        counts["blobs"] += 1
    for table in GENESIS_TABLES:
        counts[table] = 0
        for _key, row in _rows(conn, table):
            digest.update(canonical({"table": table, "row": row}) + b"\n")
            counts[table] += 1
    identity = conn.execute("SELECT journal_id FROM identity WHERE id = 1").fetchone()
    payload = {
        "seq": 1,
        "at": at,
        "kind": "genesis",
        "journal_id": None if identity is None else identity[0],
        "content": {"counts": counts, "sha256": digest.hexdigest()},
    }
    data = canonical(payload)
    conn.execute(
        "INSERT INTO chain (seq, kind, invoice_id, payload, hash)"
        " VALUES (1, 'genesis', NULL, ?, ?)",
        (data.decode("utf-8"), link(ZERO_HASH, data)),
    )
    for table in GENESIS_TABLES:
        _events_for_rows(conn, table, at)


def extend(conn: sqlite3.Connection, tables: tuple[str, ...], at: str) -> None:
    """A ``coverage`` event naming ``tables`` and how many rows each holds, then one event
    per row of them (m011)."""
    counts = {
        table: int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]) for table in tables
    }
    seq, previous = head(conn)
    payload = {"seq": seq + 1, "at": at, "kind": "coverage", "tables": list(tables)}
    payload["counts"] = counts
    data = canonical(payload)
    conn.execute(
        "INSERT INTO chain (seq, kind, invoice_id, payload, hash)"
        " VALUES (?, 'coverage', NULL, ?, ?)",
        (seq + 1, data.decode("utf-8"), link(previous, data)),
    )
    for table in tables:
        _events_for_rows(conn, table, at)


def _events_for_rows(conn: sqlite3.Connection, table: str, at: str) -> None:
    """One event per row of ``table``, in key order, written a batch at a time."""
    kind = COVERED[table][0]
    seq, previous = head(conn)
    events = []
    for key, row in _rows(conn, table):
        seq += 1
        payload = {"seq": seq, "at": at, "kind": kind, "table": table, "key": key, "row": row}
        data = canonical(payload)
        previous = link(previous, data)
        events.append((seq, kind, row.get("invoice_id"), data.decode("utf-8"), previous))
        if len(events) >= _BATCH:
            _insert(conn, events)
    _insert(conn, events)


def _insert(conn: sqlite3.Connection, events: list[tuple[Any, ...]]) -> None:
    conn.executemany(
        "INSERT INTO chain (seq, kind, invoice_id, payload, hash) VALUES (?, ?, ?, ?, ?)", events
    )
    events.clear()


def _rows(conn: sqlite3.Connection, table: str) -> Iterator[tuple[Any, dict[str, Any]]]:
    """(key, the whole row) of every row of ``table`` in key order, read a batch at a time
    (each batch read whole before the caller writes, so no cursor spans a write)."""
    key_column = COVERED[table][1]
    after: Any = None
    while True:
        where, parameters = ("", ()) if after is None else (f"WHERE {key_column} > ?", (after,))
        cursor = conn.execute(
            f"SELECT * FROM {table} {where} ORDER BY {key_column} LIMIT {_BATCH}", parameters
        )
        names = [column[0] for column in cursor.description]
        batch = cursor.fetchall()
        for values in batch:
            row = dict(zip(names, values, strict=True))
            yield row[key_column], row
        if len(batch) < _BATCH:
            return
        after = batch[-1][names.index(key_column)]

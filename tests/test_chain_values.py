"""``chain.append`` and ``chain.append_values`` write the very events the chain's definition
gives (issue 13): the canonical bytes of each payload are a promise to auditors, and the faster
way of building them (one template a table's row form, filled with each row's values, keys in
sorted order instead of sorted by the encoder, the previous hash kept as bytes) must not change
one byte of what a dict through ``canonical`` and ``link`` gives. Held over rows made to be
awkward (column names in any order, every kind of value SQLite gives back: text with quotes,
control characters, non-ASCII and per cent signs, integers at their limits, floats at theirs,
NULL; and for dicts, values of any JSON type), and over a real scan of the shared corpus of
real invoices, whose events ``append_rows`` must write again byte for byte.
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_corpus import CORPUS, needs_corpus

from invoicectl.journal import Journal
from invoicectl.journal.chain import (
    COVERED,
    append,
    append_rows,
    append_values,
    canonical,
    link,
)
from invoicectl.scan.ingest import scan_directory

_CHAIN = (
    "CREATE TABLE chain (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, invoice_id TEXT,"
    " payload TEXT NOT NULL, hash TEXT NOT NULL)"
)
# Out of order on purpose: capitals sort before lower case, "_" between them, prefixes
# before what they prefix, non-ASCII after all of ASCII; a name that reads as a format.
_NAMES = ["state", "id", "Zeta", "invoice_id", "amount", "_note", "id2", "id_", "é", "a", "%s%%"]
_TEXTS = [
    "",
    "plain",
    'a "quoted" \\ back\\slash',
    "line\nbreak\ttab\r\x00\x01\x1f\x7f",
    "Åkerlund & Søn AB, Köln, Größe – 漢字 😀",
    "\u2028\u2029\ufeff\u00a0",
    '{"nested": "json text", "n": 1.5}',
    "</script><!-- & &amp;",
    "100% sure, %s and %%",
]
_NUMBERS = [
    0,
    -1,
    2**63 - 1,
    -(2**63),
    0.1,
    -0.0,
    1e16,
    1e-7,
    5e-324,
    1.7976931348623157e308,
    123456.789,
    205267.0,
]


def _value(rng: random.Random) -> object:
    kind = rng.randrange(4)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice(_NUMBERS)
    return "".join(rng.choice(_TEXTS) for _ in range(rng.randrange(1, 4)))


def _events(conn: sqlite3.Connection) -> list[tuple[object, ...]]:
    return [tuple(row) for row in conn.execute("SELECT * FROM chain ORDER BY seq")]


def _reference(
    table: str, rows: list[dict[str, object]], at: str, after: tuple[int, str]
) -> Iterator[tuple[object, ...]]:
    """The events the module docstring defines, written the plain way: each payload a dict
    through ``canonical`` (the encoder sorting every key), each hash by ``link``."""
    kind, key_column = COVERED[table]
    seq, previous = after
    for row in rows:
        seq += 1
        payload = {"seq": seq, "at": at, "kind": kind, "table": table, "key": row[key_column]}
        data = canonical({**payload, "row": row})
        previous = link(previous, data)
        yield (seq, kind, row.get("invoice_id"), data.decode("utf-8"), previous)


def _chain() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute(_CHAIN)
    conn.execute("INSERT INTO chain VALUES (1, 'genesis', NULL, '{}', ?)", ("ab" * 32,))
    return conn


@pytest.mark.parametrize("table", sorted(COVERED))
def test_append_and_append_values_write_the_defined_events_byte_for_byte(table: str) -> None:
    rng = random.Random(table)
    rows = [tuple(_value(rng) for _ in _NAMES) for _ in range(300)]
    names = _NAMES  # every covered table's key column is among them
    at = "2026-12-01T18:00:00.123456+00:00"
    dicts = [dict(zip(names, values, strict=True)) for values in rows]
    expected = list(_reference(table, dicts, at, (1, "ab" * 32)))
    from_dicts, from_values = _chain(), _chain()
    head = append(from_dicts, table, dicts[:150], at)
    assert head == expected[149][::4]  # (seq, hash)
    assert append(from_dicts, table, dicts[150:], at, after=head) == expected[-1][::4]
    assert append_values(from_values, table, names, rows[:150], at) == expected[149][::4]
    assert append_values(from_values, table, names, rows[150:], at) == expected[-1][::4]
    defined = _chain()  # stored as the chain table stores them (invoice_id as TEXT)
    defined.executemany("INSERT INTO chain VALUES (?, ?, ?, ?, ?)", expected)
    assert _events(from_dicts) == _events(defined)
    assert _events(from_values) == _events(defined)
    for _seq, _kind, _invoice_id, payload, _hash in expected:
        # and each is the canonical form of itself, parsed back
        assert canonical(json.loads(payload)) == payload.encode("utf-8")


def test_append_writes_values_of_any_json_type_as_canonical_form_does() -> None:
    """Rows from SQLite hold text, numbers and NULL; ``append`` takes any dict, and a value
    of another type (a bool, a nested object, a list) is written as ``canonical`` writes it,
    keys sorted at every level."""
    row = {"id": 7, "z": {"b": [1, {"d": None, "c": True}], "a": 0.5}, "flag": False, "s": "x"}
    conn = _chain()
    append(conn, "events", [row], "at", after=(1, "ab" * 32))
    assert _events(conn)[1:] == list(_reference("events", [row], "at", (1, "ab" * 32)))


def test_append_values_of_no_rows_leaves_the_head() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute(_CHAIN)
    assert append_values(conn, "invoices", ["invoice_id", "state"], [], "at") == (0, "0" * 64)
    assert append_values(conn, "invoices", ["invoice_id"], [], "at", after=(7, "ab" * 32)) == (
        7,
        "ab" * 32,
    )


def _files_of_ids_in_one_file(corpus: Path, work: Path) -> list[Path]:
    """The corpus's files whose invoice ID no other file has (an ID in several files is
    settled one at a time, its events no longer the set-wise ones)."""
    outbox = work / "whole"
    outbox.mkdir()
    for source in (corpus / "ubl").glob("*.xml"):
        shutil.copy(source, outbox / source.name)
    with Journal(work / "whole.db") as journal:
        scan_directory(journal, outbox, workers=1)
        paths = journal.db.conn.execute(
            "SELECT min(source_path) FROM revisions GROUP BY invoice_id HAVING count(*) = 1"
        )
        return [Path(path) for (path,) in paths]


@needs_corpus
def test_a_scan_of_real_invoices_chains_what_append_rows_chains(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    for source in _files_of_ids_in_one_file(CORPUS, tmp_path):
        shutil.copy(source, outbox / source.name)
    with Journal(tmp_path / "journal.db") as journal:
        report = scan_directory(journal, outbox, workers=1)
        assert len(report.new) >= 25, report.new
        conn = journal.db.conn
        scanned = _events(conn)
        kinds = [event[1] for event in scanned]
        first = kinds.index("revision")
        revisions = [key for (key,) in conn.execute("SELECT id FROM revisions ORDER BY id")]
        invoices = [
            key for (key,) in conn.execute("SELECT invoice_id FROM invoices ORDER BY invoice_id")
        ]
        assert kinds[first:] == ["revision"] * len(revisions) + ["invoice"] * len(invoices)
        at = {
            kind: conn.execute(
                "SELECT json_extract(payload, '$.at') FROM chain WHERE kind = ? LIMIT 1", (kind,)
            ).fetchone()[0]
            for kind in ("revision", "invoice")
        }
        with journal.transaction():  # the same events again, from dicts, one query a row
            conn.execute("DELETE FROM chain WHERE seq >= ?", (scanned[first][0],))
            append_rows(conn, "revisions", revisions, at["revision"])
            append_rows(conn, "invoices", invoices, at["invoice"])
            assert _events(conn) == scanned


_SCALARS = st.one_of(
    st.none(),
    st.text(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(
    table=st.sampled_from(sorted(COVERED)),
    columns=st.dictionaries(
        st.text().filter(lambda name: name != "invoice_id"), _VALUES, max_size=8
    ),
    # the chain's own invoice_id column holds these (the key is the invoice ID of an
    # invoices row): values SQLite can store
    key=st.one_of(st.integers(-(2**63), 2**63 - 1), st.text()),
    invoice_id=st.one_of(st.none(), st.text(), st.integers(-(2**63), 2**63 - 1)),
    at=st.text(),
)
def test_any_row_is_written_as_the_definition_writes_it(
    table: str, columns: dict[str, object], key: object, invoice_id: object, at: str
) -> None:
    """Whatever the names and values (any text, per cent signs and quotes included, numbers
    of any size, nested objects), the template writes what a dict through ``canonical``
    writes, and ``append_values`` what ``append`` writes."""
    key_column = COVERED[table][1]
    row = {**columns, "invoice_id": invoice_id, key_column: key}
    expected = list(_reference(table, [row], at, (1, "ab" * 32)))
    from_dict, from_values = _chain(), _chain()
    append(from_dict, table, [row], at)
    append_values(from_values, table, list(row), [tuple(row.values())], at)
    assert [event[3:] for event in _events(from_dict)[1:]] == [event[3:] for event in expected]
    assert _events(from_values) == _events(from_dict)

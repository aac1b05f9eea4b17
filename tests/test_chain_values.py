"""``chain.append_values`` writes the very events ``chain.append`` writes (issue 13): the
canonical bytes of each payload are a promise to auditors, and the faster way of building
them (keys put in sorted order instead of sorted by the encoder, the previous hash kept as
bytes) must not change one byte. Held over rows made to be awkward (column names in any
order, every kind of value SQLite gives back: text with quotes, control characters and
non-ASCII, integers at their limits, floats at theirs, NULL), and over a real scan of the
shared corpus of real invoices, whose events ``append_rows`` must write again byte for byte.
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
from pathlib import Path

import pytest
from test_corpus import CORPUS, needs_corpus

from invoicectl.journal import Journal
from invoicectl.journal.chain import COVERED, append, append_rows, append_values, canonical
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


@pytest.mark.parametrize("table", sorted(COVERED))
def test_append_values_writes_append_s_events_byte_for_byte(table: str) -> None:
    rng = random.Random(table)
    rows = [tuple(_value(rng) for _ in _NAMES) for _ in range(300)]
    names = _NAMES  # every covered table's key column is among them
    old, new = sqlite3.connect(":memory:"), sqlite3.connect(":memory:")
    for conn in (old, new):
        conn.execute(_CHAIN)
        conn.execute("INSERT INTO chain VALUES (1, 'genesis', NULL, '{}', ?)", ("ab" * 32,))
    at = "2026-12-01T18:00:00.123456+00:00"
    dicts = [dict(zip(names, values, strict=True)) for values in rows]
    assert append(old, table, dicts[:150], at) == append_values(new, table, names, rows[:150], at)
    head = append(old, table, dicts[150:], at)
    assert append_values(new, table, names, rows[150:], at) == head
    assert _events(new) == _events(old)
    for _seq, _kind, _invoice_id, payload, _hash in _events(new)[1:]:
        # and each is the canonical form of itself, parsed back
        assert canonical(json.loads(payload)) == payload.encode("utf-8")


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), b"bytes"])
def test_append_values_refuses_what_canonical_form_refuses(value: object) -> None:
    """Infinity and NaN have no JSON form, and SQLite can give back infinity (and a BLOB):
    both ways refuse the row rather than write an event no auditor can read back."""
    conn = sqlite3.connect(":memory:")
    conn.execute(_CHAIN)
    names = ["invoice_id", "amount"]
    with pytest.raises((ValueError, TypeError)) as expected:
        append(conn, "invoices", [dict(zip(names, ("A-1", value), strict=True))], "at")
    with pytest.raises(expected.type):
        append_values(conn, "invoices", names, [("A-1", value)], "at")
    assert _events(conn) == []


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

"""Which invoices an export holds: what the hash chain recorded, not only what the tables say.

helper-61 found three ways to take a sent invoice out of a signed export without a word, each
through something no hash covers: an attempt's ``started_at`` edited (a dated export chose by
the table), a deleted attempt's chain events relabelled in the ``kind`` column (the check for
deleted rows read that column), and the ``attempts_started`` index missing an entry (a lost
page write). The export now holds the invoice, or refuses naming it.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from auditkit import sent_on
from logkit import output_of
from typer.testing import CliRunner

from invoicectl.cli import app
from invoicectl.journal import Journal
from invoicectl.journal.audit import AuditReader


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, output_of(args, result)


@pytest.fixture
def sent(tmp_path: Path, outbox: Path) -> Path:
    """A-1 sent on 10 January, A-2 and A-3 on 31 January (UTC), each in a run of its own."""
    return sent_on(
        tmp_path / "state" / "journal.db",
        outbox,
        (
            ("A-1", datetime(2026, 1, 10, 9, 0, tzinfo=UTC)),
            ("A-2", datetime(2026, 1, 31, 12, 0, tzinfo=UTC)),
            ("A-3", datetime(2026, 1, 31, 13, 0, tzinfo=UTC)),
        ),
    )


def edit(journal: Path, *statements: str) -> None:
    """Statements run as someone editing the file would: its triggers dropped first."""
    with sqlite3.connect(journal) as conn:
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"):
            conn.execute(f'DROP TRIGGER "{name}"')
        for statement in statements:
            conn.execute(statement)
    conn.close()


def exported(dest: Path, part: str = "0001") -> list[str]:
    return sorted(json.loads((dest / part / "manifest.json").read_text())["invoices"].values())


def test_a_start_time_edited_out_of_the_range_is_refused_not_left_out(sent: Path, tmp_path: Path):
    """One UPDATE of A-2's start time to 2001: a dated export left A-2 out and signed."""
    edit(
        sent,
        "UPDATE attempts SET started_at = '2001-01-01T00:00:00+00:00' WHERE invoice_id = 'A-2'",
    )
    dest = tmp_path / "archive"

    code, output = run("export", str(dest), "--journal", str(sent), "--since", "2026-01-31")

    assert code == 1, output
    assert "invoice A-2: attempt " in output and "not what the hash chain recorded" in output
    assert "Traceback" not in output and len(output.strip().splitlines()) == 1, output
    assert not dest.exists() or list(dest.iterdir()) == []


def test_a_top_up_refuses_an_invoice_whose_start_time_was_edited_out_of_its_range(
    sent: Path, tmp_path: Path
):
    """A-2, in the first part, has a new audit-trail entry, and its start time is edited to
    2001: the top-up of the same range chose nothing ("nothing new") and the entry was never
    exported."""
    dest = tmp_path / "archive"
    journal = ["--journal", str(sent)]
    assert run("export", str(dest), *journal, "--since", "2026-01-31")[0] == 0
    assert exported(dest) == ["A-2", "A-3"]
    with Journal(sent) as opened:
        opened.add_event("A-2", "note", "by clerk: asked again")
    edit(
        sent,
        "UPDATE attempts SET started_at = '2001-01-01T00:00:00+00:00' WHERE invoice_id = 'A-2'",
    )

    code, output = run("export", str(dest), *journal, "--since", "2026-01-31")

    assert code == 1, output
    assert "invoice A-2: attempt " in output and "not what the hash chain recorded" in output
    assert sorted(part.name for part in dest.iterdir()) == ["0001"]


def test_deleted_attempts_hidden_by_a_relabelled_kind_are_refused(sent: Path, tmp_path: Path):
    """A-2's attempts deleted and their events' kind column (no hash covers it) set to
    'attempt ': the export left A-2 out and signed; verify-export said ok."""
    edit(
        sent,
        "DELETE FROM attempts WHERE invoice_id = 'A-2'",
        "UPDATE chain SET kind = 'attempt ' WHERE kind = 'attempt' AND invoice_id = 'A-2'",
    )
    with sqlite3.connect(sent) as conn:
        (first,) = conn.execute("SELECT min(seq) FROM chain WHERE kind = 'attempt '").fetchone()
    conn.close()
    dest = tmp_path / "archive"

    code, output = run("export", str(dest), "--journal", str(sent))

    assert code == 1, output
    assert output.strip().splitlines()[0] == (
        f"invoicectl: error: invoice A-2: chain event {first} is labelled 'attempt ', its"
        " payload's kind is 'attempt' (the label is a column no hash covers: changed outside"
        " invoicectl); nothing was exported. `invoicectl verify` tells more"
    )
    assert not dest.exists() or list(dest.iterdir()) == []


def test_an_invoice_the_start_time_index_lost_is_still_exported(sent: Path, tmp_path: Path):
    """attempts_started without A-2's entry (a lost page write; the rows are intact): the
    export, choosing by that index alone, signed a part without A-2."""
    conn = sqlite3.connect(sent, isolation_level=None)
    conn.execute("CREATE INDEX partial ON attempts(started_at) WHERE invoice_id != 'A-2'")
    (lacking,) = conn.execute(
        "SELECT rootpage FROM sqlite_master WHERE name = 'partial'"
    ).fetchone()
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute(
        "UPDATE sqlite_master SET rootpage = ? WHERE name = 'attempts_started'", (lacking,)
    )
    conn.execute("DELETE FROM sqlite_master WHERE name = 'partial'")
    conn.execute("PRAGMA writable_schema = OFF")
    conn.close()
    with sqlite3.connect(sent) as conn:  # the index, as the export's choice reads it
        rows = conn.execute("SELECT invoice_id FROM attempts WHERE started_at >= ''").fetchall()
    conn.close()
    assert "A-2" not in {invoice_id for (invoice_id,) in rows}
    dest = tmp_path / "archive"

    for options in ([], ["--since", "2026-01-31"]):
        code, output = run(
            "export", str(dest / str(len(options))), "--journal", str(sent), *options
        )
        assert code == 0, output
    assert exported(dest / "0") == ["A-1", "A-2", "A-3"]
    assert exported(dest / "2") == ["A-2", "A-3"]


def test_a_dated_export_reads_the_chain_from_its_start_not_the_whole_chain(sent: Path):
    """Each attempt's events are written after it started, in time order: the events before
    the first at or after a moment (found by a bisection) hold no attempt started from then
    on, and a dated export reads the chain from there. (This journal's first two events
    were written at the real time, after the sends' clocks: the bisection steps over them.)"""
    with AuditReader(sent) as reader:
        payloads = [(row.seq, json.loads(row.payload)) for row in reader.chain()]
        started = [
            (seq, payload["row"]["started_at"])
            for seq, payload in payloads
            if payload["kind"] == "attempt"
        ]
        a_2 = min(
            seq for seq, payload in payloads if payload.get("row", {}).get("invoice_id") == "A-2"
        )
        assert reader.first_at_or_after("2026-01-31T00:00:00+00:00") == a_2
        for moment in ("2026-01-31T12:30:00+00:00", "2026-01-31T13:00:00+00:00", "2030-01-01"):
            first = reader.first_at_or_after(moment)
            assert first > a_2
            assert all(seq >= first for seq, when in started if when >= moment), moment
        assert reader.first_at_or_after("2030-01-01") == payloads[-1][0] + 1
        assert reader.chained_sent("2026-01-31T12:30:00+00:00", None) == {"A-3"}
        assert reader.chained_sent(None, "2026-01-31T00:00:00+00:00") == {"A-1"}
        assert reader.chained_sent("2026-01-31", "2026-01-31T13:00:00+00:00") == {"A-2"}

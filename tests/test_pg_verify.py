"""``invoicectl verify`` on a PostgreSQL journal (issue 16, item 5): the chain, the blobs and
every covered row checked as on SQLite, on a real server (tests/pgserver.py); SQLite's own
file checks skipped, and the summary says so."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from pgserver import free_port
from sendkit import emulator, send, settings_for
from test_journal_copy import made_journal
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.cli import app
from invoicectl.errors import ExitCode

runner = CliRunner()


def verify(journal: str) -> tuple[int, dict[str, Any], str]:
    plain = runner.invoke(app, ["verify", "--journal", journal])
    result = runner.invoke(app, ["verify", "--journal", journal, "--json"])
    return result.exit_code, json.loads(result.stdout), plain.stdout


def copied(tmp_path, pg_url) -> str:
    journal, _outbox = made_journal(tmp_path)
    done = runner.invoke(app, ["journal", "copy", "--journal", str(journal), "--to", pg_url])
    assert done.exit_code == 0, done.output
    return str(journal)


def test_a_copy_verifies_as_its_source_does(tmp_path, pg_url):
    journal = copied(tmp_path, pg_url)

    code, document, text = verify(pg_url)
    source_code, source, _text = verify(journal)

    assert code == 0 == source_code, document["problems"]
    assert "no SQLite file checks (a PostgreSQL journal)" in text
    for key in ("head", "events", "blobs", "blobs_checked", "attempts_checked", "rows_checked"):
        assert document[key] == source[key], key


def test_a_journal_sent_from_postgresql_verifies(tmp_path, pg_url):
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    for number in range(1, 4):
        write_invoice(outbox, f"INV-{number}")
    send(settings_for(pg_url), outbox, emulator().transport())
    write_invoice(outbox, "INV-2", note="amended")
    send(settings_for(pg_url), outbox, emulator().transport())

    code, document, _text = verify(pg_url)

    assert code == 0, document["problems"]
    assert document["rows_checked"] > 6 and document["attempts_checked"] >= 3


def test_rows_changed_behind_the_journal_are_named(tmp_path, pg_url):
    copied(tmp_path, pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE invoices SET state = 'pending' WHERE invoice_id = 'INV-1'")
        (attempt,) = conn.execute("SELECT min(id) FROM attempts").fetchone()
        conn.execute("DELETE FROM attempts WHERE id = %s", (attempt,))
        (sha256,) = conn.execute(
            "SELECT current_sha256 FROM invoices WHERE invoice_id = 'INV-3'"
        ).fetchone()
        conn.execute(
            "UPDATE blobs SET data = %s, codec = NULL WHERE sha256 = %s", (b"<x/>", sha256)
        )
        conn.execute(
            "UPDATE chain SET payload = replace(payload, 'INV-4', 'INV-9') WHERE seq = ("
            " SELECT max(seq) FROM chain WHERE invoice_id = 'INV-4')"
        )

    code, document, _text = verify(pg_url)

    lines = [f"{p['subject']}: {p['problem']}" for p in document["problems"]]
    assert code == 1
    assert any(line.startswith("invoice INV-1: state is 'pending'") for line in lines), lines
    assert any(f"attempt {attempt}: in the chain" in line for line in lines), lines
    assert any(line.startswith(f"blob {sha256[:16]}") for line in lines), lines
    assert any("chain event" in line and "changed after" in line for line in lines), lines


def test_a_table_dropped_by_hand_is_named(tmp_path, pg_url):
    copied(tmp_path, pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TABLE receivers")

    code, document, _text = verify(pg_url)

    assert code == 1
    assert any("its schema lacks receivers" in p["problem"] for p in document["problems"])


def test_an_unreachable_journal_is_exit_75_without_its_password():
    url = f"postgresql://ops:hunter2-pw@127.0.0.1:{free_port()}/journal"

    result = runner.invoke(app, ["verify", "--journal", url])

    assert result.exit_code == ExitCode.INCOMPLETE
    assert "cannot be reached" in result.stderr and "hunter2-pw" not in result.output


@pytest.mark.parametrize("command", ["verify", "status"])
@pytest.mark.parametrize(
    "url",
    [
        "postgresql://ops:hunter2-pw@127.0.0.1:{port}/journal?sslmode=bogus",
        "postgresql://ops:hunter2-pw@127.0.0.1:{port}/journal?port=abc",
        "postgresql://ops:hunter2-pw@[::1/journal",
    ],
    ids=["sslmode", "port", "unparsable"],
)
def test_a_url_libpq_refuses_is_exit_1_not_a_retry(command: str, url: str):
    """An option libpq will not take was exit 75 (run again later), which a monitor waits on
    for ever; and verify gave 75 for a URL it cannot parse, where status gave 1."""
    result = runner.invoke(app, [command, "--journal", url.format(port=free_port())])

    assert result.exit_code == ExitCode.COULD_NOT_RUN, result.output
    assert "cannot be reached" not in result.stderr and "hunter2-pw" not in result.output


def test_a_covered_table_dropped_hides_no_other_damage(tmp_path, pg_url):
    """helper-52: the query on a dropped table aborted verify's one snapshot transaction,
    and every check after it said "stopped: InFailedSqlTransaction": an edited environment
    row went unreported."""
    copied(tmp_path, pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TABLE history_checks")
        conn.execute("UPDATE environment SET base_url = 'https://forged.example'")

    code, document, _text = verify(pg_url)

    lines = [f"{p['subject']}: {p['problem']}" for p in document["problems"]]
    assert code == 1
    assert any("its schema lacks history_checks" in line for line in lines), lines
    assert any(line.startswith("environment") for line in lines), lines
    assert not any("InFailedSqlTransaction" in line for line in lines), lines

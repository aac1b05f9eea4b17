"""The hash chain and ``invoicectl verify`` (issue 14, items 1 and 2).

A real journal (scanned, sent to the emulator, one invoice held and released) is damaged in
each of the ways the issue lists, by plain SQL or by cutting the file, and ``verify`` must
name each damage exactly, never crash, and exit 0 only on the undamaged journal.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from sendkit import emulator, send, settings_for
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.audit.verify import verify
from invoicectl.cli import app
from invoicectl.journal import Journal
from invoicectl.journal.chain import ZERO_HASH, canonical, link
from invoicectl.lifecycle.holds import hold, release
from invoicectl.scan.ingest import scan_directory

IDS = [f"A-{number:03d}" for number in range(6)]


@pytest.fixture
def journal_path(tmp_path: Path, outbox: Path) -> Path:
    """A journal with the life of six invoices: scanned, one held and released, all sent."""
    path = tmp_path / "journal.db"
    for invoice_id in IDS:
        write_invoice(outbox, invoice_id)
    with Journal(path) as journal:
        scan_directory(journal, outbox)
        hold(journal, "A-002", "checking the amount", by="alice")
        release(journal, "A-002", by="alice")
    send(settings_for(path), outbox, emulator().transport())
    return path


def lines(path: Path) -> list[str]:
    return [finding.line() for finding in verify(path).findings]


def sql(path: Path, statement: str, *parameters: object) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(statement, parameters)


def test_every_change_is_an_event_and_the_untouched_journal_verifies(journal_path: Path):
    result = verify(journal_path)
    assert result.findings == []
    assert result.ok
    with sqlite3.connect(journal_path) as conn:
        kinds = [kind for (kind,) in conn.execute("SELECT kind FROM chain ORDER BY seq")]
        (attempts,) = conn.execute("SELECT count(*) FROM attempts").fetchone()
        runs = conn.execute("SELECT chain_seq, chain_head FROM runs").fetchall()
        head = conn.execute("SELECT seq, hash FROM chain ORDER BY seq DESC LIMIT 1").fetchone()
    assert kinds[0] == "genesis"
    # written before each request, completed after it
    assert kinds.count("attempt") == 2 * attempts == 2 * len(IDS)
    assert kinds.count("event") >= 2  # the hold and the release
    assert result.head_seq == head[0] == len(kinds)
    assert runs[-1] == tuple(head)  # the run row records the head at its end
    assert result.attempts_checked == len(IDS)


def test_the_chain_is_sha256_of_the_previous_hash_and_the_canonical_payload(journal_path: Path):
    with sqlite3.connect(journal_path) as conn:
        rows = conn.execute("SELECT seq, payload, hash FROM chain ORDER BY seq").fetchall()
    previous = ZERO_HASH
    for seq, payload, stored in rows:
        data = payload.encode("utf-8")
        assert hashlib.sha256(bytes.fromhex(previous) + data).hexdigest() == stored
        assert canonical(json.loads(payload)) == data
        assert json.loads(payload)["seq"] == seq
        previous = stored
    assert link(ZERO_HASH, b"{}") == hashlib.sha256(bytes(32) + b"{}").hexdigest()


def test_status_shows_the_chain_head(journal_path: Path):
    result = CliRunner().invoke(app, ["status", "--journal", str(journal_path)])
    with sqlite3.connect(journal_path) as conn:
        seq, digest = conn.execute(
            "SELECT seq, hash FROM chain ORDER BY seq DESC LIMIT 1"
        ).fetchone()
    assert f"chain head {seq}:{digest}" in result.stdout


def test_a_flipped_byte_in_a_blob_is_named(journal_path: Path):
    with sqlite3.connect(journal_path) as conn:
        (sha256,) = conn.execute(
            "SELECT current_sha256 FROM invoices WHERE invoice_id = 'A-003'"
        ).fetchone()
        (data,) = conn.execute("SELECT data FROM blobs WHERE sha256 = ?", (sha256,)).fetchone()
        flipped = bytearray(data)
        flipped[len(flipped) // 2] ^= 0x01
        conn.execute("UPDATE blobs SET data = ? WHERE sha256 = ?", (bytes(flipped), sha256))
    found = lines(journal_path)
    assert len(found) == 1, found
    assert found[0].startswith(f"blob {sha256[:16]} (A-003): ")
    assert found[0].endswith("no longer match their sha256") or "cannot be unpacked" in found[0]


def test_an_event_edited_in_place_is_named(journal_path: Path):
    with sqlite3.connect(journal_path) as conn:
        seq, payload = conn.execute(
            "SELECT seq, payload FROM chain WHERE invoice_id = 'A-001' AND kind = 'invoice'"
            " ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        edited = payload.replace('"state":"accepted"', '"state":"rejected"')
        assert edited != payload
        conn.execute("UPDATE chain SET payload = ? WHERE seq = ?", (edited, seq))
    found = lines(journal_path)
    assert found[0] == (
        f"chain event {seq}: its hash is not sha256(previous hash || payload): "
        "changed after it was written"
    )
    # and the row no longer agrees with the (edited) event
    assert found[1:] == [
        f"invoice A-001: state is 'accepted', its last event ({seq}) says 'rejected': "
        "changed outside invoicectl"
    ]


def test_an_event_deleted_is_named(journal_path: Path):
    with sqlite3.connect(journal_path) as conn:
        (seq,) = conn.execute(
            "SELECT min(seq) FROM chain WHERE invoice_id = 'A-004' AND kind = 'attempt'"
        ).fetchone()
    sql(journal_path, "DELETE FROM chain WHERE seq = ?", seq)
    found = lines(journal_path)
    assert found[0] == (
        f"chain event {seq}: missing: the chain goes from event {seq - 1} to {seq + 1}; deleted"
    )
    assert len(found) == 1, found  # the attempt's later event still records its row


def test_the_last_events_deleted_show_in_the_run_heads(journal_path: Path):
    with sqlite3.connect(journal_path) as conn:
        (last,) = conn.execute("SELECT max(seq) FROM chain").fetchone()
        (run_id,) = conn.execute("SELECT max(id) FROM runs").fetchone()
    sql(journal_path, "DELETE FROM chain WHERE seq = ?", last)
    found = lines(journal_path)
    assert any(
        line.startswith(f"run {run_id}: recorded chain head {last}:")
        and line.endswith(
            f"which the chain no longer holds (it ends at event {last - 1}): events were deleted"
        )
        for line in found
    ), found


def test_a_state_changed_by_hand_is_named(journal_path: Path):
    sql(journal_path, "UPDATE invoices SET state = 'pending' WHERE invoice_id = 'A-005'")
    found = lines(journal_path)
    assert len(found) == 1, found
    assert found[0].startswith("invoice A-005: state is 'pending', its last event (")
    assert found[0].endswith(") says 'accepted': changed outside invoicectl")


def test_rows_added_or_deleted_by_hand_are_named(journal_path: Path):
    sql(journal_path, "DELETE FROM attempts WHERE invoice_id = 'A-000'")
    sql(
        journal_path,
        "INSERT INTO events (invoice_id, at, kind, detail) VALUES ('A-000', 'now', 'note', 'x')",
    )
    found = lines(journal_path)
    assert any(
        line.startswith("attempt ") and line.endswith("but not in the journal: deleted")
        for line in found
    ), found
    assert any(
        line.startswith("audit-trail entry ")
        and line.endswith("no chain event records it: written outside invoicectl")
        for line in found
    ), found


def test_a_truncated_journal_is_reported_and_verify_does_not_crash(journal_path: Path):
    data = journal_path.read_bytes()
    Path(f"{journal_path}-wal").unlink(missing_ok=True)
    journal_path.write_bytes(data[: len(data) // 2])
    result = CliRunner().invoke(app, ["verify", "--journal", str(journal_path)])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stdout.splitlines()[0].startswith("journal: ")
    assert "Traceback" not in result.output


def test_verify_cli_exit_codes_json_and_subset(journal_path: Path):
    good = CliRunner().invoke(app, ["verify", "--journal", str(journal_path), "--json"])
    assert good.exit_code == 0, good.output
    document = json.loads(good.stdout)
    assert document["ok"] is True and document["problems"] == []
    sampled = CliRunner().invoke(
        app, ["verify", "--journal", str(journal_path), "--read-data-subset", "10%"]
    )
    assert sampled.exit_code == 0, sampled.output
    assert "1 of 6 blobs read" in sampled.stdout
    bad = CliRunner().invoke(
        app, ["verify", "--journal", str(journal_path), "--read-data-subset", "200%"]
    )
    assert bad.exit_code == 2
    sql(journal_path, "UPDATE invoices SET reason = 'x' WHERE invoice_id = 'A-000'")
    damaged = CliRunner().invoke(app, ["verify", "--journal", str(journal_path), "--json"])
    assert damaged.exit_code == 1
    problems = json.loads(damaged.stdout)["problems"]
    assert [problem["subject"] for problem in problems] == ["invoice A-000"]


def test_an_old_journal_gets_a_genesis_that_commits_to_its_content(tmp_path: Path, outbox: Path):
    """A journal from before the chain: m009 starts it with a genesis and one event per row."""
    path = tmp_path / "old.db"
    for invoice_id in IDS[:3]:
        write_invoice(outbox, invoice_id)
    with Journal(path) as journal:
        scan_directory(journal, outbox)
    with sqlite3.connect(path) as conn:  # as the journal was before m009
        conn.execute("DROP TABLE chain")
        conn.execute("ALTER TABLE runs DROP COLUMN chain_seq")
        conn.execute("ALTER TABLE runs DROP COLUMN chain_head")
        conn.execute("DELETE FROM _sqlite_migrations WHERE name = 'm009_audit_chain'")
    assert lines(path) == [
        "journal: has no chain yet: open it once with this invoicectl (invoicectl status)"
    ]
    with Journal(path):
        pass
    assert lines(path) == []
    with sqlite3.connect(path) as conn:
        genesis = json.loads(conn.execute("SELECT payload FROM chain WHERE seq = 1").fetchone()[0])
    assert genesis["kind"] == "genesis"
    assert genesis["content"]["counts"] == {"blobs": 3, "invoices": 3, "attempts": 0, "events": 0}

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
from auditkit import strip_chain
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
    # the run row records the head at its end; the event of that row itself comes after it
    assert kinds[-1] == "run"
    with sqlite3.connect(journal_path) as conn:
        before_end = conn.execute("SELECT seq, hash FROM chain WHERE seq = ?", (head[0] - 1,))
        assert runs[-1] == tuple(before_end.fetchone())
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
    # the run's own end event, and the head it recorded before it
    sql(journal_path, "DELETE FROM chain WHERE seq >= ?", last - 1)
    found = lines(journal_path)
    assert any(
        line.startswith(f"run {run_id}: recorded chain head {last - 1}:")
        and line.endswith(
            f"which the chain no longer holds (it ends at event {last - 2}): events were deleted"
        )
        for line in found
    ), found


def test_the_last_event_deleted_shows_in_its_run(journal_path: Path):
    """The last event is the end of the run that wrote it: its row no longer agrees."""
    with sqlite3.connect(journal_path) as conn:
        (last,) = conn.execute("SELECT max(seq) FROM chain").fetchone()
        (run_id,) = conn.execute("SELECT max(id) FROM runs").fetchone()
    sql(journal_path, "DELETE FROM chain WHERE seq = ?", last)
    found = lines(journal_path)
    assert len(found) == 1, found
    assert found[0].startswith(f"run {run_id}: chain_head is ")
    assert "exit_code is 0, its last event (" in found[0]
    assert found[0].endswith("changed outside invoicectl")


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
    strip_chain(path)  # as the journal was before m009
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


# ---- more damage, each named exactly, none a crash ---------------------------------------


def first_invoice_event(path: Path, invoice_id: str) -> int:
    """The first event of an invoice: not its last, so its row still agrees with a later one."""
    with sqlite3.connect(path) as conn:
        (seq,) = conn.execute(
            "SELECT min(seq) FROM chain WHERE invoice_id = ? AND kind = 'invoice'", (invoice_id,)
        ).fetchone()
    return int(seq)


def test_a_hash_that_is_no_sha256_is_named(journal_path: Path):
    seq = first_invoice_event(journal_path, "A-001")
    sql(journal_path, "UPDATE chain SET hash = 'zz' WHERE seq = ?", seq)
    assert lines(journal_path) == [
        f"chain event {seq}: its hash is not a sha256 (64 hex digits): changed after it was written"
    ]


def test_a_hash_replaced_by_another_names_that_event_only(journal_path: Path):
    seq = first_invoice_event(journal_path, "A-001")
    sql(journal_path, "UPDATE chain SET hash = ? WHERE seq = ?", "ab" * 32, seq)
    assert lines(journal_path) == [
        f"chain event {seq}: its hash was changed after it was written: it is not"
        " sha256(previous hash || payload), and the next event follows from the payload's hash"
    ]


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        ("[1]", "its payload is not a JSON object"),
        ("{not json", "its payload is not JSON"),
        (b"\x00\xff", "its payload is not text"),
    ],
)
def test_a_payload_replaced_by_something_else_is_named(
    journal_path: Path, payload: object, problem: str
):
    seq = first_invoice_event(journal_path, "A-001")
    sql(journal_path, "UPDATE chain SET payload = ? WHERE seq = ?", payload, seq)
    found = lines(journal_path)
    assert f"chain event {seq}: {problem}" in found, found
    assert all(line.startswith(f"chain event {seq}: ") for line in found), found


def test_a_payload_whose_key_is_no_key_is_named(journal_path: Path):
    seq = first_invoice_event(journal_path, "A-001")
    sql(
        journal_path,
        "UPDATE chain SET payload = json_set(payload, '$.key', json('[1]')) WHERE seq = ?",
        seq,
    )
    found = lines(journal_path)
    assert f"chain event {seq}: its payload names no row (a table, a key and the row)" in found
    assert all(line.startswith(f"chain event {seq}: ") for line in found), found


def test_an_invoice_id_column_edited_in_the_chain_is_named(journal_path: Path):
    """The column outside the payload that export uses to find an invoice's events."""
    seq = first_invoice_event(journal_path, "A-001")
    sql(journal_path, "UPDATE chain SET invoice_id = 'A-999' WHERE seq = ?", seq)
    assert lines(journal_path) == [
        f"chain event {seq}: its invoice_id column is 'A-999', its payload says 'A-001':"
        " changed after it was written"
    ]


def revision_of(path: Path, invoice_id: str) -> tuple[int, str, str]:
    with sqlite3.connect(path) as conn:
        row = conn.execute(
            "SELECT id, sha256, source_path FROM revisions WHERE invoice_id = ?", (invoice_id,)
        ).fetchone()
    return int(row[0]), str(row[1]), str(row[2])


def last_event_of(path: Path, kind: str, key: object) -> int:
    with sqlite3.connect(path) as conn:
        (seq,) = conn.execute(
            "SELECT max(seq) FROM chain WHERE kind = ? AND json_extract(payload, '$.key') = ?",
            (kind, key),
        ).fetchone()
    return int(seq)


def test_an_edited_revision_is_named(journal_path: Path):
    revision_id, sha256, source = revision_of(journal_path, "A-001")
    sql(
        journal_path,
        "UPDATE revisions SET source_path = '/elsewhere.xml' WHERE id = ?",
        revision_id,
    )
    seq = last_event_of(journal_path, "revision", revision_id)
    assert lines(journal_path) == [
        f"revision {revision_id} (invoice A-001, {sha256[:16]}): source_path is"
        f" '/elsewhere.xml', its last event ({seq}) says {source!r}: changed outside invoicectl"
    ]


def test_a_revision_whose_receiver_was_edited_fails_its_attempt_body(journal_path: Path):
    revision_id, sha256, _ = revision_of(journal_path, "A-001")
    sql(
        journal_path,
        "UPDATE revisions SET facts = json_set(facts, '$.customer_endpoint.id', 'other')"
        " WHERE id = ?",
        revision_id,
    )
    found = lines(journal_path)
    assert found[0].startswith("attempt ") and found[0].endswith(
        "(invoice A-001): its body sha256 is not that of the body rebuilt from the stored bytes"
    )
    assert found[1].startswith(f"revision {revision_id} (invoice A-001, {sha256[:16]}): facts is")
    assert len(found) == 2, found


def test_a_blob_turned_to_text_is_named_and_the_others_still_read(journal_path: Path):
    """helper-52: text where bytes belong (and a size that is no number) stopped the blob
    check at that blob, naming none, and left the blobs after it unread."""
    with sqlite3.connect(journal_path) as conn:
        (sha256,) = conn.execute(
            "SELECT current_sha256 FROM invoices WHERE invoice_id = 'A-001'"
        ).fetchone()
        conn.execute(
            "UPDATE blobs SET data = 'not the invoice', size = 'many' WHERE sha256 = ?", (sha256,)
        )
        (blobs,) = conn.execute("SELECT count(*) FROM blobs").fetchone()
    result = CliRunner().invoke(app, ["verify", "--journal", str(journal_path)])
    found = lines(journal_path)
    assert len(found) == 1, found
    assert found[0].startswith(f"blob {sha256[:16]} (A-001): ")
    assert f"{blobs} of {blobs} blobs read" in result.stdout


def test_a_chain_payload_that_is_not_utf8_hides_no_other_damage(journal_path: Path):
    """helper-52: one event's payload made of bytes that are not UTF-8 stopped the chain
    check unnamed, and with it every row check: an edited audit-trail entry elsewhere went
    unreported ("0 rows against their events")."""
    with sqlite3.connect(journal_path) as conn:
        (seq,) = conn.execute("SELECT min(seq) FROM chain WHERE kind = 'invoice'").fetchone()
        conn.execute(
            "UPDATE chain SET payload = CAST(CAST(payload AS BLOB) || X'FF' AS TEXT) WHERE seq = ?",
            (seq,),
        )
        conn.execute("UPDATE events SET detail = 'forged' WHERE invoice_id = 'A-002'")
    found = lines(journal_path)
    assert any(
        line.startswith(f"chain event {seq}: its payload is not UTF-8 text") for line in found
    ), found
    assert any(line.startswith("audit-trail entry ") and "'forged'" in line for line in found)


def test_a_revision_deleted_with_its_blob_is_named(journal_path: Path):
    revision_id, sha256, _ = revision_of(journal_path, "A-002")
    seq = last_event_of(journal_path, "revision", revision_id)
    with sqlite3.connect(journal_path) as conn:
        (attempt_id,) = conn.execute(
            "SELECT id FROM attempts WHERE invoice_id = 'A-002'"
        ).fetchone()
        conn.execute("DELETE FROM blobs WHERE sha256 = ?", (sha256,))
        conn.execute("DELETE FROM revisions WHERE id = ?", (revision_id,))
    assert lines(journal_path) == [
        f"attempt {attempt_id} (invoice A-002): its revision {sha256[:16]} is not in the"
        " journal: its body cannot be rebuilt",
        f"revision {revision_id} (invoice A-002, {sha256[:16]}): in the chain (event {seq}) but"
        " not in the journal: deleted",
    ]


def test_runs_history_checks_the_binding_and_the_identity_edited_are_named(journal_path: Path):
    with sqlite3.connect(journal_path) as conn:
        run_id, exit_code = conn.execute(
            "SELECT id, exit_code FROM runs ORDER BY id DESC LIMIT 1"
        ).fetchone()
        (journal_id,) = conn.execute("SELECT journal_id FROM identity").fetchone()
        (why,) = conn.execute("SELECT base_url FROM history_checks WHERE id = 1").fetchone()
        conn.execute("UPDATE runs SET exit_code = 99 WHERE id = ?", (run_id,))
        conn.execute("UPDATE history_checks SET base_url = 'http://x.test' WHERE id = 1")
        conn.execute("UPDATE environment SET base_url = 'http://elsewhere.test'")
        conn.execute("UPDATE identity SET journal_id = 'x'")
    run_seq = last_event_of(journal_path, "run", run_id)
    check_seq = last_event_of(journal_path, "history_check", 1)
    binding_seq = last_event_of(journal_path, "environment", 1)
    assert lines(journal_path) == [
        f"journal identity: journal_id is 'x', the genesis event says {journal_id!r}:"
        " changed outside invoicectl",
        f"run {run_id}: exit_code is 99, its last event ({run_seq}) says {exit_code}:"
        " changed outside invoicectl",
        f"history check 1: base_url is 'http://x.test', its last event ({check_seq}) says {why!r}:"
        " changed outside invoicectl",
        f"environment binding: base_url is 'http://elsewhere.test', its last event"
        f" ({binding_seq}) says 'http://sandbox.test': changed outside invoicectl",
    ]


def test_bytes_put_into_a_row_by_hand_are_named(journal_path: Path):
    sql(journal_path, "UPDATE invoices SET reason = x'00ff' WHERE invoice_id = 'A-000'")
    found = lines(journal_path)
    assert len(found) == 1, found
    assert found[0].startswith("invoice A-000: reason is b'\\x00\\xff', its last event (")
    assert found[0].endswith(") says None: changed outside invoicectl")


def test_text_that_is_not_utf8_is_named_row_by_row(journal_path: Path):
    """Bytes stored as text, not UTF-8: every row is still checked, each damaged one named."""
    for invoice_id in ("A-001", "A-004"):
        sql(
            journal_path,
            "UPDATE invoices SET reason = CAST(x'ff41' AS TEXT) WHERE invoice_id = ?",
            invoice_id,
        )
    sql(journal_path, "UPDATE invoices SET state = 'pending' WHERE invoice_id = 'A-005'")
    found = lines(journal_path)
    assert [line.split(":")[0] for line in found] == [
        "invoice A-001",
        "invoice A-004",
        "invoice A-005",
    ], found
    assert found[0].startswith("invoice A-001: reason is '\\udcffA', its last event (")


def checkpointed(path: Path) -> bytes:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    Path(f"{path}-wal").unlink(missing_ok=True)
    Path(f"{path}-shm").unlink(missing_ok=True)
    return path.read_bytes()


NO_HEADER = "not an SQLite database: its header is missing or damaged (truncated or overwritten)"
CUT = "truncated: the file holds 49152 bytes, its header says {size} ({pages} pages of 16384 bytes)"


@pytest.mark.parametrize(
    ("keep", "first"),
    [
        (0, "the file is empty (0 bytes): truncated, or never written"),
        (50, NO_HEADER),
        (3 * 16384, CUT),
    ],
)
def test_a_journal_cut_short_is_named_as_truncated(journal_path: Path, keep: int, first: str):
    data = checkpointed(journal_path)
    pages = int.from_bytes(data[28:32], "big")
    journal_path.write_bytes(data[:keep])
    result = CliRunner().invoke(app, ["verify", "--journal", str(journal_path)])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    expected = "journal: " + first.format(size=pages * 16384, pages=pages)
    assert result.stdout.splitlines()[0] == expected


def test_an_sqlite_file_that_is_no_journal_is_named(tmp_path: Path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (text)")
    assert lines(path) == ["journal: holds no invoicectl journal (no invoices table)"]


def test_damage_in_a_table_that_is_not_evidence_blinds_no_check(journal_path: Path):
    """A zeroed page of _sqlite_migrations made the integrity check's error stop the chain and
    row checks too ('0 chain events ... 0 rows'), an attempt edited by hand not named (found
    by a review for auditors)."""
    sql(journal_path, "UPDATE invoices SET state = 'pending' WHERE invoice_id = 'A-005'")
    with sqlite3.connect(journal_path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        (page_size,) = conn.execute("PRAGMA page_size").fetchone()
        (root,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = '_sqlite_migrations'"
        ).fetchone()
    conn.close()
    with journal_path.open("r+b") as file:
        file.seek((root - 1) * page_size)
        file.write(bytes(page_size))

    found = lines(journal_path)

    assert any("integrity check" in line for line in found), found
    assert any(line.startswith("invoice A-005: state is 'pending'") for line in found), found


@pytest.mark.parametrize("table", ["receivers", "claims", "validations", "unfinished"])
def test_a_table_dropped_by_hand_is_named(journal_path: Path, table: str):
    """Every other command refuses such a journal; verify said nothing needed attention."""
    sql(journal_path, f"DROP TABLE {table}")
    found = lines(journal_path)
    assert any(f"its schema lacks {table}" in line for line in found), found


def test_a_journal_of_two_names_is_a_problem_and_its_rows_are_still_verified(
    journal_path: Path,
):
    """helper-56: verify said "nothing needs attention" of a journal every other command
    refuses for its second name (two runs through two names lose each other's records)."""
    (journal_path.parent / "second name.db").hardlink_to(journal_path)

    found = verify(journal_path)

    assert [finding.line() for finding in found.findings] == [
        "journal: one of 2 names (hard links) of the same file: SQLite keeps a write-ahead "
        "log and invoicectl a run lock for each name, so two runs through two names would "
        "lose each other's records"
    ]
    assert found.events > 0 and found.rows_checked > 0  # the rows were verified all the same

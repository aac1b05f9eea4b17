"""A top-up vouches for each chosen invoice's rows, which events before the last part's head
record too; and it begins at that head, which it must read as signed (helper-87).

Each case once exited 0, and ``verify-export`` said ok: a top-up signed a row edited together
with its event before the last head, or an invoice whose attempt was deleted and its events
filed under none; and it began from a last part's manifest edited to name another head, which
left events in no part for good.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from auditkit import sent_journal
from sendkit import emulator, send, settings_for
from test_audit_export import run
from ublfactory import write_invoice

from invoicectl.journal import Journal

_E001_ATTEMPT = "SELECT id FROM attempts WHERE invoice_id = 'E-001'"


@pytest.fixture
def sent(tmp_path: Path, outbox: Path) -> Path:
    return sent_journal(tmp_path, outbox, ["E-001", "E-002", "E-003"])


def _forge_old_attempt(path: Path) -> int:
    """E-001's attempt row and the payload of its last chain event (before the last part's
    head), its hash left as it was: the chain is broken there, which verify names."""
    with sqlite3.connect(path) as conn:
        (attempt_id,) = conn.execute(_E001_ATTEMPT).fetchone()
        conn.execute("UPDATE attempts SET transaction_id = 'FORGED-TX' WHERE id = ?", (attempt_id,))
        seq, payload = conn.execute(
            "SELECT seq, payload FROM chain WHERE kind = 'attempt' AND"
            " json_extract(payload, '$.key') = ? ORDER BY seq DESC LIMIT 1",
            (attempt_id,),
        ).fetchone()
        event = json.loads(payload)
        event["row"]["transaction_id"] = "FORGED-TX"
        text = json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        conn.execute("UPDATE chain SET payload = ? WHERE seq = ?", (text, seq))
    return seq


def test_a_top_up_signs_an_old_row_forged_with_its_old_payload(sent: Path, tmp_path: Path):
    dest = tmp_path / "archive"
    assert run("export", str(dest), "--journal", str(sent))[0] == 0
    with Journal(sent) as journal:  # E-001 changes after the first part: it is topped up
        journal.add_event("E-001", "note", "asked the customer")
    seq = _forge_old_attempt(sent)

    code, output = run("verify", "--journal", str(sent))
    assert code == 1 and f"chain event {seq}" in output  # verify sees it

    code, output = run("export", str(dest), "--journal", str(sent))

    assert code != 0 and f"hash chain is broken at event {seq}, before the last" in output
    assert not (dest / "0002").exists()


def test_a_top_up_signs_an_invoice_without_its_deleted_attempt(sent: Path, tmp_path: Path):
    dest = tmp_path / "archive"
    assert run("export", str(dest), "--journal", str(sent))[0] == 0
    with Journal(sent) as journal:
        journal.add_event("E-001", "note", "asked the customer")
    with sqlite3.connect(sent) as conn:  # the attempt row deleted, its events refiled (both
        # before the last part's head: a top-up checks neither)
        (attempt_id,) = conn.execute(_E001_ATTEMPT).fetchone()
        conn.execute("DELETE FROM attempts WHERE id = ?", (attempt_id,))
        conn.execute(
            "UPDATE chain SET invoice_id = NULL WHERE kind = 'attempt'"
            " AND json_extract(payload, '$.key') = ?",
            (attempt_id,),
        )

    code, output = run("export", str(dest), "--journal", str(sent), "--invoice", "E-001")

    assert code != 0 and "is filed under another invoice than its payload names" in output
    assert not (dest / "0002").exists()


def test_a_top_up_builds_on_a_last_part_whose_manifest_is_not_as_signed(sent: Path, tmp_path: Path):
    dest = tmp_path / "archive"
    assert run("export", str(dest), "--journal", str(sent))[0] == 0
    with Journal(sent) as journal:
        journal.add_event("E-001", "note", "asked the customer")  # event A: E-001 only
        journal.add_event("E-002", "note", "asked the customer")  # event B: E-002
    manifest = dest / "0001" / "manifest.json"
    fields = json.loads(manifest.read_text())
    with sqlite3.connect(sent) as conn:  # the last part's head moved on to E-001's event
        seq, digest = conn.execute(
            "SELECT seq, hash FROM chain WHERE invoice_id = 'E-001' ORDER BY seq DESC LIMIT 1"
        ).fetchone()
    text = manifest.read_text().replace(fields["chain"]["head_hash"], digest)
    manifest.write_text(
        text.replace(f'"head_seq": {fields["chain"]["head_seq"]}', f'"head_seq": {seq}')
    )

    code, output = run("export", str(dest), "--journal", str(sent))

    assert code != 0 and "0001/manifest.json is not as signed" in output
    assert "verify-export" in output and not (dest / "0002").exists()


def test_a_top_up_refuses_an_invoice_whose_earlier_events_were_all_filed_elsewhere(
    sent: Path, tmp_path: Path
):
    """helper-88: with every event of E-001 up to the last head filed under no invoice (and
    its attempt deleted), its first event by the column lay after that head, the checks
    began there, and the top-up signed it with no attempt. It is in an earlier part: its
    events before the head must be filed under it."""
    dest = tmp_path / "archive"
    assert run("export", str(dest), "--journal", str(sent))[0] == 0
    head = json.loads((dest / "0001" / "manifest.json").read_text())["chain"]["head_seq"]
    with Journal(sent) as journal:  # a change after the head: E-001 is topped up
        journal.add_event("E-001", "note", "asked the customer")
    with sqlite3.connect(sent) as conn:
        conn.execute("DELETE FROM attempts WHERE invoice_id = 'E-001'")
        conn.execute(
            "UPDATE chain SET invoice_id = NULL WHERE invoice_id = 'E-001' AND seq <= ?", (head,)
        )

    code, output = run("export", str(dest), "--journal", str(sent), "--invoice", "E-001")

    assert code != 0 and f"invoice E-001 is in {dest / '0001' / 'E-001'}, but none of" in output
    assert not (dest / "0002").exists()


def test_a_stray_folder_named_as_a_new_invoice_does_not_block_the_top_up(
    sent: Path, tmp_path: Path, outbox: Path
):
    """helper-89: an empty folder in 0001 with a new invoice's name (a stray copy, or another
    ID on a file system that ignores case) made every nightly top-up refuse the journal as
    edited by hand, while `verify` found it whole. A folder is that invoice's only when its
    evidence.json names it."""
    dest = tmp_path / "archive"
    assert run("export", str(dest), "--journal", str(sent))[0] == 0
    (dest / "0001" / "E-004").mkdir()
    write_invoice(outbox, "E-004", name="file-4.xml")
    send(settings_for(sent), outbox, emulator().transport())

    code, output = run("export", str(dest), "--journal", str(sent))

    assert code == 0, output
    assert (dest / "0002" / "E-004" / "evidence.json").is_file()

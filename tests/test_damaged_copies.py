"""A damaged stored copy blocks its own invoice only, and a rescan repairs it (issue 11, item 10).

Flipping one byte in three stored blobs used to make every ``send --concurrency 2`` exit 1
with none of the 27 intact invoices ever sent; the damaged ones showed as plain ``pending``,
``status`` exited 75 forever, and a rescan of the unchanged files did not repair them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from backends import cli_journal, witness_execute, witness_rows
from sendkit import assert_each_delivered_once, emulator, send, settings_for, states
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.cli import app
from invoicectl.errors import ExitCode
from invoicectl.journal import open_journal
from invoicectl.locations import Location
from invoicectl.scan.ingest import scan_directory

DAMAGED = ("D-0004", "D-0013", "D-0027")


@pytest.fixture
def journal_path(journal_at: Location) -> Location:
    return journal_at


def damage(journal_path: Location, invoice_ids: tuple[str, ...]) -> None:
    """Flip one byte in the middle of each invoice's stored copy."""
    for invoice_id in invoice_ids:
        ((sha256,),) = witness_rows(
            journal_path, "SELECT current_sha256 FROM invoices WHERE invoice_id = ?", (invoice_id,)
        )
        ((data,),) = witness_rows(
            journal_path, "SELECT data FROM blobs WHERE sha256 = ?", (sha256,)
        )
        flipped = bytearray(data)
        flipped[len(flipped) // 2] ^= 0xFF
        witness_execute(
            journal_path, "UPDATE blobs SET data = ? WHERE sha256 = ?", (bytes(flipped), sha256)
        )


def status_code(journal_path: Location) -> tuple[int, list[dict]]:
    result = CliRunner().invoke(
        app, ["status", "--journal", cli_journal(journal_path), "--format", "json"]
    )
    return result.exit_code, json.loads(result.stdout)


def thirty_with_three_damaged(outbox: Path, journal_path: Location) -> tuple[list[str], Any, Any]:
    """Thirty invoices scanned, ``DAMAGED``'s stored copies damaged: their IDs, the settings
    and an emulator."""
    ids = [f"D-{number:04d}" for number in range(30)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    settings = settings_for(journal_path)
    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
    damage(journal_path, DAMAGED)
    sandbox = emulator()
    return ids, settings, sandbox


def test_three_damaged_copies_hold_three_invoices_and_the_rest_are_sent(
    outbox: Path, journal_path: Path
):
    ids, settings, sandbox = thirty_with_three_damaged(outbox, journal_path)

    _, summary = send(settings, outbox, sandbox.transport(), concurrency=2)

    intact = [invoice_id for invoice_id in ids if invoice_id not in DAMAGED]
    assert_each_delivered_once(sandbox.stats(), intact)
    assert sandbox.stats()["sends_received"] == 27  # no damaged bytes went out
    assert sorted(summary.held_for_damage) == list(DAMAGED)
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE
    code, records = status_code(journal_path)
    assert code == ExitCode.NEEDS_RECONCILE
    held = {record["invoice_id"]: record for record in records if record["hold"]}
    assert sorted(held) == list(DAMAGED)
    for invoice_id, record in held.items():
        assert record["state"] == "pending"
        assert invoice_id in record["hold_reason"]
        assert "stored copy" in record["hold_reason"] and "damaged" in record["hold_reason"]
        assert "rescan the file or restore the journal" in record["hold_reason"]
    with open_journal(journal_path) as journal:
        assert all(journal.invoice(i).idempotency_key is None for i in DAMAGED)  # no key spent

    # A rescan of the unchanged files repairs the copies and lifts the holds...
    with open_journal(journal_path) as journal:
        report = scan_directory(journal, outbox)
        assert sorted(report.repaired) == list(DAMAGED)
        for invoice_id in DAMAGED:
            row = journal.invoice(invoice_id)
            assert row.hold is None
            journal.content(row.current_sha256)  # reads back whole
            assert any(event.kind == "release" for event in journal.events(invoice_id))

    # ...and the next send sends them, once each.
    _, summary = send(settings, outbox, sandbox.transport(), concurrency=2)
    assert summary.exit_code == ExitCode.OK
    assert set(states(journal_path).values()) == {"accepted"}
    assert_each_delivered_once(sandbox.stats(), ids)


def test_an_operators_hold_of_a_damaged_copy_outlasts_its_repair(outbox: Path, journal_path: Path):
    """The operator froze every pending invoice (one by its ID, the rest with a bulk ``hold
    --state pending``) while three were held for damaged copies: the rescan that repairs
    those copies must not lift the operator's freeze and send them (helper-81's suspicion:
    the bulk hold skipped them, a hold by ID said 'already held', and the repair released
    them)."""
    ids, settings, sandbox = thirty_with_three_damaged(outbox, journal_path)
    send(settings, outbox, sandbox.transport(), concurrency=2)  # sends 27, holds the three
    later = outbox.parent / "later"  # a new one, pending and never held (a scan of the
    later.mkdir()
    write_invoice(later, "D-0030")  # outbox would repair the copies already)
    with open_journal(journal_path) as journal:
        scan_directory(journal, later)
    journal_arg = cli_journal(journal_path)
    runner = CliRunner()

    by_id = runner.invoke(
        app, ["hold", DAMAGED[0], "--reason", "month-end freeze", "--journal", journal_arg]
    )
    bulk = runner.invoke(
        app,
        ["hold", "--state", "pending", "--reason", "month-end freeze", "--yes"]
        + ["--journal", journal_arg],
    )

    assert by_id.exit_code == 0, by_id.output
    assert "was held by stored copy check" in by_id.output
    assert bulk.exit_code == 0, bulk.output
    assert sorted(line.split(":")[0] for line in bulk.output.splitlines()) == [
        *DAMAGED[1:],
        "D-0030",
    ]
    with open_journal(journal_path) as journal:
        report = scan_directory(journal, outbox)
        assert report.repaired == []
        for invoice_id in (*DAMAGED, "D-0030"):
            row = journal.invoice(invoice_id)
            assert row.hold is not None and row.held_by != "stored copy check", invoice_id
            assert row.hold_reason.startswith("month-end freeze"), row.hold_reason
    send(settings, outbox, sandbox.transport(), concurrency=2)
    assert sandbox.stats()["sends_received"] == 27  # nothing frozen went out

    # Released, the damaged three meet their damage again (the operator's hold left the
    # copies as they were: the release said why they were held) and are held for it; the
    # next scan repairs them, and they go, once each.
    (outbox / "D-0030.xml").write_bytes((later / "D-0030.xml").read_bytes())
    released = runner.invoke(
        app, ["release", "--state", "pending", "--yes", "--journal", journal_arg]
    )
    assert released.exit_code == 0, released.output
    assert released.output.count("was held by stored copy check") == len(DAMAGED)
    _, summary = send(settings, outbox, sandbox.transport(), concurrency=2)
    assert sorted(summary.held_for_damage) == list(DAMAGED)
    report, _ = send(settings, outbox, sandbox.transport(), concurrency=2)
    assert sorted(report.repaired) == list(DAMAGED)
    assert_each_delivered_once(sandbox.stats(), [*ids, "D-0030"])


def test_a_damaged_copy_under_an_unknown_send_is_held_not_replayed_with_other_bytes(
    outbox: Path, journal_path: Path
):
    write_invoice(outbox, "U-1")
    settings = settings_for(journal_path)
    sandbox = emulator(drop_rate=1.0)  # the request arrives; its answer is lost
    from invoicectl.goroute.retry import RetryPolicy

    send(settings, outbox, sandbox.transport(), policy=RetryPolicy(max_attempts=1))
    assert states(journal_path) == {"U-1": "unknown"}
    damage(journal_path, ("U-1",))
    sandbox.set_faults(drop_rate=0.0)

    _, summary = send(settings, outbox, sandbox.transport())

    assert summary.held_for_damage == ("U-1",)
    assert sandbox.stats()["sends_received"] == 1
    with open_journal(journal_path) as journal:
        row = journal.invoice("U-1")
        assert (row.state, row.hold, row.held_by) == ("unknown", "held", "stored copy check")
        scan_directory(journal, outbox)
        assert journal.invoice("U-1").hold is None
    _, summary = send(settings, outbox, sandbox.transport())
    assert summary.replays == 1 and states(journal_path) == {"U-1": "accepted"}
    assert_each_delivered_once(sandbox.stats(), ["U-1"])


def test_stored_bytes_an_older_reader_took_wrongly_are_held_not_a_crash(
    outbox: Path, journal_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Until this change a UTF-16 file starting with two byte order marks was journalled (libxml2
    took the second for a UTF-8 one), and an encoding declaration was looked for in the
    first 200 bytes only. A send now reads such stored bytes as they are: a late declaration
    is honoured (the invoice goes out as the text it is), a second BOM is refused, and that
    invoice is held with the reason instead of every send ending in a traceback."""
    import codecs
    import re

    from invoicectl.ubl import encoding

    good = Path(__file__).parent / "data" / "good"
    write_invoice(outbox, "OK-1")
    latin1 = (good / "iso-8859-1.xml").read_bytes()
    (outbox / "late.xml").write_bytes(latin1.replace(b'"1.0" ', b'"1.0"' + b" " * 200, 1))
    (outbox / "two-boms.xml").write_bytes(codecs.BOM_UTF16_LE + (good / "utf16.xml").read_bytes())
    window = re.compile(encoding._DECLARED_ENCODING.pattern)
    document_text = encoding.document_text

    def first_200_bytes(data: bytes, start: int = 0) -> str | None:
        found = window.match(data, start, start + 200)
        return found.group(2).decode("ascii", "replace") if found else None

    def any_boms(data: bytes) -> str:
        text = document_text(data.replace(codecs.BOM_UTF16_LE * 2, codecs.BOM_UTF16_LE, 1))
        return "\ufeff" + text if data.startswith(codecs.BOM_UTF16_LE * 2) else text

    with monkeypatch.context() as old_reader, open_journal(journal_path) as journal:
        old_reader.setattr(encoding, "_declared_encoding", first_200_bytes)
        old_reader.setattr(encoding, "document_text", any_boms)
        scan_directory(journal, outbox, workers=1)
        taken = ["GOOD-LATIN1-1", "GOOD-UTF16-1", "OK-1"]
        assert states(journal_path) == dict.fromkeys(taken, "pending")
    for name in ("late.xml", "two-boms.xml"):  # the stored bytes are what a send reads
        (outbox / name).unlink()
    sandbox = emulator()

    _, summary = send(settings_for(journal_path), outbox, sandbox.transport())

    assert_each_delivered_once(sandbox.stats(), ["GOOD-LATIN1-1", "OK-1"])
    assert summary.held_for_validation == ("GOOD-UTF16-1",)
    with open_journal(journal_path) as journal:
        held = journal.invoice("GOOD-UTF16-1")
    assert held.hold == "held" and "two byte order marks" in (held.hold_reason or "")

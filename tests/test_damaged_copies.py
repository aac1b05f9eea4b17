"""A damaged stored copy blocks its own invoice only, and a rescan repairs it (issue 11, item 10).

Flipping one byte in three stored blobs used to make every ``send --concurrency 2`` exit 1
with none of the 27 intact invoices ever sent; the damaged ones showed as plain ``pending``,
``status`` exited 75 forever, and a rescan of the unchanged files did not repair them.
"""

from __future__ import annotations

import json
from pathlib import Path

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


def test_three_damaged_copies_hold_three_invoices_and_the_rest_are_sent(
    outbox: Path, journal_path: Path
):
    ids = [f"D-{number:04d}" for number in range(30)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    settings = settings_for(journal_path)
    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
    damage(journal_path, DAMAGED)
    sandbox = emulator()

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

"""The emulator gives every document a transaction id of its own, as GoRoute does: a seeded
emulator restarted (`invoicectl sandbox --seed 1`, its help's example) too, or the next
invoice a journal sends there would read as answered for another request (found by a review)."""

from __future__ import annotations

from pathlib import Path

from sendkit import emulator, send, settings_for, states
from ublfactory import write_invoice


def test_a_seeded_emulator_restarted_gives_new_transaction_ids(outbox: Path, tmp_path: Path):
    journal = tmp_path / "journal.db"
    settings = settings_for(journal)
    write_invoice(outbox, "A-1")
    send(settings, outbox, emulator(seed=1).transport(), warn=lambda line: None)
    write_invoice(outbox, "B-1")
    restarted = emulator(seed=1)
    send(settings, outbox, restarted.transport(), warn=lambda line: None)
    assert states(journal) == {"A-1": "accepted", "B-1": "accepted"}
    assert restarted.stats()["sends_received"] == 1

"""Keeping the in-process emulator's memory between runs of ``--sandbox``.

``send --sandbox`` and ``reconcile --sandbox`` each run the emulator inside the command's own
process; without this, reconcile would meet an emulator that never saw the sends. Only what
a real GoRoute would still know is kept: idempotency keys and transactions (JSON, 0600).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from invoicectl.sandbox.clock import EmulatedClock
from invoicectl.sandbox.idempotency import KeyRecord
from invoicectl.sandbox.party import Party
from invoicectl.sandbox.state import EmulatorState
from invoicectl.sandbox.transactions import Transaction


def save(state: EmulatorState, clock: EmulatedClock, path: Path) -> None:
    document = {
        "clock_offset": clock.offset,
        "keys": [asdict(record) for record in state.keys.records()],
        "transactions": [asdict(txn) for txn in state.book.all()],
    }
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(document, handle)
    os.replace(temporary, path)


def load(state: EmulatorState, clock: EmulatedClock, path: Path) -> None:
    if not path.exists():
        return
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    clock.advance(document.get("clock_offset", 0.0))
    for record in document["keys"]:
        state.keys.remember(KeyRecord(**record))
    for txn in document["transactions"]:
        txn["receiver"] = Party(**txn["receiver"])
        txn["sender"] = Party(**txn["sender"])
        state.book.add(Transaction(**txn))

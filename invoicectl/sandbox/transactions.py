"""Transactions: what was created by each accepted send, and where it is in its lifecycle.

Status is never stored for a live transaction: it is derived from emulated time since
creation, so advancing the clock moves every transaction forward without a background task.

    pending --step--> processing --step--> sending --step--> delivered
                                                     \\----> failed     (9915:reject-all)
    9915:timeout-test waits ``timeout_test_delay`` in sending before it is delivered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from invoicectl.sandbox.clock import iso
from invoicectl.sandbox.party import Party

REJECT_ALL = "9915:reject-all"
TIMEOUT_TEST = "9915:timeout-test"
STATUSES = ("pending", "processing", "sending", "delivered", "failed")
FINAL = ("delivered", "failed")


@dataclass(frozen=True)
class Transaction:
    id: str
    created_at: float
    receiver: Party
    sender: Party
    document_type: str
    document_id: str
    metadata: dict[str, Any] = field(default_factory=dict)
    message_id: str | None = None
    idempotency_key: str | None = None
    # A staged transaction keeps the status it was given instead of moving on.
    fixed_status: str | None = None
    # ...and, optionally, when it last changed (else when it was created).
    fixed_updated_at: float | None = None
    seq: int = 0


@dataclass(frozen=True)
class SendAnswer:
    """A send that succeeded (202): a new transaction, or a replay of an earlier one."""

    transaction_id: str
    replay: bool

    def as_json(self) -> dict[str, str]:
        return {"transaction_id": self.transaction_id, "status": "pending"}


@dataclass(frozen=True)
class Timings:
    step: float
    timeout_test_delay: float


@dataclass(frozen=True)
class Progress:
    status: str
    updated_at: float
    delivered_at: float | None


def progress(txn: Transaction, now: float, timings: Timings) -> Progress:
    """Where ``txn`` stands at ``now``."""
    if txn.fixed_status is not None:
        changed = txn.created_at if txn.fixed_updated_at is None else txn.fixed_updated_at
        done = changed if txn.fixed_status == "delivered" else None
        return Progress(txn.fixed_status, changed, done)
    step = timings.step
    sending_ends = 3 * step
    if txn.receiver.participant == TIMEOUT_TEST:
        sending_ends = 2 * step + timings.timeout_test_delay
    final = "failed" if txn.receiver.participant == REJECT_ALL else "delivered"
    changes = [(0.0, "pending"), (step, "processing"), (2 * step, "sending"), (sending_ends, final)]
    elapsed = now - txn.created_at
    offset, status = max((c for c in changes if c[0] <= elapsed), default=changes[0])
    at = txn.created_at + offset
    return Progress(status, at, at if status == "delivered" else None)


def detail_json(txn: Transaction, now: float, timings: Timings) -> dict[str, Any]:
    """``GET /api/v1/transactions/{id}``: the nested shape of goroute-api.md B."""
    state = progress(txn, now, timings)
    return {
        "id": txn.id,
        "status": state.status,
        "document_type": txn.document_type,
        "document_id": txn.document_id,
        "sender": _party_json(txn.sender),
        "receiver": _party_json(txn.receiver),
        "created_at": iso(txn.created_at),
        "updated_at": iso(state.updated_at),
        "delivered_at": iso(state.delivered_at),
        "message_id": txn.message_id if state.status in ("sending", *FINAL) else None,
        "metadata": txn.metadata,
    }


def summary_json(txn: Transaction, now: float, timings: Timings) -> dict[str, Any]:
    """One row of ``GET /api/v1/transactions``: the flat shape of goroute-api.md B."""
    state = progress(txn, now, timings)
    return {
        "transaction_id": txn.id,
        "direction": "outbound",
        "document_type": txn.document_type,
        "invoice_number": txn.document_id,
        "sender_id": txn.sender.participant,
        "receiver_id": txn.receiver.participant,
        "status": state.status,
        "created_at": iso(txn.created_at),
        "delivered_at": iso(state.delivered_at),
    }


def updated_summary_json(txn: Transaction, now: float, timings: Timings) -> dict[str, Any]:
    """A list row with the time the transaction last changed (``list_order`` updated_first)."""
    return {
        **summary_json(txn, now, timings),
        "updated_at": iso(progress(txn, now, timings).updated_at),
    }


def last_changed_first(now: float, timings: Timings) -> Callable[[Transaction], Any]:
    """The sort key of a list most recently updated first."""
    return lambda txn: (-progress(txn, now, timings).updated_at, -txn.seq)


def flat_detail_json(txn: Transaction, now: float, timings: Timings) -> dict[str, Any]:
    """``GET /api/v1/transactions/{id}`` in the list's flat shape, with the sender's metadata."""
    state = progress(txn, now, timings)
    return {
        **summary_json(txn, now, timings),
        "updated_at": iso(state.updated_at),
        "metadata": txn.metadata,
    }


def _party_json(party: Party) -> dict[str, str | None]:
    return {"scheme": party.scheme, "identifier": party.identifier, "name": party.name}


class TransactionBook:
    """Every transaction by id; listing sorts on demand (reads are rare, sends are hot)."""

    def __init__(self) -> None:
        self._by_id: dict[str, Transaction] = {}

    def add(self, txn: Transaction) -> Transaction:
        if txn.id in self._by_id:
            raise ValueError(f"transaction {txn.id} already exists")
        self._by_id[txn.id] = txn
        return txn

    def get(self, txn_id: str) -> Transaction | None:
        return self._by_id.get(txn_id)

    def all(self) -> list[Transaction]:
        return list(self._by_id.values())

    def __len__(self) -> int:
        return len(self._by_id)

    def page(
        self,
        limit: int,
        cursor: str | None,
        *,
        oldest_first: bool = False,
        order: Callable[[Transaction], Any] | None = None,
    ) -> tuple[list[Transaction], str | None]:
        """Newest first (or oldest first, or by ``order``); ``cursor`` is the id of the
        previous page's last row."""
        ordered = sorted(self._by_id.values(), key=order or _newest_first, reverse=oldest_first)
        start = 0
        if cursor is not None:
            after = self._by_id.get(cursor)
            if after is None:
                raise KeyError(cursor)
            start = ordered.index(after) + 1
        rows = ordered[start : start + limit]
        more = start + limit < len(ordered)
        return rows, (rows[-1].id if more and rows else None)


def _newest_first(txn: Transaction) -> tuple[float, int]:
    return (-txn.created_at, -txn.seq)

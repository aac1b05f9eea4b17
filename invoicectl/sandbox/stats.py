"""Counters the tests read to prove what the emulator saw ("nothing delivered twice").

Every counter is bumped in O(1) on the request path; the snapshot is built only when asked.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Stats:
    sends: int = 0
    accepted: int = 0
    replays: int = 0
    key_reused: int = 0
    rejected: int = 0
    rate_limited: int = 0
    server_errors: int = 0
    drops: int = 0
    max_in_flight: int = 0
    key_sends: Counter[str] = field(default_factory=Counter)
    key_transactions: Counter[str] = field(default_factory=Counter)
    invoice_transactions: Counter[str] = field(default_factory=Counter)
    # Participant lookups that passed the key check and the rate limit, either route; per
    # participant in lower case, as the SMP writes them.
    participant_lookups: int = 0
    participant_lookup_counts: Counter[str] = field(default_factory=Counter)
    validations: int = 0  # POST /api/v1/validate past the key check and the rate limit
    # Transaction reads past the key check and the rate limit: what a reconcile costs.
    transaction_gets: int = 0  # GET /api/v1/transactions/{id}
    transaction_lists: int = 0  # GET /api/v1/transactions (one page each)

    def snapshot(self, transactions: int, idempotency_keys: int) -> dict[str, Any]:
        key_sends, key_transactions = _copy(self.key_sends), _copy(self.key_transactions)
        invoices = _copy(self.invoice_transactions)
        return {
            "sends_received": self.sends,
            "accepted": self.accepted,
            "replays": self.replays,
            "key_reused": self.key_reused,
            "rejected": self.rejected,
            "rate_limited": self.rate_limited,
            "server_errors": self.server_errors,
            "drops": self.drops,
            "max_in_flight": self.max_in_flight,
            "transactions": transactions,
            "idempotency_keys": idempotency_keys,
            "per_key": {
                key: {"sends": sends, "transactions": key_transactions.get(key, 0)}
                for key, sends in key_sends.items()
            },
            "per_invoice": invoices,
            "duplicates": sorted(k for k, n in invoices.items() if n > 1),
            "participant_lookups": self.participant_lookups,
            "lookups_per_participant": _copy(self.participant_lookup_counts),
            "validations": self.validations,
            "transaction_gets": self.transaction_gets,
            "transaction_lists": self.transaction_lists,
        }


def _copy(counter: Counter[str]) -> dict[str, int]:
    """A copy of a counter the server's thread may be writing while a test reads it: a copy
    can meet a write (a garbage collection in the middle of it lets the other thread run),
    and is then made again."""
    while True:
        try:
            return dict(counter)
        except RuntimeError:  # "dictionary changed size during iteration"
            continue

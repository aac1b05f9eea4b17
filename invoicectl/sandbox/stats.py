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
                key: {"sends": sends, "transactions": self.key_transactions[key]}
                for key, sends in list(self.key_sends.items())  # read while the server writes
            },
            "per_invoice": dict(self.invoice_transactions),
            "duplicates": sorted(k for k, n in list(self.invoice_transactions.items()) if n > 1),
            "participant_lookups": self.participant_lookups,
            "lookups_per_participant": dict(self.participant_lookup_counts),
            "validations": self.validations,
            "transaction_gets": self.transaction_gets,
            "transaction_lists": self.transaction_lists,
        }

"""The emulator's memory and its one write path: what a send does to it.

``EmulatorState`` owns the idempotency store, the transactions, the participant registry
(the SMP), the rate limiter, the fault dice and the counters. HTTP lives elsewhere
(``app.py`` and ``admin.py`` reach this state through the protocols they declare);
everything here can be driven and inspected from Python, which is how staging for
reconcile tests works.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from invoicectl.sandbox.clock import EmulatedClock
from invoicectl.sandbox.config import Faults, SandboxConfig
from invoicectl.sandbox.documents import Submission, read_submission
from invoicectl.sandbox.faults import FaultDice
from invoicectl.sandbox.idempotency import IdempotencyStore, KeyRecord, check_key, request_sha256
from invoicectl.sandbox.participants import BOTH, Registration, Registry
from invoicectl.sandbox.party import Party, parse_participant
from invoicectl.sandbox.problems import Detail, Problem
from invoicectl.sandbox.ratelimit import RateLimiter
from invoicectl.sandbox.stats import Stats
from invoicectl.sandbox.transactions import (
    STATUSES,
    SendAnswer,
    Timings,
    Transaction,
    TransactionBook,
)


class EmulatorState:
    def __init__(self, config: SandboxConfig, clock: EmulatedClock, rng: random.Random) -> None:
        self.config = config
        self.clock = clock
        # Ids get their own stream, from the system's entropy, not the seed: GoRoute never
        # gives two documents one transaction id, and a seeded emulator restarted must not
        # either (a client takes a repeated id for an answer meant for another request).
        # The fault dice stay reproducible whatever ids cost.
        self._ids = random.Random()
        self.dice = FaultDice(config.faults(), rng)
        self.keys = IdempotencyStore(config.idempotency_ttl)
        self.book = TransactionBook()
        self.participants = Registry()
        self.limiter = RateLimiter(config.rate_per_minute, config.max_concurrent)
        self.stats = Stats()
        self.timings = Timings(config.lifecycle_step, config.timeout_test_delay)
        self._seq = 0

    # -- the send path -------------------------------------------------------------------

    def send(self, idempotency_key: str | None, body: bytes) -> SendAnswer:
        """Process one accepted-for-processing send; raise ``Problem`` for 4xx answers."""
        try:
            return self._send(idempotency_key, body)
        except Problem as problem:
            if problem.code == "IDEMPOTENCY_KEY_REUSED":
                self.stats.key_reused += 1
            else:
                self.stats.rejected += 1
            raise

    def _send(self, key: str | None, body: bytes) -> SendAnswer:
        # Tier A: every send carries a key; the key is judged before the body, and a live key
        # answers for itself (replay or 422) whatever the new body holds.
        if key is None:
            raise _missing_key()
        check_key(key, self.config.max_key_length)
        self.stats.key_sends[key] += 1
        now = self.clock()
        digest = request_sha256(body)
        record = self.keys.live(key, now)
        if record is not None:
            if record.body_sha256 != digest:
                raise _key_reused(record)
            # The same bytes were valid when first seen; no need to parse them again.
            self.stats.replays += 1
            return SendAnswer(record.transaction_id, replay=True)
        submission = read_submission(body, self.config.max_document_bytes)
        if not self.participants.takes_sends(submission.receiver.participant):
            raise _not_registered(submission.receiver)
        txn = self._create(submission, key, now)
        self.keys.remember(KeyRecord(key, digest, txn.id, now))
        self.stats.key_transactions[key] += 1
        self.stats.accepted += 1
        return SendAnswer(txn.id, replay=False)

    def _create(self, submission: Submission, key: str | None, now: float) -> Transaction:
        txn = Transaction(
            id=self.new_transaction_id(),
            created_at=now,
            receiver=submission.receiver,
            sender=submission.sender,
            document_type=submission.document_type,
            document_id=submission.document_id,
            metadata=submission.metadata,
            message_id=self._message_id(),
            idempotency_key=key,
            seq=self._next_seq(),
        )
        self._record(txn, submission.invoice_id)
        return txn

    def _record(self, txn: Transaction, invoice_id: str) -> None:
        self.book.add(txn)
        self.stats.invoice_transactions[invoice_id] += 1

    # -- the SMP ------------------------------------------------------------------------

    def lookup_participant(self, participant: str) -> Registration:
        """One lookup, counted; ValueError unless ``participant`` reads scheme:identifier."""
        self.stats.participant_lookups += 1
        registration = self.participants.find(participant)
        self.stats.participant_lookup_counts[registration.participant] += 1
        return registration

    # -- staging, for reconcile and pre-flight tests ------------------------------------

    def stage_participant(
        self,
        participant: str,
        *,
        registered: bool = True,
        document_types: tuple[str, ...] = BOTH,
        lookup_error: int | None = None,
    ) -> Registration:
        """Register (or unregister) ``participant`` for lookups and sends alike."""
        return self.participants.stage(
            participant,
            registered=registered,
            document_types=document_types,
            lookup_error=lookup_error,
        )

    def preload_key(
        self,
        key: str,
        *,
        transaction_id: str,
        body_sha256: str | None = None,
        body: bytes | str | None = None,
        first_seen: float | None = None,
    ) -> KeyRecord:
        """Mark ``key`` as used for ``body`` / ``body_sha256`` (by default some other body)."""
        if body_sha256 is None:
            body_sha256 = request_sha256(body if body is not None else f"staged:{key}")
        seen = self.clock() if first_seen is None else first_seen
        record = KeyRecord(key, body_sha256, transaction_id, seen)
        self.keys.remember(record)
        return record

    def add_transaction(
        self,
        invoice_number: str,
        *,
        receiver: str = "9915:phase4-test-receiver",
        sender: str = "0088:7300010000001",
        status: str | None = None,
        created_at: float | None = None,
        transaction_id: str | None = None,
        document_type: str = "Invoice",
        metadata: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        updated_at: float | None = None,
    ) -> Transaction:
        """Stage a transaction created before the test; ``status`` pins it (else it moves on),
        last changed at ``updated_at`` (else when it was created)."""
        if status is not None and status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}")
        meta = dict(metadata or {})
        txn = Transaction(
            id=transaction_id or self.new_transaction_id(),
            created_at=self.clock() if created_at is None else created_at,
            receiver=parse_participant(receiver),
            sender=parse_participant(sender),
            document_type=document_type,
            document_id=invoice_number,
            metadata=meta,
            message_id=self._message_id(),
            idempotency_key=idempotency_key,
            fixed_status=status,
            fixed_updated_at=updated_at,
            seq=self._next_seq(),
        )
        self._record(txn, str(meta.get("invoice_id", invoice_number)))
        return txn

    def set_faults(self, faults: Faults) -> None:
        self.dice.faults = faults

    # -- ids -----------------------------------------------------------------------------

    def new_transaction_id(self) -> str:
        while True:
            candidate = f"{self.config.transaction_prefix}{self._ids.getrandbits(96):024x}"
            if self.book.get(candidate) is None:
                return candidate

    def _message_id(self) -> str:
        return f"{uuid.UUID(int=self._ids.getrandbits(128), version=4)}@sandbox.goroute"

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def snapshot(self) -> dict[str, Any]:
        snapshot = self.stats.snapshot(len(self.book), len(self.keys))
        snapshot["max_in_60s"] = self.limiter.max_in_window  # arrivals, any 60 s, one key
        return snapshot


def _missing_key() -> Problem:
    message = "Idempotency-Key header is required on POST /api/v1/documents"
    detail = Detail("IDEMPOTENCY_KEY", message, "header:Idempotency-Key")
    return Problem(400, "MISSING_IDEMPOTENCY_KEY", message, (detail,))


def _key_reused(record: KeyRecord) -> Problem:
    message = (
        f"Idempotency-Key {record.key!r} was used for a different request in the last 24 hours"
    )
    return Problem(
        422,
        "IDEMPOTENCY_KEY_REUSED",
        message,
        extra={"existing_transaction_id": record.transaction_id},
    )


def _not_registered(receiver: Party) -> Problem:
    message = f"receiver {receiver.participant} is not registered in the SMP"
    detail = Detail("SMP_LOOKUP", message, "/receiver_id")
    return Problem(404, "RECEIVER_NOT_FOUND", message, (detail,))

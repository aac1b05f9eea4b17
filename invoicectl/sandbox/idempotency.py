"""The idempotency store: which key carried which request body, and for how long it counts.

One store per emulator, shared by every API key: idempotency belongs to the account, and
keys get rotated (a new API key must not reopen a window). Expired entries are dropped when
they are next looked at, so no request ever pays for a sweep.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from invoicectl.sandbox.problems import Detail, Problem

_KEY_CHARS = re.compile(r"[A-Za-z0-9._:-]+")


def request_sha256(body: bytes | str) -> str:
    """The hash the emulator compares under one idempotency key: the exact request bytes."""
    data = body.encode("utf-8") if isinstance(body, str) else body
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class KeyRecord:
    key: str
    body_sha256: str
    transaction_id: str
    first_seen: float


def check_key(key: str, max_length: int) -> None:
    """Refuse a key GoRoute would not take (goroute-api.md C: charset and length)."""
    if len(key) > max_length:
        reason = f"Idempotency-Key is {len(key)} characters; at most {max_length} are allowed"
    elif not _KEY_CHARS.fullmatch(key):
        reason = "Idempotency-Key may only contain A-Z a-z 0-9 . _ : -"
    else:
        return
    detail = Detail("IDEMPOTENCY_KEY", reason, "header:Idempotency-Key")
    raise Problem(400, "INVALID_IDEMPOTENCY_KEY", reason, (detail,))


class IdempotencyStore:
    def __init__(self, ttl: float) -> None:
        self._ttl = ttl
        self._records: dict[str, KeyRecord] = {}

    def live(self, key: str, now: float) -> KeyRecord | None:
        """The record still protecting ``key`` at ``now``, if any."""
        record = self._records.get(key)
        if record is None:
            return None
        if now - record.first_seen >= self._ttl:
            del self._records[key]
            return None
        return record

    def remember(self, record: KeyRecord) -> None:
        self._records[record.key] = record

    def records(self) -> list[KeyRecord]:
        return list(self._records.values())

    def __len__(self) -> int:
        return len(self._records)

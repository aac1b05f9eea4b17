"""Idempotency keys: one stable key per invoice and version (design.md, Idempotency rule 1)."""

from __future__ import annotations

import hashlib
import re
from typing import Any

MAX_KEY_LENGTH = 64
_KEY_CHARS = re.compile(r"[A-Za-z0-9._:-]+")


def idempotency_key(invoice_id: str, version: int = 1) -> str:
    """``invoice-<id>`` for version 1, ``invoice-<id>-v<n>`` after; hashed when the id won't fit.

    >>> idempotency_key("INV-1")
    'invoice-INV-1'
    >>> idempotency_key("INV-1", 2)
    'invoice-INV-1-v2'
    """
    suffix = "" if version == 1 else f"-v{version}"
    key = f"invoice-{invoice_id}{suffix}"
    if _KEY_CHARS.fullmatch(key) and len(key) <= MAX_KEY_LENGTH:
        return key
    digest = hashlib.sha256(invoice_id.encode("utf-8")).hexdigest()[:32]
    return f"invoice-{digest}{suffix}"


def next_key(version: int) -> dict[str, Any]:
    """The changes that move an invoice past key version ``version`` to the next one: no
    key committed yet, and nothing of what the old key's send came to."""
    return {
        "key_version": version + 1,
        "idempotency_key": None,
        "key_sha256": None,
        "key_first_used_at": None,
        "state_before_amend": None,
        "transaction_id": None,
        "existing_transaction_id": None,
        "remote_status": None,
    }

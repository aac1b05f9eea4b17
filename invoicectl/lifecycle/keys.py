"""Idempotency keys: one stable key per invoice and version (design.md, Idempotency rule 1)."""

from __future__ import annotations

import hashlib
import re

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

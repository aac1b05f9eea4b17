"""``verify``'s checks of the stored bytes: every blob against its sha256 (or a sample of
them, ``--read-data-subset``), and the body of every attempt that carried a blob rebuilt
from it, as the sender built it, against the body sha256 the attempt recorded.

Blobs are read one at a time, each attempt body checked while its blob is at hand: nothing
is kept from one blob to the next, so a journal of any size is checked in flat memory. A
sample is drawn by selection sampling over the names as they stream (Knuth's algorithm S):
exactly the share asked for, each blob as likely as any other.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Iterator

from invoicectl.audit.findings import Verification
from invoicectl.journal.audit import AuditReader, receiver_of
from invoicectl.journal.packing import unpack

Stored = tuple[str, int, "str | None", bytes]


def check_blobs(
    reader: AuditReader, result: Verification, subset: float, rng: random.Random | None
) -> None:
    result.blobs = reader.blob_count()
    blobs = reader.stored_blobs() if subset >= 1 else _sample(reader, result.blobs, subset, rng)
    for sha256, size, codec, packed in blobs:
        result.blobs_checked += 1
        data, problem = _unpacked(sha256, size, codec, packed)
        if data is None:
            owners = ", ".join(reader.invoices_of_content(sha256)) or "no invoice"
            result.add(f"blob {sha256[:16]} ({owners})", problem)
            continue
        _check_bodies(reader, result, sha256, data)
    for invoice_id, sha256 in reader.revisions_without_blob():
        result.add(f"invoice {invoice_id}", f"revision {sha256[:16]}: its stored bytes are missing")
    for attempt_id, invoice_id, sha256 in reader.attempts_without_revision():
        result.add(
            f"attempt {attempt_id} (invoice {invoice_id})",
            f"its revision {str(sha256)[:16]} is not in the journal: its body cannot be rebuilt",
        )


def _sample(
    reader: AuditReader, total: int, subset: float, rng: random.Random | None
) -> Iterator[Stored]:
    wanted = max(1, math.ceil(total * subset)) if total else 0
    draw = rng or random.Random()
    chosen = 0
    for seen, sha256 in enumerate(reader.blob_names()):
        if chosen >= wanted:
            return
        if draw.random() * max(1, total - seen) < wanted - chosen:
            chosen += 1
            stored = reader.stored_blob(sha256)
            if stored is not None:
                yield stored


def _unpacked(sha256: str, size: int, codec: str | None, packed: bytes) -> tuple[bytes | None, str]:
    try:
        data = unpack(codec, packed)
    except (ValueError, RuntimeError) as error:
        return None, f"its packed bytes cannot be unpacked ({error})"
    if hashlib.sha256(data).hexdigest() != sha256:
        return None, "its bytes no longer match their sha256"
    if size != len(data):
        return None, f"holds {len(data)} bytes, but {size} are recorded"
    return data, ""


def _check_bodies(reader: AuditReader, result: Verification, sha256: str, data: bytes) -> None:
    from invoicectl.goroute.client import build_send_body
    from invoicectl.ubl.encoding import document_text
    from invoicectl.ubl.errors import InvalidDocument

    text: str | None = None
    for invoice_id, facts in reader.revisions_of_content(sha256):
        attempts = reader.attempt_bodies(invoice_id, sha256)
        if not attempts:
            continue
        subjects = [f"attempt {attempt_id} (invoice {invoice_id})" for attempt_id, _ in attempts]
        receiver = receiver_of(facts)
        if receiver is None:
            for subject in subjects:
                result.add(subject, f"its revision {sha256[:16]} has no receiver in its facts")
            continue
        if text is None:
            try:
                text = document_text(data)
            except InvalidDocument as error:
                for subject in subjects:
                    result.add(subject, f"its stored bytes cannot be decoded ({error})")
                return
        metadata = {"invoice_id": invoice_id, "sha256": sha256}
        body = hashlib.sha256(build_send_body(text, *receiver, metadata)).hexdigest()
        for subject, (_, body_sha256) in zip(subjects, attempts, strict=True):
            result.attempts_checked += 1
            if body != body_sha256:
                result.add(
                    subject,
                    "its body sha256 is not that of the body rebuilt from the stored bytes",
                )

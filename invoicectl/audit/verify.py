"""``invoicectl verify``: does the journal still hold what it wrote? In the spirit of
``restic check``.

Five checks, each reporting every problem it meets as one ``Finding`` and going on to the
next (a damaged file stops only the check that meets the damage):

1. SQLite's integrity check of the file;
2. the chain, event by event: no sequence number missing, every hash equal to
   ``sha256(previous hash || payload)``, every payload in canonical form; and every chain
   head a run recorded still in the chain;
3. every stored blob against its sha256 (``subset``: a random share of them);
4. every attempt's body sha256 against the body rebuilt from the stored bytes it carried;
5. every invoice, attempt and audit-trail row against its last event in the chain.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from invoicectl.errors import UsageError
from invoicectl.journal.audit import AuditReader, receiver_of
from invoicectl.journal.chain import COVERED, ZERO_HASH, canonical, link

_SUBJECT = {"invoices": "invoice {}", "attempts": "attempt {}", "events": "audit-trail entry {}"}


@dataclass(frozen=True)
class Finding:
    subject: str  # "journal", "chain event 17", "invoice INV-1", "blob 3f2a…", "run 4"
    problem: str

    def line(self) -> str:
        return f"{self.subject}: {self.problem}"


@dataclass
class Verification:
    journal: str
    findings: list[Finding] = field(default_factory=list)
    events: int = 0
    head_seq: int = 0
    head_hash: str = ZERO_HASH
    blobs: int = 0
    blobs_checked: int = 0
    attempts_checked: int = 0
    rows_checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.findings

    def add(self, subject: str, problem: str) -> None:
        self.findings.append(Finding(subject, problem))

    def summary(self) -> str:
        return (
            f"{'ok' if self.ok else f'{len(self.findings)} problem(s)'}: {self.events} chain"
            f" events, head {self.head_seq}:{self.head_hash[:16]}; {self.blobs_checked} of"
            f" {self.blobs} blobs read; {self.attempts_checked} attempt bodies rebuilt;"
            f" {self.rows_checked} rows against their events"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "journal": self.journal,
            "ok": self.ok,
            "head": {"seq": self.head_seq, "hash": self.head_hash},
            "events": self.events,
            "blobs": self.blobs,
            "blobs_checked": self.blobs_checked,
            "attempts_checked": self.attempts_checked,
            "rows_checked": self.rows_checked,
            "problems": [{"subject": f.subject, "problem": f.problem} for f in self.findings],
        }


def parse_subset(text: str | None) -> float:
    """``--read-data-subset``: "10%" (or "0.1"), as a share in (0, 1]."""
    if text is None:
        return 1.0
    try:
        share = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        share = math.nan
    if not 0 < share <= 1:
        raise UsageError(
            f"--read-data-subset {text!r}: give a percentage from 0% to 100%, e.g. 10%"
        )
    return share


def verify(path: Path, *, subset: float = 1.0, rng: random.Random | None = None) -> Verification:
    """Every check of the module docstring on the journal at ``path``, read-only."""
    result = Verification(str(path))
    if not path.is_file():
        result.add("journal", f"no journal file at {path}")
        return result
    try:
        reader = AuditReader(path)
    except sqlite3.Error as error:
        result.add("journal", f"cannot be opened: {error}")
        return result
    with reader:
        _step(result, "the integrity check", lambda: _integrity(reader, result))
        if not _has_chain(reader, result):
            return result
        last: dict[str, dict[Any, tuple[int, str]]] = {table: {} for table in COVERED}
        _step(result, "the chain check", lambda: _chain(reader, result, last))
        _step(result, "the run heads check", lambda: _run_heads(reader, result))
        sampled: set[str] = set()
        _step(result, "the blob check", lambda: _blobs(reader, result, subset, rng, sampled))
        _step(result, "the attempt bodies check", lambda: _bodies(reader, result, sampled))
        for table in COVERED:
            _step(result, f"the {table} check", lambda t=table: _rows(reader, result, t, last))  # type: ignore[misc]
    return result


def _step(result: Verification, name: str, check: Callable[[], None]) -> None:
    try:
        check()
    except sqlite3.DatabaseError as error:
        result.add("journal", f"{name} stopped: the file cannot be read ({error})")


def _has_chain(reader: AuditReader, result: Verification) -> bool:
    try:
        if reader.has_chain():
            return True
        result.add(
            "journal", "has no chain yet: open it once with this invoicectl (invoicectl status)"
        )
    except sqlite3.DatabaseError as error:
        result.add("journal", f"cannot be read ({error})")
    return False


def _integrity(reader: AuditReader, result: Verification) -> None:
    for line in reader.integrity_problems():
        result.add("journal", f"SQLite integrity check: {line}")


def _chain(
    reader: AuditReader, result: Verification, last: dict[str, dict[Any, tuple[int, str]]]
) -> None:
    expected, previous = 1, ZERO_HASH
    for event in reader.chain():
        subject = f"chain event {event.seq}"
        result.events += 1
        if event.seq != expected:
            gap = f"{expected}" if event.seq == expected + 1 else f"{expected} to {event.seq - 1}"
            result.add(
                f"chain event {gap}",
                f"missing: the chain goes from event {expected - 1} to {event.seq}; deleted",
            )
        elif link(previous, event.payload.encode("utf-8")) != event.hash:
            result.add(
                subject,
                "its hash is not sha256(previous hash || payload): changed after it was written",
            )
        previous, expected = event.hash, event.seq + 1
        result.head_seq, result.head_hash = event.seq, event.hash
        try:
            payload = json.loads(event.payload)
        except ValueError:
            result.add(subject, "its payload is not JSON")
            continue
        if canonical(payload) != event.payload.encode("utf-8"):
            result.add(
                subject, "its payload is not in canonical form: changed after it was written"
            )
        if payload.get("seq") != event.seq or payload.get("kind") != event.kind:
            result.add(subject, "its payload names another sequence number or kind")
        table = payload.get("table")
        if table in last:
            last[table][payload.get("key")] = (event.seq, _digest(payload.get("row")))


def _digest(row: Any) -> str:
    return hashlib.sha256(canonical({"row": row})).hexdigest()


def _run_heads(reader: AuditReader, result: Verification) -> None:
    for run in reader.run_heads():
        recorded = reader.chain_hash(run.seq)
        if recorded is None:
            result.add(
                f"run {run.run_id}",
                f"recorded chain head {run.seq}:{run.hash[:16]}, which the chain no longer holds"
                f" (it ends at event {result.head_seq}): events were deleted",
            )
        elif recorded != run.hash:
            result.add(
                f"run {run.run_id}",
                f"recorded chain head {run.seq}:{run.hash[:16]}, but event {run.seq} is now"
                f" {recorded[:16]}: the chain was rewritten",
            )


def _blobs(
    reader: AuditReader,
    result: Verification,
    subset: float,
    rng: random.Random | None,
    sampled: set[str],
) -> None:
    names = reader.blob_names()
    result.blobs = len(names)
    if subset < 1:
        names = (rng or random.Random()).sample(
            names, max(1, math.ceil(len(names) * subset)) if names else 0
        )
    for sha256 in names:
        result.blobs_checked += 1
        problem = _blob_problem(reader, sha256)
        if problem is None:
            sampled.add(sha256)
            continue
        owners = ", ".join(reader.invoices_of_content(sha256)) or "no invoice"
        result.add(f"blob {sha256[:16]} ({owners})", problem)
    for invoice_id, sha256 in reader.revisions_without_blob():
        result.add(f"invoice {invoice_id}", f"revision {sha256[:16]}: its stored bytes are missing")


def _blob_problem(reader: AuditReader, sha256: str) -> str | None:
    try:
        stored = reader.blob(sha256)
    except (ValueError, RuntimeError) as error:
        return f"its packed bytes cannot be unpacked ({error})"
    assert stored is not None
    size, data = stored
    if hashlib.sha256(data).hexdigest() != sha256:
        return "its bytes no longer match their sha256"
    if size != len(data):
        return f"holds {len(data)} bytes, but {size} are recorded"
    return None


def _bodies(reader: AuditReader, result: Verification, readable: set[str]) -> None:
    from invoicectl.goroute.client import build_send_body
    from invoicectl.ubl.encoding import document_text
    from invoicectl.ubl.errors import InvalidDocument

    built: dict[tuple[str, str], str] = {}
    for attempt_id, invoice_id, sha256, body_sha256, facts in reader.sent_bodies():
        if sha256 not in readable:
            continue  # not sampled, or damaged (then reported as a blob)
        subject = f"attempt {attempt_id} (invoice {invoice_id})"
        receiver = receiver_of(facts)
        if receiver is None:
            result.add(subject, f"its revision {sha256[:16]} has no receiver in its facts")
            continue
        if (invoice_id, sha256) not in built:
            stored = reader.blob(sha256)
            assert stored is not None
            try:
                text = document_text(stored[1])
            except InvalidDocument as error:
                result.add(subject, f"its stored bytes cannot be decoded ({error})")
                continue
            body = build_send_body(text, *receiver, {"invoice_id": invoice_id, "sha256": sha256})
            built[(invoice_id, sha256)] = hashlib.sha256(body).hexdigest()
        result.attempts_checked += 1
        if built[(invoice_id, sha256)] != body_sha256:
            result.add(
                subject, "its body sha256 is not that of the body rebuilt from the stored bytes"
            )


def _rows(
    reader: AuditReader,
    result: Verification,
    table: str,
    last: dict[str, dict[Any, tuple[int, str]]],
) -> None:
    events = last[table]
    name = _SUBJECT[table]
    for key, row in reader.covered_rows(table):
        result.rows_checked += 1
        subject = name.format(key)
        recorded = events.pop(key, None)
        if recorded is None:
            result.add(subject, "no chain event records it: written outside invoicectl")
        elif recorded[1] != _digest(row):
            result.add(subject, _difference(reader, recorded[0], row))
    for key, (seq, _) in events.items():
        result.add(name.format(key), f"in the chain (event {seq}) but not in the journal: deleted")


def _difference(reader: AuditReader, seq: int, row: dict[str, Any]) -> str:
    event = reader.chain_event(seq)
    assert event is not None
    was = json.loads(event.payload).get("row") or {}
    changed = [
        f"{column} is {row.get(column)!r}, its last event ({seq}) says {was.get(column)!r}"
        for column in sorted(set(row) | set(was))
        if row.get(column) != was.get(column)
    ]
    return "; ".join(changed) + ": changed outside invoicectl"

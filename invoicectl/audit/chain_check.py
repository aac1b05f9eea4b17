"""``verify``'s checks of the chain: event by event, the heads runs recorded, the journal's
identity, and every row the chain covers against its last event.

The chain is read once, in order. Each event's hash must follow from the hash before it and
its payload; when one does not, the event after it tells which was changed: an event that
follows from the stored hash means the payload was edited, one that follows from the hash
the payload gives means the hash was. Each row event's (table, key, seq, digest of the row)
goes into a temporary table (``AuditReader.begin_last_events``), a later event of a row
replacing the one before, so that a journal of any size is checked in flat memory; the rows
are then read table by table beside their last events.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from invoicectl.audit.findings import Verification
from invoicectl.journal.audit import AuditReader, ChainRow
from invoicectl.journal.chain import COVERED, GENESIS_TABLES, ZERO_HASH, canonical, link

_HEX = re.compile(r"^[0-9a-f]{64}$")
_BATCH = 1000
_ROW_EVENT = frozenset(("seq", "at", "kind", "table", "key", "row"))
_SUBJECTS = {
    "invoices": "invoice {}",
    "attempts": "attempt {}",
    "events": "audit-trail entry {}",
    "runs": "run {}",
    "history_checks": "history check {}",
}
_EDITED = "its hash is not sha256(previous hash || payload): changed after it was written"
_HASH_EDITED = (
    "its hash was changed after it was written: it is not sha256(previous hash || payload),"
    " and the next event follows from the payload's hash"
)
_NO_GENESIS = object()


@dataclass
class ChainState:
    """What the chain pass learnt for the checks after it."""

    covered: set[str] = field(default_factory=lambda: set(GENESIS_TABLES))
    genesis_journal_id: Any = _NO_GENESIS
    complete: bool = False  # read to its end (else the rows cannot be judged by it)


def check_chain(reader: AuditReader, result: Verification, state: ChainState) -> None:
    reader.begin_last_events()
    last: list[tuple[str, Any, int, bytes]] = []
    expected = 1
    previous: str | None = ZERO_HASH  # the hash the next event must follow from (None: unknown)
    doubt: tuple[int, str] | None = None  # (seq, the hash its payload gives) of a failed event
    for event in reader.chain():
        result.events += 1
        result.head_seq, result.head_hash = event.seq, str(event.hash)
        subject = f"chain event {event.seq}"
        text = event.payload if isinstance(event.payload, str) else None
        # Bytes that are not UTF-8 come as surrogates (verify reads them so): hashed as stored.
        data = None if text is None else text.encode("utf-8", "surrogateescape")
        stored = event.hash if isinstance(event.hash, str) and _HEX.match(event.hash) else None
        given = None if data is None or previous is None else link(previous, data)
        if event.seq != expected:
            _settle(result, doubt)
            doubt, given = None, None
            gap = f"{expected}" if event.seq == expected + 1 else f"{expected} to {event.seq - 1}"
            result.add(
                f"chain event {gap}",
                f"missing: the chain goes from event {expected - 1} to {event.seq}; deleted",
            )
        elif doubt is not None:
            # The event before did not follow: this one says whether its payload or its hash
            # was changed (or neither follows, and this one is in doubt too).
            if (
                given is not None
                and given != stored
                and data is not None
                and link(doubt[1], data) == stored
            ):
                result.add(f"chain event {doubt[0]}", _HASH_EDITED)
                doubt, given = None, stored
            if doubt is not None:
                _settle(result, doubt)
                doubt = None
        previous, expected = stored, event.seq + 1
        if text is None:
            result.add(subject, "its payload is not text")
        elif stored is None:
            result.add(
                subject, "its hash is not a sha256 (64 hex digits): changed after it was written"
            )
            previous = given
        elif given is not None and given != stored:
            doubt = (event.seq, given)
        if text is not None and not _is_utf8(text):
            result.add(subject, "its payload is not UTF-8 text: changed after it was written")
        elif text is not None:
            _payload(event, text, result, state, last)
        if len(last) >= _BATCH:
            reader.record_last_events(last)
            last.clear()
    _settle(result, doubt)
    reader.record_last_events(last)
    state.complete = True


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _settle(result: Verification, doubt: tuple[int, str] | None) -> None:
    if doubt is not None:
        result.add(f"chain event {doubt[0]}", _EDITED)


def _payload(
    event: ChainRow,
    text: str,
    result: Verification,
    state: ChainState,
    last: list[tuple[str, Any, int, bytes]],
) -> None:
    """The payload's own checks; a row event's last-event entry."""
    subject = f"chain event {event.seq}"
    try:
        payload = json.loads(text)
    except ValueError:
        result.add(subject, "its payload is not JSON")
        return
    if not isinstance(payload, dict):
        result.add(subject, "its payload is not a JSON object")
        return
    is_canonical = canonical(payload) == text.encode("utf-8")
    if not is_canonical:
        result.add(subject, "its payload is not in canonical form: changed after it was written")
    if payload.get("seq") != event.seq or payload.get("kind") != event.kind:
        result.add(subject, "its payload names another sequence number or kind")
    kind = payload.get("kind")
    if kind == "genesis":
        state.genesis_journal_id = payload.get("journal_id")
    elif kind == "coverage" and isinstance(payload.get("tables"), list):
        state.covered.update(table for table in payload["tables"] if table in COVERED)
    table, key, row = payload.get("table"), payload.get("key"), payload.get("row")
    names_row = table in COVERED and COVERED[table][0] == kind
    if kind not in ("genesis", "coverage") and not (
        names_row and _is_key(key) and isinstance(row, dict)
    ):
        result.add(subject, "its payload names no row (a table, a key and the row)")
        return
    said = row.get("invoice_id") if isinstance(row, dict) else None
    if event.invoice_id != said:
        result.add(
            subject,
            f"its invoice_id column is {event.invoice_id!r}, its payload says {said!r}:"
            " changed after it was written",
        )
    if isinstance(row, dict):
        whole = is_canonical and set(payload) == _ROW_EVENT
        last.append((str(table), key, event.seq, _row_digest(text if whole else None, row)))


def _is_key(key: Any) -> bool:
    if isinstance(key, bool):
        return False
    return isinstance(key, str) or (isinstance(key, int) and -(2**63) <= key < 2**63)


def _row_digest(text: str | None, row: dict[str, Any]) -> bytes:
    """sha256 of the row's canonical bytes. From a canonical row event's own text when given:
    its keys sort as at, key, kind, row, seq, table, so the row is what stands between
    ``"row":`` and the last ``,"seq":`` (no string in canonical JSON holds an unescaped
    quote), which saves serialising every row a second time."""
    if text is not None:
        start, end = text.find('"row":') + 6, text.rfind(',"seq":')
        if 6 <= start < end and text[start] == "{" and text[end - 1] == "}":
            return hashlib.sha256(text[start:end].encode("utf-8")).digest()
    return _live_digest(row)


def _live_digest(row: dict[str, Any]) -> bytes:
    """sha256 of a row as the journal holds it now, in the form its event would have. A value
    no event can hold (bytes put in by hand, NaN) gives the digest of its repr: never the
    event's."""
    text = json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def check_run_heads(reader: AuditReader, result: Verification) -> None:
    for run in reader.run_heads():
        recorded = reader.chain_hash(run.seq)
        if recorded is None:
            result.add(
                f"run {run.run_id}",
                f"recorded chain head {run.seq}:{str(run.hash)[:16]}, which the chain no longer"
                f" holds (it ends at event {result.head_seq}): events were deleted",
            )
        elif recorded != run.hash:
            result.add(
                f"run {run.run_id}",
                f"recorded chain head {run.seq}:{str(run.hash)[:16]}, but event {run.seq} is now"
                f" {recorded[:16]}: the chain was rewritten",
            )


def check_identity(reader: AuditReader, result: Verification, state: ChainState) -> None:
    """The journal's id (which outbox markers and exports name) against its genesis event."""
    if state.genesis_journal_id is _NO_GENESIS or state.genesis_journal_id is None:
        return
    journal_id = reader.journal_id()
    if journal_id != state.genesis_journal_id:
        result.add(
            "journal identity",
            f"journal_id is {journal_id!r}, the genesis event says"
            f" {state.genesis_journal_id!r}: changed outside invoicectl",
        )


def check_rows(reader: AuditReader, result: Verification, table: str) -> None:
    for key, row, seq, digest in reader.rows_and_last_events(table):
        result.rows_checked += 1
        if seq is None:
            result.add(
                _subject(table, key, row), "no chain event records it: written outside invoicectl"
            )
        elif digest != _live_digest(row):
            result.add(_subject(table, key, row), _difference(reader, seq, row))
    for key, seq in reader.rows_deleted(table):
        was = _event_row(reader, seq)
        result.add(
            _subject(table, key, was), f"in the chain (event {seq}) but not in the journal: deleted"
        )


def _subject(table: str, key: Any, row: dict[str, Any]) -> str:
    if table == "revisions":
        return f"revision {key} (invoice {row.get('invoice_id')}, {str(row.get('sha256'))[:16]})"
    if table == "environment":
        return "environment binding"
    return _SUBJECTS[table].format(key)


def _event_row(reader: AuditReader, seq: int) -> dict[str, Any]:
    event = reader.chain_event(seq)
    payload = json.loads(event.payload) if event is not None else {}
    row = payload.get("row") if isinstance(payload, dict) else None
    return row if isinstance(row, dict) else {}


def _difference(reader: AuditReader, seq: int, row: dict[str, Any]) -> str:
    was = _event_row(reader, seq)
    changed = [
        f"{column} is {_shown(row.get(column))}, its last event ({seq}) says"
        f" {_shown(was.get(column))}"
        for column in sorted(set(row) | set(was))
        if row.get(column) != was.get(column)
    ]
    return "; ".join(changed or ["differs from its last event"]) + ": changed outside invoicectl"


def _shown(value: Any) -> str:
    """A value as the finding shows it: its repr, cut to a line's worth."""
    text = repr(value)
    return text if len(text) <= 120 else f"{text[:110]}…({len(text)} characters)"

"""``invoicectl export DEST``: a signed archive an auditor verifies without invoicectl.

The form is ``manifest``'s. A part is written whole into ``DEST/.NNNN.partial-<pid>``, synced
to disk, then renamed to ``DEST/NNNN``: a full disk, an unwritable DEST or a stop leaves no
part behind, nor a DEST it made (a ``.partial`` directory of a killed export is removed by
the next). A second export to DEST is a top-up: it adds a part with the invoices whose chain
events came after the last part's head (a journal whose chain no longer reaches it unchanged
is refused), and changes nothing already there. Read-only on the journal, in one transaction
(``journal.audit.AuditReader``): the chain segment, the evidence and the bytes are the
journal as it was at one moment, whatever a send commits meanwhile.

Invoice by invoice, in flat memory: the files are written as they are made, their listing
spooled and the manifest streamed from it; memory holds what the manifest must name (the
invoice IDs), and the manifest is read back whole to be signed (Ed25519 signs a message).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from invoicectl import __version__
from invoicectl.audit.files import (
    clear_partials,
    first_missing,
    fsync_dir,
    sync_part,
    undo_part,
    write_new,
)
from invoicectl.audit.manifest import FORMAT, file_sha256, held, parts, safe_name
from invoicectl.audit.signing import SigningKey
from invoicectl.audit.top_up import anchored, choose, linked, reaching_back
from invoicectl.errors import ExportError
from invoicectl.journal.audit import AuditReader
from invoicectl.journal.sqlite_open import refuse_missing

_ATTEMPT_FIELDS = (
    "id", "run_id", "started_at", "finished_at", "idempotency_key", "revision_sha256",
    "body_sha256", "outcome", "http_status", "error_code", "message", "request_id",
    "transaction_id", "existing_transaction_id", "retry_after", "duration", "raw_body",
)  # fmt: skip


@dataclass
class Exported:
    dest: Path
    part: Path | None = None
    invoices: int = 0
    files: int = 0
    events: int = 0
    head: tuple[int, str] = (0, "")
    key_id: str = ""
    retired_key: str | None = None
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        if self.part is None:
            return f"nothing new to export to {self.dest} (chain head {self.head[0]})"
        return (
            f"exported {self.invoices} invoice(s), {self.files} file(s), {self.events} chain"
            f" events to {self.part}; head {self.head[0]}:{self.head[1][:16]}; signed by"
            f" {self.key_id}"
        )


def export(
    journal: Path,
    dest: Path,
    key: SigningKey,
    *,
    since: str | None = None,
    until: str | None = None,
    invoice_ids: list[str] | None = None,
    now: datetime,
    retention_years: int = 10,
) -> Exported:
    """Write the next part of the export at ``dest`` (module docstring)."""
    refuse_missing(journal)
    result = Exported(dest, key_id=key.key_id)
    with AuditReader(journal) as reader:
        if not reader.up_to_date():  # read-only: an export never upgrades a journal
            raise ExportError(
                f"the journal {journal} was written by an older invoicectl and is not yet in "
                "this one's form (its hash chain among it); nothing was exported. Open it "
                f"once to upgrade it (`invoicectl status --journal {journal}`), then export"
            )
        if lacking := reader.lacking():
            raise ExportError(
                f"the journal {journal} is damaged: its schema lacks {', '.join(lacking)} "
                "(dropped outside invoicectl?), and their rows with it; nothing was exported. "
                "`invoicectl doctor` names all it lacks; restore the journal from a backup"
            )
        earlier = parts(dest)
        result.head = reader.head()
        last = anchored(reader, earlier[-1], result.head[0]) if earlier else 0
        chosen = choose(reader, earlier, since, until, invoice_ids, last)
        _refuse_rows_gone(reader, reaching_back(reader, chosen, last, earlier))
        if not chosen or result.head[0] <= last:
            return result
        first = last + 1 if earlier else (reader.first_event_of(chosen) or 1)
        number = int(earlier[-1].name) + 1 if earlier else 1
        clear_partials(dest)
        made = first_missing(dest)
        work = dest / f".{number:04d}.partial-{os.getpid()}"
        target = dest / f"{number:04d}"
        try:
            work.mkdir(parents=True)
            with tempfile.TemporaryFile(dir=work) as spool, _Listing(work, spool) as listing:
                _write_events(reader, work, first, result)
                for invoice_id in chosen:
                    _write_invoice(reader, listing, invoice_id, (first, result.head[0]), earlier)
                listing.add("events.jsonl")
                listing.close_sums()
                manifest = {
                    "format": FORMAT,
                    "invoicectl_version": __version__,
                    "created_at": now.isoformat(),
                    "journal_id": reader.journal_id(),
                    "range": {"since": since, "until": until, "invoices": invoice_ids},
                    "part": number,
                    "chain": {
                        "first_seq": first,
                        "previous_hash": reader.chain_hash(first - 1),
                        "head_seq": result.head[0],
                        "head_hash": result.head[1],
                    },
                    "key_id": key.key_id,
                    "retention_years": retention_years,
                }
                _write_manifest(work / "manifest.json", manifest, listing, chosen)
            with (work / "manifest.json").open("rb", buffering=0) as file:
                data = file.readall()  # sized by fstat: one copy of the manifest in memory
            write_new(work / "manifest.sig", key.sign(data))
            write_new(work / "signing-key.pub", key.public_pem())
            sync_part(work)
            work.rename(target)
            fsync_dir(dest)
        except OSError as error:
            undo_part(work, dest, made)
            raise ExportError(
                f"cannot write the export to {dest}: {error.strerror or error}; nothing was left"
                " behind"
            ) from None
        except BaseException:
            undo_part(work, dest, made)
            raise
    result.part = target
    result.invoices = len(chosen)
    result.files = listing.count
    return result


class _Listing:
    """Every file of the part as it is written: a line of SHA256SUMS, and an entry spooled
    for the manifest (a temporary file, not a list: a part may hold a million files)."""

    def __init__(self, work: Path, spool: IO[bytes]) -> None:
        self.work = work
        self.spool = spool
        self.sums = (work / "SHA256SUMS").open("xb")
        self.count = 0

    def add(self, relative: str) -> None:
        size, sha256 = file_sha256(self.work / relative)
        if not self.sums.closed:
            self.sums.write(f"{sha256}  {relative}\n".encode())
        entry = {"path": relative, "sha256": sha256, "size": size}
        self.spool.write(json.dumps(entry, sort_keys=True, ensure_ascii=False).encode() + b"\n")
        self.count += 1

    def __enter__(self) -> _Listing:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sums.close()

    def close_sums(self) -> None:
        self.sums.close()
        self.add("SHA256SUMS")

    def entries(self) -> Iterator[bytes]:
        self.spool.seek(0)
        for line in self.spool:
            yield line.rstrip(b"\n")


def _write_manifest(
    path: Path, fields: dict[str, Any], listing: _Listing, chosen: list[str]
) -> None:
    """``manifest.json``: the fields with sorted keys, one file entry a line, one invoice a
    line (streamed: the listing comes from the spool)."""
    streamed = {"files", "invoices"}
    with path.open("xb") as out:
        out.write(b"{\n")
        for number, name in enumerate(sorted([*fields, *streamed])):
            out.write(b"," if number else b"")
            out.write(f" {json.dumps(name)}: ".encode())
            if name == "files":
                _write_lines(out, b"[", listing.entries(), b"]")
            elif name == "invoices":
                pairs = (
                    json.dumps(safe_name(invoice_id)).encode()
                    + b": "
                    + json.dumps(invoice_id, ensure_ascii=False).encode()
                    for invoice_id in chosen
                )
                _write_lines(out, b"{", pairs, b"}")
            else:
                value = json.dumps(fields[name], indent=1, sort_keys=True, ensure_ascii=False)
                out.write(value.replace("\n", "\n ").encode())
            out.write(b"\n")
        out.write(b"}\n")


def _write_lines(out: IO[bytes], opening: bytes, lines: Iterator[bytes], closing: bytes) -> None:
    out.write(opening)
    for number, line in enumerate(lines):
        out.write(b",\n  " if number else b"\n  ")
        out.write(line)
    out.write(b"\n " + closing)


def _write_events(reader: AuditReader, work: Path, first: int, result: Exported) -> None:
    """``events.jsonl``: the hash before the segment, then its events, one a line, each
    shown to follow the one before it (``top_up.linked``)."""
    with (work / "events.jsonl").open("xb") as out:
        previous = reader.chain_hash(first - 1)
        out.write(json.dumps({"previous_hash": previous}).encode() + b"\n")
        for event in linked(reader, first, result.head[0]):
            line = {"seq": event.seq, "payload": event.payload, "hash": event.hash}
            out.write(json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n")
            result.events += 1


def _refuse_rows_gone(reader: AuditReader, after: int) -> None:
    """Refuse a journal whose identity, or a row the chain records after ``after``, is gone:
    an invoice with its attempts deleted would be left out of the export without a word. So
    is an event whose kind or invoice column (no hash covers them) is not its payload's: a
    relabelled event hid a deleted row from this check, a refiled one moved a history."""
    if reader.journal_id() is None:
        raise ExportError(
            "the journal's identity row is gone (changed outside invoicectl); nothing was "
            "exported. `invoicectl verify` tells more; a backup restores it"
        )
    if (unlike := reader.first_not_as_payload(after)) is not None:
        seq, column, value, payload_value, invoice_id = unlike
        if column == "invoice_id":
            raise ExportError(
                f"chain event {seq} is filed under another invoice than its payload names "
                "(changed outside invoicectl); nothing was exported. `invoicectl verify` tells "
                "more"
            )
        of = f"invoice {invoice_id}: " if isinstance(invoice_id, str) else ""
        raise ExportError(
            f"{of}chain event {seq} is labelled {value!r}, its payload's kind is"
            f" {payload_value!r} (the label is a column no hash covers: changed outside"
            " invoicectl); nothing was exported. `invoicectl verify` tells more"
        )
    if (gone := reader.first_row_gone(after)) is not None:
        seq, kind, key, invoice_id = gone
        of = f"invoice {invoice_id}: " if invoice_id and kind != "invoice" else ""
        raise ExportError(
            f"{of}{kind} {key} (its row is gone) is in the hash chain (event {seq}) but not in "
            "the journal: deleted outside invoicectl; nothing was exported. `invoicectl "
            "verify` names every such row; a backup restores them"
        )


def _write_invoice(
    reader: AuditReader,
    listing: _Listing,
    invoice_id: str,
    segment: tuple[int, int],
    earlier: list[Path],
) -> None:
    safe = safe_name(invoice_id)
    (listing.work / safe).mkdir()
    attempts = reader.rows_of("attempts", invoice_id)
    sent = {attempt["revision_sha256"] for attempt in attempts}
    unrecorded = [] if reader.row_as_last_chained(invoice_id) else ["its row"]
    unrecorded += reader.rows_not_as_chained(invoice_id)
    if unrecorded:
        raise ExportError(
            f"invoice {invoice_id}: {', '.join(unrecorded[:3])} in the journal "
            f"{'is' if len(unrecorded) == 1 else 'are'} not what the hash chain recorded "
            "(written outside invoicectl?); nothing was exported. `invoicectl verify` names "
            "every such row"
        )
    held_before = held(earlier, invoice_id)
    for sha256 in sorted(sent):
        relative = f"{safe}/{sha256}.xml"
        if held_before(relative):
            continue
        try:
            stored = reader.blob(sha256)
        except (ValueError, RuntimeError):  # packed bytes that cannot be unpacked
            stored = (0, b"")
        if stored is None:  # its bytes gone: a part must carry what was sent, or not be made
            raise ExportError(
                f"invoice {invoice_id}: the stored bytes of content {sha256[:12]}, which it "
                "sent, are missing from the journal; nothing was exported. `invoicectl "
                "verify` names every missing copy; a rescan of the file, or a backup, restores it"
            )
        if hashlib.sha256(stored[1]).hexdigest() != sha256:
            raise ExportError(
                f"invoice {invoice_id}: the stored bytes of content {sha256[:12]} no longer "
                "match their sha256, or cannot be unpacked; nothing was exported. `invoicectl "
                "verify` names every damaged copy; a rescan of the file, or a backup, repairs it"
            )
        write_new(listing.work / relative, stored[1])
        listing.add(relative)
    snapshots = [
        _watched(json.loads(payload)) for payload in reader.invoice_snapshots(invoice_id, *segment)
    ]
    evidence = _evidence(reader, invoice_id, attempts, snapshots, sent)
    data = json.dumps(evidence, indent=1, sort_keys=True, ensure_ascii=False).encode("utf-8")
    write_new(listing.work / safe / "evidence.json", data + b"\n")
    listing.add(f"{safe}/evidence.json")


def _evidence(
    reader: AuditReader,
    invoice_id: str,
    attempts: list[dict[str, Any]],
    snapshots: list[dict[str, Any]],
    sent: set[str],
) -> dict[str, Any]:
    invoice = reader.invoice_row(invoice_id)
    assert invoice is not None  # chosen from the journal's own rows, in the same snapshot
    revisions = [
        {
            "sha256": revision["sha256"],
            "size": revision["size"],
            "first_seen": revision["first_seen"],
            "source_path": revision["source_path"],
            "sent": revision["sha256"] in sent,
        }
        for revision in reader.rows_of("revisions", invoice_id)
    ]
    keys = sorted({(a["idempotency_key"], a["revision_sha256"]) for a in attempts})
    return {
        "invoice_id": invoice_id,
        "current": {name: invoice[name] for name in _CURRENT},
        "revisions": revisions,
        "keys": [{"idempotency_key": key, "revision_sha256": sha256} for key, sha256 in keys],
        "attempts": [{name: attempt[name] for name in _ATTEMPT_FIELDS} for attempt in attempts],
        "decisions": [
            {name: event[name] for name in ("id", "at", "kind", "detail", "run_id")}
            for event in reader.rows_of("events", invoice_id)
        ],
        "history": _history(snapshots),
    }


_CURRENT = (
    "state", "reason", "transaction_id", "existing_transaction_id", "remote_status",
    "remote_checked_at", "accepted_at", "hold", "hold_reason", "verdict", "verdict_at",
    "receiver_scheme", "receiver_id", "document_type", "issue_date", "payable_amount",
    "currency", "due_date", "held_by", "held_at", "key_version", "key_sha256", "current_sha256",
)  # fmt: skip
_WATCHED = ("state", "remote_status", "verdict", "hold")


def _watched(payload: dict[str, Any]) -> dict[str, Any]:
    """What the history keeps of an invoice snapshot."""
    row = payload.get("row") or {}
    return {"seq": payload["seq"], "at": payload["at"], **{n: row.get(n) for n in _WATCHED}}


def _history(snapshots: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each change of state, delivery status, verdict or hold, from the chain's snapshots."""
    watched = _WATCHED
    changes, before = [], dict.fromkeys(watched)
    for snapshot in snapshots:
        now = {name: snapshot[name] for name in watched}
        if now != before:
            changed = {name: now[name] for name in watched if now[name] != before[name]}
            changes.append({"seq": snapshot["seq"], "at": snapshot["at"], **changed})
        before = now
    return changes

"""``invoicectl export DEST``: a signed archive an auditor verifies without invoicectl.

The form is ``manifest``'s. A part is written whole into ``DEST/.NNNN.partial-<pid>``, every
file fsynced, then renamed to ``DEST/NNNN``: a full disk, an unwritable DEST or a stop
leaves no part behind (a ``.partial`` directory of a killed export is removed by the next).
A second export to DEST is a top-up: it adds a part with the invoices whose chain events
came after the last part's head, and the chain segment from there, and changes nothing
already there. Read-only on the journal (``journal.audit.AuditReader``).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from invoicectl import __version__
from invoicectl.audit.manifest import FORMAT, file_sha256, parts, safe_name
from invoicectl.audit.signing import SigningKey
from invoicectl.errors import ExportError, UsageError
from invoicectl.journal.audit import AuditReader

_ATTEMPT_FIELDS = (
    "id", "run_id", "started_at", "finished_at", "idempotency_key", "revision_sha256",
    "body_sha256", "outcome", "http_status", "error_code", "message", "request_id",
    "transaction_id", "existing_transaction_id",
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
    if not journal.is_file():
        raise UsageError(f"no journal file at {journal}")
    result = Exported(dest, key_id=key.key_id)
    with AuditReader(journal) as reader:
        earlier = parts(dest)
        last = _last_head(earlier[-1]) if earlier else 0
        result.head = reader.head()
        chosen = _choose(reader, since, until, invoice_ids, last if earlier else None)
        if not chosen or result.head[0] <= last:
            return result
        first = last + 1 if earlier else (reader.first_event_of(chosen) or 1)
        sent_before = _sent_before(earlier)
        number = int(earlier[-1].name) + 1 if earlier else 1
        _clear_partials(dest)
        work = dest / f".{number:04d}.partial-{os.getpid()}"
        try:
            work.mkdir(parents=True)
            files = _write_part(reader, work, chosen, first, sent_before, result)
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
                "invoices": {safe_name(invoice_id): invoice_id for invoice_id in chosen},
                "key_id": key.key_id,
                "retention_years": retention_years,
                "files": files,
            }
            data = json.dumps(manifest, indent=1, sort_keys=True, ensure_ascii=False).encode()
            _write(work / "manifest.json", data + b"\n")
            _write(work / "manifest.sig", key.sign(data + b"\n"))
            _write(work / "signing-key.pub", key.public_pem())
            _fsync_dir(work)
            target = dest / f"{number:04d}"
            work.rename(target)
            _fsync_dir(dest)
        except OSError as error:
            shutil.rmtree(work, ignore_errors=True)
            raise ExportError(
                f"cannot write the export to {dest}: {error.strerror or error}; nothing was left"
                " behind"
            ) from None
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
    result.part = target
    result.invoices = len(chosen)
    result.files = len(files)
    return result


def _last_head(part: Path) -> int:
    try:
        manifest = json.loads((part / "manifest.json").read_text(encoding="utf-8"))
        return int(manifest["chain"]["head_seq"])
    except (OSError, ValueError, KeyError, TypeError):
        raise ExportError(
            f"{part}/manifest.json cannot be read; run invoicectl verify-export {part.parent}"
        ) from None


def _sent_before(earlier: list[Path]) -> set[str]:
    """``<safe-id>/<sha256>.xml`` of every revision an earlier part holds."""
    held: set[str] = set()
    for part in earlier:
        manifest = json.loads((part / "manifest.json").read_text(encoding="utf-8"))
        held.update(entry["path"] for entry in manifest["files"] if entry["path"].endswith(".xml"))
    return held


def _choose(
    reader: AuditReader,
    since: str | None,
    until: str | None,
    invoice_ids: list[str] | None,
    after: int | None,
) -> list[str]:
    if invoice_ids:
        known = reader.known_invoices(invoice_ids)
        if missing := [invoice_id for invoice_id in invoice_ids if invoice_id not in known]:
            raise UsageError(f"no invoice {missing[0]!r} in the journal {reader.path}")
        chosen = sorted(set(invoice_ids))
    else:
        chosen = reader.sent_invoice_ids(since, until)
    if after is not None:
        changed = reader.changed_after(after)
        chosen = [invoice_id for invoice_id in chosen if invoice_id in changed]
    return chosen


def _clear_partials(dest: Path) -> None:
    if dest.is_dir():
        for child in dest.iterdir():
            if child.name.startswith(".") and ".partial-" in child.name:
                shutil.rmtree(child, ignore_errors=True)


def _write_part(
    reader: AuditReader,
    work: Path,
    chosen: list[str],
    first: int,
    sent_before: set[str],
    result: Exported,
) -> list[dict[str, Any]]:
    files: list[dict[str, Any]] = []
    wanted = set(chosen)
    history: dict[str, list[dict[str, Any]]] = {invoice_id: [] for invoice_id in chosen}
    with (work / "events.jsonl").open("wb") as out:
        previous = reader.chain_hash(first - 1)
        out.write(json.dumps({"previous_hash": previous}).encode() + b"\n")
        for event in reader.chain(after=first - 1):
            line = {"seq": event.seq, "payload": event.payload, "hash": event.hash}
            out.write(json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n")
            result.events += 1
            if event.invoice_id in wanted and event.kind == "invoice":
                history[event.invoice_id].append(_watched(json.loads(event.payload)))
        out.flush()
        os.fsync(out.fileno())
    for invoice_id in chosen:
        files.extend(_write_invoice(reader, work, invoice_id, history[invoice_id], sent_before))
    files.append(_entry(work, "events.jsonl"))
    sums = "".join(f"{entry['sha256']}  {entry['path']}\n" for entry in files)
    _write(work / "SHA256SUMS", sums.encode("utf-8"))
    files.append(_entry(work, "SHA256SUMS"))
    return files


def _write_invoice(
    reader: AuditReader,
    work: Path,
    invoice_id: str,
    snapshots: list[dict[str, Any]],
    sent_before: set[str],
) -> list[dict[str, Any]]:
    safe = safe_name(invoice_id)
    folder = work / safe
    folder.mkdir()
    attempts = reader.rows_of("attempts", invoice_id)
    sent = {attempt["revision_sha256"] for attempt in attempts}
    written = []
    for sha256 in sorted(sent):
        relative = f"{safe}/{sha256}.xml"
        stored = reader.blob(sha256)
        if relative in sent_before or stored is None:
            continue
        _write(work / relative, stored[1])
        written.append(_entry(work, relative))
    evidence = _evidence(reader, invoice_id, attempts, snapshots, sent)
    data = json.dumps(evidence, indent=1, sort_keys=True, ensure_ascii=False).encode("utf-8")
    _write(folder / "evidence.json", data + b"\n")
    written.append(_entry(work, f"{safe}/evidence.json"))
    return written


def _evidence(
    reader: AuditReader,
    invoice_id: str,
    attempts: list[dict[str, Any]],
    snapshots: list[dict[str, Any]],
    sent: set[str],
) -> dict[str, Any]:
    invoice = reader.invoice_row(invoice_id)
    assert invoice is not None  # chosen from the journal's own rows
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
        "current": {
            name: invoice[name]
            for name in (
                "state",
                "reason",
                "transaction_id",
                "existing_transaction_id",
                "remote_status",
                "remote_checked_at",
                "accepted_at",
                "hold",
                "hold_reason",
                "verdict",
                "verdict_at",
                "receiver_scheme",
                "receiver_id",
                "document_type",
                "issue_date",
                "payable_amount",
                "currency",
            )  # fmt: skip
        },
        "revisions": revisions,
        "keys": [{"idempotency_key": key, "revision_sha256": sha256} for key, sha256 in keys],
        "attempts": [{name: attempt[name] for name in _ATTEMPT_FIELDS} for attempt in attempts],
        "decisions": [
            {name: event[name] for name in ("id", "at", "kind", "detail", "run_id")}
            for event in reader.rows_of("events", invoice_id)
        ],
        "history": _history(snapshots),
    }


_WATCHED = ("state", "remote_status", "verdict", "hold")


def _watched(payload: dict[str, Any]) -> dict[str, Any]:
    """What the history keeps of an invoice snapshot (only that: memory stays small)."""
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


def _entry(work: Path, relative: str) -> dict[str, Any]:
    size, sha256 = file_sha256(work / relative)
    return {"path": relative, "size": size, "sha256": sha256}


def _write(path: Path, data: bytes) -> None:
    with path.open("xb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())


def _fsync_dir(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)

"""The JSON documents of the commands that had none (issue 12's output contract): ``show``,
``hold``/``release``/``abandon``, ``backup``, ``export``, ``receivers`` as CSV, and the
sandbox's ready line.

Each is plain data with stable keys, the README's "JSON output" lists them and
``tests/golden/`` holds their shape: a renamed key fails a test. None carries a secret (an
invoice's document never holds the API key) or raw bytes: content is named by its sha256 and
size, an answer by its HTTP status, code, message and request id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from invoicectl.journal.records import Attempt, Event, Invoice, Revision

# ``receivers --format csv``: one row a receiver, its document kinds joined by a space.
RECEIVER_FIELDS = ("receiver", "registered", "takes", "document_types", "checked_at")


def invoice_document(
    record: dict[str, Any],
    invoice: Invoice,
    revisions: Sequence[Revision],
    attempts: Sequence[Attempt],
    events: Sequence[Event],
) -> dict[str, Any]:
    """``show ID --json``: ``record`` (``status``'s record of the invoice, the same keys),
    the content its key was sent with, and every revision, attempt and event, oldest first."""
    return {
        "invoice": {**record, "key_sha256": invoice.key_sha256},
        "revisions": [
            {
                "number": number,
                "sha256": revision.sha256,
                "size": revision.size,
                "first_seen": revision.first_seen,
                "path": revision.source_path,
                "current": revision.sha256 == invoice.current_sha256,
            }
            for number, revision in enumerate(revisions, start=1)
        ],
        "attempts": [_attempt(attempt) for attempt in attempts],
        "events": [
            {"at": event.at, "kind": event.kind, "detail": event.detail, "run_id": event.run_id}
            for event in events
        ],
    }


def _attempt(attempt: Attempt) -> dict[str, Any]:
    """One request as ``show`` reports it; the answer's raw body stays in the journal."""
    return {
        "run_id": attempt.run_id,
        "started_at": attempt.started_at,
        "finished_at": attempt.finished_at,
        "idempotency_key": attempt.idempotency_key,
        "revision_sha256": attempt.revision_sha256,
        "body_sha256": attempt.body_sha256,
        "outcome": attempt.outcome,  # null: no answer recorded
        "http_status": attempt.http_status,
        "error_code": attempt.error_code,
        "message": attempt.message,
        "transaction_id": attempt.transaction_id,
        "existing_transaction_id": attempt.existing_transaction_id,
        "retry_after": attempt.retry_after,
        "request_id": attempt.request_id,
        "duration": attempt.duration,
    }


def decisions_document(
    action: str, dry_run: bool, decisions: Iterable[Any], exit_code: int
) -> dict[str, Any]:
    """``hold/release/abandon --json``: per invoice whether it changed (``done``) and the
    message that says what changed, or why not."""
    listed = [
        {"invoice_id": decision.invoice_id, "done": decision.done, "message": decision.message}
        for decision in decisions
    ]
    return {
        "action": action,
        "dry_run": dry_run,
        "decisions": listed,
        "changed": sum(1 for decision in listed if decision["done"]),
        "refused": sum(1 for decision in listed if not decision["done"]),
        "exit_code": exit_code,
    }


def backup_document(result: Any) -> dict[str, Any]:
    """``backup --json``: the copy made (integrity-checked, else it is an error)."""
    return {
        "source": str(result.source),
        "destination": str(result.destination),
        "size": result.size,
        "invoices": result.invoices,
        "runs": result.runs,
        "integrity": "ok",
        "exit_code": 0,
    }


def export_document(done: Any, retired: str | None) -> dict[str, Any]:
    """``export --json``: the part written (null when nothing was new), its counts, the
    chain head it reaches, the key it was signed with and the one ``--rotate-key`` retired."""
    return {
        "destination": str(done.dest),
        "part": None if done.part is None else str(done.part),
        "invoices": done.invoices,
        "files": done.files,
        "events": done.events,
        "head": {"seq": done.head[0], "hash": done.head[1]},
        "key_id": done.key_id,
        "retired_key": retired or done.retired_key,
        "notes": list(done.notes),
        "exit_code": 0,
    }


def receiver_row(record: dict[str, Any]) -> dict[str, Any]:
    """A receiver's record as one CSV row."""
    return {
        **record,
        "registered": "yes" if record["registered"] else "no",
        "takes": " ".join(record["takes"]),
        "document_types": " ".join(record["document_types"]),
    }


def sandbox_document(base_url: str, api_key: str) -> dict[str, Any]:
    """``sandbox --json``: where the emulator listens and its (sandbox-only) key."""
    return {"base_url": base_url, "api_key": api_key}

"""The write-ahead side of the journal: runs, attempts, keys and the environment binding.

The order of writes is the whole point (design.md, "Idempotency"):

1. the key and the content it carries are committed before the first request that uses it;
2. an attempt row is committed before its request leaves;
3. the answer is committed as soon as it arrives, together with the invoice's new state.

A crash between 2 and 3 leaves an attempt without an outcome; the next run turns it into
``unknown`` and replays it under the same key with the same bytes while the key's 24-hour
window is open.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from invoicectl.errors import EnvironmentMismatch, ExitCode, UsageError, worst
from invoicectl.goroute.outcomes import (
    Accepted,
    AuthRefused,
    KeyReused,
    Outcome,
    RateLimited,
    Rejected,
    Transient,
)
from invoicectl.journal import Journal
from invoicectl.lifecycle.keys import idempotency_key

KEY_WINDOW = timedelta(hours=24)
# A replay must land inside the window, not merely start there.
REPLAY_MARGIN = timedelta(minutes=10)

# States an operator may move to a new key with ``send --new-version``.
NEW_VERSION_STATES = ("amended", "key_reused", "unknown", "rejected", "accepted")


@dataclass(frozen=True)
class WorkItem:
    invoice_id: str
    key: str
    sha256: str  # the content the key carries
    receiver_scheme: str
    receiver_id: str
    ingested_at: str
    replay: bool  # an unanswered send, replayed under its key


@dataclass(frozen=True)
class Plan:
    replays: tuple[str, ...]  # unknown, key window open: replayed first
    pending: tuple[str, ...]  # never answered yet: sent in the order they arrived
    held: tuple[str, ...]  # unknown with the window closed: left for reconcile


# ---- the environment binding --------------------------------------------------------------


def check_environment(journal: Journal, base_url: str, *, allow_change: bool) -> str | None:
    """The base URL the journal is bound to (None: not yet); another is refused unless allowed."""
    row = journal.db.execute("SELECT base_url FROM environment WHERE id = 1").fetchone()
    bound = None if row is None else str(row[0])
    if bound is not None and bound != base_url and not allow_change:
        raise EnvironmentMismatch(
            f"the journal {journal.path} is bound to {bound}, not {base_url}; keys and "
            "transactions of one environment mean nothing in another. Use another --journal, "
            "or --allow-environment-change if this is intended"
        )
    return bound


def bind_environment(journal: Journal, base_url: str, *, allow_change: bool) -> None:
    """A journal sends to one base URL; another is refused unless explicitly allowed."""
    bound = check_environment(journal, base_url, allow_change=allow_change)
    if bound == base_url:
        return
    row = None if bound is None else (bound,)
    with journal.transaction():
        journal.db.execute(
            "INSERT INTO environment (id, base_url, bound_at) VALUES (1, ?, ?)"
            " ON CONFLICT(id) DO UPDATE SET base_url = excluded.base_url,"
            " bound_at = excluded.bound_at",
            (base_url, journal.now()),
        )
        if row is not None:
            journal.add_event(None, "environment_change", f"{row[0]} -> {base_url}")


# ---- runs ---------------------------------------------------------------------------------


def begin_run(
    journal: Journal,
    command: str,
    options: dict[str, Any],
    *,
    base_url: str | None = None,
    key_fingerprint: str | None = None,
) -> int:
    cursor = journal.db.execute(
        "INSERT INTO runs (command, options, base_url, key_fingerprint, pid, host, started_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            command,
            json.dumps(options, sort_keys=True, default=str),
            base_url,
            key_fingerprint,
            os.getpid(),
            socket.gethostname(),
            journal.now(),
        ),
    )
    run_id = cursor.lastrowid
    assert run_id is not None
    return run_id


def finish_run(journal: Journal, run_id: int, exit_code: int, summary: dict[str, Any]) -> None:
    journal.db.execute(
        "UPDATE runs SET finished_at = ?, exit_code = ?, summary = ? WHERE id = ?",
        (journal.now(), exit_code, json.dumps(summary, default=str), run_id),
    )


# ---- before sending -----------------------------------------------------------------------


def close_unanswered(journal: Journal) -> list[str]:
    """Attempts a dead run left without an answer: the invoice's outcome is now unknown."""
    rows = journal.db.execute(
        "SELECT id, invoice_id FROM attempts WHERE outcome IS NULL ORDER BY id"
    ).fetchall()
    invoice_ids: list[str] = []
    with journal.transaction():
        for attempt_id, invoice_id in rows:
            journal.db.execute(
                "UPDATE attempts SET outcome = 'no_answer', finished_at = ?,"
                " message = 'the run ended before an answer was recorded' WHERE id = ?",
                (journal.now(), attempt_id),
            )
            state = journal.db.execute(
                "SELECT state FROM invoices WHERE invoice_id = ?", (invoice_id,)
            ).fetchone()[0]
            if state == "pending":
                journal.update_invoice(
                    invoice_id,
                    state="unknown",
                    reason="a request went out and no answer was recorded (the run stopped)",
                )
            if invoice_id not in invoice_ids:
                invoice_ids.append(invoice_id)
    return invoice_ids


def window_open(first_used_at: str | None, now: datetime) -> bool:
    """Whether a replay under the key would still be protected by its 24-hour window."""
    if first_used_at is None:
        return True  # the key never left: nothing to protect against
    return now - datetime.fromisoformat(first_used_at) < KEY_WINDOW - REPLAY_MARGIN


def recent_starts(journal: Journal, seconds: float) -> list[float]:
    """How long ago (seconds) each request of the last ``seconds`` started."""
    now = journal.clock()
    since = (now - timedelta(seconds=seconds)).isoformat()
    return [
        (now - datetime.fromisoformat(started)).total_seconds()
        for (started,) in journal.db.execute(
            "SELECT started_at FROM attempts WHERE started_at >= ?", (since,)
        ).fetchall()
    ]


def key_window_open(journal: Journal, item: WorkItem) -> bool:
    """Checked again just before each request: a replay may have waited a long time."""
    row = journal.db.execute(
        "SELECT key_first_used_at FROM invoices WHERE invoice_id = ?", (item.invoice_id,)
    ).fetchone()
    return window_open(row[0], journal.clock())


def plan(journal: Journal, now: datetime) -> Plan:
    """Replays first (unanswered sends whose key window is open), then new sends.

    A ``pending`` invoice whose key has already been used (a request may have reached the
    API) is treated like an unanswered one: replayed inside its window, held after it.
    """
    replays: list[str] = []
    held: list[str] = []
    for invoice_id, first_used_at in journal.db.execute(
        "SELECT invoice_id, key_first_used_at FROM invoices WHERE state = 'unknown'"
        " OR (state = 'pending' AND key_first_used_at IS NOT NULL)"
        " ORDER BY key_first_used_at, invoice_id"
    ).fetchall():
        (replays if window_open(first_used_at, now) else held).append(invoice_id)
    pending = [
        row[0]
        for row in journal.db.execute(
            "SELECT invoice_id FROM invoices WHERE state = 'pending'"
            " AND key_first_used_at IS NULL ORDER BY ingested_at, invoice_id"
        ).fetchall()
    ]
    return Plan(tuple(replays), tuple(pending), tuple(held))


def attention(journal: Journal, now: datetime) -> ExitCode:
    """What the journal's states ask of a person: 3 fix, 4 reconcile, 75 the next run."""
    counts = journal.state_counts()
    held = plan(journal, now).held
    codes = [ExitCode.OK]
    if counts["key_reused"] or counts["amended"] or held:
        codes.append(ExitCode.NEEDS_RECONCILE)
    if counts["invalid"] or counts["rejected"]:
        codes.append(ExitCode.NEEDS_FIX)
    if counts["pending"] or counts["unknown"] > len(held):
        codes.append(ExitCode.INCOMPLETE)  # sent, or replayed safely, by the next send
    return worst(*codes)


def check_new_version(journal: Journal, invoice_id: str, now: datetime) -> sqlite3.Row:
    """Refuse ``--new-version`` where a new key could deliver the invoice twice."""
    row = journal.invoice(invoice_id)
    if row is None:
        raise UsageError(f"no invoice {invoice_id!r} in the journal {journal.path}")
    state = row["state"]
    if state == "unknown" and window_open(row["key_first_used_at"], now):
        raise UsageError(
            f"invoice {invoice_id} is unknown and its key's 24-hour window is still open: "
            "`invoicectl send` replays it safely under the same key; a new key could "
            "deliver it twice"
        )
    if state not in NEW_VERSION_STATES or (
        state == "accepted" and row["remote_status"] != "failed"
    ):
        raise UsageError(
            f"invoice {invoice_id} is {state}; --new-version is for amended, rejected, "
            "key_reused and unknown invoices after `invoicectl reconcile` has shown what "
            "GoRoute holds, and for accepted invoices whose delivery failed"
        )
    return row


def new_version(journal: Journal, invoice_id: str, run_id: int) -> str:
    """The operator's explicit decision: send the current content under the next key."""
    row = check_new_version(journal, invoice_id, journal.clock())
    version = row["key_version"] + 1
    key = idempotency_key(invoice_id, version)
    with journal.transaction():
        journal.update_invoice(
            invoice_id,
            state="pending",
            reason=None,
            key_version=version,
            idempotency_key=None,
            key_sha256=None,
            key_first_used_at=None,
            state_before_amend=None,
            transaction_id=None,
            existing_transaction_id=None,
            remote_status=None,
            ingested_at=journal.now(),
        )
        journal.add_event(
            invoice_id,
            "new_version",
            f"operator chose to send content {row['current_sha256'][:12]} under {key} "
            f"(was {row['state']} under {row['idempotency_key']})",
            run_id,
        )
    return key


# ---- one invoice --------------------------------------------------------------------------


def claim(journal: Journal, invoice_id: str, *, replay: bool) -> WorkItem:
    """The key and content to send, committing the key first if this is its first use."""
    row = journal.invoice(invoice_id)
    assert row is not None
    key, sha256 = row["idempotency_key"], row["key_sha256"]
    if key is None:
        key = idempotency_key(invoice_id, row["key_version"])
        sha256 = row["current_sha256"]
        journal.update_invoice(invoice_id, idempotency_key=key, key_sha256=sha256)
    # The receiver of the content the key carries, not of whatever the file says now.
    receiver = journal.facts(invoice_id, sha256)["customer_endpoint"]
    return WorkItem(
        invoice_id=invoice_id,
        key=key,
        sha256=sha256,
        receiver_scheme=receiver["scheme"],
        receiver_id=receiver["id"],
        ingested_at=row["ingested_at"],
        replay=replay,
    )


def begin_attempt(journal: Journal, run_id: int, item: WorkItem, body_sha256: str) -> int:
    now = journal.now()
    with journal.transaction():
        cursor = journal.db.execute(
            "INSERT INTO attempts (run_id, invoice_id, revision_sha256, idempotency_key,"
            " body_sha256, started_at) VALUES (?, ?, ?, ?, ?, ?)",
            (run_id, item.invoice_id, item.sha256, item.key, body_sha256, now),
        )
        journal.db.execute(
            "UPDATE invoices SET key_first_used_at = ? WHERE invoice_id = ?"
            " AND key_first_used_at IS NULL",
            (now, item.invoice_id),
        )
    attempt_id = cursor.lastrowid
    assert attempt_id is not None
    return attempt_id


def finish_attempt(journal: Journal, attempt_id: int, outcome: Outcome) -> None:
    journal.db.execute(
        "UPDATE attempts SET finished_at = ?, outcome = ?, http_status = ?, error_code = ?,"
        " message = ?, transaction_id = ?, existing_transaction_id = ?, retry_after = ?,"
        " request_id = ?, raw_body = ?, duration = ? WHERE id = ?",
        (
            journal.now(),
            outcome_name(outcome),
            outcome.http_status,
            getattr(outcome, "code", None),
            _message(outcome),
            getattr(outcome, "transaction_id", None),
            getattr(outcome, "existing_transaction_id", None),
            getattr(outcome, "retry_after", None),
            outcome.request_id,
            outcome.raw_body,
            outcome.duration,
            attempt_id,
        ),
    )


def settle(journal: Journal, item: WorkItem, outcome: Outcome | None) -> str:
    """Record what the request came to in the invoice's state; return the state."""
    invoice_id = item.invoice_id
    match outcome:
        case Accepted(transaction_id=transaction_id):
            journal.update_invoice(
                invoice_id,
                state="accepted",
                reason=None,
                transaction_id=transaction_id,
                accepted_at=journal.now(),
            )
            return "accepted"
        case KeyReused(existing_transaction_id=existing):
            journal.update_invoice(
                invoice_id,
                state="key_reused",
                existing_transaction_id=existing,
                reason=f"key {item.key} already carried another request"
                + (f" (transaction {existing})" if existing else "")
                + "; run `invoicectl reconcile`",
            )
            return "key_reused"
        case Rejected():
            journal.update_invoice(invoice_id, state="rejected", reason=_message(outcome))
            return "rejected"
        case Transient():
            return _settle_unanswered(
                journal,
                item,
                f"no answer after retries: {_message(outcome)}; the next run replays it "
                "while the key's 24-hour window is open",
            )
        case _:
            # Not tried, stopped, rate limited to the end, or credentials refused.
            return _settle_unanswered(journal, item)


def record_answer(journal: Journal, attempt_id: int, item: WorkItem, outcome: Outcome) -> None:
    """The answer, and for a final one the invoice's new state, in one transaction: a crash
    can never leave an accepted attempt under an invoice that still looks unsent."""
    with journal.transaction():
        finish_attempt(journal, attempt_id, outcome)
        if isinstance(outcome, Accepted | KeyReused | Rejected):
            settle(journal, item, outcome)


# Attempts whose request the API refused unread, or that never left: they use no key.
_NOT_PROCESSED = ("auth_refused", "rate_limited", "not_sent")


def _settle_unanswered(journal: Journal, item: WorkItem, reason: str | None = None) -> str:
    """No final answer. If no request under the key reached the API, the key was never
    used: give it back. If one may have, the outcome is unknown, whatever came after."""
    (reached,) = journal.db.execute(
        "SELECT count(*) FROM attempts WHERE invoice_id = ? AND idempotency_key = ?"
        " AND (outcome IS NULL OR outcome NOT IN (?, ?, ?))",
        (item.invoice_id, item.key, *_NOT_PROCESSED),
    ).fetchone()
    row = journal.invoice(item.invoice_id)
    assert row is not None
    if reached == 0:
        journal.update_invoice(
            item.invoice_id, idempotency_key=None, key_sha256=None, key_first_used_at=None
        )
    elif row["state"] == "pending":
        journal.update_invoice(
            item.invoice_id,
            state="unknown",
            reason=reason
            or "a request may have reached GoRoute and no final answer came; "
            "the next run replays it while the key's 24-hour window is open",
        )
        return "unknown"
    return str(row["state"])


def outcome_name(outcome: Outcome) -> str:
    if isinstance(outcome, Transient) and not outcome.sent:
        return "not_sent"
    return {
        Accepted: "accepted",
        RateLimited: "rate_limited",
        Rejected: "rejected",
        KeyReused: "key_reused",
        AuthRefused: "auth_refused",
        Transient: "transient",
    }.get(type(outcome), type(outcome).__name__.lower())


def _message(outcome: Outcome) -> str | None:
    match outcome:
        case Rejected(code=code, message=message, details=details):
            parts = [f"HTTP {outcome.http_status}"]
            if code:
                parts.append(code)
            text = " ".join(parts) + (f": {message}" if message else "")
            if details:
                text += " (" + "; ".join(details[:5]) + ")"
            return text
        case KeyReused(message=message) | AuthRefused(message=message):
            return message or None
        case Transient(reason=reason):
            return reason
        case RateLimited(retry_after=retry_after):
            return f"rate limited (Retry-After {retry_after})"
        case _:
            return None

"""The transitions a send drives, in the order of writes that is the whole point
(design.md, "Idempotency"):

1. the key and the content it carries are chosen (``claim_key``) and committed together with
   the first attempt row that carries them, before that request leaves (``begin_attempt``): a
   run stopped while it waits for the rate limiter has used no key, and a key in the journal
   always means a request under it went out ("was sent" is "an attempt row exists", which
   ``key_first_used_at`` records in the same transaction);
2. an attempt row is committed before its request leaves (``begin_attempt``);
3. the answer is committed as soon as it arrives, together with the invoice's new state
   (``record_answer``).

A crash between 2 and 3 leaves an attempt without an outcome; the next run turns it into
``unknown`` (``close_unanswered``) and replays it under the same key with the same bytes while
the key's 24-hour window is open.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from invoicectl.goroute.outcomes import (
    Accepted,
    AuthRefused,
    KeyReused,
    Outcome,
    RateLimited,
    Rejected,
    Transient,
    WrongEndpoint,
)
from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import AttemptAnswer, Invoice, InvoiceState
from invoicectl.lifecycle.evidence import refuse_first_send
from invoicectl.lifecycle.keys import idempotency_key
from invoicectl.lifecycle.refusals import NOT_PROCESSED
from invoicectl.lifecycle.transitions import Transition, TransitionRefused, check, current, write
from invoicectl.lifecycle.window import window_open


@dataclass(frozen=True)
class WorkItem:
    invoice_id: str
    key: str
    sha256: str  # the content the key carries
    receiver_scheme: str
    receiver_id: str
    ingested_at: str
    replay: bool  # an unanswered send, replayed under its key
    # The invoice as ``claim_key`` read it: the sender's checks before the first request
    # (the receiver, the validation, the key's window) read it from here, not the journal.
    invoice: Invoice | None = field(default=None, compare=False, repr=False)


def claim_key(journal: JournalBackend, invoice_id: str, *, replay: bool) -> WorkItem:
    """The key and content to send: the key in use, else the next one for the current
    content. Nothing is written: a new key is committed by the first request that carries
    it (``begin_attempt``), so a run stopped before that request has used no key."""
    invoice = current(journal, invoice_id)
    check(Transition.claim_key, invoice)
    key, sha256 = invoice.idempotency_key, invoice.key_sha256
    if key is None:
        key = idempotency_key(invoice_id, invoice.key_version)
        sha256 = invoice.current_sha256
    assert sha256 is not None  # a key is committed with the content it carries
    # The receiver of the content the key carries, not of whatever the file says now.
    receiver = journal.facts(invoice_id, sha256)["customer_endpoint"]
    return WorkItem(
        invoice_id=invoice_id,
        key=key,
        sha256=sha256,
        receiver_scheme=receiver["scheme"],
        receiver_id=receiver["id"],
        ingested_at=invoice.ingested_at,
        replay=replay,
        invoice=invoice,
    )


def key_window_open(
    journal: JournalBackend, item: WorkItem, invoice: Invoice | None = None
) -> bool:
    """Checked again just before each request: a replay may have waited a long time.
    ``invoice``: the record as this send last read or wrote it (else it is read)."""
    record = invoice or current(journal, item.invoice_id)
    if record.key_first_used_at is None:  # no request under the key yet: a first send
        return record.state is InvoiceState.pending
    return window_open(record.key_first_used_at, journal.clock())


def begin_attempt(
    journal: JournalBackend, run_id: int, item: WorkItem, body_sha256: str
) -> tuple[int, Invoice]:
    """The write-ahead row, committed before the request leaves; the first one under a key
    commits the key and the content it carries, and starts the key's 24-hour window, in the
    same transaction. Returns the attempt's id and the invoice as this leaves it.

    The invoice is read here, inside the write's transaction, whatever the caller holds: the
    key and bytes about to leave are checked against the journal itself."""
    now = journal.now()
    with journal.transaction():
        invoice = current(journal, item.invoice_id)
        check(Transition.use_key, invoice)
        _check_same_key(invoice, item)
        refuse_first_send(journal, invoice)
        attempt_id = journal.begin_attempt(
            run_id, item.invoice_id, item.sha256, item.key, body_sha256, started_at=now
        )
        if invoice.key_first_used_at is None:
            invoice = write(
                journal,
                Transition.use_key,
                invoice,
                touch=False,
                idempotency_key=item.key,
                key_sha256=item.sha256,
                key_first_used_at=now,
            )
    return attempt_id, invoice


def replay_problem(journal: JournalBackend, item: WorkItem, body_sha256: str) -> str | None:
    """Why a replay may not go out, or None. Its key carried a request GoRoute may have
    taken (else the key is new to GoRoute: the journal changed by hand), and it carries a body
    that may have reached GoRoute under it (design.md, Idempotency rule 2; one read otherwise
    by an upgrade never goes out, under that key or another)."""
    taken = [a for a in journal.attempts(item.invoice_id) if a.outcome not in NOT_PROCESSED]
    earlier = {attempt.body_sha256 for attempt in taken if attempt.idempotency_key == item.key}
    if not earlier:
        return (
            f"no request of invoice {item.invoice_id} that GoRoute may have taken went out "
            f"under {item.key}, the key the journal holds for it (changed outside "
            "invoicectl?); nothing was sent: `invoicectl verify` checks the journal, "
            "`invoicectl show` lists the keys its requests carried"
        )
    if body_sha256 in earlier:
        return None
    return (
        f"the request built now differs from the one sent under {item.key} (body "
        f"{body_sha256[:12]}, sent {', '.join(sorted(h[:12] for h in earlier))}); nothing "
        "was sent: after the key's 24-hour window, `invoicectl reconcile` looks it up"
    )


def _check_same_key(invoice: Invoice, item: WorkItem) -> None:
    """The request carries the key and content the journal holds for the invoice (or, for a
    first use, the content it would send now): anything else is a bug, never sent."""
    if invoice.idempotency_key is None:
        expected = (
            idempotency_key(invoice.invoice_id, invoice.key_version),
            invoice.current_sha256,
        )
    else:
        expected = (invoice.idempotency_key, invoice.key_sha256 or "")
    if (item.key, item.sha256) != expected:
        raise TransitionRefused(
            f"invoice {invoice.invoice_id} changed since its send was prepared "
            f"(key {item.key}); nothing was sent"
        )


def abandon_attempt(journal: JournalBackend, attempt_id: int, why: str | None) -> None:
    """A request given up on before its answer came (the deadline, a signal): it may have
    reached GoRoute, so its invoice is settled as unknown (``settle(..., None)``)."""
    journal.finish_attempt(
        attempt_id,
        AttemptAnswer(
            outcome="no_answer",
            message=f"abandoned in flight ({why or 'the run stopped'}) before an answer came",
        ),
    )


def withdraw_attempt(journal: JournalBackend, attempt_id: int, why: str | None) -> None:
    """A write-ahead row whose request never left (the run was abandoned while the row was
    being committed): no API saw its key, so ``settle(..., None)`` may give the key back."""
    journal.finish_attempt(
        attempt_id,
        AttemptAnswer(
            outcome="not_sent",
            message=f"withdrawn before its request left ({why or 'the run stopped'})",
        ),
    )


def record_answer(
    journal: JournalBackend,
    attempt_id: int,
    item: WorkItem,
    outcome: Outcome,
    was: Invoice | None = None,
) -> Invoice | None:
    """The answer, and for a final one the invoice's new state, in one transaction: a crash
    can never leave an accepted attempt under an invoice that still looks unsent. Returns
    the invoice as a final answer left it (None for any other answer).

    ``was``: the invoice as ``begin_attempt`` left it, written over on condition that the row
    still holds its state and key (``Journal.save``): no read, and no stale overwrite."""
    with journal.transaction():
        journal.finish_attempt(attempt_id, answer_of(outcome))
        if isinstance(outcome, Accepted | KeyReused | Rejected):
            return _answered(journal, item, outcome, was or current(journal, item.invoice_id))
    return None


def settled_unanswered(
    journal: JournalBackend, item: WorkItem, outcome: Outcome | None, *, tried: bool
) -> Invoice | None:
    """A send that ended with no final answer, settled: its key goes back, unless a try may
    have reached GoRoute (a 5xx, a time-out): then it is unknown, and returned if ``tried``
    in this run (a replay stopped before its try is no result of the run)."""
    if settle(journal, item, outcome) is not InvoiceState.unknown or not tried:
        return None
    return current(journal, item.invoice_id)


def settle(journal: JournalBackend, item: WorkItem, outcome: Outcome | None) -> InvoiceState:
    """Record what the request came to in the invoice's state; return the state."""
    if isinstance(outcome, Accepted | KeyReused | Rejected):
        return _answered(journal, item, outcome, current(journal, item.invoice_id)).state
    match outcome:
        case Transient():
            return _settle_key(
                journal,
                item.invoice_id,
                item.key,
                f"no answer after retries: {message_of(outcome)}; the next run replays it "
                "while the key's 24-hour window is open",
            )
        case _:
            # Not tried, stopped, rate limited to the end, or credentials refused.
            return _settle_key(journal, item.invoice_id, item.key)


def _answered(
    journal: JournalBackend,
    item: WorkItem,
    outcome: Accepted | KeyReused | Rejected,
    invoice: Invoice,
) -> Invoice:
    """A final answer in the invoice's state, written over ``invoice``."""
    match outcome:
        case Accepted(transaction_id=transaction_id):
            return write(
                journal,
                Transition.record_answer,
                invoice,
                state=InvoiceState.accepted,
                reason=None,
                transaction_id=transaction_id,
                accepted_at=journal.now(),
            )
        case KeyReused(existing_transaction_id=existing):
            return write(
                journal,
                Transition.record_answer,
                invoice,
                state=InvoiceState.key_reused,
                existing_transaction_id=existing,
                reason=f"key {item.key} already carried another request"
                + (f" (transaction {existing})" if existing else "")
                + "; run `invoicectl reconcile`",
            )
        case _:
            return write(
                journal,
                Transition.record_answer,
                invoice,
                state=InvoiceState.rejected,
                reason=message_of(outcome),
            )


def _settle_key(
    journal: JournalBackend, invoice_id: str, key: str, reason: str | None = None
) -> InvoiceState:
    """No final answer. If no request under the key reached the API, the key was never
    used: give it back. If one may have, the outcome is unknown, whatever came after."""
    reached = journal.count_attempts(invoice_id, key, except_outcomes=NOT_PROCESSED)
    invoice = current(journal, invoice_id)
    if reached == 0 and invoice.idempotency_key is None:  # no request ever carried it
        return invoice.state
    if reached == 0:
        write(
            journal,
            Transition.release_key,
            invoice,
            idempotency_key=None,
            key_sha256=None,
            key_first_used_at=None,
        )
    elif invoice.state is InvoiceState.pending:
        mark_unknown(
            journal,
            invoice_id,
            reason
            or "a request may have reached GoRoute and no final answer came; "
            "the next run replays it while the key's 24-hour window is open",
        )
        return InvoiceState.unknown
    return invoice.state


def mark_unknown(journal: JournalBackend, invoice_id: str, reason: str) -> None:
    write(
        journal,
        Transition.mark_unknown,
        current(journal, invoice_id),
        state=InvoiceState.unknown,
        reason=reason,
    )


def close_unanswered(journal: JournalBackend) -> list[str]:
    """Attempts a dead run left without an answer: the invoice's outcome is now unknown."""
    invoice_ids: list[str] = []
    with journal.transaction():
        for attempt in journal.unanswered_attempts():
            journal.finish_attempt(
                attempt.id,
                AttemptAnswer(
                    outcome="no_answer", message="the run ended before an answer was recorded"
                ),
            )
            if current(journal, attempt.invoice_id).state is InvoiceState.pending:
                mark_unknown(
                    journal,
                    attempt.invoice_id,
                    "a request went out and no answer was recorded (the run stopped)",
                )
            if attempt.invoice_id not in invoice_ids:
                invoice_ids.append(attempt.invoice_id)
        # A run killed between two tries of an invoice (in its retry's wait, after an answer
        # of 5xx or 429) left it pending under a used key: settled as that run would have.
        for invoice_id, key in journal.keys_left_pending():
            left = _settle_key(
                journal,
                invoice_id,
                key,
                "a request may have reached GoRoute and the run stopped before a final "
                "answer; the next run replays it while the key's 24-hour window is open",
            )
            if left is InvoiceState.unknown and invoice_id not in invoice_ids:
                invoice_ids.append(invoice_id)
    return invoice_ids


def answer_of(outcome: Outcome) -> AttemptAnswer:
    """An outcome as the journal records it on its attempt row."""
    return AttemptAnswer(
        outcome=outcome_name(outcome),
        http_status=outcome.http_status,
        error_code=getattr(outcome, "code", None),
        message=message_of(outcome),
        transaction_id=getattr(outcome, "transaction_id", None),
        existing_transaction_id=getattr(outcome, "existing_transaction_id", None),
        retry_after=getattr(outcome, "retry_after", None),
        request_id=outcome.request_id,
        raw_body=outcome.raw_body,
        duration=outcome.duration,
    )


def outcome_name(outcome: Outcome) -> str:
    if isinstance(outcome, Transient) and not outcome.sent:
        return "not_sent"
    return {
        Accepted: "accepted",
        RateLimited: "rate_limited",
        Rejected: "rejected",
        KeyReused: "key_reused",
        AuthRefused: "auth_refused",
        WrongEndpoint: "wrong_endpoint",
        Transient: "transient",
    }.get(type(outcome), type(outcome).__name__.lower())


def message_of(outcome: Outcome) -> str | None:
    match outcome:
        case Rejected(code=code, message=message, details=details):
            parts = [f"HTTP {outcome.http_status}"]
            if code:
                parts.append(code)
            text = " ".join(parts) + (f": {message}" if message else "")
            if details:
                text += " (" + "; ".join(details[:5]) + ")"
            return text
        case (
            KeyReused(message=message)
            | AuthRefused(message=message)
            | WrongEndpoint(message=message)
        ):
            return message or None
        case Transient(reason=reason):
            return reason
        case RateLimited(retry_after=retry_after):
            return f"rate limited (Retry-After {retry_after})"
        case _:
            return None

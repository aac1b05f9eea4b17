"""The verdicts reconcile reaches and the plain data a verdict is delivered in.

``Verdict`` names what happened to an invoice; ``GUIDANCE`` says what each one means for the
operator (a title, whether a person must act, the next step, the exit code, whether
``--apply`` may adopt it); ``VERDICT_ORDER`` is the order the groups are shown in. A ``Case``
carries one invoice's verdict with both sides of the story: ``JournalSide`` (what the journal
holds and tried to send) and ``ApiSide`` (what GoRoute holds). Nothing here asks GoRoute or
touches the journal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from invoicectl.errors import ExitCode
from invoicectl.goroute.client import Transaction


class Verdict(StrEnum):
    already_sent = "already_sent"
    sent_then_failed = "sent_then_failed"
    different_document = "different_document"
    not_found = "not_found"
    in_progress = "in_progress"
    unknown_found = "unknown_found"
    unknown_ambiguous = "unknown_ambiguous"
    unknown_sent_earlier = "unknown_sent_earlier"
    unknown_not_found_window_open = "unknown_not_found_window_open"
    unknown_not_found_window_closed = "unknown_not_found_window_closed"
    unknown_search_incomplete = "unknown_search_incomplete"
    amended = "amended"
    delivered = "delivered"
    delivery_failed = "delivery_failed"
    delivery_pending = "delivery_pending"
    needs_decision = "needs_decision"
    lookup_failed = "lookup_failed"


@dataclass(frozen=True)
class Guidance:
    """What a verdict means for the operator: a title, who acts, and the group's next step."""

    title: str
    needs_person: bool
    next_step: str
    exit_code: ExitCode
    adoptable: bool = False


GUIDANCE: Mapping[Verdict, Guidance] = {
    Verdict.already_sent: Guidance(
        "already sent",
        False,
        "`invoicectl reconcile --apply` adopts the existing transaction; nothing to resend",
        ExitCode.NEEDS_RECONCILE,
        adoptable=True,
    ),
    Verdict.sent_then_failed: Guidance(
        "sent, then failed",
        True,
        "delivery failed; send it again under a new key: `invoicectl send DIR --new-version ID`",
        ExitCode.NEEDS_RECONCILE,
    ),
    Verdict.different_document: Guidance(
        "different document",
        True,
        "investigate: the key carried another document (key collision); nothing was sent "
        "for this invoice under it",
        ExitCode.NEEDS_RECONCILE,
    ),
    Verdict.not_found: Guidance(
        "not found",
        True,
        "investigate: GoRoute does not know the transaction id; ask GoRoute support",
        ExitCode.NEEDS_RECONCILE,
    ),
    Verdict.in_progress: Guidance(
        "still in progress",
        False,
        "wait, then run `invoicectl reconcile` again",
        ExitCode.INCOMPLETE,
    ),
    Verdict.unknown_found: Guidance(
        "unanswered, found",
        False,
        "`invoicectl reconcile --apply` adopts the transaction found; nothing to resend",
        ExitCode.NEEDS_RECONCILE,
        adoptable=True,
    ),
    Verdict.unknown_ambiguous: Guidance(
        "unanswered, found more than once",
        True,
        "investigate: several transactions carry this invoice number and receiver "
        "(already delivered more than once?)",
        ExitCode.NEEDS_RECONCILE,
    ),
    Verdict.unknown_sent_earlier: Guidance(
        "unanswered, found only an earlier send",
        True,
        "investigate: GoRoute holds this invoice number for this receiver from before this "
        "journal's first attempt (sent by something else, or earlier); this journal's own send "
        "was not found. Do not send it again until you know the customer does not have it",
        ExitCode.NEEDS_RECONCILE,
    ),
    Verdict.unknown_not_found_window_open: Guidance(
        "unanswered, not found, window open",
        False,
        "`invoicectl send DIR` replays it under the same key, safe until the window closes",
        ExitCode.INCOMPLETE,
    ),
    Verdict.unknown_not_found_window_closed: Guidance(
        "unanswered, not found, window closed",
        True,
        "confirm with GoRoute that it was never delivered (a resend now could deliver a "
        "duplicate), then `invoicectl send DIR --new-version ID`",
        ExitCode.NEEDS_RECONCILE,
    ),
    Verdict.unknown_search_incomplete: Guidance(
        "unanswered, not found in an incomplete search, window closed",
        True,
        "the transactions list could not be searched far enough back: ask GoRoute whether it "
        "was delivered (a resend now could deliver a duplicate); if not, "
        "`invoicectl send DIR --new-version ID`",
        ExitCode.NEEDS_RECONCILE,
    ),
    Verdict.amended: Guidance(
        "amended",
        True,
        "either restore the file to the content sent and run `invoicectl scan DIR`, "
        "or send the new content under a new key: `invoicectl send DIR --new-version ID`",
        ExitCode.NEEDS_RECONCILE,
    ),
    Verdict.delivered: Guidance("delivered", False, "nothing: delivered", ExitCode.OK),
    Verdict.delivery_failed: Guidance(
        "delivery failed",
        True,
        "find out why with GoRoute; to send it again: `invoicectl send DIR --new-version ID`",
        ExitCode.NEEDS_RECONCILE,
    ),
    Verdict.delivery_pending: Guidance(
        "delivery in progress",
        False,
        "nothing yet; a later `invoicectl reconcile` follows it",
        ExitCode.OK,
    ),
    Verdict.needs_decision: Guidance(
        "needs a decision (409)",
        True,
        "ask GoRoute whether it was already delivered; "
        "if not, `invoicectl send DIR --new-version ID`",
        ExitCode.NEEDS_RECONCILE,
    ),
    Verdict.lookup_failed: Guidance(
        "lookup failed",
        False,
        "outcome unknown: the API did not answer; run `invoicectl reconcile` again later",
        ExitCode.INCOMPLETE,
    ),
}

# The order groups appear in: what needs a person first, what is fine last.
VERDICT_ORDER: tuple[Verdict, ...] = (
    Verdict.different_document,
    Verdict.not_found,
    Verdict.sent_then_failed,
    Verdict.unknown_ambiguous,
    Verdict.unknown_sent_earlier,
    Verdict.unknown_not_found_window_closed,
    Verdict.unknown_search_incomplete,
    Verdict.amended,
    Verdict.delivery_failed,
    Verdict.needs_decision,
    Verdict.lookup_failed,
    Verdict.already_sent,
    Verdict.unknown_found,
    Verdict.in_progress,
    Verdict.unknown_not_found_window_open,
    Verdict.delivery_pending,
    Verdict.delivered,
)


@dataclass(frozen=True)
class JournalSide:
    """What the journal holds and tried to send."""

    state: str
    document_type: str
    receiver: str | None
    idempotency_key: str | None = None
    sent_sha256: str | None = None  # the content the key carries
    current_sha256: str | None = None  # the content on disk now
    sent_revision: int | None = None  # 1-based, among this invoice's revisions
    current_revision: int | None = None
    first_attempt_at: str | None = None  # when the key first carried a request
    last_attempt_at: str | None = None
    last_http_status: int | None = None
    key_first_used_at: str | None = None
    transaction_id: str | None = None
    remote_status: str | None = None
    state_before_amend: str | None = None


@dataclass(frozen=True)
class ApiSide:
    """What GoRoute holds for the transaction the verdict is about."""

    transaction_id: str | None
    invoice_number: str | None = None
    receiver: str | None = None
    document_type: str | None = None
    status: str | None = None
    created_at: str | None = None
    delivered_at: str | None = None

    @classmethod
    def of(cls, txn: Transaction, fallback_id: str | None = None) -> ApiSide:
        return cls(
            transaction_id=txn.transaction_id or fallback_id,
            invoice_number=txn.invoice_number,
            receiver=txn.receiver or txn.receiver_id,
            document_type=txn.document_type,
            status=txn.status,
            created_at=txn.created_at,
            delivered_at=txn.delivered_at,
        )


@dataclass(frozen=True)
class Case:
    invoice_id: str
    verdict: Verdict
    needs_person: bool
    action: str  # the exact next command or step for this invoice
    journal: JournalSide
    api: ApiSide | None = None
    window_open: bool | None = None  # the key's 24 h window, where it matters
    window_closes_at: str | None = None
    detail: str = ""
    applied: bool = False  # --apply changed the journal for this case
    exit_code: ExitCode = ExitCode.OK

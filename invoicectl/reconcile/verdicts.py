"""The verdicts reconcile reaches, what each means for the operator, and the data they travel in.

``Verdict`` is the one table of verdicts: each member is declared with its ``Guidance`` (a
title, whether a person must act, the next step, the exit code, whether ``--apply`` adopts it
or holds it), and the members are declared in the order the report shows them: what needs a person
first, what is fine last. ``GUIDANCE`` and ``VERDICT_ORDER`` are read off it, so the three
cannot drift apart. A ``Case`` carries one invoice's verdict with both sides of the story:
``JournalSide`` (what the journal holds and tried to send) and ``ApiSide`` (what GoRoute
holds). Every judge ends in ``build_case``, which applies the verdict's guidance to one invoice;
``failed_lookups.lookup_failed`` is the case any judge ends in when GoRoute gave no usable
answer. Nothing here asks GoRoute or touches the journal.

The verdicts, in display order (``tests/test_verdicts.py`` checks this table against the
data):

=================================  =================================  ======  ============  ====
verdict                            when                               person  --apply       exit
=================================  =================================  ======  ============  ====
different_document                 key_reused; the transaction        yes     hold it       4
                                   carries another invoice/receiver
other_version                      key_reused, unknown or held by a   yes     hold it       4
                                   history check: this invoice (number
                                   and receiver) in other content,
                                   not failed: a delivery of it
content_unconfirmed                key_reused, or held by a history   yes     hold it       4
                                   check: this invoice, but GoRoute
                                   gives no content hash to compare
not_found                          key_reused or accepted: GoRoute    yes     nothing       4
                                   does not know the transaction id
sent_then_failed                   key_reused or unknown; this        yes     nothing       4
                                   invoice's transaction ``failed``
unknown_ambiguous                  unknown; several transactions      yes     hold it       4
                                   match: already sent more than once
unknown_sent_earlier               unknown; the only match was        yes     hold it       4
                                   created before the first attempt:
                                   something else sent this invoice
unknown_not_found_window_closed    unknown; no match in a complete    yes     nothing       4
                                   search, window closed: a resend
                                   could duplicate it
unknown_search_incomplete          unknown; no match, but the search  yes     nothing       4
                                   did not reach back far enough,
                                   window closed
amended                            the file changed after its key     yes     nothing       4
                                   carried other content
delivery_failed                    accepted; delivery failed          yes     (recorded)    4
needs_decision                     rejected with 409 (conflict)       yes     nothing       4
lookup_failed                      the API did not answer after       no**    nothing       75
                                   retries (5xx, timeouts, 429s)
already_sent                       key_reused; the existing           no      adopt it      4/0*
                                   transaction is this invoice
unknown_found                      unknown; exactly one transaction   no      adopt it      4/0*
                                   matches (number and receiver)
in_progress                        key_reused; this invoice's         no      nothing       75
                                   transaction is still on its way
unknown_not_found_window_open      unknown; no match, the key's       no      nothing       75
                                   window is open: ``send`` replays
delivery_pending                   accepted; delivery still on its    no      (recorded)    0
                                   way
delivered                          accepted; delivery now final       no      (recorded)    0
=================================  =================================  ======  ============  ====

\\* 4 until ``--apply`` adopts the transaction, 0 once it has. \\*\\* yes, exit 4, when the API
refused the lookup itself (a 4xx other than 401/403/404).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Self

from invoicectl.errors import ExitCode


@dataclass(frozen=True)
class Guidance:
    """What a verdict means for the operator: a title, who acts, and the group's next step.

    ``next_step`` is shown once per group; ``ID`` in it stands for the invoice's id and is
    filled in for each case's own action.
    """

    title: str
    needs_person: bool
    next_step: str
    exit_code: ExitCode
    adoptable: bool = False
    held: bool = False  # ``--apply`` holds it: a send must not go out on its own


class Verdict(StrEnum):
    """What happened to an invoice, declared in display order, each with its ``Guidance``."""

    guidance: Guidance

    # Called once per member, with its (value, guidance) pair. ``guidance`` is optional only
    # for the type checker: after the class is built, ``Verdict("amended")`` is the usual
    # look-up by value, which never reaches this method.
    def __new__(cls, value: str, guidance: Guidance | None = None) -> Self:
        if guidance is None:
            raise TypeError(f"verdict {value!r} is declared without its Guidance")
        member = str.__new__(cls, value)
        member._value_ = value
        member.guidance = guidance
        return member

    # Needs a person.
    different_document = (
        "different_document",
        Guidance(
            "different document",
            True,
            "investigate: the key carried another document (key collision); nothing was sent "
            "for this invoice under it",
            ExitCode.NEEDS_RECONCILE,
            held=True,
        ),
    )
    other_version = (
        "other_version",
        Guidance(
            "another version",
            True,
            "investigate: GoRoute holds another version of this invoice (its number, for its "
            "receiver, in other content): a delivery of it, so sending this content too "
            "delivers the invoice twice",
            ExitCode.NEEDS_RECONCILE,
            held=True,
        ),
    )
    content_unconfirmed = (
        "content_unconfirmed",
        Guidance(
            "content unconfirmed",
            True,
            "investigate: GoRoute holds this invoice number for this receiver, but gives no "
            "content hash, and it may be another version of the invoice; compare GoRoute's "
            "document with the file",
            ExitCode.NEEDS_RECONCILE,
            held=True,
        ),
    )
    not_found = (
        "not_found",
        Guidance(
            "not found",
            True,
            "investigate: GoRoute does not know the transaction id; ask GoRoute support",
            ExitCode.NEEDS_RECONCILE,
        ),
    )
    sent_then_failed = (
        "sent_then_failed",
        Guidance(
            "sent, then failed",
            True,
            "delivery failed; send it again under a new key: "
            "`invoicectl send DIR --new-version ID`",
            ExitCode.NEEDS_RECONCILE,
        ),
    )
    unknown_ambiguous = (
        "unknown_ambiguous",
        Guidance(
            "unanswered, found more than once",
            True,
            "investigate: several transactions carry this invoice number and receiver "
            "(already delivered more than once?)",
            ExitCode.NEEDS_RECONCILE,
            held=True,
        ),
    )
    unknown_sent_earlier = (
        "unknown_sent_earlier",
        Guidance(
            "unanswered, found only an earlier send",
            True,
            "investigate: GoRoute holds this invoice number for this receiver from before this "
            "journal's first attempt (sent by something else, or earlier); this journal's own "
            "send was not found. Do not send it again until you know the customer does not "
            "have it",
            ExitCode.NEEDS_RECONCILE,
            held=True,
        ),
    )
    unknown_not_found_window_closed = (
        "unknown_not_found_window_closed",
        Guidance(
            "unanswered, not found, window closed",
            True,
            "confirm with GoRoute that it was never delivered (a resend now could deliver a "
            "duplicate), then `invoicectl send DIR --new-version ID`",
            ExitCode.NEEDS_RECONCILE,
        ),
    )
    unknown_search_incomplete = (
        "unknown_search_incomplete",
        Guidance(
            "unanswered, not found in an incomplete search, window closed",
            True,
            "the transactions list could not be searched far enough back: ask GoRoute whether "
            "it was delivered (a resend now could deliver a duplicate); if not, `invoicectl "
            "release ID --force`, then `invoicectl send DIR --new-version ID`",
            ExitCode.NEEDS_RECONCILE,
        ),
    )
    amended = (
        "amended",
        Guidance(
            "amended",
            True,
            "either restore the file to the content sent and run `invoicectl scan DIR`, "
            "or send the new content under a new key: `invoicectl send DIR --new-version ID`",
            ExitCode.NEEDS_RECONCILE,
        ),
    )
    delivery_failed = (
        "delivery_failed",
        Guidance(
            "delivery failed",
            True,
            "find out why with GoRoute; to send it again: `invoicectl send DIR --new-version ID`",
            ExitCode.NEEDS_RECONCILE,
        ),
    )
    needs_decision = (
        "needs_decision",
        Guidance(
            "needs a decision (409)",
            True,
            "ask GoRoute whether it was already delivered; if not, `invoicectl release ID "
            "--force` (your word), then `invoicectl send DIR --new-version ID`",
            ExitCode.NEEDS_RECONCILE,
        ),
    )
    # No person by default; a person when the API refused the lookup itself (see judging).
    lookup_failed = (
        "lookup_failed",
        Guidance(
            "lookup failed",
            False,
            "outcome unknown: the API did not answer; run `invoicectl reconcile` again later",
            ExitCode.INCOMPLETE,
        ),
    )
    # No person: --apply adopts these (exit 4 until it has).
    already_sent = (
        "already_sent",
        Guidance(
            "already sent",
            False,
            "`invoicectl reconcile --apply` adopts the existing transaction; nothing to resend",
            ExitCode.NEEDS_RECONCILE,
            adoptable=True,
        ),
    )
    unknown_found = (
        "unknown_found",
        Guidance(
            "unanswered, found",
            False,
            "`invoicectl reconcile --apply` adopts the transaction found; nothing to resend",
            ExitCode.NEEDS_RECONCILE,
            adoptable=True,
        ),
    )
    # No person: time or the next run settles these.
    in_progress = (
        "in_progress",
        Guidance(
            "still in progress",
            False,
            "wait, then run `invoicectl reconcile` again",
            ExitCode.INCOMPLETE,
        ),
    )
    unknown_not_found_window_open = (
        "unknown_not_found_window_open",
        Guidance(
            "unanswered, not found, window open",
            False,
            "`invoicectl send DIR` replays it under the same key, safe until the window closes",
            ExitCode.INCOMPLETE,
        ),
    )
    delivery_pending = (
        "delivery_pending",
        Guidance(
            "delivery in progress",
            False,
            "nothing yet; a later `invoicectl reconcile` follows it",
            ExitCode.OK,
        ),
    )
    delivered = (
        "delivered",
        Guidance("delivered", False, "nothing: delivered", ExitCode.OK),
    )


# Read off ``Verdict``, for callers that look a verdict up or walk them in order.
GUIDANCE: Mapping[Verdict, Guidance] = MappingProxyType(
    {verdict: verdict.guidance for verdict in Verdict}
)
VERDICT_ORDER: tuple[Verdict, ...] = tuple(Verdict)


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
    # Transactions the answers to its earlier keys named: a new version's search never
    # takes one of them for a send of its own key.
    earlier_keys: frozenset[str] = frozenset()


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
    # Judged on a search that stopped short: it clears no evidence (``unanswered``).
    short_search: bool = False


Window = tuple[bool | None, str | None]  # (still open, closes at)


def build_case(
    invoice_id: str,
    verdict: Verdict,
    side: JournalSide,
    *,
    action: str | None = None,
    needs_person: bool | None = None,
    api: ApiSide | None = None,
    detail: str = "",
    window: Window = (None, None),
) -> Case:
    """A verdict's guidance applied to one invoice, unless the judge knows better for it.

    Who acts, the exit code and the next step (``ID`` replaced by the invoice's id) come from
    the verdict's ``Guidance``; a case that needs a person always exits 4 (``NEEDS_RECONCILE``).
    """
    guidance = verdict.guidance
    person = guidance.needs_person if needs_person is None else needs_person
    exit_code = ExitCode.NEEDS_RECONCILE if person else guidance.exit_code
    step = action if action is not None else guidance.next_step.replace("ID", invoice_id)
    return Case(
        invoice_id=invoice_id,
        verdict=verdict,
        needs_person=person,
        action=step,
        journal=side,
        api=api,
        window_open=window[0],
        window_closes_at=window[1],
        detail=detail,
        exit_code=exit_code,
    )

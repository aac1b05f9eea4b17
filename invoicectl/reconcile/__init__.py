"""Reconcile: what really happened to every refused, unanswered or changed send, and what next.

``reconcile()`` reads the journal, asks GoRoute (GET requests only, through the same rate
limiter and retry policy as ``send``), and returns a ``ReconcileReport``: one ``Case`` per
invoice that needs a look, each with a ``Verdict``, both sides of the story (what the journal
tried to send, what the API holds) and the exact next step. It never sends a document, never
prints, never exits.

=================================  =================================  ======  ============  ====
verdict                            when                               person  --apply       exit
=================================  =================================  ======  ============  ====
already_sent                       key_reused; the existing           no      adopt it      4/0*
                                   transaction is this invoice
sent_then_failed                   key_reused or unknown; this        yes     nothing       4
                                   invoice's transaction ``failed``
different_document                 key_reused; the transaction        yes     nothing       4
                                   carries another invoice/receiver
not_found                          key_reused or accepted: GoRoute    yes     nothing       4
                                   does not know the transaction id
in_progress                        key_reused; this invoice's         no      nothing       75
                                   transaction is still on its way
unknown_found                      unknown; exactly one transaction   no      adopt it      4/0*
                                   matches (number and receiver)
unknown_ambiguous                  unknown; several transactions      yes     nothing       4
                                   match: already sent more than once
unknown_sent_earlier               unknown; the only match was        yes     nothing       4
                                   created before the first attempt:
                                   something else sent this invoice
unknown_not_found_window_open      unknown; no match, the key's       no      nothing       75
                                   window is open: ``send`` replays
unknown_not_found_window_closed    unknown; no match in a complete    yes     nothing       4
                                   search, window closed: a resend
                                   could duplicate it
unknown_search_incomplete          unknown; no match, but the search  yes     nothing       4
                                   did not reach back far enough,
                                   window closed
amended                            the file changed after its key     yes     nothing       4
                                   carried other content
delivered                          accepted; delivery now final       no      (recorded)    0
delivery_failed                    accepted; delivery failed          yes     (recorded)    4
delivery_pending                   accepted; delivery still on its    no      (recorded)    0
                                   way
needs_decision                     rejected with 409 (conflict)       yes     nothing       4
lookup_failed                      the API did not answer after       no**    nothing       75
                                   retries (5xx, timeouts, 429s)
=================================  =================================  ======  ============  ====

\\* 4 until ``--apply`` adopts the transaction, 0 once it has. \\*\\* yes, exit 4, when the API
refused the lookup itself (a 4xx other than 401/403/404).

The key's window is ``send``'s (``lifecycle.window_open``): 24 hours less ``REPLAY_MARGIN``, so
reconcile never calls a window open that ``send`` would hold. A transaction is this invoice's
only if its number and receiver match, its content hash (``metadata.sha256``, when GoRoute
gives one back) is the one the key carried, and, for an unanswered send, it was created after
the key's first attempt (less ``CLOCK_SLACK``). The list search looks ``LOOK_BACK`` further back
for earlier sends of the same invoice; older transactions are never counted, whatever the page
size, so the verdict does not depend on how the list happens to be paged.

Journal writes: ``--apply`` adopts (state ``accepted``, the transaction id, its status), one
SQLite transaction and one event row per invoice, and only if the invoice is still in the
state and under the key it was judged in. Delivery status of ``accepted`` invoices is always
recorded (``remote_status``, ``remote_checked_at``, an event when it changes), with or without
``--apply``: it is a fact about a transaction the journal already owns, not a decision. All
lookups finish before anything is written, so a 401/403 (``CredentialsRefused``) changes
nothing.

This module is the public face: ``reconcile()``, its ``ReconcileReport``, and the names callers
use, re-exported from the modules that own them. ``reconcile_verdicts``: ``Verdict``,
``GUIDANCE``, ``VERDICT_ORDER`` and the ``Case`` data. ``reconcile_journal``: which invoices
need a look, and the journal writes. ``reconcile_search``: every GET, and the transactions-list
search. ``reconcile_judge``: both sides compared into verdicts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from invoicectl.errors import ExitCode, worst
from invoicectl.goroute.client import GoRouteClient
from invoicectl.goroute.limiter import RateLimiter
from invoicectl.goroute.retry import RetryPolicy
from invoicectl.journal import Journal
from invoicectl.reconcile.judge import CLOCK_SLACK, compare, judge
from invoicectl.reconcile.search import LOOK_BACK, Lookups, SearchSummary
from invoicectl.reconcile.subjects import find_subjects, write_back
from invoicectl.reconcile.verdicts import (
    GUIDANCE,
    VERDICT_ORDER,
    ApiSide,
    Case,
    Guidance,
    JournalSide,
    Verdict,
)

__all__ = [
    "CLOCK_SLACK",
    "GUIDANCE",
    "LOOK_BACK",
    "VERDICT_ORDER",
    "ApiSide",
    "Case",
    "Guidance",
    "JournalSide",
    "ReconcileReport",
    "SearchSummary",
    "Verdict",
    "compare",
    "reconcile",
]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class ReconcileReport:
    cases: tuple[Case, ...]
    applied: tuple[str, ...]  # invoice ids --apply changed
    recorded: tuple[str, ...]  # invoice ids whose delivery status was recorded
    exit_code: ExitCode
    apply: bool
    checked_at: str
    requests: int = 0
    search: SearchSummary = field(default_factory=SearchSummary)

    @property
    def counts(self) -> dict[Verdict, int]:
        """Cases per verdict, in ``VERDICT_ORDER``, verdicts without cases left out."""
        present = [case.verdict for case in self.cases]
        return {verdict: present.count(verdict) for verdict in VERDICT_ORDER if verdict in present}

    @property
    def needs_person(self) -> int:
        return sum(case.needs_person for case in self.cases)


async def reconcile(
    journal: Journal,
    client: GoRouteClient,
    *,
    limiter: RateLimiter,
    policy: RetryPolicy,
    apply: bool = False,
    now: Callable[[], datetime] = utc_now,
    list_limit: int = 100,
    max_list_pages: int = 50,
    concurrency: int = 10,
    run_id: int | None = None,
) -> ReconcileReport:
    """Judge every invoice that needs a look; with ``apply``, adopt the unambiguous ones.

    Raises ``CredentialsRefused`` (exit 5) on a 401/403, before anything is written.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    subjects = find_subjects(journal)
    lookups = Lookups(client, limiter, policy, concurrency)
    await lookups.run(subjects, list_limit=list_limit, max_list_pages=max_list_pages)
    moment = now()
    cases = [judge(subject, lookups, moment) for subject in subjects]
    checked_at = moment.isoformat()
    cases, applied, recorded = write_back(journal, cases, apply, checked_at, run_id)
    ordered = tuple(sorted(cases, key=lambda c: (VERDICT_ORDER.index(c.verdict), c.invoice_id)))
    return ReconcileReport(
        cases=ordered,
        applied=tuple(applied),
        recorded=tuple(recorded),
        exit_code=worst(*(case.exit_code for case in ordered)),
        apply=apply,
        checked_at=checked_at,
        requests=lookups.requests,
        search=lookups.search_summary,
    )

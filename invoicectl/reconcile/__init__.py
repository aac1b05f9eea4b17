"""Reconcile: what really happened to every refused, unanswered or changed send, and what next.

``reconcile()`` reads the journal, asks GoRoute (GET requests only, through the same rate
limiter and retry policy as ``send``), and returns a ``ReconcileReport``: one ``Case`` per
invoice that needs a look, each with a ``Verdict``, both sides of the story (what the journal
tried to send, what the API holds) and the exact next step. It never sends a document, never
prints, never exits.

The verdicts, what each asks of the operator, its exit code and its order are one table:
``Verdict`` in ``reconcile/verdicts.py`` (drawn in that module's docstring).

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
use, re-exported from the modules that own them:

- ``verdicts``: ``Verdict`` (each with its ``Guidance``, in display order) and the ``Case`` data;
- ``subjects``: which invoices need a look, and the journal writes;
- ``search``: every GET, and the transactions-list search;
- ``judge``: which judge each invoice goes to; ``key_reused``, ``unanswered`` and ``delivery``
  judge the three kinds of lookup; ``matching`` compares a transaction with the journal's
  side; ``cases`` builds each ``Case`` from its verdict's guidance; ``timestamps`` reads the
  times they compare.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from invoicectl.errors import ExitCode, worst
from invoicectl.goroute.client import GoRouteClient
from invoicectl.goroute.limiter import RateLimiter
from invoicectl.goroute.retry import RetryPolicy
from invoicectl.journal.interface import JournalBackend
from invoicectl.reconcile.judge import judge
from invoicectl.reconcile.matching import CLOCK_SLACK, compare
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
    journal: JournalBackend,
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

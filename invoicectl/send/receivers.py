"""Receiver pre-flight: before an invoice's first send, is its receiver on the Peppol network,
and does it take this kind of document?

Each receiver is looked up once (GoRoute's participant lookup, through the run's rate limiter,
one short try: ``send.advisory``) and the answer kept in the journal for a day, so 20,000
invoices to 300 receivers cost at most 300 lookups. A receiver that is not registered, or not
for this document type, is a reason the sender holds the invoice with, and no send is spent
on it. A lookup that fails (5xx, timeout, an answer of neither documented shape) never blocks
a send: the invoice goes out as it would have, and the summary says how many went unchecked.
After three lookups in a row got no answer, the run asks no more: the rest go unchecked too.
Replays are never checked: an unanswered send goes again under its key, whatever the lookup
would say.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from invoicectl.goroute.limiter import RateLimiter
from invoicectl.goroute.outcomes import Outcome
from invoicectl.goroute.participants import Participant, takes
from invoicectl.goroute.retry import RetryPolicy, call_with_retry
from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import Invoice, ReceiverCheck
from invoicectl.send.advisory import Breaker, one_try, within

# GoRoute's participant lookup of one ``scheme:id`` (``GoRouteClient.lookup_participant``).
Lookup = Callable[[str], Awaitable[Outcome]]

# How long a lookup's answer stands before the next send asks again.
RECHECK_AFTER = timedelta(days=1)


class ReceiverChecks:
    """The receiver checks of one send run."""

    def __init__(
        self,
        journal: JournalBackend,
        lookup: Lookup,
        limiter: RateLimiter,
        policy: RetryPolicy,
        *,
        refresh: bool = False,
        should_stop: Callable[[], bool] = lambda: False,
        on_wrong_url: Callable[[str], None] = lambda why: None,
        rng: random.Random | None = None,
    ) -> None:
        self.journal = journal
        self.lookup = lookup
        self.limiter = limiter
        self.policy = one_try(policy)
        self.breaker = Breaker("lookups", on_wrong_url)
        self.refresh = refresh
        self.should_stop = should_stop
        self.rng = rng
        self.lookups = 0  # lookups asked in this run
        self.failed: set[str] = set()  # receivers whose lookup failed: sent unchecked
        self._checked: set[str] = set()  # receivers looked up in this run (casefolded)
        self._answers: dict[str, ReceiverCheck] = {}  # what those lookups said
        self._locks: dict[str, asyncio.Lock] = {}

    async def problem(self, invoice: Invoice) -> str | None:
        """Why ``invoice``'s receiver cannot take it, by its check; None when it can, or
        when nothing is known (the lookup failed)."""
        peppol_id = invoice.receiver
        if peppol_id is None:
            return None
        check = await self._check(peppol_id)
        return None if check is None else problem(check, invoice.document_type)

    async def _check(self, peppol_id: str) -> ReceiverCheck | None:
        """The receiver's check: from the journal while fresh, else looked up (once per run,
        however many workers ask at the same time, and however the id is cased); None when
        nothing current is known. A failed lookup is never answered from an older check: the
        receiver may have registered since."""
        same = peppol_id.strip().casefold()  # Peppol ids are case-insensitive
        async with self._locks.setdefault(same, asyncio.Lock()):
            if same in self._checked:
                return self._answers.get(same)
            known = self.journal.receiver_check(peppol_id)
            if known is not None and self._fresh(known):
                return known
            if self.breaker.open:  # GoRoute stopped answering lookups: sent unchecked
                self._checked.add(same)
                self.failed.add(same)
                return None
            try:
                outcome = await call_with_retry(
                    lambda: within(self.lookup(peppol_id), "receiver lookup"),
                    policy=self.policy,
                    limiter=self.limiter,
                    should_stop=self.should_stop,
                    rng=self.rng,
                )
            except ValueError:  # not an id the lookup can ask for: send it unchecked
                outcome = None
                self.failed.add(same)
            if outcome is None:  # the run is stopping, or nothing could be asked
                return None
            self._checked.add(same)
            self.lookups += 1
            self.breaker.note(outcome)
            if self.breaker.wrong_url:  # the run stops, this invoice unsent
                return None
            if not isinstance(outcome, Participant):
                self.failed.add(same)
                return None
            check = ReceiverCheck(
                peppol_id, outcome.registered, outcome.document_types, self.journal.now()
            )
            self.journal.remember_receiver(check)
            self._answers[same] = check
            return check

    def _fresh(self, check: ReceiverCheck) -> bool:
        if self.refresh:
            return False
        age = self.journal.clock() - datetime.fromisoformat(check.checked_at)
        return timedelta(0) <= age < RECHECK_AFTER  # from the future: the clock was set back


def problem(check: ReceiverCheck, document_type: str) -> str | None:
    """Why a receiver cannot take a document, by its check; None when it can."""
    if not check.registered:
        return (
            f"receiver {check.peppol_id} is not registered on the Peppol network "
            f"(participant lookup, {check.checked_at}); nothing was sent"
        )
    if not takes(check.document_types, document_type):
        return (
            f"receiver {check.peppol_id} does not take {document_type} documents "
            f"(participant lookup, {check.checked_at}); nothing was sent"
        )
    return None

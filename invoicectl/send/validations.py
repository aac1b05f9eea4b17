"""Server-side validation on request (``send --validate``): before an invoice's first send, does
GoRoute's ``POST /api/v1/validate`` find its current revision valid?

Each revision's content is validated once (through the run's rate limiter, one short try:
``send.advisory``) and the answer kept in the journal by sha256, so a later run asks nothing
again for the same bytes. What the API finds invalid is a reason the sender holds the invoice
with, its first errors named, and no send is spent on it. A validation that fails (5xx,
timeout, an answer without a boolean ``valid``) never blocks a send: the invoice goes out as
it would have, the summary counts it as unvalidated, and the run exits 75.
After three validations in a row got no answer, the run asks no more: the rest go
unvalidated too. Replays are never validated.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable

from invoicectl.goroute.limiter import RateLimiter
from invoicectl.goroute.outcomes import Outcome, Validation
from invoicectl.goroute.retry import RetryPolicy, call_with_retry
from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import Invoice, Validated
from invoicectl.send.advisory import Breaker, one_try, within

# GoRoute's validation of one document's stored bytes (``GoRouteClient.validate_document``).
Validate = Callable[[bytes], Awaitable[Outcome]]

# How many of the API's errors a hold reason names.
ERRORS_IN_REASON = 3


class Validations:
    """The validations of one run."""

    def __init__(
        self,
        journal: JournalBackend,
        validate: Validate,
        limiter: RateLimiter,
        policy: RetryPolicy,
        *,
        should_stop: Callable[[], bool] = lambda: False,
        on_wrong_url: Callable[[str], None] = lambda why: None,
        rng: random.Random | None = None,
    ) -> None:
        self.journal = journal
        self.validate = validate
        self.limiter = limiter
        self.policy = one_try(policy)
        self.breaker = Breaker("validations", on_wrong_url)
        self.should_stop = should_stop
        self.rng = rng
        self.asked = 0  # validations asked in this run
        self.failed: list[str] = []  # invoices whose validation failed: sent unvalidated
        self.outcomes: dict[str, Outcome] = {}  # what those failed validations came to

    async def problem(self, invoice: Invoice) -> str | None:
        """Why GoRoute finds ``invoice``'s current revision invalid; None when it is valid,
        or when nothing is known (the validation failed)."""
        known = await self.check(invoice)
        return None if known is None else problem(known)

    async def check(self, invoice: Invoice) -> Validated | None:
        """What the validation says of ``invoice``'s current revision: from the journal if
        its content was validated before, else asked; None when the validation failed."""
        sha256 = invoice.current_sha256
        known = self.journal.validation(sha256)
        if known is None:
            known = await self._ask(invoice.invoice_id, sha256)
        return known

    async def _ask(self, invoice_id: str, sha256: str) -> Validated | None:
        if self.breaker.open:  # GoRoute stopped answering validations: sent unvalidated
            self.failed.append(invoice_id)
            self.outcomes[invoice_id] = self.breaker.not_asked()
            return None
        document = self.journal.content(sha256)
        outcome = await call_with_retry(
            lambda: within(self.validate(document), "validation", len(document)),
            policy=self.policy,
            limiter=self.limiter,
            should_stop=self.should_stop,
            rng=self.rng,
        )
        if outcome is None:  # the run is stopping: nothing was asked
            return None
        self.asked += 1
        self.breaker.note(outcome)  # a redirect stops a send's run: kept as failed for `validate`
        if not isinstance(outcome, Validation):
            self.failed.append(invoice_id)
            self.outcomes[invoice_id] = outcome
            return None
        validated = Validated(sha256, outcome.valid, outcome.errors, self.journal.now())
        self.journal.remember_validation(validated)
        return validated


def problem(validated: Validated) -> str | None:
    """The hold reason for an invalid revision, its first errors named; None when valid."""
    if validated.valid:
        return None
    shown = "; ".join(validated.errors[:ERRORS_IN_REASON])
    more = len(validated.errors) - ERRORS_IN_REASON
    if more > 0:
        shown += f"; and {more} more"
    return (
        f"GoRoute's validation found the document invalid: {shown} "
        f"(validated {validated.checked_at}); nothing was sent"
    )

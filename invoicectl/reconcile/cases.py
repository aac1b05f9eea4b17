"""Building a ``Case``: a verdict's guidance applied to one invoice.

Every judge ends here. ``build_case`` fills in what the verdict's ``Guidance`` says (who acts,
the exit code, the next step with ``ID`` replaced by the invoice's id) unless the judge knows
better for this one invoice; a case that needs a person always exits 4 (``NEEDS_RECONCILE``).
``lookup_failed`` is the case any judge ends in when GoRoute gave no usable answer.
"""

from __future__ import annotations

from invoicectl.errors import ExitCode
from invoicectl.goroute.outcomes import Outcome, RateLimited, Rejected, Transient
from invoicectl.reconcile.verdicts import ApiSide, Case, JournalSide, Verdict

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


def lookup_failed(
    invoice_id: str,
    side: JournalSide,
    outcome: Outcome | None,
    api: ApiSide | None,
    window: Window = (None, None),
) -> Case:
    """No usable answer: a person only when the API refused the lookup itself."""
    refused = isinstance(outcome, Rejected)
    return build_case(
        invoice_id,
        Verdict.lookup_failed,
        side,
        api=api,
        needs_person=refused,
        detail=_failure_text(outcome) + "; what happened is still unknown",
        window=window,
    )


def _failure_text(outcome: Outcome | None) -> str:
    if isinstance(outcome, Transient):
        return f"no usable answer after retries: {outcome.reason}"
    if isinstance(outcome, RateLimited):
        return "still rate limited (429) after waiting as long as --max-wait allows"
    if isinstance(outcome, Rejected):
        code = f" {outcome.code}" if outcome.code else ""
        return f"the API refused the lookup (HTTP {outcome.http_status}{code}: {outcome.message})"
    return "the lookup did not run"

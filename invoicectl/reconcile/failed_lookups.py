"""The case a judge ends in when GoRoute gave no usable answer (``lookup_failed``)."""

from __future__ import annotations

from invoicectl.goroute.outcomes import Outcome, RateLimited, Rejected, Transient
from invoicectl.goroute.transactions import NotFound
from invoicectl.reconcile.verdicts import ApiSide, Case, JournalSide, Verdict, Window, build_case


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
    if isinstance(outcome, NotFound):  # a transaction the list shows
        return "the transactions list shows it, but its own GET answered 404"
    if isinstance(outcome, RateLimited):
        return "still rate limited (429) after waiting as long as --max-wait allows"
    if isinstance(outcome, Rejected) and outcome.http_status is None:
        return f"not looked up: {outcome.message}"  # the client refused to ask (a bad id)
    if isinstance(outcome, Rejected):
        code = f" {outcome.code}" if outcome.code else ""
        return f"the API refused the lookup (HTTP {outcome.http_status}{code}: {outcome.message})"
    return "the lookup did not run"

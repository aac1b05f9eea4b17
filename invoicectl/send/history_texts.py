"""What the history check says: the reasons it holds invoices with, and its one-line messages."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from invoicectl.errors import ExitCode, InvoicectlError
from invoicectl.goroute.outcomes import Outcome, RateLimited, Rejected, Transient
from invoicectl.journal.records import Invoice, InvoiceState

if TYPE_CHECKING:  # the reconcile package brings the client: a send without a check needs none
    from invoicectl.goroute.transactions import Transaction
    from invoicectl.reconcile.search_result import SearchSummary


class HistoryUnchecked(InvoicectlError):
    """The history check could not be made: nothing was sent."""

    def __init__(self, message: str, exit_code: ExitCode) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Finding:
    """What the check decided: invoices held as found, held as not checked, to be sent."""

    found: tuple[str, ...]
    not_checked: tuple[str, ...]
    to_send: tuple[str, ...]
    unsupported: str | None = None  # the API here has no transactions list: why we know

    def unheld(self, invoice_ids: tuple[str, ...]) -> tuple[str, ...]:
        """Those of ``invoice_ids`` the check did not hold."""
        held = {*self.found, *self.not_checked}
        return tuple(invoice_id for invoice_id in invoice_ids if invoice_id not in held)


def _lost_version_reason(invoice: Invoice, listed: str) -> str:
    """Why a ``--new-version`` was not sent: GoRoute holds a send of it under a key this
    journal has no answer for (a backup restored after a new version went out?)."""
    invoice_id = invoice.invoice_id
    force = "" if invoice.state is InvoiceState.accepted else " --force"
    return (
        f"not sent as a new version: GoRoute holds {listed} with this invoice's number, which "
        "no answer this journal holds names (was it restored from a backup taken before a "
        "--new-version?); if that is this invoice delivered, `invoicectl abandon "
        f"{invoice_id}` records it as settled; if its delivery failed, `invoicectl release "
        f"{invoice_id}{force}`, then `send DIR --new-version {invoice_id}`"
    )


def not_checked_reason(invoice: Invoice, summary: SearchSummary) -> str:
    reached = f"back to {summary.reached}" if summary.reached else "in no known order"
    return (
        f"not checked: the history check of a journal with no history there searched "
        f"GoRoute's transactions {reached} only ({summary.note}), and this invoice "
        f"(issued {invoice.issue_date or 'undated'}) may have been sent before that: confirm "
        f"with GoRoute, then `invoicectl release {invoice.invoice_id} --force`"
    )


def no_such_route(outcome: Rejected) -> bool:
    """The API itself says it has no such route: a JSON answer of 404, 405 or 501 (a web
    page's 404 there may be a proxy's passing fault, and switches nothing off)."""
    if outcome.http_status not in (404, 405, 501) or not outcome.raw_body:
        return False
    try:
        return isinstance(json.loads(outcome.raw_body), dict)
    except (ValueError, RecursionError):
        return False


def finding_text(finding: Finding) -> str:
    if finding.unsupported is not None:
        return (
            f"GoRoute here has no transactions list ({finding.unsupported}), so what it "
            f"already holds cannot be checked; sending {len(finding.to_send)} invoices (no "
            "marker says this outbox was sent from another journal)"
        )
    total = len(finding.found) + len(finding.not_checked) + len(finding.to_send)
    text = (
        f"GoRoute's transactions were checked for the {total} invoices this journal never "
        "sent (or sends under a new key): "
        f"{len(finding.found)} already there, held for `invoicectl reconcile`"
    )
    if finding.not_checked:
        text += f"; {len(finding.not_checked)} held as not checked (the search stopped short)"
    return f"{text}; {len(finding.to_send)} to send"


def unchecked(why: str, cause: str, code: ExitCode = ExitCode.INCOMPLETE) -> HistoryUnchecked:
    after = (
        "run again once GoRoute answers"
        if code is ExitCode.INCOMPLETE
        else "fix the cause, or send anyway with --trust-new-journal"
    )
    return HistoryUnchecked(
        f"{why}, and the check failed: {cause}. Nothing was sent, so that nothing GoRoute "
        f"already holds is sent twice; {after} (`--trust-new-journal` sends without the "
        "check, only if no other journal ever sent these invoices)",
        code,
    )


def failure_text(outcome: Outcome) -> str:
    if isinstance(outcome, Transient):
        return f"no usable answer after retries ({outcome.reason})"
    if isinstance(outcome, RateLimited):
        return "still rate limited (429) after waiting as long as --max-wait allows"
    if isinstance(outcome, Rejected):
        code = f" {outcome.code}" if outcome.code else ""
        return f"GoRoute refused the transactions list (HTTP {outcome.http_status}{code})"
    return f"unexpected answer {type(outcome).__name__}"


def failure_code(outcome: Outcome) -> ExitCode:
    return ExitCode.COULD_NOT_RUN if isinstance(outcome, Rejected) else ExitCode.INCOMPLETE


_BY_THE_CHECK = "found by the history check of a journal with no history there"


def found_reason(
    invoice: Invoice, txns: tuple[Transaction, ...], by: str = _BY_THE_CHECK
) -> tuple[str, str | None]:
    """The hold's reason, and the transaction to keep when exactly one is this invoice."""
    from invoicectl.reconcile.matching import compare
    from invoicectl.reconcile.verdicts import JournalSide

    side = JournalSide(
        state=str(invoice.state),
        document_type=invoice.document_type,
        receiver=invoice.receiver or invoice.receiver_id,
    )
    same = [txn for txn in txns if not compare(invoice.invoice_id, side, txn)]
    listed = ", ".join(
        f"{txn.transaction_id or 'no id'} ({txn.status or 'no status'}, created "
        f"{txn.created_at or 'undated'})"
        for txn in txns
    )
    if invoice.key_first_used_at is not None:  # a --new-version: sent from here before
        return _lost_version_reason(invoice, listed), None
    if len(same) == 1 and len(txns) == 1 and same[0].transaction_id:
        return (
            f"GoRoute already holds transaction {listed} for this invoice, {by}: "
            "`invoicectl reconcile` judges it, `invoicectl reconcile --apply` adopts it",
            same[0].transaction_id,
        )
    return (
        f"GoRoute already holds {len(txns)} transaction(s) with this invoice number, {by}: "
        f"{listed}; find out whether "
        f"the receiver has it, then `invoicectl release {invoice.invoice_id} --force` sends it "
        f"or `invoicectl abandon {invoice.invoice_id}` records that it was settled",
        None,
    )

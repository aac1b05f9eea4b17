"""``invoicectl validate DIR``: scan, then have GoRoute validate each pending invoice's current
revision, holding what it finds invalid, without sending anything.

The same pieces as a send: the run lock, the scan, the plan's pending invoices, the run's rate
limiter and retry policy, and ``Validations``, which keeps each content's result in the
journal; a revision validated before is answered from there, with no request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from invoicectl.errors import Cause, ExitCode, explain, worst
from invoicectl.goroute.limiter import RateLimiter
from invoicectl.goroute.outcomes import AuthRefused, Outcome, redirected
from invoicectl.interrupts import RunSignals, run_cancelled_by_signals
from invoicectl.journal import locked_journal
from invoicectl.journal.interface import JournalBackend
from invoicectl.lifecycle.holds import hold
from invoicectl.lifecycle.plan import plan
from invoicectl.lifecycle.sending import close_unanswered, message_of
from invoicectl.lifecycle.transitions import current
from invoicectl.runs import REAL_CLOCKS, Clocks, Scan, Session, make_client, no_session
from invoicectl.scan.report import ScanReport
from invoicectl.send.history_ahead import leave_check_to_next_send
from invoicectl.send.validations import Validations, problem
from invoicectl.settings import Settings


@dataclass(frozen=True)
class Checked:
    """One invoice's validation: ``verdict`` is valid, invalid or unvalidated."""

    invoice_id: str
    verdict: str
    asked: bool  # a request was spent (else the journal knew the content)
    errors: tuple[str, ...] = ()
    reason: str | None = None  # why it went unvalidated
    held: bool = False

    def line(self) -> str:
        known = "" if self.asked else " (validated before)"
        if self.verdict == "invalid":
            held = "held" if self.held else "not held"
            return f"{self.invoice_id}: invalid{known}, {held}: {'; '.join(self.errors[:3])}"
        if self.verdict == "unvalidated":
            return f"{self.invoice_id}: not validated ({self.reason})"
        return f"{self.invoice_id}: valid{known}"


@dataclass
class ValidateSummary:
    checked: list[Checked] = field(default_factory=list)
    requests: int = 0
    exit_code: ExitCode = ExitCode.OK

    def to_dict(self) -> dict[str, Any]:
        return {
            "exit_code": int(self.exit_code),
            "validations": self.requests,
            "invoices": [vars(checked) for checked in self.checked],
        }

    def exit_cause(self, report: ScanReport) -> str:
        """What the exit code was chosen from, in words, for the run's last line."""
        invalid = sum(checked.verdict == "invalid" for checked in self.checked)
        causes = [Cause(ExitCode.NEEDS_FIX, f"{invalid} invalid (validation)")] if invalid else []
        unvalidated = sum(checked.verdict == "unvalidated" for checked in self.checked)
        if unvalidated:
            causes.append(Cause(ExitCode.INCOMPLETE, f"{unvalidated} not validated"))
        if self.exit_code is ExitCode.AUTH_REFUSED:
            causes.append(Cause(ExitCode.AUTH_REFUSED, "the API refused the credentials"))
        if self.exit_code is ExitCode.COULD_NOT_RUN:
            causes.append(Cause(ExitCode.COULD_NOT_RUN, "the base URL answered with a redirect"))
        if report.files == 0:
            causes.append(Cause(report.input_code, "the outbox holds no *.xml file"))
        return explain(self.exit_code, causes)


def validate(
    settings: Settings,
    scan: Scan,
    session: Session = no_session,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    clocks: Clocks = REAL_CLOCKS,
    outboxes: Sequence[Path] = (),
) -> tuple[ScanReport, ValidateSummary]:
    """Scan, then validate every pending invoice not held; hold the invalid."""
    journal_lock = locked_journal(settings.journal, "validate", clock=clocks.wall, create=True)
    with RunSignals() as signals, journal_lock as journal, session() as emulated:
        left_unanswered = close_unanswered(journal)  # as a send does (runner.send)
        # Its invoices are recorded: another outbox's send checks them.
        leave_check_to_next_send(journal, outboxes, settings.base_url, settings.profile)
        report = scan(journal)
        report.left_unanswered[:0] = left_unanswered
        run = _validate(journal, settings, transport or emulated, clocks)
        summary = run_cancelled_by_signals(signals, run)
    return report, summary


async def _validate(
    journal: JournalBackend,
    settings: Settings,
    transport: httpx.AsyncBaseTransport | None,
    clocks: Clocks,
) -> ValidateSummary:
    pending = plan(journal, journal.clock()).pending
    summary = ValidateSummary()
    limiter = RateLimiter(settings.rate_per_minute, clock=clocks.monotonic, sleep=clocks.sleep)
    refused = wrong_url = False
    async with make_client(settings, transport) as client:
        validations = Validations(
            journal,
            client.validate_document,
            limiter,
            settings.retry_policy(),
            should_stop=lambda: refused or wrong_url,
            rng=clocks.rng,
        )
        slots = asyncio.Semaphore(max(1, settings.concurrency))

        async def one(invoice_id: str) -> Checked:
            nonlocal refused, wrong_url
            async with slots:
                before = validations.asked
                known = await validations.check(current(journal, invoice_id))
                asked = validations.asked > before
            if known is None:
                outcome = validations.outcomes.get(invoice_id)
                refused = refused or isinstance(outcome, AuthRefused)
                wrong_url = wrong_url or redirected(outcome)
                return Checked(invoice_id, "unvalidated", asked, reason=_failure(outcome))
            why = problem(known)
            if why is None:
                return Checked(invoice_id, "valid", asked)
            held = hold(journal, invoice_id, why, by="validation").done
            return Checked(invoice_id, "invalid", asked, known.errors, held=held)

        summary.checked = list(await asyncio.gather(*(one(i) for i in pending)))
        summary.requests = validations.asked
    codes = []
    if any(checked.verdict == "invalid" for checked in summary.checked):
        codes.append(ExitCode.NEEDS_FIX)
    if refused:
        codes.append(ExitCode.AUTH_REFUSED)
    if wrong_url:  # a redirect: every request meets it, and waiting fixes nothing
        codes.append(ExitCode.COULD_NOT_RUN)
    if any(checked.verdict == "unvalidated" for checked in summary.checked):
        codes.append(ExitCode.INCOMPLETE)  # not judged: the next run asks again
    summary.exit_code = worst(*codes)
    return summary


def _failure(outcome: Outcome | None) -> str:
    if outcome is None:
        return "stopped before asking"
    return message_of(outcome) or f"HTTP {outcome.http_status}"

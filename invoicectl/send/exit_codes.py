"""A send run's exit code, from what it did and what the journal holds after it."""

from __future__ import annotations

from invoicectl.errors import ExitCode, worst
from invoicectl.journal.interface import JournalBackend
from invoicectl.lifecycle.plan import attention
from invoicectl.send.summary import SendSummary


def exit_code_for(summary: SendSummary, journal: JournalBackend) -> ExitCode:
    """design.md's exit codes, the highest-ranked that applies."""
    codes = [attention(journal, journal.clock())]
    if summary.stopped_by == "credentials":
        codes.append(ExitCode.AUTH_REFUSED)
    if summary.stopped_by == "wrong_url":
        codes.append(ExitCode.COULD_NOT_RUN)
    if summary.signals:  # also when the deadline or an outage stopped it first
        codes.append(ExitCode.INTERRUPTED)
    if "deadline" in summary.stops:
        codes.append(ExitCode.INCOMPLETE)
    return worst(*codes)

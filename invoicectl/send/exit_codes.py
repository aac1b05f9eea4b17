"""A send run's exit code and its causes, from what it did and what the journal holds after it.

The code and the words of the run's last line (``exit 3: 1 invalid, 2 rejected``) come from
the same causes, so that the line can never name a reason the code was not chosen for.
"""

from __future__ import annotations

from invoicectl.errors import Cause, ExitCode, worst
from invoicectl.journal.interface import JournalBackend
from invoicectl.lifecycle.plan import attention_causes
from invoicectl.send.summary import LOCK_LOST, SendSummary


def exit_code_for(summary: SendSummary, journal: JournalBackend) -> ExitCode:
    """design.md's exit codes, the highest-ranked that applies."""
    return worst(*(cause.code for cause in send_causes(summary, journal)))


def judge_exit(summary: SendSummary, journal: JournalBackend) -> None:
    """Set the summary's exit code and the causes it was chosen from."""
    causes = send_causes(summary, journal)
    summary.exit_causes = tuple(causes)
    summary.exit_code = worst(*(cause.code for cause in causes))


def send_causes(summary: SendSummary, journal: JournalBackend) -> list[Cause]:
    """What the run itself stopped on first, then what the journal asks of a person, then
    (for an exit 0) what the run did."""
    causes = []
    if "credentials" in summary.stops:
        causes.append(Cause(ExitCode.AUTH_REFUSED, "the API refused the credentials"))
    if "wrong_url" in summary.stops:
        causes.append(Cause(ExitCode.COULD_NOT_RUN, "the base URL did not answer as GoRoute"))
    if summary.signals:  # also when the deadline or an outage stopped it first
        causes.append(Cause(ExitCode.INTERRUPTED, f"interrupted by {summary.signals[0]}"))
    if "lease_lost" in summary.stops:  # a worker of a shared journal: the rest is another's
        causes.append(Cause(ExitCode.INCOMPLETE, "this worker's lease was lost"))
    if "lock_lost" in summary.stops:
        causes.append(Cause(ExitCode.LOCKED, f"its run lock file was {LOCK_LOST}"))
    if summary.unsent > 0 and (begun := journal.unfinished_history_check()) is not None:
        # A worker of a shared journal: first sends wait while another send's check has no end.
        waiting = f"first sends wait for the history check begun in {begun} to end"
        causes.append(Cause(ExitCode.INCOMPLETE, waiting))
    if "deadline" in summary.stops:
        left = f", {summary.unsent} not started" if summary.unsent > 0 else ""
        causes.append(Cause(ExitCode.INCOMPLETE, f"deadline reached{left}"))
    if summary.unvalidated:  # --validate was asked, and GoRoute's validation did not answer
        causes.append(Cause(ExitCode.INCOMPLETE, f"{summary.unvalidated} not validated"))
    journal_causes = attention_causes(journal, journal.clock())
    if any(cause.code is ExitCode.INCOMPLETE for cause in journal_causes):
        for stop, text in (("outage", "GoRoute did not answer"), ("rate_limit", "rate limited")):
            if stop in summary.stops:
                causes.append(Cause(ExitCode.INCOMPLETE, text))
    causes += journal_causes
    done = sorted(summary.counts().items())
    causes += [Cause(ExitCode.OK, f"{n} {state}") for state, n in done if state != "unknown"]
    if not summary.results:
        causes.append(Cause(ExitCode.OK, "nothing to send"))
    return causes

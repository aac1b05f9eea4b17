"""A send that finds nothing to send and nothing to replay: the same run, without a client.

Most cron runs are this one: the outbox holds nothing new. Building the HTTP client (its TLS
context loads the CA bundle) and importing the sender, httpx and asyncio cost a run like that
three times what its scan and its journal do. Nothing is asked of GoRoute when nothing goes
out, so ``runner.send`` asks ``nothing_to_send`` first, once the history check is done, and
then ``idle_run`` comes to the summary ``Sender.run`` would come to with no work (tests hold
the two to the same run record): the plan's held invoices, the journal's counts, a stop
signal heard since the scan or a deadline already spent, and the exit code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from invoicectl.journal.interface import JournalBackend
from invoicectl.lifecycle.plan import held_for_reconcile, plan
from invoicectl.send.exit_codes import judge_exit
from invoicectl.send.options import SendOptions
from invoicectl.send.stopping import Stopping
from invoicectl.send.summary import SendSummary


def nothing_to_send(journal: JournalBackend, options: SendOptions) -> bool:
    """No replay and no new send planned, and no ``--new-version`` to apply (that makes a
    pending invoice of one already settled)."""
    if options.new_versions:
        return False
    planned = plan(journal, journal.clock(), options.order)
    return not planned.replays and not planned.pending


def idle_run(
    journal: JournalBackend,
    options: SendOptions,
    run_id: int,
    *,
    stopping: Stopping,
    signals: Sequence[str],
    monotonic: Callable[[], float],
    on_start: Callable[[SendSummary], None],
) -> SendSummary:
    """What ``Sender.run`` says of a run with no work. ``signals`` are those heard since the
    scan, which the send loop would hear first."""
    started = monotonic()
    summary = SendSummary(run_id=run_id)
    summary.held = held_for_reconcile(journal, plan(journal, journal.clock(), options.order))
    on_start(summary)
    for name in signals:
        stopping.stop(name)
    # The loop's deadline timer fires in its first turn when the deadline is spent, after a
    # signal heard there: both are then reasons, in that order.
    deadline = options.deadline
    if deadline is not None and monotonic() - started >= deadline:
        stopping.stop("deadline")
    summary.stopped_by = stopping.first
    summary.stops = tuple(stopping.reasons)
    summary.elapsed = monotonic() - started
    summary.journal_counts = journal.state_counts()
    judge_exit(summary, journal)
    return summary

"""One ``invoicectl reconcile`` from start to end: lock, check the environment, judge, record.

The CLI calls ``reconcile`` and renders the ``ReconcileReport`` that comes back. Requests a dead
run left without an answer are first settled as a send's start settles them (``unknown``), so
that they are looked up like any unanswered send. A stop signal
during the lookups cancels them (GETs change nothing remote, and nothing is written before
every lookup has finished) and ends the run as ``Interrupted``: exit 130, the run recorded.
"""

from __future__ import annotations

from dataclasses import replace

import httpx

from invoicectl.environment import binding_of, check_environment
from invoicectl.errors import ExitCode, worst
from invoicectl.goroute.limiter import OnWait, RateLimiter
from invoicectl.interrupts import RunSignals, run_cancelled_by_signals
from invoicectl.journal import locked_journal, shared_budget
from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import Hold
from invoicectl.lifecycle.plan import clashes_past_asking
from invoicectl.lifecycle.sending import close_unanswered
from invoicectl.reconcile import ReconcileReport
from invoicectl.reconcile import reconcile as judge
from invoicectl.reconcile.progress import OnLookup
from invoicectl.runs import REAL_CLOCKS, Clocks, Session, make_client, no_session, recorded_run
from invoicectl.settings import Settings


def reconcile(
    settings: Settings,
    *,
    apply: bool = False,
    allow_environment_change: bool = False,
    transport: httpx.AsyncBaseTransport | None = None,
    session: Session = no_session,
    clocks: Clocks = REAL_CLOCKS,
    on_progress: OnLookup | None = None,
    on_wait: OnWait | None = None,
) -> ReconcileReport:
    """What really happened to every send that needs a look; nothing is ever resent.

    ``on_progress`` hears how far the lookups have got, ``on_wait`` every wait before it
    starts (pacing, Retry-After, a backoff): the CLI draws them, the report comes at the end.
    """
    # Beside send workers on a PostgreSQL journal: what a live worker holds is left to it
    # (``InvoiceBusy``), and the lookups take their slots from the account's shared budget.
    journal_lock = locked_journal(settings.journal, "reconcile", clock=clocks.wall, shared=True)
    with RunSignals() as signals, journal_lock as journal, session() as emulated:
        transport = transport or emulated
        check_environment(journal, allow_change=allow_environment_change, **binding_of(settings))
        # A request a dead run left without an answer (a send killed mid-request) is settled
        # as the next send would settle it, unknown, and so looked up here (helper-107: after
        # a kill -9 reconcile said "nothing to reconcile", exit 0, of invoices GoRoute held).
        close_unanswered(journal)
        account = settings.api_key.fingerprint if settings.api_key else None
        options = {"apply": apply, "rate": settings.rate_per_minute, "sandbox": settings.sandbox}
        with recorded_run(journal, "reconcile", options, settings) as run_id:

            async def run() -> ReconcileReport:
                async with make_client(settings, transport) as client:
                    return await judge(
                        journal,
                        client,
                        limiter=RateLimiter(
                            settings.rate_per_minute,
                            clock=clocks.monotonic,
                            sleep=clocks.sleep,
                            on_wait=on_wait,
                            permits=shared_budget(journal, account),
                        ),
                        policy=settings.retry_policy(),
                        apply=apply,
                        concurrency=settings.concurrency,
                        run_id=run_id,
                        on_progress=on_progress,
                    )

            report = _with_holds(journal, run_cancelled_by_signals(signals, run()))
            summary = {"counts": report.counts, "apply": apply}
            journal.finish_run(run_id, int(report.exit_code), summary)
    return report


def _with_holds(journal: JournalBackend, report: ReconcileReport) -> ReconcileReport:
    """``report`` with the invoices on hold it judged none of (helper-107: a send held 10 as
    "not checked", exit 4, and reconcile then said "nothing to reconcile", exit 0); those
    that ask nothing of a person (``clashes_past_asking``) left out."""
    judged = {case.invoice_id for case in report.cases} | clashes_past_asking(journal)
    held = [i for i in journal.invoice_ids([], None, [Hold.held]) if i not in judged]
    if not held:
        return report
    code = worst(report.exit_code, ExitCode.NEEDS_RECONCILE)
    return replace(report, on_hold=len(held), exit_code=code)

"""One ``invoicectl send`` from start to end: lock, scan, bind, send, record the run.

The CLI calls ``send`` (or ``dry_run``) and renders what comes back. Stop signals are held
from before the lock until the run's state is saved (``interrupts.RunSignals``): during the
scan they interrupt it, after it they reach the send loop through ``Sender.request_stop``,
and one that comes after the loop still makes the run's exit code 130.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from contextlib import ExitStack, suppress
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from invoicectl import config_values, event_loop
from invoicectl.environment import bind_environment, binding_of, check_environment
from invoicectl.errors import ExitCode, worst
from invoicectl.interrupts import Interrupted, RunSignals, run_cancelled_by_signals
from invoicectl.journal import CheckTurn, locked_journal, opened_journal, scan_turn
from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import Hold, SendOrder
from invoicectl.lifecycle.contradicted import hold_contradicted
from invoicectl.lifecycle.decisions import check_new_version
from invoicectl.lifecycle.plan import Plan, attention_causes, plan
from invoicectl.lifecycle.sending import close_unanswered
from invoicectl.lifecycle.suppliers import hold_other_suppliers
from invoicectl.runs import (
    REAL_CLOCKS,
    Clocks,
    Scan,
    Session,
    make_client,
    no_session,
    recorded_run,
)
from invoicectl.scan.report import ScanReport
from invoicectl.send.history import check_history
from invoicectl.send.history_ahead import begin_check_ahead, leave_check_to_next_send
from invoicectl.send.idle import idle_run, nothing_to_send
from invoicectl.send.marker import MarkerKeeper, marker_entry
from invoicectl.send.options import SendOptions
from invoicectl.send.other_accounts import hold_sent_by_others
from invoicectl.send.outbox_turns import marked_below, outbox_turn
from invoicectl.send.stopping import Stopping
from invoicectl.send.summary import DryRun, Progress, SendSummary
from invoicectl.settings import Settings

if TYPE_CHECKING:
    from pathlib import Path

    import httpx

    from invoicectl.goroute.limiter import OnWait


def send(
    settings: Settings,
    scan: Scan,
    options: SendOptions,
    *,
    allow_environment_change: bool = False,
    run_options: dict[str, Any] | None = None,
    on_scanned: Callable[[ScanReport], None] = lambda report: None,
    on_start: Callable[[SendSummary], None] = lambda summary: None,
    on_progress: Progress = lambda result, summary: None,
    on_wait: OnWait | None = None,
    on_stopping: Callable[[str, int], None] = lambda signal_name, in_flight: None,
    transport: httpx.AsyncBaseTransport | None = None,
    session: Session = no_session,
    clocks: Clocks = REAL_CLOCKS,
) -> tuple[ScanReport, SendSummary]:
    """Scan (``scan``, an outbox into the journal) and send what is pending; the journal
    records every step.

    ``options.deadline`` counts from here, scan included, so a cron run ends in time.
    ``on_stopping(signal name, requests in flight)`` is called at once for a first signal;
    ``on_wait`` hears every wait of the run before it starts (``goroute.limiter.Wait``).
    """
    started = clocks.monotonic()
    if transport is None and session is no_session:  # the network: refused before any scan
        config_values.refuse_plain_http(settings.base_url)
    # Send workers share a PostgreSQL journal (``send.workers``); a SQLite one has one run.
    journal_lock = locked_journal(
        settings.journal, "send", clock=clocks.wall, shared=True, create=True
    )
    with RunSignals() as signals, journal_lock as journal, ExitStack() as held:
        options = _hold_turns(options, held, settings, journal)
        # Where several hosts send, none first-sends while this one's history check runs.
        deadline = options.deadline  # the run's, from ``started``
        check_turn = CheckTurn(
            journal,
            left=lambda: None if deadline is None else deadline - (clocks.monotonic() - started),
            stop=lambda: _stop_if_signalled(signals),
        )
        held.callback(check_turn.give_back)
        # The turn before the scan when a check is due: its invoices are the check's.
        base_url, profile = settings.base_url, settings.profile
        ahead = begin_check_ahead(journal, base_url, profile, options.marked(), check_turn.take)
        bound_elsewhere = journal.bound_base_url() not in (None, marker_entry(base_url, profile))
        if ahead != "lost" and bound_elsewhere:
            # Bound elsewhere, this send is refused after its scan: what the marker says for
            # the journal's own base URL is left to the next send there, as a scan's is.
            leave_check_to_next_send(journal, options.marked(), base_url, profile, check_turn.take)
        with scan_turn(journal):
            # Before the scan: an edited file must not hide that its send is unknown.
            left_unanswered = close_unanswered(journal)
            report = scan(journal)
            report.left_unanswered[:0] = left_unanswered
        on_scanned(report)
        signals.hold()  # from here a signal stops the run in order, never mid-write
        # Checked now, bound only by the first answer from the API itself (Sender).
        binding = binding_of(settings)
        check_environment(journal, allow_change=allow_environment_change, **binding)
        # A state or hold invoicectl never writes (changed by hand) is refused before any
        # request, not found by the exit code's count after the run has sent and recorded.
        journal.refuse_unwritten()
        for invoice_id in options.new_versions:
            check_new_version(journal, invoice_id, journal.clock())
        if options.supplier is not None:  # a profile's send: its supplier's invoices only
            report.held_for_others = hold_other_suppliers(
                journal, options.supplier, options.new_versions, options.skip_invoices
            )
        if options.deadline is not None:
            left = max(0.0, options.deadline - (clocks.monotonic() - started))
            options = replace(options, deadline=left)
        with recorded_run(journal, "send", run_options or {}, settings) as run_id:
            hold_contradicted(journal)  # a row edited or lost: never sent twice for it
            if options.supplier is None:  # it takes every file
                entry = (settings.base_url, marker_entry(settings.base_url, settings.profile))
                for outbox in options.marked():
                    hold_sent_by_others(journal, outbox, entry, opened_journal)
            # Nothing to send or replay (most cron runs): no request can go out, so neither
            # the client nor the emulator (``--sandbox``) is built, nor the sender imported.
            idle = nothing_to_send(journal, options)
            if not idle and transport is None:
                transport = held.enter_context(session())
            # A journal with no history here, or one that lost it, asks GoRoute first.
            # Its GETs change nothing remote: a stop signal cancels them where they wait.
            options, keeper = check_history(
                journal,
                settings,
                options,
                run_id,
                transport=transport,
                clocks=clocks,
                take_turn=check_turn.take,
                run=lambda main: run_cancelled_by_signals(signals, main),
            )
            check_turn.give_back()

            def bind() -> None:
                bind_environment(journal, allow_change=allow_environment_change, **binding)

            callbacks = {
                "on_start": on_start,
                "on_progress": on_progress,
                "on_wait": on_wait,
                "bind": bind,
                "on_durable_attempt": keeper.durable if keeper else lambda attempt_id: None,
            }
            stopping = Stopping(grace=options.stop_grace, on_stopping=on_stopping)
            if idle:
                summary = idle_run(
                    journal,
                    options,
                    run_id,
                    stopping=stopping,
                    signals=signals.undelivered,
                    monotonic=clocks.monotonic,
                    on_start=on_start,
                )
            else:
                run = _send(
                    journal, settings, options, run_id, transport, clocks, callbacks, stopping
                )
                summary = _run_loop(signals, stopping, _keeping(keeper, run))
            summary.heard_late(signals.received)
            for cause in report.send_causes():
                summary.add_cause(cause)
            # The exit code is recorded: a signal from now on (held, never raised) changes
            # nothing, or the process would exit 130 while the run's row, and the metrics'
            # last success, said 0 (helper-68).
            journal.finish_run(run_id, int(summary.exit_code), summary.to_dict())
            if keeper is not None:  # every attempt of the run is durable now
                keeper.durable(journal.last_attempt_of(run_id) or 0)
                keeper.write()
    return report, summary


def _hold_turns(
    options: SendOptions, held: ExitStack, settings: Settings, journal: JournalBackend
) -> SendOptions:
    """Two journals never send from one outbox at once: the run's turn on each directory
    whose marker it reads, held by ``held``. A recursive run walks for them again once it
    holds its outbox's turn, which a send of a subdirectory taken since meets."""
    if options.outbox is None:
        return options
    journal_id = journal.identity().journal_id

    def take(outbox: Path, below: bool = False) -> None:
        held.enter_context(
            outbox_turn(
                outbox, settings.base_url, journal_id, options.supplier, settings.journal, below
            )
        )

    take(options.outbox, below=options.recursive)
    if options.recursive:
        options = replace(options, marked_below=marked_below(options.outbox))
    for outbox in options.marked_below:
        take(outbox)
    return options


def _stop_if_signalled(signals: RunSignals) -> None:
    """``Interrupted`` by a stop signal the run holds (one it does not is raised at once)."""
    if signals.undelivered:
        raise Interrupted(signals.undelivered[0])


def _run_loop(
    signals: RunSignals, stopping: Stopping, run: Coroutine[Any, Any, SendSummary]
) -> SendSummary:
    return event_loop.run(_listening(signals, stopping, run))


async def _keeping(
    keeper: MarkerKeeper | None, run: Coroutine[Any, Any, SendSummary]
) -> SendSummary:
    """``run``, the outbox marker kept up to date beside it."""
    if keeper is None:
        return await run
    import asyncio  # here: a run with nothing to send never starts a loop

    keeping = asyncio.create_task(keeper.keep())
    try:
        return await run
    finally:
        keeping.cancel()
        with suppress(asyncio.CancelledError):
            await keeping


async def _listening(
    signals: RunSignals, stopping: Stopping, run: Coroutine[Any, Any, SendSummary]
) -> SendSummary:
    with signals.listening(stopping.stop):
        return await run


async def _send(
    journal: JournalBackend,
    settings: Settings,
    options: SendOptions,
    run_id: int,
    transport: httpx.AsyncBaseTransport | None,
    clocks: Clocks,
    callbacks: dict[str, Any],
    stopping: Stopping,
) -> SendSummary:
    from invoicectl.send.sender import Sender  # here: it brings httpx and the client
    from invoicectl.send.workers import as_worker

    with as_worker(journal, settings, options, run_id) as work:
        async with make_client(settings, transport) as client:
            sender = Sender(
                journal,
                client,
                options,
                run_id,
                monotonic=clocks.monotonic,
                sleep=clocks.sleep,
                rng=clocks.rng,
                stopping=stopping,
                work=work,
                **callbacks,
            )
            try:
                return await sender.run()
            except Exception as failed:  # a journal write that failed, say: the line counts
                if made := sender.summary.requests:  # what went out before it (helper-92)
                    failed.add_note(
                        f"this run made {made} request(s) before it: `invoicectl status` shows "
                        "what the journal holds, and the next send replays the unanswered "
                        "under their keys"
                    )
                raise


def dry_run(
    settings: Settings,
    scan: Scan,
    order: SendOrder = SendOrder.due,
    *,
    clocks: Clocks = REAL_CLOCKS,
    outboxes: Sequence[Path] = (),
) -> tuple[ScanReport, DryRun]:
    """Scan and plan; no request, no run recorded, and no API key needed. A base URL the
    send itself would refuse (plain http to a remote host) is refused here too: a plan for
    a send that cannot start would mislead."""
    if not settings.sandbox:
        config_values.refuse_plain_http(settings.base_url)
    with locked_journal(
        settings.journal, "send --dry-run", clock=clocks.wall, shared=True, create=True
    ) as journal:
        check_turn = CheckTurn(journal)  # another host's send may check beside a dry run
        try:
            base_url, profile = settings.base_url, settings.profile  # another outbox's send
            leave_check_to_next_send(journal, outboxes, base_url, profile, check_turn.take)
            with scan_turn(journal):
                report = scan(journal)
        finally:
            check_turn.give_back()
        now = journal.clock()
        planned = plan(journal, now, order)
        counts = journal.state_counts()
        # What is left to send is the plan, not a problem: a dry run says 0 for it.
        causes = [c for c in attention_causes(journal, now) if c.code is not ExitCode.INCOMPLETE]
        late = _late(journal, planned, settings.rate_per_minute, now)
        on_hold = journal.hold_counts()[Hold.held]
    skipped = {
        state: count
        for state, count in counts.items()
        if count and state not in ("pending", "unknown")
    }
    requests = len(planned.pending) + len(planned.replays)
    return report, DryRun(
        would_send=planned.pending,
        would_replay=planned.replays,
        held=planned.held,
        skipped=skipped,
        estimated_seconds=requests * _PACE / settings.rate_per_minute,
        rate_per_minute=settings.rate_per_minute,
        exit_code=worst(*(cause.code for cause in (*causes, *report.send_causes()))),
        exit_causes=(*causes, *report.send_causes()),
        order=order,
        late=late,
        on_hold=on_hold,
    )


# The limiter paces at (60 s + 1 s margin) / rate.
_PACE = 61.0


def _late(
    journal: JournalBackend, planned: Plan, rate_per_minute: int, now: datetime
) -> tuple[tuple[str, str], ...]:
    """(invoice ID, due date) of each new send that would go out after its due date at
    ``rate_per_minute``, after the replays that go first."""
    late = []
    for position, invoice_id in enumerate(planned.pending, start=len(planned.replays) + 1):
        invoice = journal.invoice(invoice_id)
        due = invoice.due_date if invoice and invoice.document_type == "Invoice" else None
        goes_out = now + timedelta(seconds=position * _PACE / rate_per_minute)
        if due is not None and goes_out.date().isoformat() > due:
            late.append((invoice_id, due))
    return tuple(late)

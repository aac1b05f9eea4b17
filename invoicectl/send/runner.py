"""One ``invoicectl send`` from start to end: lock, scan, bind, send, record the run.

The CLI calls ``send`` (or ``dry_run``) and renders what comes back; signals reach the run
through ``Sender.request_stop``.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from invoicectl import lifecycle
from invoicectl.environment import bind_environment, check_environment
from invoicectl.errors import ExitCode, InvoicectlError
from invoicectl.goroute.client import GoRouteClient
from invoicectl.goroute.limiter import RateLimiter
from invoicectl.journal import Journal, locked_journal
from invoicectl.journal.records import InvoiceState
from invoicectl.reconcile import ReconcileReport
from invoicectl.scan.ingest import ScanReport, scan_directory
from invoicectl.send.sender import Progress, Sender, SendOptions, SendSummary
from invoicectl.settings import Settings


@dataclass(frozen=True)
class DryRun:
    would_send: tuple[str, ...]
    would_replay: tuple[str, ...]
    held: tuple[str, ...]  # unknown outside the key window: reconcile first
    skipped: dict[InvoiceState, int]  # state -> count of invoices nothing is done for
    estimated_seconds: float
    rate_per_minute: int
    exit_code: ExitCode

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": True,
            "would_send": list(self.would_send),
            "would_replay": list(self.would_replay),
            "held_for_reconcile": list(self.held),
            "skipped": self.skipped,
            "estimated_seconds": round(self.estimated_seconds, 1),
            "rate_per_minute": self.rate_per_minute,
            "exit_code": int(self.exit_code),
        }


@contextmanager
def sandbox_session(settings: Settings) -> Iterator[httpx.AsyncBaseTransport | None]:
    """``--sandbox``: the built-in emulator in this process, its memory kept beside the
    sandbox journal between runs (so reconcile sees what send sent). None otherwise."""
    if not settings.sandbox:
        yield None
        return
    from invoicectl.sandbox import Sandbox, SandboxConfig
    from invoicectl.sandbox.persist import load, save

    # Generous limits: the client paces itself to --rate anyway.
    emulator = Sandbox(SandboxConfig.for_tier("professional", lifecycle_step=1.0))
    memory = settings.journal.with_name(settings.journal.stem + "-emulator.json")
    load(emulator, memory)
    try:
        yield emulator.transport()
    finally:
        save(emulator, memory)


def make_client(settings: Settings, transport: httpx.AsyncBaseTransport | None) -> GoRouteClient:
    assert settings.api_key is not None
    return GoRouteClient(
        settings.base_url,
        settings.api_key,
        transport=transport,
        max_connections=max(10, settings.concurrency),
    )


@contextmanager
def recorded_run(
    journal: Journal, command: str, options: dict[str, Any], settings: Settings
) -> Iterator[int]:
    """A runs row from start to end; a run that fails still records how it ended."""
    assert settings.api_key is not None
    run_id = journal.begin_run(
        command,
        options,
        base_url=settings.base_url,
        key_fingerprint=settings.api_key.fingerprint,
    )
    try:
        yield run_id
    except InvoicectlError as error:
        journal.finish_run(run_id, int(error.exit_code), {"error": str(error)})
        raise


def send(
    settings: Settings,
    directory: Path,
    options: SendOptions,
    *,
    recursive: bool = False,
    allow_environment_change: bool = False,
    run_options: dict[str, Any] | None = None,
    on_scanned: Callable[[ScanReport], None] = lambda report: None,
    on_start: Callable[[SendSummary], None] = lambda summary: None,
    on_progress: Progress = lambda result, summary: None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> tuple[ScanReport, SendSummary]:
    """Scan ``directory`` and send what is pending; the journal records every step.

    ``options.deadline`` counts from here, scan included, so a cron run ends in time.
    """
    started = time.monotonic()
    journal_lock = locked_journal(settings.journal, "send")
    with journal_lock as journal, sandbox_session(settings) as emulated:
        transport = transport or emulated
        # Before the scan: a file edited after a crash must not hide that its send is unknown.
        lifecycle.close_unanswered(journal)
        report = scan_directory(journal, directory, recursive=recursive)
        on_scanned(report)
        bind_environment(journal, settings.base_url, allow_change=allow_environment_change)
        for invoice_id in options.new_versions:
            lifecycle.check_new_version(journal, invoice_id, journal.clock())
        if options.deadline is not None:
            left = max(0.0, options.deadline - (time.monotonic() - started))
            options = replace(options, deadline=left)
        with recorded_run(journal, "send", run_options or {}, settings) as run_id:
            callbacks = {"on_start": on_start, "on_progress": on_progress}
            summary = asyncio.run(_send(journal, settings, options, run_id, transport, callbacks))
            journal.finish_run(run_id, int(summary.exit_code), summary.to_dict())
    return report, summary


async def _send(
    journal: Journal,
    settings: Settings,
    options: SendOptions,
    run_id: int,
    transport: httpx.AsyncBaseTransport | None,
    callbacks: dict[str, Any],
) -> SendSummary:
    async with make_client(settings, transport) as client:
        sender = Sender(journal, client, options, run_id, **callbacks)
        with _stop_on_signals(sender):
            return await sender.run()


@contextmanager
def _stop_on_signals(sender: Sender) -> Iterator[None]:
    """SIGINT/SIGTERM: take no new work, let requests in flight finish, exit 130."""
    loop = asyncio.get_running_loop()
    installed = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, sender.request_stop, "signal")
            installed.append(signum)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - not the main thread
            pass
    try:
        yield
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)


def dry_run(
    settings: Settings, directory: Path, *, recursive: bool = False
) -> tuple[ScanReport, DryRun]:
    """Scan and plan; no request, no run recorded."""
    with locked_journal(settings.journal, "send --dry-run") as journal:
        report = scan_directory(journal, directory, recursive=recursive)
        plan = lifecycle.plan(journal, journal.clock())
        counts = journal.state_counts()
        attention = lifecycle.attention(journal, journal.clock())
    skipped = {
        state: count
        for state, count in counts.items()
        if count and state not in ("pending", "unknown")
    }
    requests = len(plan.pending) + len(plan.replays)
    # The limiter paces at (60 s + 1 s margin) / rate.
    estimated = requests * 61.0 / settings.rate_per_minute
    return report, DryRun(
        would_send=plan.pending,
        would_replay=plan.replays,
        held=plan.held,
        skipped=skipped,
        estimated_seconds=estimated,
        rate_per_minute=settings.rate_per_minute,
        # What is left to send is the plan, not a problem: a dry run says 0 for it.
        exit_code=ExitCode.OK if attention is ExitCode.INCOMPLETE else attention,
    )


def reconcile(
    settings: Settings,
    *,
    apply: bool = False,
    allow_environment_change: bool = False,
    transport: httpx.AsyncBaseTransport | None = None,
) -> ReconcileReport:
    """What really happened to every send that needs a look; nothing is ever resent."""
    from invoicectl.reconcile import reconcile as judge

    journal_lock = locked_journal(settings.journal, "reconcile")
    with journal_lock as journal, sandbox_session(settings) as emulated:
        transport = transport or emulated
        check_environment(journal, settings.base_url, allow_change=allow_environment_change)
        options = {"apply": apply, "rate": settings.rate_per_minute, "sandbox": settings.sandbox}
        with recorded_run(journal, "reconcile", options, settings) as run_id:

            async def run() -> ReconcileReport:
                async with make_client(settings, transport) as client:
                    return await judge(
                        journal,
                        client,
                        limiter=RateLimiter(settings.rate_per_minute),
                        policy=settings.retry_policy(),
                        apply=apply,
                        concurrency=settings.concurrency,
                        run_id=run_id,
                    )

            report = asyncio.run(run())
            summary = {"counts": report.counts, "apply": apply}
            journal.finish_run(run_id, int(report.exit_code), summary)
    return report

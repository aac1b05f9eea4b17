"""Shared set-up for send tests: an emulator, settings pointing at it, and a way to run send."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from invoicectl.goroute.retry import RetryPolicy
from invoicectl.journal import open_journal
from invoicectl.locations import Location
from invoicectl.runs import REAL_CLOCKS, Clocks
from invoicectl.sandbox import DEFAULT_API_KEY, Sandbox, SandboxConfig
from invoicectl.scan.ingest import scanning
from invoicectl.send import runner
from invoicectl.send.options import SendOptions
from invoicectl.settings import Settings, resolve

FAST_RETRY = RetryPolicy(max_attempts=5, max_wait=5.0, backoff_initial=0.02, backoff_max=0.2)


def emulator(**overrides: Any) -> Sandbox:
    overrides.setdefault("seed", 7)
    return Sandbox(SandboxConfig.for_tier("enterprise", **{
        "rate_per_minute": 1_000_000, "max_concurrent": 1000, **overrides,
    }))  # fmt: skip


def settings_for(
    journal: Location, base_url: str = "http://sandbox.test", **kwargs: Any
) -> Settings:
    environ = {"GOROUTE_API_KEY": DEFAULT_API_KEY, "GOROUTE_BASE_URL": base_url}
    environ.update(kwargs.pop("environ", {}))
    return resolve(journal=journal, environ=environ, **kwargs)


def send(
    settings: Settings,
    outbox: Path,
    transport: httpx.AsyncBaseTransport | None,
    **options: Any,
):
    options.setdefault("rate_per_minute", 60_000)
    options.setdefault("concurrency", 10)
    options.setdefault("policy", FAST_RETRY)
    options.setdefault("outbox", outbox)  # where the history marker goes, as the CLI does
    allow = options.pop("allow_environment_change", False)
    clocks = options.pop("clocks", REAL_CLOCKS)
    return runner.send(
        settings,
        scanning(outbox),
        SendOptions(**options),
        transport=transport,
        allow_environment_change=allow,
        clocks=clocks,
    )


def at(moment: datetime) -> Clocks:
    """A run's clocks with its wall clock at ``moment``, moving on in real time from there."""
    offset = moment - datetime.now(UTC)
    return Clocks(wall=lambda: datetime.now(UTC) + offset)


def states(journal_path: Location) -> dict[str, str]:
    with open_journal(journal_path) as journal:
        return {row.invoice_id: row.state for row in journal.invoices()}


def assert_each_delivered_once(sandbox_stats: dict[str, Any], invoice_ids: list[str]) -> None:
    per_invoice = sandbox_stats["per_invoice"]
    assert sandbox_stats["duplicates"] == []
    missing = [invoice_id for invoice_id in invoice_ids if per_invoice.get(invoice_id) != 1]
    assert missing == [], f"not exactly one transaction: {missing[:10]}"


def committed_events(location: Location) -> list[str]:
    """The events' details as another connection sees them: what is committed, in order."""
    from backends import witness_rows

    return [row[0] for row in witness_rows(location, "SELECT detail FROM events ORDER BY id")]


def note(journal: Any, detail: str) -> str:
    """A small write of the journal's own (an event), for tests of how writes commit."""
    journal.add_event(None, "note", detail)
    return detail

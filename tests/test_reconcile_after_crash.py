"""reconcile after a send killed mid-request: its requests left without an answer are looked up.

helper-107: a send killed (kill -9) while GoRoute was answering left its invoices ``pending``
with an attempt and no answer; ``reconcile`` said "nothing to reconcile", exit 0, of invoices
GoRoute held. It now settles them first, as the next send would (``unknown``), and judges them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from backends import witness_execute
from sendkit import FAST_RETRY, at, emulator, send, settings_for, states
from ublfactory import write_invoice

from invoicectl.errors import ExitCode
from invoicectl.goroute.retry import RetryPolicy
from invoicectl.locations import Location
from invoicectl.reconcile import Verdict
from invoicectl.reconcile.runner import reconcile
from invoicectl.sandbox import Sandbox
from invoicectl.settings import Settings

ONE_TRY = RetryPolicy(max_attempts=1, backoff_initial=0.01, backoff_max=0.02)


def _killed_mid_request(settings: Settings, outbox: Path, sandbox: Sandbox, hours_ago: float):
    """A send whose requests GoRoute took and whose process died before any answer was
    recorded: what kill -9 during the requests leaves."""
    sandbox.set_faults(drop_rate=1.0)
    then = datetime.now(UTC) - timedelta(hours=hours_ago)
    send(settings, outbox, sandbox.transport(), policy=ONE_TRY, clocks=at(then))
    sandbox.set_faults(drop_rate=0.0)
    witness_execute(settings.journal, "UPDATE attempts SET outcome = NULL, finished_at = NULL")
    witness_execute(settings.journal, "UPDATE invoices SET state = 'pending'")
    if hours_ago >= 24:
        sandbox.advance_clock(hours_ago * 3600)


@pytest.mark.parametrize("hours_ago", [1, 25])  # its key's window open, then closed
def test_a_send_killed_mid_request_is_looked_up_and_adopted(
    outbox: Path, journal_at: Location, hours_ago: float
):
    ids = ["INV-1", "INV-2"]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    sandbox = emulator()
    settings = settings_for(journal_at)
    _killed_mid_request(settings, outbox, sandbox, hours_ago)
    assert states(journal_at) == dict.fromkeys(ids, "pending")

    report = reconcile(settings, transport=sandbox.transport())

    assert {case.invoice_id: case.verdict for case in report.cases} == dict.fromkeys(
        ids, Verdict.unknown_found
    )
    assert report.exit_code == ExitCode.NEEDS_RECONCILE  # --apply adopts them
    applied = reconcile(settings, apply=True, transport=sandbox.transport())
    assert applied.applied == tuple(ids) and applied.exit_code == ExitCode.OK
    assert states(journal_at) == dict.fromkeys(ids, "accepted")
    # Nothing was sent again: one request per invoice reached GoRoute, the killed run's.
    send(settings, outbox, sandbox.transport(), policy=FAST_RETRY)
    assert sandbox.stats()["sends_received"] == len(ids)

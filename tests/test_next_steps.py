"""The next step a report names works when an operator follows it, in order, and every step
passes the same duplicate guard: each test walks one such path and counts what the emulator
received."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sendkit import emulator, send, settings_for, states
from ublfactory import write_invoice

from invoicectl.errors import UsageError
from invoicectl.goroute.retry import RetryPolicy
from invoicectl.journal import open_journal
from invoicectl.lifecycle.decisions import check_new_version
from invoicectl.locations import Location
from invoicectl.reconcile.runner import reconcile

ONE_TRY = RetryPolicy(max_attempts=1, backoff_initial=0.01, backoff_max=0.02)


@pytest.fixture
def journal_path(journal_at: Location) -> Location:
    return journal_at


def _refusal(journal_path: Location, invoice_id: str) -> str | None:
    with open_journal(journal_path) as journal:
        try:
            check_new_version(journal, invoice_id, datetime.now(UTC))
        except UsageError as error:
            return str(error)
    return None


def test_an_unanswered_send_that_failed_is_replayed_then_sent_again(
    journal_path: Location, outbox: Path
):
    """GoRoute kept the request, lost its answer, and the delivery failed, inside the key's
    window. Reconcile's next step is the replay under the key (a new key is refused while a
    replay can still say what the key did), then reconcile, then the new version: each step
    as named works, and the invoice goes out once more only at the last."""
    write_invoice(outbox, "F-1", receiver="9915:reject-all")
    sandbox = emulator(drop_rate=1.0)
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), policy=ONE_TRY)
    assert states(journal_path) == {"F-1": "unknown"}
    sandbox.advance_clock(600)  # its delivery has failed by now

    (case,) = reconcile(settings, transport=sandbox.transport()).cases
    assert case.verdict.value == "sent_then_failed"
    assert "`invoicectl send DIR` replays it under its key" in case.action, case.action
    assert "`invoicectl send` replays it" in (_refusal(journal_path, "F-1") or "")  # as named

    sandbox.set_faults(drop_rate=0.0)
    send(settings, outbox, sandbox.transport(), policy=ONE_TRY)
    assert states(journal_path) == {"F-1": "accepted"}
    assert sandbox.stats()["per_invoice"] == {"F-1": 1}  # the replay delivered nothing new
    refused = _refusal(journal_path, "F-1") or ""
    assert "`invoicectl reconcile`" in refused and "not known" in refused, refused

    (case,) = reconcile(settings, transport=sandbox.transport()).cases
    assert case.verdict.value == "delivery_failed"
    assert _refusal(journal_path, "F-1") is None
    send(settings, outbox, sandbox.transport(), policy=ONE_TRY, new_versions=("F-1",))
    assert sandbox.stats()["per_invoice"] == {"F-1": 2}

"""A send with nothing to send or replay (issue 13, start-up): no client, the same run.

``runner.send`` takes ``send.idle`` when the plan is empty, so that a cron run over an outbox
with nothing new builds no HTTP client and no emulator. These tests hold that path to what the
sender itself comes to with no work, on the same journal: the summary, so the run record and
the exit code, with a person's work waiting, a spent deadline and a stop signal.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sendkit import FAST_RETRY, at, emulator, send, settings_for
from ublfactory import write_invoice

from invoicectl.errors import ExitCode
from invoicectl.goroute.client import GoRouteClient
from invoicectl.goroute.retry import RetryPolicy
from invoicectl.journal import Journal
from invoicectl.scan.ingest import scanning
from invoicectl.send import runner
from invoicectl.send.idle import idle_run, nothing_to_send
from invoicectl.send.options import SendOptions
from invoicectl.send.sender import Sender
from invoicectl.send.stopping import Stopping
from invoicectl.send.summary import SendSummary
from invoicectl.settings import Settings

OPTIONS = {"rate_per_minute": 60_000, "concurrency": 10, "policy": FAST_RETRY}


def settled(outbox: Path, journal: Path) -> Settings:
    """A journal whose every invoice is settled, some in states that need a person: one
    accepted, one refused with 422 (key_reused), one rejected, one invalid, and one left
    unknown by a run 25 hours ago (held: its key's window has closed)."""
    settings = settings_for(journal)
    sandbox = emulator()
    write_invoice(outbox, "OLD-1")
    sandbox.set_faults(drop_rate=1.0)
    then = datetime.now(UTC) - timedelta(hours=25)
    send(settings, outbox, sandbox.transport(), policy=RetryPolicy(max_attempts=1), clocks=at(then))
    sandbox.set_faults(drop_rate=0.0)
    with sqlite3.connect(journal) as conn:  # a crash after the request left it so
        conn.execute("UPDATE attempts SET outcome = NULL, finished_at = NULL")
        conn.execute("UPDATE invoices SET state = 'pending'")
    sandbox.advance_clock(25 * 3600)
    write_invoice(outbox, "GOOD-1")
    write_invoice(outbox, "TAKEN-1")
    write_invoice(outbox, "NOWHERE-1", receiver="9915:not-registered")
    (outbox / "BROKEN-1.xml").write_text("<Invoice>", encoding="utf-8")
    sandbox.preload_key("invoice-TAKEN-1", transaction_id="txn_elsewhere")
    send(settings, outbox, sandbox.transport(), check_receivers=False)
    return settings


def empty(outbox: Path, journal: Path) -> Settings:
    """A journal that has never held an invoice, and an empty outbox."""
    return settings_for(journal)


def what_the_sender_says(
    journal_path: Path, options: SendOptions, signal: str | None = None
) -> dict[str, Any]:
    """``Sender.run`` with no work on this journal, with ``signal`` heard as the loop starts
    (as ``runner.send`` hands on one that came after the scan)."""
    stopping = Stopping(grace=options.stop_grace)

    async def run(journal: Journal, run_id: int) -> SendSummary:
        async with GoRouteClient("http://sandbox.test", _key(), transport=_refused()) as client:
            sender = Sender(journal, client, options, run_id, stopping=stopping)
            if signal is not None:
                asyncio.get_running_loop().call_soon(stopping.stop, signal)
            return await sender.run()

    with Journal(journal_path) as journal:
        summary = asyncio.run(run(journal, journal.begin_run("send", {})))
    return _comparable(summary)


def what_idle_says(
    journal_path: Path, options: SendOptions, signal: str | None = None
) -> dict[str, Any]:
    started: list[SendSummary] = []
    with Journal(journal_path) as journal:
        assert nothing_to_send(journal, options)
        summary = idle_run(
            journal,
            options,
            journal.begin_run("send", {}),
            stopping=Stopping(grace=options.stop_grace),
            signals=[signal] if signal else [],
            monotonic=time.monotonic,
            on_start=started.append,
        )
    assert started == [summary]
    return _comparable(summary)


def _comparable(summary: SendSummary) -> dict[str, Any]:
    record = summary.to_dict()
    del record["timing"]["elapsed_seconds"]
    return record


def _key():  # type: ignore[no-untyped-def]
    from invoicectl.goroute.apikey import ApiKey
    from invoicectl.sandbox import DEFAULT_API_KEY

    return ApiKey(DEFAULT_API_KEY)


def _refused():  # type: ignore[no-untyped-def]
    import httpx

    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"a run with no work made a request: {request.url}")

    return httpx.MockTransport(handler)


def twin(journal: Path) -> Path:
    """A copy of the journal (closed, checkpointed), for the other path to run on."""
    with sqlite3.connect(journal) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    copy = journal.with_name("twin.db")
    shutil.copyfile(journal, copy)
    return copy


@pytest.mark.parametrize("journal_state", [empty, settled])
@pytest.mark.parametrize(
    ("deadline", "signal"), [(None, None), (0.0, None), (None, "SIGTERM"), (0.0, "SIGHUP")]
)
def test_nothing_to_send_comes_to_what_the_sender_comes_to(
    outbox: Path, tmp_path: Path, journal_state: Any, deadline: float | None, signal: str | None
) -> None:
    journal = tmp_path / "send.db"
    journal_state(outbox, journal)
    options = SendOptions(**OPTIONS, deadline=deadline)
    copy = twin(journal)

    assert what_idle_says(journal, options, signal) == what_the_sender_says(copy, options, signal)


def test_a_send_with_nothing_to_send_builds_neither_client_nor_emulator(
    outbox: Path, tmp_path: Path
) -> None:
    """Through ``runner.send``: the session (the emulator of ``--sandbox``) is never
    entered, no client is built, and the run's record says what the sender would say."""
    journal = tmp_path / "send.db"
    settings = settled(outbox, journal)
    copy = twin(journal)

    def no_emulator():  # type: ignore[no-untyped-def]
        raise AssertionError("a send with nothing to send entered the emulator's session")

    report, summary = runner.send(
        settings,
        scanning(outbox),
        SendOptions(**OPTIONS, outbox=outbox),
        session=no_emulator,
    )

    assert report.files == 5 and summary.planned == 0
    assert summary.held == ("OLD-1",)
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE
    with sqlite3.connect(journal) as conn:
        ((code, recorded),) = conn.execute(
            "SELECT exit_code, summary FROM runs WHERE id = ?", (summary.run_id,)
        ).fetchall()
    assert code == int(ExitCode.NEEDS_RECONCILE)
    recorded = json.loads(recorded)
    del recorded["timing"]["elapsed_seconds"]
    expected = what_the_sender_says(copy, SendOptions(**OPTIONS))
    assert {**recorded, "run_id": None} == {**expected, "run_id": None}


def test_work_to_do_still_enters_the_emulator(outbox: Path, tmp_path: Path) -> None:
    """One invoice to send: the session is entered (and the send goes through it)."""
    journal = tmp_path / "send.db"
    settings = settings_for(journal)
    write_invoice(outbox, "NEW-1")
    sandbox = emulator()
    entered: list[bool] = []

    def session():  # type: ignore[no-untyped-def]
        from contextlib import nullcontext

        entered.append(True)
        return nullcontext(sandbox.transport())

    _, summary = runner.send(
        settings,
        scanning(outbox),
        SendOptions(**OPTIONS, outbox=outbox, trust_new_journal=True),
        session=session,
    )

    assert entered == [True]
    assert summary.counts() == {"accepted": 1} and summary.exit_code == ExitCode.OK

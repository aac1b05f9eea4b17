"""The stop machinery in process, with a real journal and an answer that never comes.

The subprocess tests (``test_stopping``) use real signals and the real grace; these drive the
same ``Sender`` through ``request_stop`` with a short grace, so each case takes a moment.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from sendkit import send, settings_for, states
from ublfactory import write_invoice

from invoicectl.errors import ExitCode
from invoicectl.journal import Journal
from invoicectl.render.send import stop_line, summary_line
from invoicectl.runs import make_client
from invoicectl.scan.ingest import scan_directory
from invoicectl.send.options import SendOptions
from invoicectl.send.sender import Sender
from invoicectl.send.stopping import Stopping
from invoicectl.send.summary import SendSummary


@pytest.fixture
def journal_path(tmp_path: Path) -> Path:
    return tmp_path / "journal.db"


def never_answers() -> httpx.AsyncBaseTransport:
    async def handler(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    return httpx.MockTransport(handler)


def outbox_of(outbox: Path, count: int) -> list[str]:
    ids = [f"Q-{number:02d}" for number in range(count)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    return ids


def test_the_deadline_abandons_what_is_in_flight_after_the_grace(outbox: Path, journal_path: Path):
    ids = outbox_of(outbox, 5)

    _, summary = send(
        settings_for(journal_path), outbox, never_answers(), concurrency=2, deadline=1.0,
        stop_grace=0.2, check_receivers=False, order="scan", trust_new_journal=True,
    )  # fmt: skip

    assert summary.stops == ("deadline",) and summary.stopped_by == "deadline"
    assert (summary.abandoned, summary.abandoned_by) == (2, "deadline")
    assert summary.unanswered == 2 and summary.unsent == 3
    assert summary.exit_code == ExitCode.INCOMPLETE
    assert states(journal_path) == dict.fromkeys(ids[:2], "unknown") | dict.fromkeys(
        ids[2:], "pending"
    )
    with Journal(journal_path) as journal:
        (attempt,) = journal.attempts(ids[0])
        assert attempt.outcome == "no_answer" and "abandoned in flight" in attempt.message
        assert journal.invoice(ids[0]).idempotency_key == f"invoice-{ids[0]}"
        assert journal.invoice(ids[2]).idempotency_key is None  # never carried: no key
    line = summary_line(summary)
    assert "2 unanswered, will be replayed; 3 not started" in line
    assert "unknown" not in line


def test_signal_then_deadline_then_signal_keeps_every_reason(outbox: Path, journal_path: Path):
    outbox_of(outbox, 3)
    heard: list[tuple[str, int]] = []
    stopping = Stopping(grace=30.0, on_stopping=lambda name, n: heard.append((name, n)))

    async def stop_later() -> None:
        await asyncio.sleep(0.2)
        stopping.stop("deadline")
        await asyncio.sleep(0.05)
        stopping.stop("SIGTERM")
        await asyncio.sleep(0.05)
        stopping.stop("SIGTERM")  # the second abandons at once, long before the grace

    settings = settings_for(journal_path)
    with Journal(journal_path) as journal:
        scan_directory(journal, outbox)
        run_id = journal.begin_run("send", {})

        async def main():
            async with make_client(settings, never_answers()) as client:
                sender = Sender(
                    journal, client, SendOptions(rate_per_minute=60_000, check_receivers=False),
                    run_id, stopping=stopping,
                )  # fmt: skip
                stopper = asyncio.create_task(stop_later())
                summary = await sender.run()
                await stopper
                return summary

        summary = asyncio.run(asyncio.wait_for(main(), timeout=20))

    assert summary.stops == ("deadline", "SIGTERM", "SIGTERM")
    assert summary.signals == ("SIGTERM", "SIGTERM")
    assert summary.exit_code == ExitCode.INTERRUPTED  # a signal after the deadline: 130
    assert heard == [("SIGTERM", 3)]
    assert summary.abandoned_by == "SIGTERM" and summary.unanswered == 3
    line = stop_line(summary, deadline=1.0, outage_after=3)
    assert line is not None and line.startswith(
        "invoicectl: stopped by SIGTERM (after the deadline)"
    )
    assert "3 requests in flight abandoned (a second SIGTERM)" in line


def test_a_signal_heard_after_the_loop_still_makes_the_exit_130():
    summary = SendSummary(run_id=1, stops=("deadline",), exit_code=ExitCode.INCOMPLETE)
    summary.heard_late(["SIGHUP"])
    assert summary.stops == ("deadline", "SIGHUP") and summary.exit_code == ExitCode.INTERRUPTED
    summary.heard_late(["SIGHUP"])  # the same signal, not counted twice
    assert summary.stops == ("deadline", "SIGHUP")


@pytest.mark.parametrize(
    ("stops", "said"),
    [
        (("outage",), "GoRoute did not answer 3 invoices in a row"),
        (("rate_limit",), "GoRoute kept answering 429"),
        (("deadline",), "stopped at the deadline (240 s, scan included)"),
        (("SIGINT",), "stopped by SIGINT"),
    ],
)
def test_every_interrupted_summary_ends_with_the_command_that_continues(
    stops: tuple[str, ...], said: str
):
    summary = SendSummary(run_id=7, stops=stops, outage_reason="connection refused")
    summary.continue_with = "invoicectl send ./outbox --journal j.db"

    line = stop_line(summary, deadline=240, outage_after=3) or ""

    assert line.startswith(f"invoicectl: {said}")
    assert line.endswith("state saved; continue with: invoicectl send ./outbox --journal j.db")
    assert summary_line(summary).endswith("continue with: invoicectl send ./outbox --journal j.db")
    assert summary.to_dict()["continue_with"] == summary.continue_with


def test_a_run_that_was_not_interrupted_names_no_command():
    summary = SendSummary(run_id=7, stops=("credentials",))
    summary.continue_with = "invoicectl send ./outbox"

    assert stop_line(summary, deadline=None, outage_after=3) is None
    assert "continue with" not in summary_line(summary)
    assert summary.to_dict()["continue_with"] is None


def test_a_send_refused_401_after_an_unanswered_try_is_counted_unanswered(
    outbox: Path, journal_path: Path
):
    """A 503 (it may have been processed), then a 401 on the retry: the invoice is unknown,
    to be replayed; the run's results said nothing had left (`send --json`: no invoice, 0
    unanswered, all not started), and a cron script reading it believed so."""
    (first, *rest) = outbox_of(outbox, 3)
    answers = iter([503, 401])

    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(next(answers, 401), json={"error": {"message": "no"}})

    _, summary = send(
        settings_for(journal_path), outbox, httpx.MockTransport(handler),
        concurrency=1, check_receivers=False, order="scan", trust_new_journal=True,
    )  # fmt: skip

    assert summary.exit_code == ExitCode.AUTH_REFUSED
    assert [(result.invoice_id, result.state) for result in summary.results] == [(first, "unknown")]
    assert (summary.unanswered, summary.unsent) == (1, 2)
    assert states(journal_path) == {first: "unknown"} | dict.fromkeys(rest, "pending")

"""The history check of a new journal obeys every stop path: --deadline and stop signals.

The check only reads GoRoute's transactions list (GETs change nothing remote), so a deadline
that binds it gets the send's short stop grace, not half a minute more, and a stop signal
cancels it where it waits instead of being held until the check gives up (up to 210 s).
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from hostile import HostileServer, answer_json, hang, routes
from processkit import send_process
from sendkit import send, settings_for
from ublfactory import write_invoice

from invoicectl.errors import ExitCode
from invoicectl.journal import Journal
from invoicectl.journal.records import InvoiceState
from invoicectl.send.history import HistoryUnchecked


def a_list_that_never_answers() -> HostileServer:
    return HostileServer(
        routes(
            {
                ("GET", "/api/v1/transactions"): hang(300),
                ("POST", "/api/v1/documents"): answer_json(202, {"transaction_id": "tx-1"}),
            }
        )
    )


def test_a_deadline_bounds_the_history_check_with_the_send_s_stop_grace(
    outbox: Path, tmp_path: Path
):
    journal = tmp_path / "journal.db"
    write_invoice(outbox, "DL-1")
    with a_list_that_never_answers() as server:
        settings = settings_for(journal, base_url=server.base_url)
        started = time.monotonic()
        with pytest.raises(HistoryUnchecked) as refused:
            send(settings, outbox, None, deadline=1.0, stop_grace=0.5, check_receivers=False)
        took = time.monotonic() - started
        assert not any(request.method == "POST" for request in server.requests)
    assert refused.value.exit_code == ExitCode.INCOMPLETE
    # 1 s of deadline and 0.5 s of grace; the old check waited 30 s past the deadline.
    assert took < 20, f"--deadline 1 took {took:.1f} s"
    with Journal(journal) as opened:
        invoice = opened.invoice("DL-1")
        assert invoice is not None and invoice.state is InvoiceState.pending


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_stops_the_history_check_at_once(
    outbox: Path, tmp_path: Path, signum: signal.Signals
):
    journal = tmp_path / "journal.db"
    write_invoice(outbox, "SIG-1")
    with a_list_that_never_answers() as server:
        process = send_process(outbox, journal, server.base_url, "--no-receiver-check")
        try:
            waited = time.monotonic() + 60
            while not server.requests and time.monotonic() < waited:
                if process.poll() is not None:
                    break
                time.sleep(0.02)
            if not server.requests:
                process.kill()
            assert server.requests, f"the history check never asked: {process.communicate()}"
            process.send_signal(signum)
            # The list never answers and the check would give up after 210 s at most.
            _, stderr = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
        assert not any(request.method == "POST" for request in server.requests)
    assert process.returncode == ExitCode.INTERRUPTED, stderr
    assert f"interrupted by {signum.name}" in stderr
    assert "Traceback" not in stderr
    with Journal(journal) as opened:
        invoice = opened.invoice("SIG-1")
        assert invoice is not None and invoice.state is InvoiceState.pending
        assert not opened.history_checked(f"{server.base_url}")


def test_a_list_that_never_answers_is_given_up_after_the_time_it_names(
    outbox: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """With no --deadline the check waits its limit and then the grace for the request in
    flight, and its line said only the limit (180 s, where it had waited 210)."""
    from invoicectl.send import history

    monkeypatch.setattr(history, "CHECK_SECONDS", 0.5)
    monkeypatch.setattr(history, "_GRACE_SECONDS", 0.5)
    write_invoice(outbox, "TL-1")
    with a_list_that_never_answers() as server:
        settings = settings_for(tmp_path / "journal.db", base_url=server.base_url)
        started = time.monotonic()
        with pytest.raises(HistoryUnchecked) as refused:
            send(settings, outbox, None, check_receivers=False)
        took = time.monotonic() - started
    assert "did not answer in 1 s (the check's 0.5 s, then 0.5 s for the request" in str(
        refused.value
    )
    assert 0.9 < took < 20, f"took {took:.1f} s"


def test_each_list_request_of_the_check_has_the_run_s_request_timeout(
    outbox: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """helper-96: the check built its client without ``request_timeout``: with
    ``INVOICECTL_REQUEST_TIMEOUT=4`` each list request of a stalled server ran 60 s."""
    from invoicectl.send import history

    monkeypatch.setattr(history, "CHECK_SECONDS", 15.0)
    monkeypatch.setattr(history, "_GRACE_SECONDS", 0.5)
    write_invoice(outbox, "RT-1")
    with a_list_that_never_answers() as server:
        settings = settings_for(
            tmp_path / "journal.db",
            base_url=server.base_url,
            environ={"INVOICECTL_REQUEST_TIMEOUT": "0.3"},
        )
        with pytest.raises(HistoryUnchecked):
            send(settings, outbox, None, check_receivers=False)
        asked = [request for request in server.requests if request.method == "GET"]
    assert len(asked) >= 2, "one list request held the whole check"

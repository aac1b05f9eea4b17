"""An answer meant for another request: a front that answers a send from memory (a caching
proxy, a broken gateway) repeats another invoice's 202. Counted as accepted, that invoice
would never be sent and would read as delivered. Within one run the repeated transaction id
leaves it unknown, replayed under its key; across runs `reconcile` finds the transaction is
another document's and says so."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx
import pytest
from hostile import Behaviour, HostileServer, Request, Wire
from processkit import run_cli, run_send
from sendkit import assert_each_delivered_once, emulator, states
from ublfactory import write_invoice

from invoicectl.goroute.outcomes import Accepted, Transient
from invoicectl.journal import Journal
from invoicectl.sandbox import BackgroundServer
from invoicectl.send.answer_check import SeenTransactions

pytestmark = pytest.mark.slow

QUICK = ("--trust-new-journal", "--no-receiver-check", "--concurrency", "1")


class AnswersFromMemory:
    """Hands the first POST on to the API at ``target``; answers every later POST with that
    first answer, byte for byte, without handing it on. GETs go through."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.remembered: bytes | None = None
        self.lock = threading.Lock()

    def __call__(self, request: Request, wire: Wire) -> None:
        with self.lock:
            if request.method == "POST" and self.remembered is not None:
                wire.write(self.remembered)
                return
            headers = {
                name: value
                for name, value in request.headers.items()
                if name not in ("host", "content-length", "connection", "accept-encoding")
            }
            answer = httpx.request(
                request.method, self.target + request.path, content=request.body, headers=headers
            )
            head = f"HTTP/1.1 {answer.status_code} {answer.reason_phrase}\r\n"
            head += f"Content-Type: {answer.headers.get('content-type', 'application/json')}\r\n"
            head += f"Content-Length: {len(answer.content)}\r\nConnection: close\r\n\r\n"
            raw = head.encode() + answer.content
            if request.method == "POST":
                self.remembered = raw
            wire.write(raw)


def front(target: str) -> Behaviour:
    return AnswersFromMemory(target)


def test_a_repeated_transaction_id_in_one_run_is_unknown_and_replayed_once(
    outbox: Path, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.db"
    ids = ["M-1", "M-2", "M-3"]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    sandbox = emulator()
    with BackgroundServer(sandbox) as api:
        with HostileServer(front(api.base_url)) as cache:
            run_send(outbox, journal, cache.base_url, *QUICK, "--max-attempts", "2")
        after = states(journal)
        assert sorted(after.values()) == ["accepted", "unknown", "unknown"], after
        assert sandbox.stats()["sends_received"] == 1  # the others never reached it
        with Journal(journal) as opened:
            reasons = [row.reason or "" for row in opened.invoices() if row.state == "unknown"]
        assert all("an answer meant for another request" in reason for reason in reasons)

        args = ("--no-receiver-check", "--allow-environment-change")
        code, output = run_send(outbox, journal, api.base_url, *args)
        assert code == 0, output
        assert set(states(journal).values()) == {"accepted"}
        assert_each_delivered_once(sandbox.stats(), ids)


def test_reconcile_says_an_accepted_invoice_was_answered_for_another(
    outbox: Path, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.db"
    sandbox = emulator()
    with BackgroundServer(sandbox) as api:
        with HostileServer(front(api.base_url)) as cache:
            write_invoice(outbox, "X-1")
            assert run_send(outbox, journal, cache.base_url, *QUICK)[0] == 0
            write_invoice(outbox, "X-2")  # the next run: the cache answers with X-1's 202
            assert run_send(outbox, journal, cache.base_url, *QUICK)[0] == 0
        assert states(journal) == {"X-1": "accepted", "X-2": "accepted"}
        assert sandbox.stats()["sends_received"] == 1

        code, stdout, stderr = run_cli(
            journal, api.base_url, "reconcile", "--format", "json", "--allow-environment-change"
        )
        assert code == 4, stdout + stderr
        cases = {case["invoice_id"]: case for case in json.loads(stdout)["cases"]}
        assert cases["X-2"]["verdict"] == "different_document"
        assert cases["X-2"]["needs_person"] is True
        assert "invoice number: API X-1, journal X-2" in cases["X-2"]["detail"]
        assert "whether this invoice reached GoRoute is unknown" in cases["X-2"]["action"]
        assert cases["X-1"]["verdict"] in ("delivered", "delivery_pending")
        code, stdout, stderr = run_cli(
            journal, api.base_url, "reconcile", "--apply", "--allow-environment-change"
        )
    assert code == 4, stdout + stderr  # nothing adopted or recorded as X-2's
    with Journal(journal) as opened:
        assert opened.invoice("X-2").remote_status is None  # X-1's delivery is not X-2's
        assert opened.invoice("X-2").state == "accepted"


def test_the_check_remembers_a_bounded_number_of_ids() -> None:
    seen = SeenTransactions(remembered=2)
    assert isinstance(seen.checked("A", Accepted(transaction_id="t1")), Accepted)
    assert isinstance(seen.checked("A", Accepted(transaction_id="t1")), Accepted)  # a replay
    repeated = seen.checked("B", Accepted(transaction_id="t1", http_status=202))
    assert isinstance(repeated, Transient) and repeated.http_status == 202
    assert "given for invoice A" in repeated.reason
    for number in range(2, 6):
        seen.checked(f"I{number}", Accepted(transaction_id=f"t{number}"))
    assert isinstance(seen.checked("C", Accepted(transaction_id="t1")), Accepted)  # forgotten

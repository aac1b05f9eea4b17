"""An independent review of issue 13's sendcpu pass: the invoice record a send keeps instead
of reading the row again, the first try outside tenacity, requests built per fixed path, and
a grouped commit one pass of the event loop later (since: at the end of a window of time,
``send.commits``; the tests below hold for it too).

Each test tries one way the change could send twice, lose an answer, send other bytes under
a used key, or record something untrue; they pass on wt-sendcpu (no bug found), and pin it.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hostile import Behaviour, HostileServer, Request, Wire, answer_json, in_turn, routes
from sendkit import FAST_RETRY, emulator, send, settings_for
from ublfactory import write_invoice

from invoicectl.audit.verify import verify
from invoicectl.errors import UsageError
from invoicectl.goroute.retry import RetryPolicy
from invoicectl.journal import Journal
from invoicectl.runs import make_client
from invoicectl.sandbox import DEFAULT_API_KEY
from invoicectl.scan.ingest import scan_directory
from invoicectl.send.commits import GroupCommits
from invoicectl.send.options import SendOptions
from invoicectl.send.sender import Sender
from invoicectl.send.stopping import Stopping

QUICK = {"check_receivers": False, "trust_new_journal": True}
UNAVAILABLE = answer_json(503, {"error": {"code": "UNAVAILABLE", "message": "down"}})
NO_RETRY_AFTER_WAIT = answer_json(
    429, {"error": {"code": "RATE_LIMITED", "message": "slow"}}, headers={"Retry-After": "0"}
)


def api(documents: Behaviour) -> Behaviour:
    return routes({
        ("POST", "/api/v1/documents"): documents,
        ("GET", "/peppol/version"): answer_json(
            200, {"version": "1.0", "environment": "sandbox", "status": "ok"}
        ),
    })  # fmt: skip


def accepted(request: Request, wire: Wire) -> None:
    """202 with a transaction named after the key; a cookie offered on every answer."""
    key = request.headers.get("idempotency-key", "")
    answer_json(
        202,
        {"transaction_id": f"tx-{key}", "status": "queued"},
        headers={"Set-Cookie": f"session={key}; Path=/"},
    )(request, wire)


def key_reused(request: Request, wire: Wire) -> None:
    answer_json(
        422,
        {"error": {"code": "IDEMPOTENCY_KEY_REUSED", "message": "used",
                   "existing_transaction_id": "tx-earlier"}},
    )(request, wire)  # fmt: skip


REJECTED = answer_json(422, {"error": {"code": "VALIDATION_FAILED", "message": "bad total"}})
CONFLICT = answer_json(409, {"error": {"code": "CONFLICT", "message": "duplicate"}})


def documents(server: HostileServer) -> list[Request]:
    return [request for request in server.requests if request.path == "/api/v1/documents"]


def rows(journal_path: Path) -> dict[str, dict[str, Any]]:
    with sqlite3.connect(journal_path) as witness:
        witness.row_factory = sqlite3.Row
        return {row["invoice_id"]: dict(row) for row in witness.execute("SELECT * FROM invoices")}


def attempts(journal_path: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(journal_path) as witness:
        witness.row_factory = sqlite3.Row
        return [dict(row) for row in witness.execute("SELECT * FROM attempts ORDER BY id")]


def assert_results_are_the_journal(summary: Any, journal_path: Path) -> None:
    """What the run reports of each invoice is what a fresh read of its row says."""
    table = rows(journal_path)
    for result in summary.results:
        row = table[result.invoice_id]
        assert (
            result.state,
            result.transaction_id,
            result.existing_transaction_id,
            result.reason,
        ) == (row["state"], row["transaction_id"], row["existing_transaction_id"], row["reason"])


# ---- (3) the requests: one key and one API key each, the right ones, no cookie -------------


def test_concurrent_requests_each_carry_their_own_key_once_and_no_cookie(
    outbox: Path, tmp_path: Path
):
    """40 sends, 10 at a time, each answered with a Set-Cookie: every request has exactly
    one Idempotency-Key and one X-API-Key, the (key, body) pairs that arrived are exactly
    the journal's write-ahead rows, and no cookie ever goes back."""
    ids = [f"H-{n:02d}" for n in range(40)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    journal_path = tmp_path / "j.db"
    with HostileServer(api(accepted)) as server:
        _report, summary = send(
            settings_for(journal_path, server.base_url), outbox, None, concurrency=10, **QUICK
        )
        sent = documents(server)
    assert summary.counts().get("accepted") == 40
    assert len(sent) == 40
    for request in sent:
        names = [name for name, _value in request.header_lines]
        assert names.count("idempotency-key") == 1, request.header_lines
        assert names.count("x-api-key") == 1
        assert request.headers["x-api-key"] == DEFAULT_API_KEY
        assert "cookie" not in names
    arrived = sorted(
        (r.headers["idempotency-key"], hashlib.sha256(r.body).hexdigest()) for r in sent
    )
    journaled = sorted((a["idempotency_key"], a["body_sha256"]) for a in attempts(journal_path))
    assert arrived == journaled
    table = rows(journal_path)
    assert {row["idempotency_key"] for row in table.values()} == {key for key, _ in arrived}
    assert all(row["transaction_id"] == f"tx-{row['idempotency_key']}" for row in table.values())
    assert_results_are_the_journal(summary, journal_path)


# ---- (1) the kept record: retries, final answers after them, replays ----------------------


@pytest.mark.parametrize(
    ("answers", "state", "transaction", "existing"),
    [
        ((UNAVAILABLE, NO_RETRY_AFTER_WAIT, accepted), "accepted", "tx-", None),
        ((UNAVAILABLE, key_reused), "key_reused", None, "tx-earlier"),
        ((UNAVAILABLE, CONFLICT), "rejected", None, None),
        ((NO_RETRY_AFTER_WAIT, UNAVAILABLE, REJECTED), "rejected", None, None),
    ],
    ids=["503-429-202", "503-422-key-reused", "503-409", "429-503-422"],
)
def test_a_final_answer_after_retries_is_recorded_over_the_last_attempts_record(
    outbox: Path, tmp_path: Path, answers: tuple[Behaviour, ...], state: str,
    transaction: str | None, existing: str | None,
):  # fmt: skip
    """A second and third try of one invoice in one run: one key, one body, and the final
    answer written over the record the last write-ahead row left (the window started by the
    first), its row touched, the result what the row says, the chain intact."""
    write_invoice(outbox, "R-1")
    journal_path = tmp_path / "j.db"
    with HostileServer(api(in_turn(*answers, accepted))) as server:
        _report, summary = send(settings_for(journal_path, server.base_url), outbox, None, **QUICK)
        sent = documents(server)
    assert len(sent) == len(answers)
    assert len({(r.headers["idempotency-key"], r.body) for r in sent}) == 1
    row = rows(journal_path)["R-1"]
    tries = attempts(journal_path)
    assert row["state"] == state
    assert row["key_first_used_at"] == tries[0]["started_at"]
    assert row["updated_at"] >= tries[-1]["finished_at"]
    assert row["existing_transaction_id"] == existing
    if transaction is not None:
        assert row["transaction_id"] == transaction + row["idempotency_key"]
        assert row["reason"] is None
    else:
        assert row["transaction_id"] is None and row["reason"]
    assert [result.requests for result in summary.results] == [len(answers)]
    assert_results_are_the_journal(summary, journal_path)
    assert verify(journal_path).findings == []


def test_a_replay_of_an_unknown_invoice_clears_what_unknown_said(outbox: Path, tmp_path: Path):
    """Run 1 gets no answer (unknown, with its reason); run 2 replays under the same key and
    bytes after one more 503: accepted, and the reason unknown wrote is gone from the row."""
    write_invoice(outbox, "U-1")
    journal_path = tmp_path / "j.db"
    once = RetryPolicy(max_attempts=1, max_wait=1.0, backoff_initial=0.01, backoff_max=0.02)
    with HostileServer(api(in_turn(UNAVAILABLE, UNAVAILABLE, accepted))) as server:
        send(settings_for(journal_path, server.base_url), outbox, None, policy=once, **QUICK)
        unknown = rows(journal_path)["U-1"]
        assert unknown["state"] == "unknown" and unknown["reason"]
        _report, summary = send(
            settings_for(journal_path, server.base_url), outbox, None, policy=FAST_RETRY, **QUICK
        )
        sent = documents(server)
    assert len({(r.headers["idempotency-key"], r.body) for r in sent}) == 1
    row = rows(journal_path)["U-1"]
    assert row["state"] == "accepted" and row["reason"] is None
    assert row["transaction_id"] == f"tx-{row['idempotency_key']}"
    assert row["key_first_used_at"] == unknown["key_first_used_at"]
    assert row["updated_at"] > unknown["updated_at"]
    assert [(r.replay, r.requests) for r in summary.results] == [(True, 2)]
    assert_results_are_the_journal(summary, journal_path)
    assert verify(journal_path).findings == []


def test_an_amended_file_after_an_unanswered_send_sends_nothing_under_its_key(
    outbox: Path, tmp_path: Path
):
    """The file is edited after a send without an answer: the next run sends nothing (the
    invoice is amended, its key and the bytes that key carries kept), and a third run still
    nothing; the row is never rewritten from a record the send kept."""
    write_invoice(outbox, "M-1")
    journal_path = tmp_path / "j.db"
    once = RetryPolicy(max_attempts=1, max_wait=1.0, backoff_initial=0.01, backoff_max=0.02)
    with HostileServer(api(in_turn(UNAVAILABLE, accepted))) as server:
        send(settings_for(journal_path, server.base_url), outbox, None, policy=once, **QUICK)
        before = rows(journal_path)["M-1"]
        write_invoice(outbox, "M-1", amount="999.00")
        for _run in range(2):
            send(settings_for(journal_path, server.base_url), outbox, None, **QUICK)
        sent = documents(server)
    assert len(sent) == 1
    after = rows(journal_path)["M-1"]
    assert after["state"] == "amended" and after["state_before_amend"] == "unknown"
    assert (after["idempotency_key"], after["key_sha256"], after["key_first_used_at"]) == (
        before["idempotency_key"], before["key_sha256"], before["key_first_used_at"],
    )  # fmt: skip
    assert after["current_sha256"] != before["current_sha256"]
    assert verify(journal_path).findings == []


# ---- (4) the grouped commit later: stops before it, a closing loop ----------------------------


def _sender_run(journal_path: Path, outbox: Path, transport: Any, commits: type[GroupCommits]):
    stopping = Stopping(grace=30.0)
    with Journal(journal_path) as journal:
        scan_directory(journal, outbox)
        run_id = journal.begin_run("send", {})

        async def main() -> Any:
            async with make_client(settings_for(journal_path), transport) as client:
                sender = Sender(
                    journal, client,
                    SendOptions(rate_per_minute=100_000_000, check_receivers=False, concurrency=3),
                    run_id, stopping=stopping,
                )  # fmt: skip
                sender.commits = commits(journal)
                sender.commits.stopping = stopping  # type: ignore[attr-defined]
                return await sender.run()

        summary = asyncio.run(asyncio.wait_for(main(), timeout=30))
    return summary


@pytest.mark.parametrize("signals", [1, 2], ids=["stop", "abandon"])
def test_a_stop_in_the_pass_the_commit_now_waits_withdraws_every_row(
    outbox: Path, tmp_path: Path, signals: int
):
    """The stop lands after the three attempt rows were asked for and before their commit
    (while the commit waits): nothing leaves, every row says not sent, keys back."""
    ids = [f"W-{n}" for n in range(3)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    sandbox = emulator()

    class StopInTheExtraPass(GroupCommits):
        stopping: Stopping
        armed = True

        async def durable(self, write):  # type: ignore[no-untyped-def]
            if self.armed:
                self.armed = False
                loop = asyncio.get_running_loop()
                for _ in range(signals):
                    loop.call_soon(self.stopping.stop, "SIGINT")  # the pass before the commit
            return await super().durable(write)

    journal_path = tmp_path / "j.db"
    summary = _sender_run(journal_path, outbox, sandbox.transport(), StopInTheExtraPass)
    assert sandbox.stats()["sends_received"] == 0
    table = rows(journal_path)
    assert {i: (r["state"], r["idempotency_key"]) for i, r in table.items()} == {
        i: ("pending", None) for i in ids
    }
    assert [a["outcome"] for a in attempts(journal_path)] == ["not_sent"] * 3
    assert summary.durable_writes == 3
    assert verify(journal_path).findings == []


def test_a_writer_the_run_forgot_is_committed_before_the_loop_closes(tmp_path: Path):
    """asyncio.run's main returns while a writer still waits (cancelled as the loop shuts
    down): its commit, at the window's end, still runs, and the writer ends."""
    path = tmp_path / "journal.db"
    seen: list[tuple[str, bool]] = []

    with Journal(path) as journal:
        commits = GroupCommits(journal)

        async def writer() -> None:
            seen.append(await commits.durable(lambda: journal.add_event(None, "note", "late")))

        async def main() -> None:
            asyncio.get_running_loop().create_task(writer())
            await asyncio.sleep(0)  # the writer has asked; its commit is a window away

        asyncio.run(main())
    assert seen == [(None, True)]
    with sqlite3.connect(path) as witness:
        assert (
            witness.execute("SELECT count(*) FROM events WHERE detail = 'late'").fetchone()[0] == 1
        )


def test_new_version_of_an_amended_file_after_an_unanswered_send_says_what_works(
    outbox: Path, tmp_path: Path
):
    """Refused (the old key may have delivered), and the refusal does not promise a replay
    `send` will not make: an amended invoice is held, so the advice is to restore the file."""
    write_invoice(outbox, "M-2")
    journal_path = tmp_path / "j.db"
    once = RetryPolicy(max_attempts=1, max_wait=1.0, backoff_initial=0.01, backoff_max=0.02)
    with HostileServer(api(in_turn(UNAVAILABLE, accepted))) as server:
        settings = settings_for(journal_path, server.base_url)
        send(settings, outbox, None, policy=once, **QUICK)
        write_invoice(outbox, "M-2", amount="999.00")
        with pytest.raises(UsageError) as refused:
            send(settings, outbox, None, new_versions=("M-2",), **QUICK)
        assert len(documents(server)) == 1
    message = str(refused.value)
    assert "is amended" in message and "a new key could deliver it twice" in message
    assert "Restore the file to the content that key carried" in message
    assert "replays it safely" not in message


def test_new_version_of_an_invoice_with_a_request_in_flight_says_what_works(
    outbox: Path, tmp_path: Path
):
    """helper-98: a request under its key in flight (a live send worker's on a shared
    journal): the refusal told the operator to restore a file that never changed."""
    from invoicectl.journal import open_journal
    from invoicectl.lifecycle.decisions import check_new_version
    from invoicectl.lifecycle.sending import begin_attempt, claim_key
    from invoicectl.scan.ingest import scanning

    write_invoice(outbox, "M-3")
    with open_journal(tmp_path / "j.db") as journal:
        scanning(outbox)(journal)
        run_id = journal.begin_run("send", {})
        begin_attempt(journal, run_id, claim_key(journal, "M-3", replay=False), "body")
        with pytest.raises(UsageError) as refused:
            check_new_version(journal, "M-3", journal.clock())

    message = str(refused.value)
    assert "is pending with a request under its key (in flight now" in message
    assert "`invoicectl send` sends it under that same key" in message
    assert "Restore the file" not in message

"""Every way a send stops, with the real CLI in a subprocess and real signals (issue 11,
items 2, 3 and 12).

A hostile server answers one byte every few seconds (``trickle``) or not at all (``hang``):
nothing the client does on its own ends such a request soon. ``--deadline`` must still end
the run within the deadline and the grace (``STOP_GRACE``), every signal must end it with
exit 130 and one line naming it, and the summary must say what went out unanswered.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from historykit import add_history
from hostile import Behaviour, HostileServer, answer_json, hang, in_turn, routes, trickle
from logkit import said, unstamped
from processkit import cli_process, journal_states, open_attempts, run_cli, wait_for
from ublfactory import write_invoice

from invoicectl.defaults import STOP_GRACE
from invoicectl.journal import Journal

pytestmark = pytest.mark.slow

# Generous: the machine is shared; this only says "does not hang".
MARGIN = 8.0
# Neither the receiver lookups nor a new journal's history check: these tests are about stopping.
NO_CHECKS = ("--no-receiver-check", "--trust-new-journal")


def api(documents: Behaviour, **more: Behaviour) -> Behaviour:
    """GoRoute's routes, with the documents endpoint answering as ``documents`` does."""
    table = {
        ("POST", "/api/v1/documents"): documents,
        ("GET", "/peppol/version"): answer_json(
            200, {"version": "1.0", "environment": "sandbox", "status": "ok"}
        ),
    }
    table.update({("GET", path): behaviour for path, behaviour in more.items()})
    return routes(table)


def accepted(request, wire) -> None:
    key = request.headers.get("idempotency-key", "")
    answer_json(202, {"transaction_id": f"tx-{key}", "status": "queued"})(request, wire)


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    return tmp_path / "journal.db"


def outbox_of(outbox: Path, count: int) -> list[str]:
    ids = [f"S-{number:03d}" for number in range(count)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    return ids


def documents_sent(server: HostileServer) -> list:
    return [request for request in server.requests if request.path == "/api/v1/documents"]


def stopped_line(stderr: str) -> str:
    """The one line naming what stopped the run."""
    lines = [line for line in unstamped(stderr).splitlines() if "stopped" in line]
    assert len(lines) == 1, stderr
    return lines[0]


def test_deadline_ends_a_trickled_run_in_time_and_the_next_run_replays(outbox: Path, journal: Path):
    ids = outbox_of(outbox, 3)
    # The first two requests trickle for ever; everything after is answered at once.
    server_behaviour = api(in_turn(trickle(every=5.0), trickle(every=5.0), accepted))
    with HostileServer(server_behaviour) as server:
        started = time.monotonic()
        code, stdout, stderr = run_cli(
            journal, server.base_url, "send", str(outbox), "--deadline", "3",
            "--concurrency", "2", "--order", "scan", *NO_CHECKS,
        )  # fmt: skip
        elapsed = time.monotonic() - started

        assert code == 75, stdout + stderr
        assert elapsed < 3 + STOP_GRACE + MARGIN
        line = stopped_line(stderr)
        assert line.startswith("invoicectl: stopped at the deadline (3 s")
        assert "2 requests in flight abandoned" in line
        assert f"continue with: invoicectl send {outbox}" in line
        assert journal_states(journal) == {ids[0]: "unknown", ids[1]: "unknown", ids[2]: "pending"}
        assert open_attempts(journal) == 0  # the abandoned rows say so
        with Journal(journal) as opened:
            assert opened.attempts(ids[0])[0].outcome == "no_answer"

        # The lock is free: the next run starts, replays both under their keys, sends the third.
        code, stdout, stderr = run_cli(journal, server.base_url, "send", str(outbox), *NO_CHECKS)
        assert code == 0, stdout + stderr

    assert set(journal_states(journal).values()) == {"accepted"}
    per_key: dict[str, list[bytes]] = {}
    for request in documents_sent(server):
        per_key.setdefault(request.headers["idempotency-key"], []).append(request.body)
    assert {key: len(bodies) for key, bodies in per_key.items()} == {
        f"invoice-{ids[0]}": 2,
        f"invoice-{ids[1]}": 2,
        f"invoice-{ids[2]}": 1,
    }
    assert all(len(set(bodies)) == 1 for bodies in per_key.values())  # same key, same bytes


def test_the_run_after_a_kill_names_what_the_killed_one_left_unanswered(
    outbox: Path, journal: Path
):
    """helper-104: after a ``kill -9`` mid-send, the next run said only "sending 3 invoices
    (2 replays)": nothing in a cron log told an operator that a run had died with requests
    out. It names each, and what becomes of it (the scan's ``unknown`` lines, and
    ``left_unanswered`` in its JSON)."""
    outbox_of(outbox, 3)
    with HostileServer(api(in_turn(hang(), hang(), accepted))) as server:
        process = cli_process(
            journal, server.base_url, "send", str(outbox), "--concurrency", "2", *NO_CHECKS
        )
        wait_for(lambda: len(documents_sent(server)) >= 2, timeout=30)
        time.sleep(0.2)
        process.kill()
        process.communicate(timeout=30)
        assert open_attempts(journal) == 2
        with Journal(journal) as opened:
            left = sorted(row.invoice_id for row in opened.invoices() if row.key_first_used_at)
        code, stdout, stderr = run_cli(journal, server.base_url, "send", str(outbox), *NO_CHECKS)
        again = run_cli(journal, server.base_url, "scan", str(outbox), "--json")

    assert code == 0, stderr
    said = unstamped(stdout)
    for invoice_id in left:
        assert (
            f"  unknown  {invoice_id}: a run that stopped (killed, or its host lost?) sent it "
            "and recorded no answer; replayed under the same key inside its 24-hour window"
        ) in said, said
    assert set(journal_states(journal).values()) == {"accepted"}
    assert "left_unanswered" not in json.loads(again[1])  # said once, by the run that found it


def test_the_stopping_line_speaks_of_the_signal_that_came(capsys):
    """helper-104: cron's or systemd's SIGTERM was told "Ctrl-C again to abandon them", and
    a run with nothing in flight was offered to abandon it."""
    from invoicectl.cli.send_lines import say_stopping

    say_stopping("SIGTERM", 3)
    say_stopping("SIGHUP", 0)
    say_stopping("SIGINT", 2)
    assert capsys.readouterr().err.splitlines() == [
        "invoicectl: SIGTERM: stopping: 3 in flight; a second SIGTERM abandons them",
        "invoicectl: SIGHUP: stopping: nothing in flight",
        "invoicectl: SIGINT: stopping: 2 in flight; Ctrl-C again to abandon them",
    ]


def test_a_first_signal_says_what_is_in_flight_a_second_abandons_it(outbox: Path, journal: Path):
    ids = outbox_of(outbox, 10)
    with HostileServer(api(hang())) as server:
        process = cli_process(
            journal, server.base_url, "send", str(outbox), "--json", "--concurrency", "4",
            *NO_CHECKS,
        )  # fmt: skip
        wait_for(lambda: len(documents_sent(server)) >= 4, timeout=30)
        time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        assert process.stderr is not None
        notice = unstamped(process.stderr.readline())
        while "WARNING" in notice:  # --trust-new-journal says it skipped the history check
            notice = unstamped(process.stderr.readline())
        assert notice.strip() == (
            "invoicectl: SIGINT: stopping: 4 in flight; Ctrl-C again to abandon them"
        )
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)

    assert process.returncode == 130, stderr
    line = stopped_line(stderr)
    assert line.startswith("invoicectl: stopped by SIGINT;")
    assert "4 requests in flight abandoned (a second SIGINT)" in line
    assert "4 unanswered, will be replayed" in line
    summary = json.loads(stdout)
    assert summary["unanswered"] == 4 and summary["not_started"] == 6
    assert summary["stops"] == ["SIGINT", "SIGINT"] and summary["signal"] == "SIGINT"
    # The journal $INVOICECTL_JOURNAL named (cli_env's) is named: a shell lacks it (helper-104).
    assert summary["continue_with"] == f"invoicectl send {outbox} --journal {journal}"
    states = journal_states(journal)
    assert sorted(states.values()).count("unknown") == 4
    assert sorted(states.values()).count("pending") == 6

    # status says the same: 4 unanswered, replayed by the next send.
    code, stdout, _ = run_cli(journal, server.base_url, "status")
    assert code == 75
    assert "4 unanswered, will be replayed by the next send" in stdout.splitlines()[0]
    assert len(ids) == 10


def test_a_single_signal_whose_grace_runs_out_is_not_called_a_second(outbox: Path, journal: Path):
    """helper-51: one SIGTERM, the requests in flight still unanswered when its grace ran
    out, and the run's line said they were abandoned "(a second SIGTERM)"."""
    outbox_of(outbox, 4)
    with HostileServer(api(hang())) as server:
        process = cli_process(
            journal, server.base_url, "send", str(outbox), "--json", "--concurrency", "4",
            *NO_CHECKS,
        )  # fmt: skip
        wait_for(lambda: len(documents_sent(server)) >= 4, timeout=30)
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=30)

    assert process.returncode == 130, stderr
    line = stopped_line(stderr)
    assert "4 requests in flight abandoned (the grace after SIGTERM ran out)" in line, line
    assert "a second" not in line


def test_the_text_summary_counts_what_went_out_unanswered(outbox: Path, journal: Path):
    outbox_of(outbox, 6)
    with HostileServer(api(hang())) as server:
        process = cli_process(
            journal, server.base_url, "send", str(outbox), "--concurrency", "2",
            "--journal", str(journal), *NO_CHECKS,
        )  # fmt: skip
        wait_for(lambda: len(documents_sent(server)) >= 2, timeout=30)
        time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=30)

    assert process.returncode == 130, stderr
    summary = unstamped(stdout).strip().splitlines()[-1]
    assert "2 unanswered, will be replayed; 4 not started" in summary
    assert "nothing sent" not in summary
    assert summary.endswith(f"continue with: invoicectl send {outbox} --journal {journal}")


def test_a_signal_after_the_deadline_still_stops_the_run_with_130(outbox: Path, journal: Path):
    outbox_of(outbox, 2)
    with HostileServer(api(trickle(every=5.0))) as server:
        process = cli_process(
            journal, server.base_url, "send", str(outbox), "--deadline", "1", "--concurrency",
            "1", *NO_CHECKS,
        )  # fmt: skip
        wait_for(lambda: len(documents_sent(server)) >= 1, timeout=30)
        time.sleep(1.5)  # the deadline has fired; the request is in its grace
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=30)

    assert process.returncode == 130, stdout + stderr
    assert "invoicectl: SIGTERM: stopping: 1 in flight" in stderr
    assert stopped_line(stderr).startswith("invoicectl: stopped by SIGTERM (after the deadline)")
    assert sorted(journal_states(journal).values()) == ["pending", "unknown"]


def test_sighup_is_a_stop_like_the_others_never_a_silent_death(outbox: Path, journal: Path):
    outbox_of(outbox, 3)
    with HostileServer(api(hang())) as server:
        process = cli_process(journal, server.base_url, "send", str(outbox), *NO_CHECKS)
        wait_for(lambda: len(documents_sent(server)) >= 1, timeout=30)
        process.send_signal(signal.SIGHUP)
        process.send_signal(signal.SIGHUP)
        stdout, stderr = process.communicate(timeout=30)

    assert process.returncode == 130, stdout + stderr
    assert stopped_line(stderr).startswith("invoicectl: stopped by SIGHUP")
    assert "unknown" in journal_states(journal).values()


def test_signals_as_the_answers_arrive_end_with_130_never_a_kill(outbox: Path, journal: Path):
    """A burst of SIGTERMs from the first to the process's exit: whichever phase each lands
    in (the loop, its end, saving the run), the process ends 130 with its state saved."""
    outbox_of(outbox, 4)
    with HostileServer(api(accepted)) as server:
        process = cli_process(journal, server.base_url, "send", str(outbox), *NO_CHECKS)
        wait_for(lambda: len(documents_sent(server)) >= 1, timeout=30)
        while process.poll() is None:
            process.send_signal(signal.SIGTERM)
            time.sleep(0.002)
        stdout, stderr = process.communicate(timeout=30)

    assert process.returncode == 130, stdout + stderr
    assert "SIGTERM" in stderr
    assert open_attempts(journal) == 0
    with Journal(journal) as opened:
        (unfinished,) = opened.db.execute(
            "SELECT count(*) FROM runs WHERE finished_at IS NULL"
        ).fetchone()
    assert unfinished == 0


def test_sighup_during_a_scan_says_so_and_exits_130(outbox: Path, journal: Path):
    for number in range(1500):
        write_invoice(outbox, f"H-{number:05d}", padding=2000)
    process = cli_process(journal, "http://127.0.0.1:9", "scan", str(outbox))
    wait_for(journal.exists, timeout=30)
    process.send_signal(signal.SIGHUP)
    stdout, stderr = process.communicate(timeout=60)

    if process.returncode == 0:  # pragma: no cover - the scan outran the signal
        pytest.skip("the scan finished before the signal arrived")
    assert process.returncode == 130, stdout + stderr
    assert said(stderr, 130).strip().splitlines()[-1] == (
        "invoicectl: interrupted by SIGHUP; state saved"
    )


def test_sighup_during_reconcile_lookups_exits_130_and_records_the_run(outbox: Path, journal: Path):
    outbox_of(outbox, 1)
    failing = answer_json(503, {"error": {"code": "UNAVAILABLE", "message": "down"}})
    with HostileServer(api(failing, **{"/api/v1/transactions": hang()})) as server:
        code, stdout, stderr = run_cli(
            journal, server.base_url, "send", str(outbox), "--max-attempts", "1", *NO_CHECKS
        )
        assert journal_states(journal) == {"S-000": "unknown"}, stdout + stderr
        process = cli_process(journal, server.base_url, "reconcile")
        wait_for(
            lambda: any(r.path.startswith("/api/v1/transactions") for r in server.requests),
            timeout=30,
        )
        process.send_signal(signal.SIGHUP)
        stdout, stderr = process.communicate(timeout=30)

    assert process.returncode == 130, stdout + stderr
    assert said(stderr, 130).strip().splitlines()[-1] == (
        "invoicectl: interrupted by SIGHUP; state saved"
    )
    with Journal(journal) as opened:
        (code, summary) = opened.db.execute(
            "SELECT exit_code, summary FROM runs WHERE command = 'reconcile'"
        ).fetchone()
    assert code == 130 and "SIGHUP" in summary
    assert journal_states(journal) == {"S-000": "unknown"}


def test_the_lock_is_free_right_after_a_deadline(outbox: Path, journal: Path):
    outbox_of(outbox, 1)
    with HostileServer(api(hang())) as server:
        first = cli_process(journal, server.base_url, "send", str(outbox), "--deadline", "1",
                            *NO_CHECKS)  # fmt: skip
        first.communicate(timeout=1 + STOP_GRACE + MARGIN)
        code, stdout, stderr = run_cli(journal, server.base_url, "send", str(outbox),
                                       "--deadline", "0", *NO_CHECKS)  # fmt: skip

    assert first.returncode == 75
    assert code == 75, stdout + stderr  # it started (not 6): the lock was free
    assert "another invoicectl" not in stderr


@pytest.mark.parametrize("output", [[], ["--format", "jsonl"]], ids=["table", "jsonl"])
def test_a_listing_stopped_by_a_signal_says_so_in_one_line_and_nothing_more(
    journal: Path, output: list[str]
):
    """The listing's cursor was let go after its journal had closed: "Exception ignored in:
    <generator object InvoiceRecords.listed>" and a ProgrammingError traceback. JSON Lines
    ended in an error document over four lines, the first glued to a record the signal cut:
    no reader of lines could parse it."""
    with Journal(journal) as opened:
        add_history(opened, 3000)  # some 300 KB listed: more than the pipe holds
    process = cli_process(journal, "http://127.0.0.1:9", "status", "--all", *output)
    assert process.stdout is not None
    process.stdout.readline()  # listing, and soon waiting on the pipe no one reads
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=60)

    assert process.returncode == 130, stderr
    stopped = "interrupted by SIGTERM; state saved"
    if output:  # the records, the last one out perhaps cut by the signal, then the error
        lines = stdout.splitlines()  # (the first: the rest of what readline's buffer took)
        assert json.loads(lines[-1]) == {"error": stopped, "exit_code": 130}
        assert all(json.loads(line) for line in lines[1:-2])
        assert stderr == ""  # JSON asked for: the error is the document, and only there
    else:
        assert said(stderr, 130).strip().splitlines() == [f"invoicectl: {stopped}"]

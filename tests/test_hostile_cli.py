"""The real CLI against a hostile server (issue 11, items 1, 2, 4 and 5).

Where the process boundary is the point (peak memory, a run that must end and let go of its
lock) ``invoicectl`` runs as a subprocess; where only the output and the journal matter it runs
in-process through Typer's runner, still over real loopback HTTP to ``tests/hostile.py``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hostile import (
    HostileServer,
    Request,
    answer,
    answer_json,
    claims_length,
    endless,
    in_turn,
    per_request,
    routes,
    trickle,
)
from reconcile_staging import FAST_RETRIES, add_invoice, run_reconcile, sent
from test_hostile_answers import BAD_IDS, FORMS, SECRET
from typer.testing import CliRunner
from ublfactory import invoice_xml, write_invoice

from invoicectl.cli import app
from invoicectl.journal import Journal
from invoicectl.reconcile import Verdict

JSON = {"Content-Type": "application/json"}
PEAK_BOUND_MB = 150
_KILL_AT_MB = 600  # old code passed 1.2 GB: stop it long before it hurts the machine


def cli_env(base_url: str, journal: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "GOROUTE_BASE_URL": base_url,
        "GOROUTE_API_KEY": SECRET,
        "INVOICECTL_JOURNAL": str(journal),
        **extra,
    }


def run_cli(
    args: list[str], env: dict[str, str], tmp_path: Path, timeout: float = 60
) -> tuple[int, int, str, str]:
    """(exit code, peak RSS in MB, stdout, stderr) of ``python -m invoicectl ARGS``.

    The peak is the child's VmHWM, polled until it exits. Not ``ru_maxrss``: Linux folds the
    forked copy of this test process (hundreds of MB by now) into the child's figure at exec.
    A run on its way past ``_KILL_AT_MB``, or past ``timeout``, is killed.
    """
    out = tmp_path / f"out-{time.monotonic_ns()}.txt"
    err = out.with_suffix(".err")
    with out.open("w") as stdout, err.open("w") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-m", "invoicectl", *args], env=env, stdout=stdout, stderr=stderr
        )
    started = time.monotonic()
    peak_kb = 0
    while True:
        pid, status = os.waitpid(child.pid, os.WNOHANG)
        if pid:
            break
        try:
            status_text = Path(f"/proc/{child.pid}/status").read_text()
            hwm = next(line for line in status_text.splitlines() if line.startswith("VmHWM"))
            peak_kb = max(peak_kb, int(hwm.split()[1]))
        except (OSError, StopIteration):  # not exec'd yet, or a zombie already
            pass
        if peak_kb > _KILL_AT_MB * 1024 or time.monotonic() - started > timeout:
            child.send_signal(signal.SIGKILL)
        time.sleep(0.01)
    child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode, peak_kb // 1024, out.read_text(), err.read_text()


def api(behaviour: Any) -> Any:
    """``behaviour`` for everything but the health check, which answers as GoRoute's does (a
    run may ask it first, to know it talks to the API at all)."""
    version = answer_json(200, {"version": "1.0", "environment": "sandbox", "status": "ok"})
    return routes({("GET", "/peppol/version"): version}, otherwise=behaviour)


def journal_states(path: Path) -> dict[str, str]:
    with Journal(path) as journal:
        return {row.invoice_id: str(row.state) for row in journal.invoices()}


# 1. Peak memory whatever the server sends ---------------------------------------------------


def _big_error(request: Request, wire: Any) -> None:
    # Written in pieces: the test process itself stays small.
    head = b'{"error": {"code": "BIG", "message": "'
    size = len(head) + 50 * 1024 * 1024 + 3
    wire.write(b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n")
    wire.write(b"Content-Length: %d\r\nConnection: close\r\n\r\n" % size + head)
    block = b"m" * 65536
    for _ in range(50 * 16):
        if not wire.write(block):
            return
    wire.write(b'"}}')


SEND_FLOODS = {
    "endless 202 body": endless(202),
    "3 GB Content-Length": claims_length(3 * 1024**3),
    "50 MB JSON error": _big_error,
}


@pytest.mark.slow
@pytest.mark.parametrize("flood", list(SEND_FLOODS))
def test_send_stays_small_whatever_the_answer(tmp_path: Path, outbox: Path, flood: str) -> None:
    for number in range(3):
        write_invoice(outbox, f"RSS-{number}")
    journal = tmp_path / "journal.db"
    with HostileServer(api(SEND_FLOODS[flood])) as server:
        code, peak, stdout, stderr = run_cli(
            [
                "send",
                str(outbox),
                "--trust-new-journal",
                "--no-receiver-check",
                "--max-attempts",
                "2",
            ],
            cli_env(server.base_url, journal),
            tmp_path,
        )
    output = stdout + stderr
    assert peak < PEAK_BOUND_MB, f"{flood}: peak RSS {peak} MB\n{output[-500:]}"
    assert code == 75, output[-500:]
    # Each answer may have meant "accepted": unknown, replayed under the same key next run.
    assert set(journal_states(journal).values()) == {"unknown"}


@pytest.mark.slow
def test_reconcile_stays_small_against_a_60_mb_page(tmp_path: Path, outbox: Path) -> None:
    write_invoice(outbox, "RSS-1")
    journal = tmp_path / "journal.db"
    with HostileServer(api(answer_json(503, {"error": {"code": "DOWN"}}))) as server:
        env = cli_env(server.base_url, journal)
        run_cli(
            [
                "send",
                str(outbox),
                "--trust-new-journal",
                "--no-receiver-check",
                "--max-attempts",
                "1",
            ],
            env,
            tmp_path,
        )
    assert journal_states(journal) == {"RSS-1": "unknown"}
    item = {"invoice_number": "OTHER", "receiver_id": "9915:x", "status": "delivered"}
    one = json.dumps({**item, "padding": "p" * 300})
    page = '{"transactions": [' + ",".join([one] * (60 * 1024 * 1024 // len(one))) + "]}"
    with HostileServer(api(answer(200, page.encode(), JSON))) as server:
        env = cli_env(server.base_url, journal)
        args = ["reconcile", "--allow-environment-change", "--max-attempts", "1"]
        code, peak, stdout, stderr = run_cli([*args, "--format", "json"], env, tmp_path)
    assert peak < PEAK_BOUND_MB, f"peak RSS {peak} MB\n{stderr[-500:]}"
    assert code == 75, stdout[-800:] + stderr[-800:]
    (case,) = json.loads(stdout)["cases"]
    assert case["verdict"] == "lookup_failed"
    assert "GoRoute answered 200 with more than 2097152 bytes" in case["detail"]


# 2. A trickling answer cannot hold a run --------------------------------------------------


def test_a_trickling_answer_leaves_the_invoice_unknown_and_the_run_ends(
    tmp_path: Path, outbox: Path
) -> None:
    write_invoice(outbox, "SLOW-1")
    journal = tmp_path / "journal.db"
    slow = trickle(202, b'{"transaction_id": "tx_slow"' + b" " * 1000 + b"}", every=2.0)
    send = [
        "send",
        str(outbox),
        "--trust-new-journal",
        "--no-receiver-check",
        "--max-attempts",
        "1",
    ]
    answers = in_turn(slow, answer_json(202, {"transaction_id": "tx_slow"}))
    with HostileServer(api(answers)) as server:
        env = cli_env(server.base_url, journal, INVOICECTL_REQUEST_TIMEOUT="1")
        started = time.monotonic()
        code, _, stdout, stderr = run_cli(send, env, tmp_path, timeout=40)
        took = time.monotonic() - started
        assert code == 75, stdout + stderr
        assert took < 30, stdout + stderr  # "does not hang": the old client read for 35 min
        assert journal_states(journal) == {"SLOW-1": "unknown"}
        with Journal(journal) as opened:
            (attempt,) = opened.attempts("SLOW-1")
        assert attempt.message == (
            "no complete answer within 1 s, the limit for this request; the outcome is unknown"
        )
        # The lock was let go: the next run replays under the same key and bytes.
        code, _, stdout, stderr = run_cli(send, env, tmp_path)
    assert code == 0, stdout + stderr
    assert journal_states(journal) == {"SLOW-1": "accepted"}
    first, replay = [request for request in server.requests if request.method == "POST"]
    assert replay.headers["idempotency-key"] == first.headers["idempotency-key"]
    assert replay.body == first.body


def test_a_trickling_answer_cannot_hold_reconcile(tmp_path: Path, outbox: Path) -> None:
    with Journal(tmp_path / "journal.db") as journal:
        add_invoice(journal, outbox, "SLOW-2")
        sent(journal, "SLOW-2", "key_reused", http_status=422, existing_transaction_id="tx_2")
        add_invoice(journal, outbox, "SLOW-3")
        sent(journal, "SLOW-3", "unknown", hours_ago=2)
    slow = trickle(200, b"{" + b" " * 1000 + b"}", every=2.0)
    with HostileServer(api(slow)) as server:
        env = cli_env(server.base_url, tmp_path / "journal.db", INVOICECTL_REQUEST_TIMEOUT="1")
        args = ["reconcile", "--allow-environment-change", "--max-attempts", "1"]
        started = time.monotonic()
        code, _, stdout, stderr = run_cli([*args, "--format", "json"], env, tmp_path, timeout=40)
    assert time.monotonic() - started < 30, stderr
    assert code == 75, stdout + stderr
    verdicts = {case["invoice_id"]: case["verdict"] for case in json.loads(stdout)["cases"]}
    assert verdicts == {"SLOW-2": "lookup_failed", "SLOW-3": "lookup_failed"}


# 4. The key never reaches the journal, the reports or the terminal -------------------------


def _raw(form: str) -> str:
    """A form as it stands inside a JSON string (already-escaped forms as written)."""
    return form if "\\u" in form or "\\/" in form else json.dumps(form)[1:-1]


def _echo_transaction(raw: str, number: str, txn_id: str | None = None) -> str:
    id_part = f'"{txn_id}"' if txn_id else f'"{raw}"'
    return (
        '{"id": ' + id_part + ', "transaction_id": ' + id_part + ', "document_id": "' + number
        + '", "receiver": {"scheme": "9915", "identifier": "phase4-test-receiver"}, '
        + '"status": "' + raw + '", "message_id": "' + raw + '", "metadata": {"note": "'
        + raw + '"}, "created_at": "2030-01-01T00:00:00Z"}'
    )  # fmt: skip


def _echo_server(form: str) -> Any:
    raw = _raw(form)
    header = form if form.isascii() else ""
    echo_headers = {**JSON, "X-Request-Id": header}

    def body(**fields: str) -> bytes:
        parts = [f'"{name}": "{value}"' for name, value in fields.items()]
        details = f'"details": [{{"rule": "R-1", "location": "{raw}", "message": "{raw}"}}]'
        return ("{" + ", ".join([*parts, details, f'"request_id": "{raw}"']) + "}").encode()

    by_invoice = {
        "E-202": answer(202, body(transaction_id=raw), echo_headers, reason=header),
        "E-422": answer(
            422,
            body(error_code="IDEMPOTENCY_KEY_REUSED", existing_transaction_id=raw, message=raw),
            echo_headers,
            reason=header,
        ),
        "E-OK": answer(
            422,
            body(error_code="IDEMPOTENCY_KEY_REUSED", existing_transaction_id="tx_ok", message=raw),
            echo_headers,
        ),
        "E-400": answer(400, body(error_code=raw, message=raw), echo_headers, reason=header),
        "E-500": answer(500, body(message=raw), echo_headers, reason=header),
    }

    def documents(request: Request) -> Any:
        invoice_id = json.loads(request.body)["metadata"]["invoice_id"]
        return by_invoice[invoice_id]

    listing = (
        '{"transactions": ['
        + ", ".join(_echo_transaction(raw, n) for n in ("E-202", "E-422", "E-500"))
        + '], "next_cursor": "' + raw + '", "has_more": false}'
    )  # fmt: skip
    return routes(
        {
            ("POST", "/api/v1/documents"): per_request(documents),
            ("GET", "/api/v1/transactions/tx_ok"): answer(
                200, _echo_transaction(raw, "E-OK", "tx_ok").encode(), echo_headers, reason=header
            ),
            ("GET", "/api/v1/transactions"): answer(
                200, listing.encode(), echo_headers, reason=header
            ),
        }
    )


def assert_key_nowhere(journal: Path, *outputs: str) -> None:
    stored = [p for p in journal.parent.iterdir() if p.name.startswith(journal.name)]
    assert journal in stored
    for path in stored:
        data = path.read_bytes()
        for name, form in FORMS.items():
            assert form.encode() not in data, f"the key, {name}, in {path.name}"
    for text in outputs:
        for name, form in FORMS.items():
            assert form not in text, f"the key, {name}, in the output: {text[:2000]}"


@pytest.mark.parametrize("name", list(FORMS))
def test_an_echoed_key_reaches_no_journal_report_or_terminal(
    name: str, outbox: Path, isolated_environment: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for invoice_id in ("E-202", "E-422", "E-OK", "E-400", "E-500"):
        write_invoice(outbox, invoice_id)
    runner = CliRunner()
    outputs: list[str] = []
    with HostileServer(api(_echo_server(FORMS[name]))) as server:
        monkeypatch.setenv("GOROUTE_BASE_URL", server.base_url)
        monkeypatch.setenv("GOROUTE_API_KEY", SECRET)
        runs = [
            [
                "send",
                str(outbox),
                "--trust-new-journal",
                "--no-receiver-check",
                "--max-attempts",
                "1",
                "--rate",
                "6000",
            ],
            ["reconcile", "--format", "json", "--max-attempts", "1", "--rate", "6000"],
            ["reconcile", "--apply", "--max-attempts", "1", "--rate", "6000"],
            ["status"],
            ["status", "--format", "json"],
            *(["show", invoice_id] for invoice_id in ("E-202", "E-422", "E-OK", "E-400", "E-500")),
        ]
        for args in runs:
            result = runner.invoke(app, args)
            assert result.exception is None or isinstance(result.exception, SystemExit), args
            assert result.exit_code not in (1, 2), (args, result.output)
            outputs += [result.stdout, result.stderr]
    states = journal_states(isolated_environment)
    assert states["E-400"] == "rejected" and states["E-422"] == "key_reused"
    assert states["E-202"] == "unknown"  # its id carried the key: unconfirmed, replayed
    assert_key_nowhere(isolated_environment, *outputs)


def test_a_key_echoed_in_utf16_reaches_no_journal_or_terminal(
    outbox: Path, isolated_environment: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-82: a proxy echoing the request's headers as UTF-16 text, with no charset (read
    as UTF-8: a NUL after each character of the key). Redaction looked through white space
    and invisible characters only, and this key has 15 letters and digits, one short of the
    letters-only check: the key was stored in the journal's raw body, and `send` and `show`
    printed it as s\\x00k\\x00_..., which anyone reads back. The same with %00 between its
    characters, percent-encoded."""
    write_invoice(outbox, "U16-1")
    write_invoice(outbox, "U16-2")
    utf16 = ("bad key " + SECRET).encode("utf-16-le")
    spaced = "".join(f"%{ord(c):02X}%00" for c in SECRET)
    percent = ("bad key " + spaced).encode()
    by_invoice = {
        "U16-1": answer(400, utf16, {"Content-Type": "text/plain"}),
        "U16-2": answer(400, percent, {"Content-Type": "text/plain"}),
    }

    def documents(request: Request) -> Any:
        return by_invoice[json.loads(request.body)["metadata"]["invoice_id"]]

    runner = CliRunner()
    served = routes({("POST", "/api/v1/documents"): per_request(documents)})
    with HostileServer(api(served)) as server:
        monkeypatch.setenv("GOROUTE_BASE_URL", server.base_url)
        monkeypatch.setenv("GOROUTE_API_KEY", SECRET)
        sent = runner.invoke(app, ["send", str(outbox), "--trust-new-journal",
                                   "--no-receiver-check", "--max-attempts", "1"])  # fmt: skip
        shown = [runner.invoke(app, ["show", invoice_id]) for invoice_id in by_invoice]

    assert sent.exit_code == 3, sent.output
    assert journal_states(isolated_environment) == {"U16-1": "rejected", "U16-2": "rejected"}
    outputs = [sent.stdout, sent.stderr, *(result.stdout + result.stderr for result in shown)]
    stored = isolated_environment.read_bytes()
    assert SECRET.encode("utf-16-le") not in stored and spaced.encode() not in stored
    for text in outputs:
        assert "\\x00".join(SECRET) not in text and spaced not in text, text
    assert_key_nowhere(isolated_environment, *outputs)


@pytest.mark.parametrize("name", ["plain", "json unicode lower", "url every char", "html"])
def test_an_echoed_key_in_a_401_reaches_no_terminal(
    name: str, outbox: Path, isolated_environment: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_invoice(outbox, "E-401")
    raw = _raw(FORMS[name])
    header = FORMS[name] if FORMS[name].isascii() else ""
    body = ('{"error": {"code": "AUTH_001", "message": "bad key ' + raw + '"}}').encode()
    refusal = answer(401, body, {**JSON, "X-Request-Id": header}, reason=header)
    with HostileServer(api(refusal)) as server:
        monkeypatch.setenv("GOROUTE_BASE_URL", server.base_url)
        monkeypatch.setenv("GOROUTE_API_KEY", SECRET)
        result = CliRunner().invoke(
            app, ["send", str(outbox), "--trust-new-journal", "--no-receiver-check"]
        )
    assert result.exit_code == 5, result.output
    assert "bad key [redacted]" in result.stderr or "[withheld" in result.stderr
    assert_key_nowhere(isolated_environment, result.stdout, result.stderr)


# 5. Hostile identifiers: reconcile goes on with the others ---------------------------------


def _refusing_with(ids: dict[str, str]) -> Any:
    def documents(request: Request) -> Any:
        invoice_id = json.loads(request.body)["metadata"]["invoice_id"]
        bad = ids.get(invoice_id)
        if invoice_id == "ID-202":
            return answer(202, b'{"transaction_id": ".."}', JSON)
        raw = "tx_good" if bad is None else _raw(bad)
        text = '{"error_code": "IDEMPOTENCY_KEY_REUSED", "existing_transaction_id": "' + raw
        return answer(422, (text + '"}').encode(), JSON)

    # GoRoute gives back the content hash sent with ID-good: its content is this journal's.
    sent_sha256 = hashlib.sha256(invoice_xml("ID-good")).hexdigest()
    good = _echo_transaction("delivered", "ID-good", "tx_good").replace(
        '"metadata": {', f'"metadata": {{"sha256": "{sent_sha256}", '
    )
    return routes(
        {
            ("POST", "/api/v1/documents"): per_request(documents),
            ("GET", "/api/v1/transactions/tx_good"): answer(200, good.encode(), JSON),
            ("GET", "/api/v1/transactions"): answer_json(200, {"transactions": []}),
        }
    )


def test_unusable_ids_from_a_send_do_not_stop_reconcile(
    outbox: Path, isolated_environment: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = {f"ID-{name.replace(' ', '-')}": bad for name, bad in BAD_IDS.items()}
    for invoice_id in [*ids, "ID-good", "ID-202"]:
        write_invoice(outbox, invoice_id)
    runner = CliRunner()
    with HostileServer(api(_refusing_with(ids))) as server:
        monkeypatch.setenv("GOROUTE_BASE_URL", server.base_url)
        monkeypatch.setenv("GOROUTE_API_KEY", SECRET)
        send = [
            "send",
            str(outbox),
            "--trust-new-journal",
            "--no-receiver-check",
            "--max-attempts",
            "1",
        ]
        sent_result = runner.invoke(app, [*send, "--rate", "6000"])
        results = [
            runner.invoke(
                app, ["reconcile", "--format", "json", "--max-attempts", "1", "--rate", "6000"]
            )
            for _ in range(2)  # and again: nothing stored makes a later run crash
        ]
    assert sent_result.exit_code == 4, sent_result.output
    for result in results:
        assert result.exit_code == 4, result.output
        cases = {case["invoice_id"]: case for case in json.loads(result.stdout)["cases"]}
        assert cases["ID-good"]["verdict"] == "already_sent"
        for invoice_id in ids:  # searched for like a 422 that named no transaction
            assert cases[invoice_id]["verdict"] == "not_found", cases[invoice_id]
            assert "named no usable existing_transaction_id" in cases[invoice_id]["detail"]
        assert cases["ID-202"]["verdict"] == "unknown_not_found_window_open"
    paths = [request.path for request in server.requests if request.method == "GET"]
    assert all(len(path) < 300 for path in paths)
    assert {path.split("?")[0] for path in paths} - {"/peppol/version"} == {
        "/api/v1/transactions",
        "/api/v1/transactions/tx_good",
    }
    with Journal(isolated_environment) as journal:
        for invoice_id in ids:
            row = journal.invoice(invoice_id)
            assert row is not None and row.existing_transaction_id is None
            message = journal.attempts(invoice_id)[-1].message or ""
            assert "existing_transaction_id was unusable" in message and message.isprintable()


def test_unusable_ids_in_an_old_journal_do_not_stop_reconcile(tmp_path: Path, outbox: Path) -> None:
    with Journal(tmp_path / "journal.db") as journal:
        for name, bad in BAD_IDS.items():
            reused, accepted = f"OLD-reused-{name}", f"OLD-accepted-{name}"
            add_invoice(journal, outbox, reused)
            sent(journal, reused, "key_reused", http_status=422, existing_transaction_id=bad)
            add_invoice(journal, outbox, accepted)
            sent(journal, accepted, "accepted", http_status=202, transaction_id=bad)
        add_invoice(journal, outbox, "ID-good")
        sent(journal, "ID-good", "key_reused", http_status=422, existing_transaction_id="tx_good")
        with HostileServer(_refusing_with({})) as server:
            report = run_reconcile(journal, base_url=server.base_url, policy=FAST_RETRIES)
    verdicts = {case.invoice_id: case for case in report.cases}
    assert verdicts["ID-good"].verdict is Verdict.already_sent
    for name in BAD_IDS:
        assert verdicts[f"OLD-reused-{name}"].verdict is Verdict.not_found
        accepted = verdicts[f"OLD-accepted-{name}"]
        assert accepted.verdict is Verdict.lookup_failed and accepted.needs_person
        assert accepted.detail.startswith("not looked up: the transaction id is unusable")
    paths = {request.path.split("?")[0] for request in server.requests}
    assert paths == {"/api/v1/transactions", "/api/v1/transactions/tx_good"}


def _echoing_checks(form: str) -> Any:
    """Lookups and validation whose every string echoes the key, beside a plain 202."""
    raw = _raw(form)
    header = form if form.isascii() else ""
    headers = {**JSON, "X-Request-Id": header}
    lookup = (
        '{"found": true, "participant_id": "9915:phase4-test-receiver", "name": "' + raw
        + '", "capabilities": [{"document_type": "urn:oasis:names:specification:ubl:schema:'
        + 'xsd:CreditNote-2::CreditNote##' + raw + '", "process_id": "' + raw
        + '"}], "smp_endpoint": "' + raw + '"}'
    )  # fmt: skip
    validation = (
        '{"valid": false, "errors": [{"rule": "' + raw + '", "location": "' + raw
        + '", "message": "' + raw + '"}], "request_id": "' + raw + '"}'
    )  # fmt: skip
    return routes(
        {
            ("GET", "/api/v1/participants/lookup"): answer(200, lookup.encode(), headers),
            ("POST", "/api/v1/validate"): answer(200, validation.encode(), headers),
            ("POST", "/api/v1/documents"): answer_json(202, {"transaction_id": "tx_1"}),
        }
    )


@pytest.mark.parametrize("name", ["plain", "json slash", "json mixed", "url twice", "html"])
@pytest.mark.parametrize("check", ["receiver", "validation"])
def test_an_echoed_key_in_a_lookup_or_validation_reaches_nothing(
    name: str,
    check: str,
    outbox: Path,
    isolated_environment: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_invoice(outbox, "C-1")
    args = ["send", str(outbox), "--trust-new-journal", "--max-attempts", "1"]
    args += ["--validate", "--no-receiver-check"] if check == "validation" else []
    runner = CliRunner()
    with HostileServer(api(_echoing_checks(FORMS[name]))) as server:
        monkeypatch.setenv("GOROUTE_BASE_URL", server.base_url)
        monkeypatch.setenv("GOROUTE_API_KEY", SECRET)
        results = [runner.invoke(app, args), runner.invoke(app, ["show", "C-1"])]
        results.append(runner.invoke(app, ["status", "--format", "json"]))
    asked = {request.path.split("?")[0] for request in server.requests}
    assert ("/api/v1/validate" if check == "validation" else "/api/v1/participants/lookup") in asked
    for result in results:
        assert result.exception is None or isinstance(result.exception, SystemExit)
    # Neither check found this invoice acceptable: it was held, not sent.
    assert journal_states(isolated_environment) == {"C-1": "pending"}
    assert_key_nowhere(
        isolated_environment, *(text for r in results for text in (r.stdout, r.stderr))
    )


@pytest.fixture
def never_accepting() -> Iterator[int]:
    """A port whose listen queue is full: the kernel drops every further SYN, so a connect
    hangs (as to a host behind a firewall that drops packets) and nothing can be sent."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):  # the handshake goes on in the kernel
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    time.sleep(0.2)
    try:
        yield port
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def test_a_connect_cut_by_the_request_limit_is_no_unknown_send(
    tmp_path: Path, outbox: Path, never_accepting: int
) -> None:
    """helper-82: INVOICECTL_REQUEST_TIMEOUT below the 10 s connect timeout, the request's
    limit fired while the TCP handshake was still pending: no byte had left, yet the invoice
    was "unknown" (its key used, reconcile's after 24 h). The connect now times out first."""
    write_invoice(outbox, "BH-1")
    journal = tmp_path / "journal.db"
    env = cli_env(f"http://127.0.0.1:{never_accepting}", journal, INVOICECTL_REQUEST_TIMEOUT="1")
    code, _, stdout, stderr = run_cli(
        ["send", str(outbox), "--trust-new-journal", "--no-receiver-check", "--max-attempts", "1"],
        env,
        tmp_path,
        timeout=20,
    )
    assert code == 75, stdout + stderr
    with Journal(journal) as opened:
        (attempt,) = opened.attempts("BH-1")
    assert attempt.outcome == "not_sent", attempt.message
    assert journal_states(journal) == {"BH-1": "pending"}

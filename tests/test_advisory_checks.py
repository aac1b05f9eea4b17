"""The receiver lookup and ``--validate``'s validation only advise (``send.advisory``): one
short try each, and none once GoRoute stopped answering them, so they cannot hold the sends.

A hanging lookup once held every invoice of a run behind five tries of a minute each: with a
deadline, runs sent nothing at all, run after run. Bounds here are in requests made, never in
seconds; the subprocess's own timeout only keeps a regression from hanging the suite.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hostile import HostileServer, Request, Wire, answer_json, hang, per_request, routes
from sendkit import emulator, send, settings_for, states
from test_hostile_cli import api, cli_env, run_cli
from test_send_validate import FailingValidate
from ublfactory import write_invoice

from invoicectl.errors import ExitCode
from invoicectl.goroute.retry import RetryPolicy
from invoicectl.send.advisory import BREAK_AFTER

# Five tries a request, as a send gets: a check must not take them.
RETRIES = RetryPolicy(max_attempts=5, max_wait=1.0, backoff_initial=0.01, backoff_max=0.02)
RECEIVERS = 12
CONCURRENCY = 2


@pytest.fixture
def journal_path(tmp_path: Path) -> Path:
    return tmp_path / "advisory.db"


def twelve_receivers(outbox: Path) -> list[str]:
    ids = [f"R-{number:02d}" for number in range(RECEIVERS)]
    for number, invoice_id in enumerate(ids):
        write_invoice(outbox, invoice_id, receiver=f"9915:receiver-{number:02d}")
    return ids


def _accept(request: Request, wire: Wire) -> None:
    key = request.headers.get("idempotency-key", "")
    answer_json(202, {"transaction_id": f"tx_{key[-12:]}"})(request, wire)


def _checks_hang(path: str) -> HostileServer:
    """Documents accepted at once; every ``path`` request answered never."""
    return HostileServer(
        api(routes({("POST", "/api/v1/documents"): per_request(lambda _: _accept), path: hang()}))
    )


def _send_against(server: HostileServer, tmp_path: Path, *extra: str) -> tuple[int, dict, str]:
    args = ["send", str(tmp_path / "outbox"), "--trust-new-journal", "--json"]
    args += ["--deadline", "30", "--concurrency", str(CONCURRENCY), "--rate", "6000", *extra]
    env = cli_env(server.base_url, tmp_path / "journal.db")
    code, _, stdout, stderr = run_cli(args, env, tmp_path, timeout=120)
    return code, (json.loads(stdout) if stdout.strip() else {}), (stdout + stderr)[-3000:]


def _paths(server: HostileServer, prefix: str) -> list[str]:
    return [request.path for request in server.requests if request.path.startswith(prefix)]


def test_a_hanging_lookup_holds_no_send(tmp_path: Path, outbox: Path) -> None:
    ids = twelve_receivers(outbox)
    with _checks_hang(("GET", "/api/v1/participants")) as server:
        code, summary, output = _send_against(server, tmp_path)

    lookups = _paths(server, "/api/v1/participants")
    # The checks in flight when the third in a row failed end too; none starts after.
    assert 1 <= len(lookups) <= BREAK_AFTER + CONCURRENCY - 1, output
    assert len(set(lookups)) == len(lookups), output  # one try each
    assert len(_paths(server, "/api/v1/documents")) == RECEIVERS, output
    assert code == ExitCode.OK, output  # unchecked receivers are no failure (README)
    assert summary["receivers"]["unchecked"] == RECEIVERS, output
    assert summary["counts"] == {"accepted": RECEIVERS}, output
    assert states(tmp_path / "journal.db") == dict.fromkeys(ids, "accepted")


def test_a_hanging_validation_holds_no_send(tmp_path: Path, outbox: Path) -> None:
    ids = twelve_receivers(outbox)
    with _checks_hang(("POST", "/api/v1/validate")) as server:
        code, summary, output = _send_against(server, tmp_path, "--validate", "--no-receiver-check")

    validations = _paths(server, "/api/v1/validate")
    assert 1 <= len(validations) <= BREAK_AFTER + CONCURRENCY - 1, output
    assert len(_paths(server, "/api/v1/documents")) == RECEIVERS, output
    assert code == ExitCode.INCOMPLETE, output  # validation was asked for, and not made
    assert summary["validation"]["unvalidated"] == RECEIVERS, output
    assert states(tmp_path / "journal.db") == dict.fromkeys(ids, "accepted")


@pytest.mark.parametrize("status", [503, 408])
def test_three_failed_lookups_in_a_row_end_the_lookups(
    journal_path: Path, outbox: Path, status: int
) -> None:
    """503s (or 408s: a proxy that stopped waiting) for R-00, R-01, an answer for R-02, then
    more of them: the breaker opens after R-05."""
    twelve_receivers(outbox)
    sandbox = emulator()
    for number in range(RECEIVERS):
        error = None if number == 2 else status
        sandbox.stage_participant(f"9915:receiver-{number:02d}", lookup_error=error)

    _, summary = send(
        settings_for(journal_path), outbox, sandbox.transport(), policy=RETRIES, concurrency=1
    )

    asked = sandbox.stats()["lookups_per_participant"]
    assert sorted(asked) == [f"9915:receiver-{number:02d}" for number in range(6)]
    assert set(asked.values()) == {1}  # one try each, though the run's policy allows five
    assert summary.receiver_lookups == 6 and summary.receivers_unchecked == RECEIVERS - 1
    assert set(states(journal_path).values()) == {"accepted"}
    assert summary.exit_code == ExitCode.OK


def test_three_failed_validations_in_a_row_end_the_validations(
    journal_path: Path, outbox: Path
) -> None:
    twelve_receivers(outbox)
    sandbox = emulator()
    failing = FailingValidate(sandbox.transport())

    _, summary = send(
        settings_for(journal_path),
        outbox,
        failing,
        validate=True,
        check_receivers=False,
        policy=RETRIES,
        concurrency=1,
    )

    assert failing.validations == BREAK_AFTER  # one try each, then none
    assert (summary.validations, summary.unvalidated) == (BREAK_AFTER, RECEIVERS)
    assert set(states(journal_path).values()) == {"accepted"}
    assert summary.exit_code == ExitCode.INCOMPLETE

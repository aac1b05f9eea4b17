"""A base URL that answers with a redirect (plain http to an https site, a host that has
moved) stops the run with one line and exit 1, instead of reading as an outage (exit 75) at
every cron run; a document POST that met one is unknown and replayed under its key, so it
is delivered once even when the redirect came after the API had it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hostile import Behaviour, HostileServer, Request, Wire, answer, as_sent, handed_on, routes
from processkit import run_cli, run_send
from sendkit import assert_each_delivered_once, emulator, states
from ublfactory import write_invoice

from invoicectl.goroute.limiter import RateLimiter
from invoicectl.goroute.outcomes import Transient
from invoicectl.goroute.retry import RetryPolicy, call_with_retry
from invoicectl.journal import Journal
from invoicectl.sandbox import BackgroundServer

pytestmark = pytest.mark.slow

MOVED = "https://api.goroute.example/peppol-api"


def moved_permanently() -> Behaviour:
    return answer(301, headers={"Location": MOVED})


def handed_on_then_redirected(target: str) -> Behaviour:
    """A front that hands every request on to the API at ``target`` and then answers 303 See
    Other: the API has the document, and the client cannot tell."""

    def behave(request: Request, wire: Wire) -> None:
        handed_on(target, request)
        answer(303, headers={"Location": target + request.path})(request, wire)

    return behave


def posts(server: HostileServer) -> list[Request]:
    return [request for request in server.requests if request.method == "POST"]


def test_a_new_journal_meets_the_redirect_at_its_history_check(
    outbox: Path, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.db"
    for number in range(3):
        write_invoice(outbox, f"H-{number}")
    with HostileServer(moved_permanently()) as server:
        code, output = run_send(outbox, journal, server.base_url)
        assert posts(server) == []
        assert len(server.requests) == 1  # never retried
    assert code == 1, output
    assert f"GoRoute answered 301, a redirect to {MOVED}" in output
    assert f"the base URL {server.base_url} is wrong or has moved" in output
    assert set(states(journal).values()) == {"pending"}


def test_a_post_that_met_a_redirect_is_replayed_under_its_key_and_delivered_once(
    outbox: Path, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.db"
    ids = [f"R-{number}" for number in range(6)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    sandbox = emulator()
    with BackgroundServer(sandbox) as api:
        with HostileServer(handed_on_then_redirected(api.base_url)) as front:
            args = ("--trust-new-journal", "--no-receiver-check", "--concurrency", "1")
            code, output = run_send(outbox, journal, front.base_url, *args)
            sent = posts(front)
        assert code == 1, output
        assert "GoRoute answered 303, a redirect" in output
        assert "exit 75" not in output
        assert len(sent) == 1  # the first redirect stopped the run; no retry
        after = states(journal)
        assert sorted(after.values()) == ["pending"] * 5 + ["unknown"]
        with Journal(journal) as opened:
            assert opened.bound_base_url() is None  # a redirect is no answer from the API
            (unknown,) = [row for row in opened.invoices() if row.state == "unknown"]
        assert unknown.idempotency_key == sent[0].headers["idempotency-key"]

        code, output = run_send(outbox, journal, api.base_url, "--no-receiver-check")
        assert code == 1  # the invoice's request may have reached GoRoute at the other URL
        assert "no answer there came from GoRoute's API (a redirect" in output, output
        code, output = run_send(
            outbox, journal, api.base_url, "--no-receiver-check", "--allow-environment-change"
        )
        assert code == 0, output
        assert set(states(journal).values()) == {"accepted"}
        assert_each_delivered_once(sandbox.stats(), ids)


def handed_on_but(prefix: str, target: str) -> Behaviour:
    """Every request handed on to the API at ``target``, but those under ``prefix``: 302."""

    def pass_on(request: Request, wire: Wire) -> None:
        wire.write(as_sent(handed_on(target, request)))

    moved = {("GET", prefix): answer(302, headers={"Location": MOVED})}
    moved[("POST", prefix)] = answer(307, headers={"Location": MOVED})
    return routes(moved, pass_on)


@pytest.mark.parametrize(
    ("prefix", "flags"),
    [("/api/v1/participants", ()), ("/api/v1/validate", ("--validate", "--no-receiver-check"))],
    ids=["lookup", "validation"],
)
def test_a_check_that_meets_a_redirect_stops_the_send_with_nothing_sent(
    outbox: Path, tmp_path: Path, prefix: str, flags: tuple[str, ...]
) -> None:
    """helper-91: a receiver lookup or a validation answered by a redirect was a failed
    check: the invoices went out unchecked (the README: a redirect stops `send`, exit 1)."""
    journal = tmp_path / "journal.db"
    for number in range(3):
        write_invoice(outbox, f"K-{number}")
    sandbox = emulator()
    with (
        BackgroundServer(sandbox) as api,
        HostileServer(handed_on_but(prefix, api.base_url)) as front,
    ):
        code, output = run_send(outbox, journal, front.base_url, "--trust-new-journal", *flags)
        sent = posts(front)
    assert code == 1, output
    assert "a redirect to" in output and "is wrong or has moved" in output
    assert [request.path for request in sent if request.path == "/api/v1/documents"] == []
    assert set(states(journal).values()) == {"pending"}


def test_reconcile_at_a_redirect_concludes_nothing(outbox: Path, tmp_path: Path) -> None:
    journal = tmp_path / "journal.db"
    write_invoice(outbox, "C-1")
    with BackgroundServer(emulator()) as api:
        assert run_send(outbox, journal, api.base_url)[0] == 0
    with HostileServer(moved_permanently()) as server:
        code, stdout, stderr = run_cli(
            journal, server.base_url, "reconcile", "--allow-environment-change"
        )
        asked = len(server.requests)
    assert code == 1, stdout + stderr
    assert "a redirect to" in stderr and "nothing was changed" in stderr
    assert asked == 1
    with Journal(journal) as opened:
        assert opened.invoice("C-1").verdict is None


@pytest.mark.anyio
async def test_a_redirect_is_not_retried() -> None:
    tries = 0

    async def attempt() -> Transient:
        nonlocal tries
        tries += 1
        return Transient(http_status=308, reason="moved")

    policy = RetryPolicy(max_attempts=5, max_wait=1.0, backoff_initial=0.01, backoff_max=0.01)
    outcome = await call_with_retry(attempt, policy=policy, limiter=RateLimiter(6000))
    assert isinstance(outcome, Transient) and tries == 1

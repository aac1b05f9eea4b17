"""A wrong base URL stops the run with one line and changes nothing, and the journal is bound
only by the first answer from the API itself (issue 11, items 7 and 8)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hostile import HostileServer, answer, answer_json
from processkit import run_send
from sendkit import emulator, states
from ublfactory import write_invoice

from invoicectl.journal import Journal
from invoicectl.sandbox import DEFAULT_API_KEY, BackgroundServer

pytestmark = pytest.mark.slow

PAGE = b"<html><head><title>404 Not Found</title></head><body>nginx</body></html>"


def a_web_server() -> HostileServer:
    """Answers every path, API paths included, with its HTML 404 page."""
    return HostileServer(answer(404, PAGE, {"Content-Type": "text/html"}))


def journal_facts(journal: Path) -> tuple[dict[str, str], str | None]:
    with Journal(journal) as opened:
        bound = opened.bound_base_url()
    return states(journal), bound


@pytest.mark.parametrize(
    ("path", "trust", "asked"),
    [
        # A new journal asks the transactions list first (its history check) ...
        ("/peppol-apii", False, "/api/v1/transactions"),
        ("", False, "/api/v1/transactions"),
        # ... and one told to trust itself meets the page at the documents POST.
        ("/peppol-apii", True, "/api/v1/documents"),
        ("/peppol-api/v2", True, "/api/v1/documents"),
    ],
)
def test_a_typo_in_the_path_burns_nothing_and_the_fixed_url_sends(
    outbox: Path, tmp_path: Path, path: str, trust: bool, asked: str
) -> None:
    journal = tmp_path / "journal.db"
    for number in range(3):
        write_invoice(outbox, f"W-{number}")
    with a_web_server() as server:
        args = ["--trust-new-journal"] if trust else []
        code, output = run_send(outbox, journal, server.base_url + path, *args)
        posts = [request for request in server.requests if request.method == "POST"]
    assert code == 1
    assert f"{server.base_url}{path}{asked} answered 404 (text/html" in output
    assert "the base URL is wrong" in output
    assert len(posts) == (1 if trust else 0)  # the first answer stopped the run
    states, bound = journal_facts(journal)
    assert set(states.values()) == {"pending"}  # nothing rejected, nothing unknown
    assert bound is None

    with BackgroundServer(emulator()) as fixed:
        code, output = run_send(outbox, journal, fixed.base_url)
    assert code == 0, output
    states, bound = journal_facts(journal)
    assert set(states.values()) == {"accepted"}
    assert bound == fixed.base_url


@pytest.mark.parametrize(
    "base_url",
    [
        "http://127.0.0.1:9",  # nothing listens
        "http://goroute.example.invalid",  # plain http to a remote host: refused
    ],
)
def test_a_url_that_never_answered_does_not_bind_the_journal(
    outbox: Path, tmp_path: Path, base_url: str
) -> None:
    journal = tmp_path / "journal.db"
    write_invoice(outbox, "U-1")
    code, output = run_send(outbox, journal, base_url, "--max-attempts", "1")
    assert code != 0
    if journal.exists():
        assert journal_facts(journal)[1] is None
    with BackgroundServer(emulator()) as fixed:
        code, output = run_send(outbox, journal, fixed.base_url)
    assert code == 0, output  # no "bound to another base URL"
    assert journal_facts(journal) == ({"U-1": "accepted"}, fixed.base_url)


def test_a_trailing_slash_is_the_same_environment(outbox: Path, tmp_path: Path) -> None:
    journal = tmp_path / "journal.db"
    write_invoice(outbox, "S-1")
    with BackgroundServer(emulator()) as server:
        assert run_send(outbox, journal, server.base_url + "/")[0] == 0
        write_invoice(outbox, "S-2")
        code, output = run_send(outbox, journal, server.base_url)
    assert code == 0, output
    assert journal_facts(journal)[1] == server.base_url


def test_reconcile_at_a_wrong_url_concludes_nothing(outbox: Path, tmp_path: Path) -> None:
    """Every transaction "not found" at a web page would read as "never arrived"."""
    journal = tmp_path / "journal.db"
    write_invoice(outbox, "R-1")
    with BackgroundServer(emulator()) as server:
        assert run_send(outbox, journal, server.base_url)[0] == 0
    env = {
        **os.environ,
        "GOROUTE_API_KEY": DEFAULT_API_KEY,
        "INVOICECTL_JOURNAL": str(journal),
    }
    with a_web_server() as web:
        env["GOROUTE_BASE_URL"] = web.base_url + "/peppol-apii"
        run = subprocess.run(
            [sys.executable, "-m", "invoicectl", "reconcile", "--allow-environment-change"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "the base URL is wrong" in run.stderr
    assert "reconcile changed nothing" in run.stderr
    assert states(journal) == {"R-1": "accepted"}
    with Journal(journal) as opened:
        assert opened.invoice("R-1").verdict is None


@pytest.mark.parametrize(
    ("status", "bound"),
    [(401, False), (503, True), (400, True)],
)
def test_which_answers_bind_the_journal(
    outbox: Path, tmp_path: Path, status: int, bound: bool
) -> None:
    """A refused key binds nothing (a sandbox key at the production URL); a server error or
    a refusal of the document is an answer from the API there, and binds."""
    journal = tmp_path / "journal.db"
    write_invoice(outbox, "B-1")
    error = {"error": {"code": "SOME_CODE", "message": "no"}}
    with HostileServer(answer_json(status, error)) as server:
        args = ("--max-attempts", "1", "--no-receiver-check", "--trust-new-journal")
        run_send(outbox, journal, server.base_url, *args)
        assert journal_facts(journal)[1] == (server.base_url if bound else None)


def test_plain_http_to_a_remote_host_is_refused_before_the_outbox_is_scanned(
    outbox: Path, tmp_path: Path
) -> None:
    """The refusal used to come after a scan had made the journal and read every file."""
    journal = tmp_path / "journal.db"
    write_invoice(outbox, "P-1")
    code, output = run_send(outbox, journal, "http://example.com/peppol-api")
    assert code == 1 and "plain http to a remote host" in output, output
    assert not journal.exists()


def test_one_journal_serves_one_profile(tmp_path: Path) -> None:
    """Two profiles (two accounts at one base URL) whose journal settings name one database
    spelt two ways: the second sent the first one's unanswered invoices again through its own
    account (found by a review of several servers). The binding names the profile."""
    from invoicectl.environment import bind_environment, check_environment
    from invoicectl.errors import EnvironmentMismatch

    url = "https://api.goroute.example/peppol-api"
    with Journal(tmp_path / "journal.db") as journal:
        journal.bind_base_url(url)  # bound with no profile (or before bindings named one)
        with pytest.raises(EnvironmentMismatch, match="If it is profile acme's own"):
            check_environment(journal, url, allow_change=False, profile="acme")
        bind_environment(journal, url, allow_change=True, profile="acme")  # when told
        assert journal.bound_base_url() == f"{url} (profile acme)"
        with pytest.raises(EnvironmentMismatch, match=r"bound to .* \(profile acme\), not"):
            check_environment(journal, url, allow_change=False, profile="beta")
        with pytest.raises(EnvironmentMismatch):
            check_environment(journal, url, allow_change=False)  # no profile: another config
        check_environment(journal, url, allow_change=False, profile="acme")
        bind_environment(journal, url, allow_change=True, profile="beta")
        assert journal.bound_base_url() == f"{url} (profile beta)"
    # One account's journal that starts to use profiles: its last run used this profile's key.
    with Journal(tmp_path / "one-account.db") as journal:
        journal.bind_base_url(url)
        journal.begin_run("send", {}, key_fingerprint="0123456789ab")
        with pytest.raises(EnvironmentMismatch):
            check_environment(journal, url, allow_change=False, profile="acme", account="ffff")
        bind_environment(journal, url, allow_change=False, profile="acme", account="0123456789ab")
        assert journal.bound_base_url() == f"{url} (profile acme)"

"""Health-check pings (issue 12, item 2): a loopback listener receives /start and /<exit code>
with the output's tail; the URL, a secret, shows nowhere; a ping that fails fails no run."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hostile import HostileServer, answer, endless, hang
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl import pings
from invoicectl.cli import app
from invoicectl.journal import locked_journal

FAST = ["--rate", "60000"]
SECRET = "c0ffee-secret-uuid-5b1f"


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def journal_text(path: Path) -> str:
    """Every row of every table of the journal, as SQL text."""
    conn = sqlite3.connect(path)
    try:
        return "\n".join(conn.iterdump())
    finally:
        conn.close()


def assert_nowhere(url: str, *texts: str) -> None:
    for text in texts:
        assert SECRET not in text
        assert url not in text


def test_a_send_pings_start_then_its_exit_code_with_the_output_s_tail(outbox: Path, tmp_path: Path):
    write_invoice(outbox, "INV-1")
    write_invoice(outbox, "INV-2")
    with HostileServer(answer(200, b"OK")) as server:
        url = f"{server.base_url}/ping/{SECRET}"
        result = invoke("send", str(outbox), "--sandbox", *FAST, "--ping-url", url)

    assert result.exit_code == 0, result.output
    assert [(r.method, r.path) for r in server.requests] == [
        ("POST", f"/ping/{SECRET}/start"),
        ("POST", f"/ping/{SECRET}/0"),
    ]
    body = server.requests[1].body.decode()
    assert "accepted 2" in body and body.strip().splitlines()[-1] in result.output
    assert_nowhere(
        url, result.output, result.stderr, journal_text(tmp_path / "state" / "sandbox.db")
    )


def test_a_run_kept_out_by_one_that_pings_nothing_still_pings_its_end(outbox: Path, tmp_path: Path):
    """helper-105: only a holder that pings its own end (a send, a reconcile) makes the end
    ping needless; one kept out by a scan, or by another journal's send of the outbox, says
    its 6 as before."""
    write_invoice(outbox, "INV-1")
    with HostileServer(answer(200)) as server:
        url = f"{server.base_url}/{SECRET}"
        with locked_journal(tmp_path / "state" / "sandbox.db", "scan", create=True):
            kept_out = invoke("send", str(outbox), "--sandbox", *FAST, "--ping-url", url)

    assert kept_out.exit_code == 6, kept_out.output
    assert "no end ping" not in kept_out.stderr
    assert [r.path for r in server.requests] == [f"/{SECRET}/start", f"/{SECRET}/6"]


def test_a_run_the_journal_s_holder_kept_out_sends_no_end_ping(outbox: Path, tmp_path: Path):
    """helper-104: a second cron run (or one by hand) during a send exited 6 and pinged /6:
    healthchecks.io marks the check down at once while the first run works. It never had the
    journal: the holder pings its own end, and the /start sent stays (a holder that never
    ends is still caught by the grace period)."""
    write_invoice(outbox, "INV-1")
    with HostileServer(answer(200)) as server:
        url = f"{server.base_url}/{SECRET}"
        with locked_journal(tmp_path / "state" / "sandbox.db", "send", create=True):
            kept_out = invoke("send", str(outbox), "--sandbox", *FAST, "--ping-url", url)
        after = invoke("send", str(outbox), "--sandbox", *FAST, "--ping-url", url)

    assert kept_out.exit_code == 6, kept_out.output
    assert "no end ping from this run" in kept_out.stderr
    assert after.exit_code == 0, after.output
    assert [r.path for r in server.requests] == [
        f"/{SECRET}/start",
        f"/{SECRET}/start",
        f"/{SECRET}/0",
    ]
    assert_nowhere(url, kept_out.output, after.output)


def test_the_exit_code_is_the_run_s_and_an_error_s_line_is_in_the_tail(outbox: Path):
    write_invoice(outbox, "INV-1")
    (outbox / "broken.xml").write_bytes(b"<not-ubl/>")
    with HostileServer(answer(200)) as server:
        url = f"{server.base_url}/{SECRET}"
        sent = invoke("send", str(outbox), "--sandbox", *FAST, "--ping-url", url)
        # An outbox that is not there: the run ends with an error line.
        refused = invoke("send", str(outbox / "nope"), "--sandbox", "--ping-url", url)

    assert sent.exit_code == 3, sent.output
    assert refused.exit_code != 0
    paths = [r.path for r in server.requests]
    assert paths == [
        f"/{SECRET}/start",
        f"/{SECRET}/3",
        f"/{SECRET}/start",
        f"/{SECRET}/{refused.exit_code}",
    ]
    assert "invoicectl: error:" in server.requests[3].body.decode()
    assert "invalid" in server.requests[1].body.decode()
    assert_nowhere(url, sent.output, refused.output)


def test_reconcile_pings_too(outbox: Path, tmp_path: Path):
    write_invoice(outbox, "INV-1")
    invoke("send", str(outbox), "--sandbox", *FAST)
    with HostileServer(answer(200)) as server:
        url = f"{server.base_url}/{SECRET}"
        result = invoke("reconcile", "--sandbox", "--ping-url", url)

    assert [r.path for r in server.requests] == [f"/{SECRET}/start", f"/{SECRET}/0"]
    assert result.exit_code == 0, result.output
    assert server.requests[1].body  # the report's lines
    assert_nowhere(url, result.output, journal_text(tmp_path / "state" / "sandbox.db"))


def test_the_config_key_ping_url_is_used(outbox: Path, tmp_path: Path, monkeypatch):
    write_invoice(outbox, "INV-1")
    with HostileServer(answer(200)) as server:
        config = tmp_path / "config.toml"
        config.write_text(f'ping_url = "{server.base_url}/{SECRET}"\n', encoding="utf-8")
        monkeypatch.setenv("INVOICECTL_CONFIG", str(config))
        result = invoke("send", str(outbox), "--sandbox", *FAST)

    assert result.exit_code == 0, result.output
    assert [r.path for r in server.requests] == [f"/{SECRET}/start", f"/{SECRET}/0"]


@pytest.mark.parametrize(
    "behaviour", [hang(30), answer(500), answer(302)], ids=["hang", "500", "redirect"]
)
def test_a_ping_that_fails_is_one_line_and_fails_no_run(outbox: Path, monkeypatch, behaviour):
    monkeypatch.setattr(pings, "TIMEOUT", 0.5)
    write_invoice(outbox, "INV-1")
    with HostileServer(behaviour) as server:
        url = f"{server.base_url}/{SECRET}"
        result = invoke("send", str(outbox), "--sandbox", *FAST, "--ping-url", url)

    assert result.exit_code == 0, result.output
    said = [line for line in result.stderr.splitlines() if "the ping URL" in line]
    assert len(said) == 2, said  # /start and /0
    assert all(line.startswith("invoicectl: the ping URL's /") for line in said)
    assert_nowhere(url, result.output, result.stderr)


def test_an_answer_that_never_ends_is_read_no_further_than_a_kilobyte(outbox: Path):
    write_invoice(outbox, "INV-1")
    with HostileServer(endless(200)) as server:
        result = invoke(
            "send", str(outbox), "--sandbox", *FAST, "--ping-url", f"{server.base_url}/{SECRET}"
        )

    assert result.exit_code == 0, result.output
    assert "the ping URL" not in result.stderr  # a 200, its body not waited for
    assert len(server.requests) == 2


def test_a_ping_url_nobody_listens_on_is_one_line(outbox: Path):
    with HostileServer(answer(200)) as server:
        url = f"{server.base_url}/{SECRET}"  # closed once the block ends
    write_invoice(outbox, "INV-1")

    result = invoke("send", str(outbox), "--sandbox", *FAST, "--ping-url", url)

    assert result.exit_code == 0, result.output
    assert "the ping URL's /start ping failed: it could not be reached" in result.stderr
    assert_nowhere(url, result.output, result.stderr)


def test_a_ping_url_s_query_string_stays_after_what_is_appended(outbox: Path):
    """helper-104: healthchecks.io's ``?create=1`` (a check made on its first ping) was
    refused, and with it every send; /start and the exit code go on the path, ahead of it."""
    write_invoice(outbox, "INV-1")
    with HostileServer(answer(200)) as server:
        url = f"{server.base_url}/ping/{SECRET}/nightly/?create=1"
        result = invoke("send", str(outbox), "--sandbox", *FAST, "--ping-url", url)

    assert result.exit_code == 0, result.output
    assert [r.path for r in server.requests] == [
        f"/ping/{SECRET}/nightly/start?create=1",
        f"/ping/{SECRET}/nightly/0?create=1",
    ]
    assert_nowhere(url, result.output, result.stderr)


@pytest.mark.parametrize(
    "bad", [f"ftp://{SECRET}.example", f"https://{SECRET}.example/x#q=1", f"{SECRET}"]
)
def test_a_bad_ping_url_is_refused_without_being_shown(outbox: Path, bad: str):
    result = invoke("send", str(outbox), "--sandbox", "--ping-url", bad)

    assert result.exit_code == 2
    assert "ping_url" in result.output
    assert SECRET not in result.output


@pytest.mark.parametrize("port", ["0", "00", "65536", "99999999", "http", "\u0668\u0660", "-1"])
def test_a_ping_url_whose_port_reaches_no_server_is_refused_from_every_source(
    outbox: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, port: str
):
    # Port 0 was taken, and every ping of every run then failed; a port past 65535 or not
    # a number was refused without saying why.
    url = f"https://hc-ping.example:{port}/{SECRET}"
    config = tmp_path / "config.toml"
    config.write_text(f'ping_url = "{url}"\n', encoding="utf-8")
    said = "must be an http(s) URL with a host and a port from 1 to 65535 (the value is not shown"

    by_option = invoke("send", str(outbox), "--sandbox", "--ping-url", url)
    monkeypatch.setenv("INVOICECTL_PING_URL", url)
    by_variable = invoke("send", str(outbox), "--sandbox")
    monkeypatch.delenv("INVOICECTL_PING_URL")
    monkeypatch.setenv("INVOICECTL_CONFIG", str(config))
    by_config = invoke("send", str(outbox), "--sandbox")

    assert by_option.exit_code == 2, by_option.output
    assert f"ping_url (the command line) {said}" in by_option.stderr, by_option.stderr
    assert by_variable.exit_code == 1, by_variable.output
    assert f"ping_url ($INVOICECTL_PING_URL) {said}" in by_variable.stderr, by_variable.stderr
    assert by_config.exit_code == 1, by_config.output
    assert f"ping_url (config file {config}) {said}" in by_config.stderr, by_config.stderr
    for result in (by_option, by_variable, by_config):
        assert "Traceback" not in result.output
        assert SECRET not in result.output


def test_the_tail_is_the_last_ten_kilobytes_in_plain_text():
    tail = pings.OutputTail()
    for number in range(5000):
        tail.add(f"\x1b[1;32mline {number}\x1b[0m\r\n")

    text = tail.text()
    assert len(text) <= pings.TAIL_BYTES
    assert text.endswith(b"line 4999\n")
    assert b"\x1b" not in text and b"\r" not in text

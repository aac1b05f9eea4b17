"""Logs a person can read the next morning (issue 12, item 3): a timestamp on every plain line
when a stream is not a terminal, ``--log-format json`` for log shippers, and a last line that
names the exit code's cause, built from what the code was chosen from."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hostile import HostileServer, answer
from logkit import unstamped
from processkit import cli_env
from sendkit import emulator
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.cli import app
from invoicectl.errors import Cause, ExitCode, explain
from invoicectl.journal import Journal, locked_journal
from invoicectl.lifecycle.plan import attention, attention_causes
from invoicectl.loglines import STAMP, LineStream, LogFormat
from invoicectl.sandbox import BackgroundServer

FAST = ("--rate", "60000")
SECRET_PING = "5ec12e7-ping-uuid"


def at(moment: str):
    return lambda: datetime.fromisoformat(moment).replace(tzinfo=UTC)


# --- the stream -------------------------------------------------------------------------------


def test_each_line_is_stamped_at_its_first_character_however_it_is_written() -> None:
    out = io.StringIO()
    stream = LineStream(out, "stdout", LogFormat.text, clock=at("2026-12-01T17:20:03.9"))
    stream.write("first ")
    stream.write("line\nsecond\n\nthird")
    stream.write(" ends\n")
    assert out.getvalue() == (
        "2026-12-01T17:20:03Z first line\n"
        "2026-12-01T17:20:03Z second\n"
        "2026-12-01T17:20:03Z\n"
        "2026-12-01T17:20:03Z third ends\n"
    )


def test_json_lines_carry_the_tagged_event_and_fields_else_a_plain_line_event() -> None:
    out = io.StringIO()
    stream = LineStream(out, "stderr", LogFormat.json, clock=at("2026-12-01T17:20:03"))
    stream.tag({"event": "send.summary", "level": None, "run_id": 7, "counts": {"accepted": 2}})
    stream.write("run 7: accepted 2\n\ninvoicectl: error: journal locked\n")
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first == {
        "timestamp": "2026-12-01T17:20:03Z",
        "level": "info",
        "event": "send.summary",
        "message": "run 7: accepted 2",
        "run_id": 7,
        "counts": {"accepted": 2},
    }
    assert second["event"] == "line" and second["level"] == "error"
    assert not stream.isatty()  # no progress bar or table drawn into JSON lines


# --- a real night's log -----------------------------------------------------------------------


@pytest.fixture
def night(outbox: Path) -> Path:
    """An outbox with 2 good invoices, 2 the API rejects (no such receiver), 1 broken file."""
    write_invoice(outbox, "GOOD-1")
    write_invoice(outbox, "GOOD-2")
    write_invoice(outbox, "NOWHERE-1", receiver="9915:not-registered")
    write_invoice(outbox, "NOWHERE-2", receiver="9915:not-registered")
    (outbox / "broken.xml").write_text("<Invoice", encoding="utf-8")
    return outbox


def run(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    """The real CLI in a process whose stdout and stderr are pipes, not terminals."""
    done = subprocess.run(
        [sys.executable, "-m", "invoicectl", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def server() -> Iterator[BackgroundServer]:
    with BackgroundServer(emulator()) as running:
        yield running


def nights_runs(night: Path) -> list[tuple[str, ...]]:
    return [
        ("send", str(night), "--no-receiver-check", *FAST),
        ("reconcile",),
        ("scan", str(night)),
        ("status",),
        ("status", "--state", "nope"),  # an error: exit 2
    ]


@pytest.mark.slow
def test_every_line_of_a_night_s_runs_starts_with_a_timestamp(
    night: Path, tmp_path: Path, server: BackgroundServer
) -> None:
    env = cli_env(tmp_path / "journal.db", server.base_url)
    codes, lines = [], []
    for args in nights_runs(night):
        code, stdout, stderr = run(env, *args)
        codes.append(code)
        lines += stdout.splitlines() + stderr.splitlines()
        assert stdout.strip() or args[0] == "status", (args, stderr)
        # Each run ends with the line naming its exit code's cause.
        assert unstamped(stderr).splitlines()[-1].startswith(f"exit {code}: "), stderr

    assert codes == [3, 0, 3, 3, 2]
    assert len(lines) > 15
    unstamped_lines = [line for line in lines if not STAMP.match(line)]
    assert unstamped_lines == []
    stamp = lines[0][:20]
    assert datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) <= datetime.now(UTC)


@pytest.mark.slow
def test_the_last_lines_name_each_cause(
    night: Path, tmp_path: Path, server: BackgroundServer
) -> None:
    env = cli_env(tmp_path / "journal.db", server.base_url)
    last = []
    for args in nights_runs(night):
        _, _, stderr = run(env, *args)
        last.append(unstamped(stderr).splitlines()[-1])
    assert last[:4] == [
        "exit 3: 1 invalid, 2 rejected",
        "exit 0: 2 delivery pending",
        "exit 3: 1 invalid file",
        "exit 3: 1 invalid, 2 rejected",
    ]
    assert last[4].startswith("exit 2: unknown state 'nope'")


@pytest.mark.slow
def test_in_a_cron_log_each_run_s_exit_line_comes_last(
    night: Path, tmp_path: Path, server: BackgroundServer
) -> None:
    """``> log 2>&1`` under cron (no PYTHONUNBUFFERED): stdout is block-buffered, stderr is
    not, and the ``exit N:`` line was written before everything the command printed."""
    env = cli_env(tmp_path / "journal.db", server.base_url)
    env.pop("PYTHONUNBUFFERED", None)
    for args in [*nights_runs(night), ("verify",), ("doctor",)]:
        log = tmp_path / "cron.log"
        with log.open("w") as file:
            done = subprocess.run(
                [sys.executable, "-m", "invoicectl", *args],
                env=env, stdout=file, stderr=subprocess.STDOUT, timeout=120,
            )  # fmt: skip
        lines = unstamped(log.read_text()).splitlines()
        assert len(lines) > 1, (args, lines)
        assert lines[-1].startswith(f"exit {done.returncode}: "), (args, lines)
        assert not any(line.startswith("exit ") for line in lines[:-1]), (args, lines)


@pytest.mark.slow
def test_json_log_lines_one_object_a_line_with_events_run_id_and_counts(
    night: Path, tmp_path: Path, server: BackgroundServer
) -> None:
    env = cli_env(tmp_path / "journal.db", server.base_url)
    code, stdout, stderr = run(env, "send", str(night), "--no-receiver-check", *FAST,
                               "--log-format", "json")  # fmt: skip
    assert code == 3, stderr
    records = [json.loads(line) for line in stdout.splitlines() + stderr.splitlines()]
    for record in records:
        assert STAMP.match(record["timestamp"] + " ")
        assert record["level"] in ("info", "warning", "error")
        assert isinstance(record["event"], str) and isinstance(record["message"], str)
    by_event = {record["event"]: record for record in records}
    assert {"send.start", "send.batch", "send.summary", "run.exit"} <= set(by_event)
    summary = by_event["send.summary"]
    assert summary["counts"] == {"accepted": 2, "rejected": 2} and summary["run_id"] == 1
    assert by_event["run.exit"] == {
        **by_event["run.exit"],
        "level": "error",
        "exit_code": 3,
        "cause": "1 invalid, 2 rejected",
        "run_id": 1,
        "message": "exit 3: 1 invalid, 2 rejected",
    }
    assert json.loads(stderr.splitlines()[-1])["event"] == "run.exit"

    # From the environment too, for every command.
    code, stdout, stderr = run({**env, "INVOICECTL_LOG_FORMAT": "json"}, "scan", str(night))
    events = [json.loads(line)["event"] for line in stdout.splitlines() + stderr.splitlines()]
    assert code == 3 and events == ["scan.done", "line", "run.exit"]


@pytest.mark.slow
def test_json_document_and_json_log_never_share_a_stream(
    night: Path, tmp_path: Path, server: BackgroundServer
) -> None:
    env = cli_env(tmp_path / "journal.db", server.base_url)
    args = ("send", str(night), "--no-receiver-check", *FAST, "--json")
    code, stdout, stderr = run(env, *args, "--log-format", "json")
    assert code == 3
    assert json.loads(stdout)["exit_code"] == 3  # stdout: the one document, whole
    events = [json.loads(line)["event"] for line in stderr.splitlines()]  # stderr: log lines
    assert events[-1] == "run.exit"

    # --json alone stays one document and nothing else.
    code, stdout, stderr = run(env, "scan", str(night), "--json")
    assert code == 3 and json.loads(stdout)["files"] == 5 and stderr == ""
    # Data formats are never stamped; their diagnostics on stderr are.
    code, stdout, stderr = run(env, "status", "--format", "csv")
    assert stdout.splitlines()[0].startswith("invoice_id") and not STAMP.match(stdout)
    assert unstamped(stderr).splitlines() == ["exit 3: 1 invalid, 2 rejected"]


@pytest.mark.slow
def test_help_version_and_completion_are_not_log_lines(tmp_path: Path) -> None:
    env = cli_env(tmp_path / "journal.db", "http://127.0.0.1:9")
    for args in (("--help",), ("status", "-h"), ("--version",), ("status", "--version")):
        code, stdout, stderr = run(env, *args)
        assert code == 0 and stdout and not STAMP.match(stdout) and stderr == "", args
    code, stdout, stderr = run(env)  # no command: the root's help, on stderr
    assert code == 2 and stderr.startswith("Usage: invoicectl") and stdout == ""


# --- errors end with their cause too ----------------------------------------------------------


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_a_locked_journal_ends_with_exit_6_and_who_holds_it(outbox: Path, tmp_path: Path) -> None:
    write_invoice(outbox, "INV-1")
    path = tmp_path / "journal.db"
    with locked_journal(path, "send", create=True):
        result = invoke("scan", str(outbox), "--journal", str(path))
    assert result.exit_code == 6
    last = result.stderr.splitlines()[-1]
    assert last.startswith("exit 6: ") and f"pid {os.getpid()}" in last, result.stderr


def test_refused_credentials_end_with_exit_5(outbox: Path, tmp_path: Path) -> None:
    write_invoice(outbox, "INV-1")
    with BackgroundServer(emulator()) as server:
        env = cli_env(tmp_path / "journal.db", server.base_url, api_key="not-the-key-0000")
        # Refused at the history check before a new journal's first send (an error), then in
        # the send itself (the run's summary).
        first = run(env, "send", str(outbox), *FAST)
        second = run(env, "send", str(outbox), *FAST, "--trust-new-journal")
    for code, stdout, stderr in (first, second):
        assert code == 5
        last = unstamped(stderr).splitlines()[-1]
        assert last.startswith("exit 5: the API refused the credentials"), stderr
        assert "not-the-key-0000" not in stdout + stderr
    assert unstamped(second[2]).splitlines()[-1] == (
        "exit 5: the API refused the credentials; also 1 waiting to be sent"
    )


def test_doctor_s_last_line_names_the_checks_that_failed(tmp_path: Path) -> None:
    """Not the exit-code table's "could not run (configuration, journal unreadable, bug)":
    which checks failed, as the summary above it says."""
    Journal(tmp_path / "journal.db").close()  # doctor fails a journal that is not there
    env = cli_env(tmp_path / "journal.db", "http://127.0.0.1:9")
    code, _, stderr = run(env, "doctor")
    assert code == 75  # nothing answers at the base URL: transient
    last = unstamped(stderr).splitlines()[-1]
    assert last.startswith("exit 75: 1 of 8 checks failed (base_url)"), stderr


def test_a_usage_error_ends_with_exit_2_after_typer_s_message() -> None:
    result = invoke("status", "--bogus")
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert "No such option: --bogus" in lines[-2]
    assert lines[-1] == "exit 2: usage error: No such option: --bogus"


def test_a_bad_log_format_is_a_usage_error_naming_where_it_came_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result = invoke("status", "--log-format", "xml")
    assert result.exit_code == 2
    assert "log_format (the command line) must be text or json, not 'xml'" in result.stderr
    monkeypatch.setenv("INVOICECTL_LOG_FORMAT", "yaml")
    result = invoke("status")
    assert result.exit_code == 1
    assert "log_format ($INVOICECTL_LOG_FORMAT) must be text or json" in result.stderr
    # helper-93: it blocked every command's help too (no other bad setting does)
    for asked in (["status", "--help"], ["send", "-h"]):
        helped = invoke(*asked)
        assert helped.exit_code == 0 and "Usage" in helped.stdout, helped.stderr


def test_the_config_file_s_log_format_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    config = tmp_path / "config.toml"
    config.write_text('log_format = "json"\n', encoding="utf-8")
    env = {
        **cli_env(tmp_path / "journal.db", "http://127.0.0.1:9"),
        "INVOICECTL_CONFIG": str(config),
    }
    Journal(tmp_path / "journal.db").close()  # status reads a journal; it makes none
    code, stdout, stderr = run(env, "status")
    assert code == 0, stderr
    assert [json.loads(line)["event"] for line in stderr.splitlines()] == ["run.exit"]
    assert json.loads(stdout.splitlines()[0])["event"] == "status.counts"


@pytest.mark.parametrize("value", ['["json"]', "{ a = 1 }", "true"])
def test_a_config_log_format_of_another_type_is_one_line_not_a_traceback(
    tmp_path: Path, value: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f"log_format = {value}\n", encoding="utf-8")
    env = {
        **cli_env(tmp_path / "journal.db", "http://127.0.0.1:9"),
        "INVOICECTL_CONFIG": str(config),
    }
    code, stdout, stderr = run(env, "status")
    assert code == 1
    assert "Traceback" not in stderr + stdout
    assert f"log_format (config file {config}) must be text or json" in stderr


def test_no_secret_reaches_a_log_line(outbox: Path, tmp_path: Path) -> None:
    write_invoice(outbox, "INV-1")
    with HostileServer(answer(500, b"down")) as pinged, BackgroundServer(emulator()) as server:
        env = cli_env(tmp_path / "journal.db", server.base_url)
        url = f"{pinged.base_url}/ping/{SECRET_PING}"
        for fmt in ("text", "json"):
            code, stdout, stderr = run(env, "send", str(outbox), *FAST, "--ping-url", url,
                                       "--log-format", fmt)  # fmt: skip
            assert code == 0, stderr
            assert "ping URL's /start ping failed" in stderr  # a refused ping is said...
            for text in (stdout, stderr):  # ...but neither the URL nor the key ever is
                assert SECRET_PING not in text and url not in text
                assert env["GOROUTE_API_KEY"] not in text


# --- the cause comes from what chose the code -------------------------------------------------


def test_the_journal_s_causes_are_what_its_exit_code_is_chosen_from(outbox: Path, tmp_path: Path):
    write_invoice(outbox, "INV-1")
    (outbox / "broken.xml").write_text("<Invoice", encoding="utf-8")
    path = tmp_path / "journal.db"
    assert invoke("scan", str(outbox), "--journal", str(path)).exit_code == 3
    with Journal(path) as journal:
        causes = attention_causes(journal, journal.clock())
        assert attention(journal, journal.clock()) is ExitCode.NEEDS_FIX
    assert causes == [
        Cause(ExitCode.NEEDS_FIX, "1 invalid"),
        Cause(ExitCode.INCOMPLETE, "1 waiting to be sent"),
    ]
    assert explain(ExitCode.NEEDS_FIX, causes) == "1 invalid; also 1 waiting to be sent"
    assert explain(ExitCode.OK, []) == "done; nothing needs attention"


def test_the_ping_s_tail_is_the_log_as_written_timestamps_and_last_line_included(
    outbox: Path, tmp_path: Path
) -> None:
    write_invoice(outbox, "INV-1")
    with HostileServer(answer(200, b"OK")) as pinged, BackgroundServer(emulator()) as server:
        env = cli_env(tmp_path / "journal.db", server.base_url)
        url = f"{pinged.base_url}/ping/{SECRET_PING}"
        code, _, stderr = run(env, "send", str(outbox), *FAST, "--ping-url", url)
    assert code == 0, stderr
    assert [request.path for request in pinged.requests][-1] == f"/ping/{SECRET_PING}/0"
    body = pinged.requests[-1].body.decode()
    assert "accepted 1" in body
    assert unstamped(body).splitlines()[-1] == "exit 0: 1 accepted"  # every line stamped

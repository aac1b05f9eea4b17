"""How the command line answers errors: JSON when JSON was asked for (``--json`` or
``--format json``), otherwise one line on stderr that no terminal width breaks apart."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from logkit import said, unstamped
from sendkit import emulator
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.cli import app
from invoicectl.cli.app import answers_in_json
from invoicectl.cli.consoles import say
from invoicectl.journal import Journal
from invoicectl.sandbox import DEFAULT_API_KEY, BackgroundServer
from invoicectl.scan.ingest import scan_directory

runner = CliRunner()
CLI_DIR = Path(__file__).resolve().parents[1] / "invoicectl" / "cli"


def invoke(*args: str):
    return runner.invoke(app, list(args))


def environment_without_a_terminal_width(**extra: str) -> dict[str, str]:
    """The test's environment, minus COLUMNS: rich then falls back to 80 columns."""
    return {**{k: v for k, v in os.environ.items() if k != "COLUMNS"}, **extra}


@pytest.mark.parametrize(
    ("args", "error", "exit_code"),
    [
        (["status", "--format", "json", "--bogus"], "No such option: --bogus", 2),
        (["status", "--format=json", "--bogus"], "No such option: --bogus", 2),
        (
            ["status", "--format", "json", "--state", "lost"],
            "unknown state 'lost'; choose from pending, invalid, accepted, rejected, "
            "key_reused, unknown, amended",
            2,
        ),
        (
            ["status", "--format", "json", "--journal"],
            "Option '--journal' requires an argument.",
            2,
        ),
        (
            ["reconcile", "--format", "json", "--rate", "0"],
            "Invalid value for '--rate': 0 is not in the range x>=1.",
            2,
        ),
        (
            ["reconcile", "--format", "json"],
            "no API key: set GOROUTE_API_KEY or pass --api-key-file PATH (a file only you can "
            "read, chmod 600); to try invoicectl without an account, add --sandbox",
            1,
        ),
    ],
)
def test_format_json_answers_every_error_in_json(args: list[str], error: str, exit_code: int):
    result = invoke(*args)

    assert result.exit_code == exit_code, result.output
    assert json.loads(result.stdout) == {"error": error, "exit_code": exit_code}
    assert result.stderr == ""  # one document, nothing else


def test_status_format_json_answers_a_journal_it_cannot_use_in_json(tmp_path: Path):
    (tmp_path / "a-file").write_text("not a directory")
    journal = tmp_path / "a-file" / "state" / "journal.db"

    result = invoke("status", "--format", "json", "--journal", str(journal))

    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout) == {
        "error": f"no journal at {journal}: nothing was ever scanned or sent with it here, or "
        "it was lost or not mounted; `invoicectl scan` or `send` creates one",
        "exit_code": 1,
    }
    assert result.stderr == ""


@pytest.mark.parametrize("output_format", ["table", "csv"])
def test_other_formats_answer_errors_on_stderr(output_format: str):
    result = invoke("status", "--format", output_format, "--state", "lost")

    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("invoicectl: error: unknown state 'lost'")


@pytest.mark.parametrize(
    ("args", "wanted"),
    [
        (["scan", "outbox", "--json"], True),
        (["status", "--format", "json"], True),
        (["reconcile", "--format=json"], True),
        (["status", "--format", "csv"], False),
        (["status"], False),
        (["scan", "--", "--json"], False),  # past "--", an argument
        (["status", "--", "--format", "json"], False),
        (["show", "json"], False),
    ],
)
def test_json_is_asked_for_by_json_or_format_json(args: list[str], wanted: bool):
    assert answers_in_json(args) is wanted


def test_a_long_error_is_one_line_on_stderr_when_stderr_is_not_a_terminal(tmp_path: Path):
    missing = tmp_path.joinpath(*["a-rather-long-directory-name"] * 8)

    result = subprocess.run(
        [sys.executable, "-m", "invoicectl", "scan", str(missing)],
        capture_output=True,
        text=True,
        env=environment_without_a_terminal_width(),
    )

    assert result.returncode == 1, result.stderr
    assert said(result.stderr, 1) == f"invoicectl: error: the outbox {missing} is not a directory\n"


def test_the_credentials_stop_of_send_is_one_line_on_stderr(outbox: Path, tmp_path: Path):
    write_invoice(outbox, "INV-0")
    with BackgroundServer(emulator()) as server:

        def send(api_key: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "invoicectl", "send", str(outbox), "--json"],
                capture_output=True,
                text=True,
                env=environment_without_a_terminal_width(
                    GOROUTE_BASE_URL=server.base_url,
                    GOROUTE_API_KEY=api_key,
                    INVOICECTL_JOURNAL=str(tmp_path / "journal.db"),
                ),
            )

        # A journal with history, so the sender itself meets the 401 (not the history check).
        assert send(DEFAULT_API_KEY).returncode == 0
        write_invoice(outbox, "INV-1")
        result = send("sk_test_not_a_known_key")

    assert result.returncode == 5, result.stderr
    (line,) = unstamped(result.stderr).splitlines()  # --json: no exit line
    assert line.startswith("invoicectl: error: the API refused the credentials (")
    assert line.endswith("); nothing changed state")


def test_say_writes_one_unwrapped_line_when_stderr_is_not_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
):
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    message = "invoicectl: error: " + " ".join(["word"] * 100) + " [red]not markup[/red]"

    say(message)

    assert stderr.getvalue() == message + "\n"


def test_only_consoles_writes_to_stderr():
    """Every line on stderr goes through ``consoles.say``, so none can wrap in a log file."""
    writes = ("sys.stderr", "stderr=True", "err=True", "Console(")
    writers = [
        path.name
        for path in sorted(CLI_DIR.glob("*.py"))
        if path.name != "consoles.py" and any(write in path.read_text() for write in writes)
    ]

    assert writers == []


def _homeless(monkeypatch: pytest.MonkeyPatch) -> None:
    """A container's user: no HOME, no passwd entry, no XDG directories."""

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    for name in ("HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "INVOICECTL_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(Path, "home", staticmethod(no_home))


def test_no_home_directory_and_a_journal_named_is_no_config_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    _homeless(monkeypatch)
    monkeypatch.setenv("INVOICECTL_JOURNAL", str(tmp_path / "journal.db"))
    Journal(tmp_path / "journal.db").close()  # status reads a journal; it makes none
    result = invoke("status")
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output


def test_no_home_directory_and_no_journal_named_is_one_line(monkeypatch: pytest.MonkeyPatch):
    _homeless(monkeypatch)
    monkeypatch.delenv("INVOICECTL_JOURNAL", raising=False)
    result = invoke("status")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0] == (
        "invoicectl: error: cannot tell the home directory (HOME is unset and this user has no "
        "passwd entry): set HOME, or INVOICECTL_JOURNAL (and INVOICECTL_CONFIG for a config "
        "file)"
    )
    assert "Traceback" not in result.output


@pytest.mark.parametrize("value", ['["professional"]', '{name = "professional"}', "5"])
def test_a_tier_that_is_no_word_is_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str
):
    config = tmp_path / "config.toml"
    config.write_text(f"tier = {value}\n")
    monkeypatch.setenv("INVOICECTL_CONFIG", str(config))
    monkeypatch.setenv("INVOICECTL_JOURNAL", str(tmp_path / "journal.db"))
    result = invoke("send", str(tmp_path), "--dry-run")
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "tier" in result.stderr


@pytest.mark.parametrize(
    "command",
    [
        [b"show", b"\xff"],
        [b"hold", b"INV-1", b"--reason", b"caf\xe9"],
        [b"show", b"\xff", b"--json"],
    ],
    ids=["show", "hold reason", "show json"],
)
def test_an_argument_that_is_not_utf8_is_a_usage_error(tmp_path: Path, command: list[bytes]):
    """An operator's Latin-1 terminal typing "café": a UnicodeEncodeError traceback (the
    journal cannot store or look up such text), with --json an empty stdout."""
    journal = tmp_path / "journal.db"
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    write_invoice(outbox, "INV-1")
    with Journal(journal) as opened:
        scan_directory(opened, outbox)

    result = subprocess.run(
        [sys.executable.encode(), b"-m", b"invoicectl", *command, b"--journal", bytes(journal)],
        capture_output=True,
        env=environment_without_a_terminal_width(),
    )

    said_all = (result.stdout + result.stderr).decode("utf-8", "replace")
    assert result.returncode == 2, said_all
    assert "Traceback" not in said_all and "holds bytes that are not UTF-8 text" in said_all
    if b"--json" in command:
        assert json.loads(result.stdout)["exit_code"] == 2


def test_an_error_reaches_a_terminal_whatever_its_width(tmp_path):
    """helper-51: with COLUMNS=0 on a terminal, every stderr line vanished: `status` of a
    missing journal exited 1 saying nothing."""
    import os
    import pty
    import subprocess
    import sys

    leader, follower = pty.openpty()
    environ = {**os.environ, "COLUMNS": "0"}
    done = subprocess.run(
        [sys.executable, "-m", "invoicectl", "status", "--journal", str(tmp_path / "gone.db")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=follower,
        env=environ,
        timeout=60,
    )
    os.close(follower)
    said = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal's other end is closed: all was read
            break
        if not chunk:
            break
        said += chunk
    os.close(leader)
    assert done.returncode == 1
    assert b"gone.db" in said and b"exit 1" in said, said

"""Bad input on the command line or in the config file: one line and an exit code, never a
traceback (a config nested too deeply, a --limit past any count, a confirmation with stdin
closed, the sandbox's options, an empty DIRECTORY)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ublfactory import write_invoice


def run(
    tmp_path: Path, *args: str, close_stdin: bool = False, timeout: float = 60, **extra: str
) -> tuple[int, str]:
    """``python -m invoicectl ARGS`` in a process of its own, so that a traceback shows as it
    would in a cron log: its exit code and its stderr. ``close_stdin``: stdin closed, as
    ``<&-`` leaves it."""
    env = {**os.environ, "HOME": str(tmp_path / "home"), **extra}
    popen: dict[str, Any] = {"preexec_fn": lambda: os.close(0)} if close_stdin else {}
    done = subprocess.run(
        [sys.executable, "-m", "invoicectl", *args],
        env=env, capture_output=True, text=True, timeout=timeout, cwd=tmp_path, **popen,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stderr


def test_a_config_file_nested_too_deeply_is_one_line(tmp_path: Path):
    """1 KB of ``a = [[[...]]]`` made tomllib recurse past Python's limit: a RecursionError
    traceback on every command."""
    config = tmp_path / "deep.toml"
    config.write_text("a = " + "[" * 500 + "]" * 500 + "\n", encoding="utf-8")
    code, stderr = run(tmp_path, "status", INVOICECTL_CONFIG=str(config))
    assert code == 1, stderr
    assert f"cannot read the config file {config}: nested too deeply" in stderr


def test_a_limit_past_any_count_is_a_usage_error(tmp_path: Path):
    """2**63 passed ``min=0`` and reached islice: a ValueError traceback."""
    journal = tmp_path / "journal.db"
    code, stderr = run(tmp_path, "status", "--journal", str(journal), "--limit", str(2**63))
    assert code == 2, stderr
    assert "Invalid value for '--limit'" in stderr


@pytest.mark.parametrize("action", ["hold", "release", "abandon"])
def test_a_confirmation_with_stdin_closed_asks_for_yes(tmp_path: Path, outbox: Path, action: str):
    """``hold --state pending`` from cron with ``<&-``: sys.stdin is None, and asking it
    whether it is a terminal was an AttributeError traceback."""
    journal = tmp_path / "journal.db"
    for invoice_id in ("INV-1", "INV-2"):
        write_invoice(outbox, invoice_id)
    assert run(tmp_path, "scan", str(outbox), "--journal", str(journal))[0] == 0
    if action == "release":
        held = run(tmp_path, "hold", "--state", "pending", "--reason", "x", "--yes",
                   "--journal", str(journal))  # fmt: skip
        assert held[0] == 0, held
    reason = () if action == "release" else ("--reason", "x")
    code, stderr = run(
        tmp_path, action, "--state", "pending", *reason, "--journal", str(journal),
        close_stdin=True,
    )  # fmt: skip
    assert code == 2, stderr
    assert f"2 invoices match; add --yes to {action} them" in stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--port", "-1"], "Invalid value for '--port'"),
        (["--port", "70000"], "Invalid value for '--port'"),
        (["--tier", "gold"], "unknown --tier 'gold'; choose standard, professional or enterprise"),
        (["--tier", "enterprise"], "--tier enterprise needs --rate and --concurrency"),
        (["--rate", "0"], "Invalid value for '--rate'"),
        (["--concurrency", "0"], "Invalid value for '--concurrency'"),
        (["--error-rate", "2"], "Invalid value for '--error-rate'"),
        (["--error-rate", "nan"], "Invalid value for '--error-rate': nan is not a number"),
        (["--drop-rate", "-0.5"], "Invalid value for '--drop-rate'"),
        (["--latency-ms", "-5"], "Invalid value for '--latency-ms'"),
        (["--latency-ms", "inf"], "Invalid value for '--latency-ms': inf is not a number"),
    ],
)
def test_a_bad_sandbox_option_is_a_usage_error(tmp_path: Path, args: list[str], said: str):
    """Each was a traceback (OverflowError from bind, ValueError from the config), or, for
    nan or inf latency, a server that never answered."""
    port = [] if "--port" in args else ["--port", "0"]  # were it served: no port taken
    code, stderr = run(tmp_path, "sandbox", *args, *port, timeout=20)
    assert code == 2, stderr
    assert said in stderr


@pytest.mark.parametrize("command", ["send", "scan", "validate"])
def test_an_empty_directory_argument_is_a_usage_error(tmp_path: Path, command: str):
    """``invoicectl send "$OUTBOX"`` in a crontab with OUTBOX unset: Path("") is the working
    directory, and every *.xml there was scanned and sent."""
    write_invoice(tmp_path, "STRAY-1")  # the working directory holds an invoice
    journal = tmp_path / "journal.db"
    code, stderr = run(tmp_path, command, "", "--journal", str(journal), "--sandbox")
    assert code == 2, stderr
    assert "Invalid value for 'directory': empty" in stderr
    assert not journal.exists()


NO_SUCH_HOME = "~no-such-user-invoicectl/x"


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (["status", "--journal", NO_SUCH_HOME], {}, "the journal"),
        (["status"], {"INVOICECTL_JOURNAL": NO_SUCH_HOME}, "journal ($INVOICECTL_JOURNAL)"),
        (["status", "--journal", "j.db"], {"INVOICECTL_CONFIG": NO_SUCH_HOME}, "INVOICECTL_CONFIG"),
        (["scan", NO_SUCH_HOME, "--journal", "j.db"], {}, "the outbox"),
        (["send", NO_SUCH_HOME, "--journal", "j.db"], {}, "the outbox"),
        (
            ["export", "arch", "--journal", "j.db", "--signing-key", NO_SUCH_HOME],
            {},
            "--signing-key",
        ),
    ],
    ids=["--journal", "INVOICECTL_JOURNAL", "INVOICECTL_CONFIG", "scan", "send", "--signing-key"],
)
def test_a_path_of_a_user_with_no_home_here_is_one_line(
    tmp_path: Path, args: list[str], env: dict[str, str], named: str
):
    """``~name/...`` of a user this machine does not know: ``Path.expanduser`` raised, and
    every command ended in a RuntimeError traceback."""
    (tmp_path / "home").mkdir()
    from invoicectl.journal import Journal

    Journal(tmp_path / "j.db").close()  # a journal to export, for --signing-key
    code, stderr = run(tmp_path, *args, GOROUTE_API_KEY="sk_test_" + "a" * 24, **env)
    assert code in (1, 2), stderr
    assert f"{named} '{NO_SUCH_HOME}' begins with ~no-such-user-invoicectl" in stderr
    assert "give the path in full" in stderr.strip().splitlines()[-1]


def test_an_api_key_file_under_a_user_with_no_home_is_named_not_shown(tmp_path: Path):
    """The config's ``api_key_file`` as ``~name/...``: one line naming the setting, never its
    value (it may be the key itself, typed in the wrong place)."""
    (tmp_path / "home").mkdir()
    config = tmp_path / "config.toml"
    config.write_text(f'api_key_file = "{NO_SUCH_HOME}"\n', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "GOROUTE_API_KEY"}
    done = subprocess.run(
        [sys.executable, "-m", "invoicectl", "send", str(tmp_path), "--journal", "j.db"],
        env={**env, "HOME": str(tmp_path / "home"), "INVOICECTL_CONFIG": str(config)},
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "api_key_file (config file" in done.stderr and "begins with ~" in done.stderr
    assert NO_SUCH_HOME not in done.stderr


@pytest.mark.parametrize("setting", ["journal", "metrics_file"])
def test_a_config_path_under_a_user_with_no_home_is_a_config_error_naming_the_file(
    tmp_path: Path, setting: str
):
    """helper-93: the config file's ``journal`` or ``metrics_file`` as ``~name/...`` was a
    usage error (exit 2) naming "the journal", not the setting and the file it is in."""
    (tmp_path / "home").mkdir()
    config = tmp_path / "config.toml"
    config.write_text(f'{setting} = "{NO_SUCH_HOME}"\n', encoding="utf-8")
    journal = [] if setting == "journal" else ["--journal", "j.db"]
    env = {"INVOICECTL_CONFIG": str(config), "INVOICECTL_JOURNAL": ""}  # the config's journal
    code, stderr = run(tmp_path, "status", *journal, **env)
    assert code == 1, stderr
    assert f"{setting} (config file {config}) '{NO_SUCH_HOME}' begins with ~" in stderr


@pytest.mark.parametrize("command", ["send", "scan"])
def test_a_missing_outbox_makes_no_journal(tmp_path: Path, command: str):
    """``send`` of an outbox that is not there made an empty journal before it said so."""
    (tmp_path / "home").mkdir()
    journal = tmp_path / "j.db"
    code, stderr = run(
        tmp_path, command, str(tmp_path / "nope"), "--journal", str(journal),
        GOROUTE_API_KEY="sk_test_" + "a" * 24,
    )  # fmt: skip
    assert code == 1 and "is not a directory" in stderr, stderr
    assert not journal.exists()


@pytest.mark.parametrize("deadline", ["nan", "inf", "1e99"])
def test_a_dry_run_refuses_the_deadline_the_real_send_refuses(
    tmp_path: Path, outbox: Path, deadline: str
) -> None:
    """helper-67: a cron line tried with --dry-run passed (exit 0), then failed for real."""
    write_invoice(outbox, "D-1")
    asked = ("send", str(outbox), "--dry-run", "--sandbox", f"--deadline={deadline}")
    code, said = run(tmp_path, *asked)
    assert code == 2, said
    assert "deadline (the command line) must be a number of seconds from 0 to 2,678,400" in said


@pytest.mark.parametrize("value", ["5", '""', '["k.pem"]'])
def test_a_signing_key_of_another_type_is_refused_not_replaced_by_the_default(
    tmp_path: Path, value: str
):
    """helper-93: ``signing_key = 5`` in the config file was ignored, and the export signed
    with the default key beside the journal (a wrong-typed value is refused, never read as
    something else); ``""`` said "signing key file . is not a regular file"."""
    (tmp_path / "home").mkdir()
    from invoicectl.journal import Journal

    Journal(tmp_path / "j.db").close()
    config = tmp_path / "config.toml"
    config.write_text(f"signing_key = {value}\n", encoding="utf-8")
    code, stderr = run(
        tmp_path, "export", "arch", "--journal", "j.db", INVOICECTL_CONFIG=str(config)
    )
    assert code == 1, stderr
    assert f"signing_key (config file {config}) must be a non-empty text" in stderr
    assert not (tmp_path / "signing-key.pem").exists() and not (tmp_path / "arch").exists()


def test_a_path_holding_a_direction_mark_is_said_with_it_escaped(tmp_path: Path):
    """helper-93: `--journal` holding U+202E printed raw in "no journal at ...": a terminal
    shows the rest of the line reversed, and the path is not the one a person reads."""
    (tmp_path / "home").mkdir()
    code, stderr = run(tmp_path, "status", "--journal", str(tmp_path / "a\u202eb.db"))
    assert code == 1, stderr
    assert "\u202e" not in stderr and "a\\u202eb.db" in stderr
    assert stderr.count("a\\u202eb.db") == 2  # the error, and the exit line

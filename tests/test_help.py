"""Help a person can read at 80 columns (issue 12, item 9).

``send -h`` was 111 lines at 80 columns with an 18-column description (the
``--allow-environment-change/--no-allow-...`` pair widened the option column), every
command repeated the exit-code table, none gave an example, there was no shell completion,
and ``--version`` worked only at the top level.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from invoicectl import __version__
from invoicectl.cli import app
from invoicectl.errors import MEANINGS, ExitCode

runner = CliRunner()
TABLE = "Exit codes (when several apply"
POINTER = "Exit codes: the table in invoicectl --help."


def commands() -> list[str]:
    listing = help_of()
    section = listing.split("\nCommands:\n", 1)[1]
    return [line.split()[0] for line in section.splitlines() if line.startswith("  ")]


def help_of(*command: str) -> str:
    result = runner.invoke(app, [*command, "-h"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_every_command_is_listed_with_a_purpose_that_fits() -> None:
    listing = help_of().split("\nCommands:\n", 1)[1]
    assert "doctor" in commands() and "send" in commands()
    for line in listing.splitlines():
        assert not line.rstrip().endswith("..."), line  # cut short: longer than one line


@pytest.mark.parametrize("command", ["send", "reconcile", "status", "doctor", "hold"])
def test_descriptions_have_room_at_80_columns(command: str) -> None:
    text = help_of(command)
    assert "/ --no-" not in text
    assert max(map(len, text.splitlines())) <= 80
    starts = [
        len(line) - len(line.split("  ", 2)[-1].lstrip())
        for line in text.split("\nOptions:\n", 1)[1].splitlines()
        if re.match(r"  -", line) and "  " in line.strip()
    ]
    # Each description starts by column 36, so it has at least 44 of the 80.
    assert starts and max(starts) <= 36, text


def test_send_help_is_short_enough_to_read() -> None:
    # it was 111; 91 with --supplier, --all-profiles and --profiles (one line each)
    assert len(help_of("send").splitlines()) < 92


def test_every_command_has_one_line_of_purpose_and_examples_and_points_to_the_table() -> None:
    for command in commands():
        text = help_of(command)
        lines = text.splitlines()
        assert lines[0].startswith(f"Usage: invoicectl {command} "), command
        purpose = lines[2].strip()
        assert purpose.endswith(".") and len(purpose) <= 60, (command, purpose)
        examples = [line.strip() for line in lines if line.strip().startswith("invoicectl ")]
        assert re.search(r"^  Examples?:$", text, re.M), command
        assert examples and all(e.startswith(f"invoicectl {command}") for e in examples), command
        assert TABLE not in text, command
        assert text.rstrip().endswith(POINTER), command
        assert max(map(len, lines)) <= 80, command


def test_the_exit_code_table_is_at_the_top_level_with_every_code() -> None:
    text = help_of()
    assert text.count(TABLE) == 1
    table = text.split(TABLE, 1)[1]
    for code, meaning in MEANINGS.items():
        assert re.search(rf"^ +{int(code)}  {re.escape(meaning[:30])}", table, re.M), code
    assert set(MEANINGS) == set(ExitCode)
    assert max(map(len, text.splitlines())) <= 80


def test_version_on_every_command_even_without_its_arguments() -> None:
    for command in ["", *commands()]:
        result = runner.invoke(app, [*command.split(), "--version"])
        assert result.exit_code == 0, (command, result.output)
        assert result.stdout == f"invoicectl {__version__}\n", command


def _completion(*words: str) -> list[str]:
    env = {
        **os.environ,
        "_INVOICECTL_COMPLETE": "complete_bash",
        "COMP_WORDS": " ".join(("invoicectl", *words)),
        "COMP_CWORD": str(len(words)),
    }
    done = subprocess.run(
        [sys.executable, "-m", "invoicectl"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_shell_completion_completes_commands_and_options() -> None:
    assert _completion("do") == ["doctor"]
    assert "--allow-environment-change" in _completion("send", "--al")
    script = subprocess.run(
        [sys.executable, "-m", "invoicectl", "--show-completion", "bash"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert script.returncode == 0 and "_INVOICECTL_COMPLETE=complete_bash" in script.stdout


@pytest.mark.parametrize(
    ("shell", "mark"),
    [("bash", "complete_bash"), ("zsh", "complete_zsh"), ("fish", "complete_fish")],
)
def test_show_completion_prints_the_shell_named_whatever_shell_runs_it(
    shell: str, mark: str
) -> None:
    """README: ``invoicectl --show-completion bash > /etc/bash_completion.d/invoicectl``. A
    provisioning script runs under sh (dash), cron or sudo: the shell named is the one wanted,
    not whichever shell happens to be the parent (typer guesses, and "dash" is no shell it
    knows)."""
    sh = shutil.which("dash") or shutil.which("sh")
    assert sh is not None
    command = f"{shlex.quote(sys.executable)} -m invoicectl --show-completion {shell}"
    done = subprocess.run([sh, "-c", command], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"_INVOICECTL_COMPLETE={mark}" in done.stdout

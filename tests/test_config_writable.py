"""A config file someone else can change is warned about, once a run: it says where invoices
go, with which key, into which journal, so whoever can write it (or the directory holding it,
who can replace it) can redirect sends. A warning on stderr, never a refusal; a group that is
the owner's alone (umask 002's user private group) is the owner."""

from __future__ import annotations

import grp
import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest
from logkit import unstamped
from typer.testing import CliRunner

from invoicectl.cli import app

runner = CliRunner()


def config_in(directory: Path, mode: int) -> Path:
    directory.mkdir(exist_ok=True)
    config = directory / "config.toml"
    config.write_text('tier = "standard"\nrate = 30\n', encoding="utf-8")
    config.chmod(mode)
    return config


def warning(place: Path, what: str, writers: str, mode: int) -> str:
    return (
        f"invoicectl: warning: {what} is writable by {writers} (mode {mode:04o}): whoever "
        f"can change it can redirect sends; run chmod go-w {place}"
    )


def test_a_config_file_others_can_write_is_warned_about_once_a_run(tmp_path: Path) -> None:
    # The real process reads the file twice at least (the log format, then the settings):
    # one line, stamped as every log line, and the run goes on.
    config = config_in(tmp_path / "etc", 0o666)
    environ = {**os.environ, "INVOICECTL_CONFIG": str(config)}
    environ["INVOICECTL_JOURNAL"] = str(tmp_path / "j.db")

    run = subprocess.run(
        [sys.executable, "-m", "invoicectl", "profiles"],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )

    assert run.returncode == 0, run.stderr
    lines = unstamped(run.stderr).splitlines()
    assert lines == [warning(config, f"the config file {config}", "others", 0o666)], run.stderr


def test_the_warning_is_a_json_log_line_with_log_format_json(tmp_path: Path) -> None:
    config = config_in(tmp_path / "etc", 0o646)
    environ = {**os.environ, "INVOICECTL_CONFIG": str(config)}
    environ["INVOICECTL_JOURNAL"] = str(tmp_path / "j.db")

    run = subprocess.run(
        [sys.executable, "-m", "invoicectl", "--log-format", "json", "profiles"],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )

    assert run.returncode == 0, run.stderr
    first = json.loads(run.stderr.splitlines()[0])
    assert first["level"] == "warning"
    assert first["message"] == warning(config, f"the config file {config}", "others", 0o646)


def test_a_directory_others_can_write_is_warned_about(tmp_path: Path) -> None:
    config = config_in(tmp_path / "shared", 0o644)
    config.parent.chmod(0o777)

    result = runner.invoke(app, ["profiles"], env={"INVOICECTL_CONFIG": str(config)})

    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        warning(
            config.parent,
            f"the directory {config.parent} holding the config file",
            "others",
            0o777,
        )
    ]


@pytest.mark.parametrize(
    ("file_mode", "directory_mode"),
    [(0o644, 0o755), (0o600, 0o700), (0o644, 0o1777), (0o664, 0o775)],
    ids=["usual", "private", "a sticky directory (/tmp)", "owner's private group (umask 002)"],
)
def test_a_config_file_only_its_owner_can_change_is_not_warned_about(
    tmp_path: Path, file_mode: int, directory_mode: int
) -> None:
    config = config_in(tmp_path / "etc", file_mode)
    config.parent.chmod(directory_mode)
    owner = pwd.getpwuid(os.getuid())
    private = grp.getgrgid(owner.pw_gid)
    if file_mode & 0o020 and (private.gr_name != owner.pw_name or private.gr_mem):
        pytest.skip(f"the primary group {private.gr_name} is not {owner.pw_name}'s alone")

    result = runner.invoke(app, ["profiles"], env={"INVOICECTL_CONFIG": str(config)})

    assert result.exit_code == 0, result.output
    assert result.stderr == ""


def test_a_config_file_a_shared_group_can_write_names_the_group(tmp_path: Path) -> None:
    config = config_in(tmp_path / "etc", 0o664)
    shared = next((g for g in grp.getgrall() if g.gr_gid != pwd.getpwuid(os.getuid()).pw_gid), None)
    try:
        assert shared is not None
        os.chown(config, -1, shared.gr_gid)
    except (AssertionError, PermissionError):
        pytest.skip("no group to give the file to (not root, and no other group)")
    config.chmod(0o664)

    result = runner.invoke(app, ["profiles"], env={"INVOICECTL_CONFIG": str(config)})

    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        warning(config, f"the config file {config}", f"its group {shared.gr_name}", 0o664)
    ]

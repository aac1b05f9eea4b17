"""Settings: the defaults stated once, where the journal lives, and the run objects they build."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from invoicectl.cli.options import tier_help
from invoicectl.errors import ConfigError
from invoicectl.goroute.retry import RetryPolicy
from invoicectl.sandbox.config import TIERS as SANDBOX_TIERS
from invoicectl.sandbox.config import SandboxConfig
from invoicectl.send.options import SendOptions
from invoicectl.settings import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_WAIT,
    TIERS,
    default_journal_path,
    resolve,
)

NO_KEY = {"need_key": False}


def test_defaults_come_from_the_standard_tier(tmp_path: Path):
    settings = resolve(journal=tmp_path / "j.db", environ={}, **NO_KEY)

    assert (settings.rate_per_minute, settings.concurrency) == TIERS["standard"] == (100, 10)
    assert (settings.max_attempts, settings.max_wait) == (DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_WAIT)
    assert settings.batch_size == 50


def test_a_tier_sets_rate_and_concurrency_unless_they_are_given(tmp_path: Path):
    professional = resolve(journal=tmp_path / "j.db", tier="professional", environ={}, **NO_KEY)
    overridden = resolve(
        journal=tmp_path / "j.db", tier="professional", rate=7, environ={}, **NO_KEY
    )

    assert (professional.rate_per_minute, professional.concurrency) == (500, 50)
    assert (overridden.rate_per_minute, overridden.concurrency) == (7, 50)


def test_a_tier_named_more_specifically_beats_a_rate_of_the_config_file(tmp_path: Path):
    """helper-93: ``--tier professional`` ran at the config file's ``rate = 100``."""
    config = tmp_path / "config.toml"
    config.write_text(
        'rate = 100\nconcurrency = 4\n[profiles.big]\nbase_url = "https://x.test"\n'
        'tier = "professional"\n'
    )
    environ = {"INVOICECTL_CONFIG": str(config)}

    def limits(**given: Any) -> tuple[int, int, str]:
        chosen = resolve(journal=tmp_path / "j.db", environ=environ, **given, **NO_KEY)
        return chosen.rate_per_minute, chosen.concurrency, chosen.sources["rate"]

    assert limits() == (100, 4, "config file")
    assert limits(tier="professional") == (500, 50, "option")
    assert limits(tier="professional", rate=7) == (7, 50, "option")
    assert limits(profile="big") == (500, 50, "profile big")
    assert limits(profile="big", tier="standard") == (100, 10, "option")


def test_an_unknown_tier_in_the_config_file_names_the_tiers(tmp_path: Path):
    config = tmp_path / "config.toml"
    config.write_text('tier = "gold"\n')

    # A configuration error (exit 1), naming the file; it was a usage error (exit 2) before.
    expected = r"tier \(config file .*\) must be 'standard' or 'professional', not 'gold'"
    with pytest.raises(ConfigError, match=expected):
        resolve(journal=tmp_path / "j.db", environ={"INVOICECTL_CONFIG": str(config)}, **NO_KEY)


@pytest.mark.parametrize("kind", ["fifo", "device", "directory", "huge", "missing"])
def test_a_config_path_that_names_no_config_file_is_one_line_at_once(tmp_path: Path, kind: str):
    """A FIFO used to block every command, /dev/zero to fill memory, and a config file named
    by INVOICECTL_CONFIG that is not there to be silently ignored."""
    import os

    path = tmp_path / "config.toml"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path = Path("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    elif kind == "huge":
        path.write_text("# a comment\n" * 100_000)
    expected = {
        "fifo": "is not a regular file",
        "device": "is not a regular file",
        "directory": "is not a regular file",
        "huge": "is over 1024 KB: not a config file?",
        "missing": "INVOICECTL_CONFIG names .*, which does not exist",
    }[kind]
    with pytest.raises(ConfigError, match=expected):
        resolve(journal=tmp_path / "j.db", environ={"INVOICECTL_CONFIG": str(path)}, **NO_KEY)


def test_the_tier_help_is_built_from_the_tier_table():
    assert tier_help() == (
        "Account tier: standard = 100/min, 10 concurrent (the default); "
        "professional = 500/min, 50 concurrent."
    )


def test_the_sandbox_tiers_are_the_same_table():
    assert SANDBOX_TIERS is TIERS
    config = SandboxConfig.for_tier("professional")
    assert (config.rate_per_minute, config.max_concurrent) == TIERS["professional"]


def test_retry_policy_carries_max_attempts_and_max_wait(tmp_path: Path):
    settings = resolve(
        journal=tmp_path / "j.db", max_attempts=3, max_wait=7.5, environ={}, **NO_KEY
    )

    assert settings.retry_policy() == RetryPolicy(max_attempts=3, max_wait=7.5)


def test_send_options_carry_pacing_retries_deadline_and_new_versions(tmp_path: Path):
    settings = resolve(
        journal=tmp_path / "j.db", rate=60, concurrency=4, max_attempts=2, environ={}, **NO_KEY
    )

    options = settings.send_options(deadline=30.0, new_versions=["INV-1", "INV-2"])

    assert options == SendOptions(
        rate_per_minute=60,
        concurrency=4,
        policy=RetryPolicy(max_attempts=2, max_wait=DEFAULT_MAX_WAIT),
        deadline=30.0,
        new_versions=("INV-1", "INV-2"),
    )
    assert settings.send_options() == SendOptions(
        rate_per_minute=60, concurrency=4, policy=RetryPolicy(max_attempts=2)
    )


def test_send_run_options_are_what_the_runs_table_records(tmp_path: Path):
    settings = resolve(journal=tmp_path / "j.db", rate=60, concurrency=4, environ={}, **NO_KEY)

    recorded = settings.send_run_options(Path("outbox"), deadline=None, new_versions=("INV-1",))

    assert recorded == {
        "directory": "outbox",
        "rate": 60,
        "concurrency": 4,
        "sandbox": False,
        "new_version": ["INV-1"],
        "deadline": None,
    }


def test_default_journal_path_follows_the_environment(tmp_path: Path):
    explicit = default_journal_path({"INVOICECTL_JOURNAL": "~/books.db"})
    state_home = default_journal_path({"XDG_STATE_HOME": str(tmp_path)})

    assert explicit == Path("~/books.db").expanduser()
    assert state_home == tmp_path / "invoicectl" / "journal.db"
    assert default_journal_path({}) == Path.home() / ".local" / "state" / "invoicectl" / (
        "journal.db"
    )


def test_the_sandbox_journal_sits_beside_the_default_one(tmp_path: Path):
    settings = resolve(sandbox=True, environ={"XDG_STATE_HOME": str(tmp_path)})

    assert settings.journal == tmp_path / "invoicectl" / "sandbox.db"


def test_settings_and_the_cli_load_nothing_heavy():
    """``invoicectl --help`` reads settings for its help text: settings must not pull in the
    journal, and the CLI must leave HTTP, XML, the journal and the sending machinery to the
    commands that use them."""
    probe = (
        "import sys, invoicectl.settings, invoicectl.cli;"
        "heavy = ('invoicectl.journal', 'invoicectl.send', 'invoicectl.scan', 'httpx', 'lxml',"
        " 'sqlite_utils', 'tomllib', 'hashlib');"
        # A None entry is an import blocked, not a module loaded (httpx's own CLI tool).
        "print(sorted(name for name, module in sys.modules.items() if module is not None"
        " and (name.split('.')[0] in heavy or name.startswith(heavy))))"
    )

    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_sandbox_journal_is_a_file_when_the_journal_setting_is_a_database(
    tmp_path: Path,
):
    """helper-51: with INVOICECTL_JOURNAL a PostgreSQL URL, `--sandbox` made its journal at
    './postgresql:/fin:PASSWORD@db.internal:5432/sandbox.db' and said so on stderr, in the
    ping and in the outbox's marker."""
    environ = {
        "INVOICECTL_JOURNAL": "postgresql://fin:S3cretPGpass@db.internal:5432/journal",
        "XDG_STATE_HOME": str(tmp_path),
    }
    settings = resolve(sandbox=True, environ=environ)
    assert settings.journal == tmp_path / "invoicectl" / "sandbox.db"
    assert "S3cretPGpass" not in str(settings.journal)

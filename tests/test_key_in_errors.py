"""An API key pasted into the wrong setting never comes back in the error refusing it: every
error the command line writes, on stderr or as its JSON document, hides each key it can find
(``known_keys``), wherever that key is kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from invoicectl.cli import app
from invoicectl.known_keys import hide_keys

KEY = "sk_live_SECRETKEY_abcdef0123456789"
MARKER = "[redacted]"
runner = CliRunner()


def write_key_file(path: Path) -> Path:
    path.write_text(KEY + "\n", encoding="utf-8")
    path.chmod(0o600)
    return path


def assert_hidden(text: str, *said: str) -> None:
    assert KEY not in text, text
    assert MARKER in text, text
    for words in said:  # the error still says what is wrong, and where
        assert words in text, text


# Each: the command line, the environment beside GOROUTE_API_KEY, words the error keeps.
MISPLACED = {
    "request timeout": (["status"], {"INVOICECTL_REQUEST_TIMEOUT": KEY}, "request_timeout"),
    "log format": (["status"], {"INVOICECTL_LOG_FORMAT": KEY}, "$INVOICECTL_LOG_FORMAT"),
    "profile variable": (["status"], {"INVOICECTL_PROFILE": KEY}, "unknown profile"),
    "profile option": (["--profile", KEY, "status"], {}, "unknown profile"),
    "base url": (["status"], {"GOROUTE_BASE_URL": KEY}, "$GOROUTE_BASE_URL"),
    "config path": (["status"], {"INVOICECTL_CONFIG": KEY}, "INVOICECTL_CONFIG names"),
    "rate option": (["reconcile", "--rate", KEY], {}, "Invalid value for '--rate'"),
    "unknown option": (["status", f"--{KEY}"], {}, "No such option"),
}


@pytest.mark.parametrize("name", list(MISPLACED))
def test_a_key_in_the_wrong_setting_is_hidden_in_the_json_error(name: str) -> None:
    args, environ, said = MISPLACED[name]

    result = runner.invoke(
        app, [*args, "--format", "json"], env={"GOROUTE_API_KEY": KEY, **environ}
    )

    assert result.exit_code in (1, 2), result.output
    assert_hidden(json.loads(result.stdout)["error"], said)
    assert result.stderr == ""


@pytest.mark.parametrize("name", list(MISPLACED))
def test_a_key_in_the_wrong_setting_is_hidden_on_stderr(name: str) -> None:
    args, environ, said = MISPLACED[name]

    result = runner.invoke(app, args, env={"GOROUTE_API_KEY": KEY, **environ})

    assert result.exit_code in (1, 2), result.output
    assert_hidden(result.stderr, said)
    assert KEY not in result.stdout


def test_a_key_as_an_option_of_the_group_is_hidden() -> None:
    # Refused before any command is invoked: click shows that error itself.
    result = runner.invoke(app, [f"--{KEY}", "status"], env={"GOROUTE_API_KEY": KEY})

    assert result.exit_code == 2, result.output
    assert_hidden(result.stderr, "No such option")


def test_the_process_writes_no_key_on_stderr_or_in_its_last_line(tmp_path: Path) -> None:
    # The real process: its log lines and its last line (``exit 1: <cause>``) too.
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    environ = {**os.environ, "GOROUTE_API_KEY": KEY, "INVOICECTL_REQUEST_TIMEOUT": KEY}
    for extra in ([], ["--json"], ["--log-format", "json"]):
        result = subprocess.run(
            [sys.executable, "-m", "invoicectl", "send", str(outbox), *extra],
            capture_output=True,
            text=True,
            env=environ,
        )
        assert result.returncode == 1, result.stderr
        assert_hidden(result.stdout + result.stderr, "$INVOICECTL_REQUEST_TIMEOUT")


def test_a_key_kept_in_the_config_file_is_hidden_in_an_error_about_that_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No $GOROUTE_API_KEY: the key is in the file api_key_file names, and the config file
    # refused (an unknown setting, the key pasted as its name) is still read for it.
    config = tmp_path / "config.toml"
    key_file = write_key_file(tmp_path / "key")
    config.write_text(f'api_key_file = "{key_file}"\n{KEY} = 1\n', encoding="utf-8")
    monkeypatch.setenv("INVOICECTL_CONFIG", str(config))

    result = runner.invoke(app, ["status", "--format", "json"])

    assert result.exit_code == 1, result.output
    assert_hidden(json.loads(result.stdout)["error"], "unknown setting(s)")


def test_a_key_of_a_profile_is_hidden_in_an_error_about_that_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        f'[profiles.acme]\napi_key_env = "ACME_KEY"\nbase_url = "ftp://x/{KEY}"\n'
        f'[profiles.beta]\napi_key_env = "BETA_KEY"\nsender = "{KEY}"\n',
        encoding="utf-8",
    )
    monkeypatch.setenv("INVOICECTL_CONFIG", str(config))
    monkeypatch.setenv("BETA_KEY", KEY)

    result = runner.invoke(app, ["--profile", "acme", "status"])

    assert result.exit_code == 1, result.output
    assert_hidden(result.stderr, "sender must be a Peppol id")


def test_a_key_from_the_key_file_option_is_hidden(tmp_path: Path) -> None:
    key_file = write_key_file(tmp_path / "key")

    result = runner.invoke(
        app, ["reconcile", "--api-key-file", str(key_file), "--rate", KEY, "--format", "json"]
    )

    assert result.exit_code == 2, result.output
    assert_hidden(json.loads(result.stdout)["error"], "--rate")


def test_doctor_hides_the_key_in_its_settings_check() -> None:
    result = runner.invoke(
        app, ["doctor", "--json"], env={"GOROUTE_API_KEY": KEY, "GOROUTE_BASE_URL": KEY}
    )

    assert result.exit_code == 1, result.output
    assert_hidden(json.loads(result.stdout)["checks"][0]["message"], "$GOROUTE_BASE_URL")


@pytest.mark.parametrize(
    "config",
    ["a directory", "not toml [[", "profiles = 3", "[profiles]\nacme = 1", "api_key_file = 7"],
)
def test_finding_the_keys_never_fails(tmp_path: Path, config: str) -> None:
    path = tmp_path / "config.toml"
    if config == "a directory":
        path.mkdir()
    else:
        path.write_text(config, encoding="utf-8")
    environ = {"GOROUTE_API_KEY": KEY, "INVOICECTL_CONFIG": str(path)}

    assert hide_keys(f"not {KEY!r}", environ) == f"not '{MARKER}'"
    assert hide_keys("nothing to hide", environ) == "nothing to hide"


def test_no_key_anywhere_leaves_the_text_alone(tmp_path: Path) -> None:
    environ = {"GOROUTE_API_KEY": "short key", "INVOICECTL_CONFIG": str(tmp_path / "absent")}

    assert hide_keys(f"not {KEY!r}", environ) == f"not {KEY!r}"


def test_a_key_variable_over_the_cap_is_one_error_line() -> None:
    environ = {"GOROUTE_API_KEY": "k" * 20_000, "GOROUTE_BASE_URL": "http://127.0.0.1:9"}

    result = runner.invoke(app, ["reconcile", "--format", "json"], env=environ)

    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["error"] == (
        "GOROUTE_API_KEY is too large to hold an API key (over 4096 bytes); "
        "check it holds the key and nothing else"
    )


@pytest.mark.parametrize(
    "environ",
    [{"INVOICECTL_PROFILE": KEY}, {"GOROUTE_BASE_URL": f"https://h/?k={KEY}"}],
    ids=["profile variable", "base url query"],
)
def test_doctor_hides_the_key_of_the_key_file_option(
    tmp_path: Path, environ: dict[str, str]
) -> None:
    # helper-67 (r01): send hid a key of --api-key-file pasted into another setting, doctor
    # printed it, on its lines and in --json.
    key_file = write_key_file(tmp_path / "key")
    for extra in ([], ["--json"]):
        result = runner.invoke(
            app, ["doctor", "--api-key-file", str(key_file), *extra], env=environ
        )

        assert result.exit_code == 1, result.output
        assert_hidden(result.stdout)
        assert KEY not in result.stderr


def test_doctor_hides_the_key_in_every_check(tmp_path: Path) -> None:
    # A key in the journal's path reaches the journal, lock and disk checks, not only config.
    key_file = write_key_file(tmp_path / "key")
    journal = tmp_path / KEY / "journal.db"

    result = runner.invoke(
        app,
        ["doctor", "--api-key-file", str(key_file), "--json", "--journal", str(journal)],
        env={"GOROUTE_BASE_URL": "http://127.0.0.1:9"},
    )

    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["checks"][0]["name"] == "config"
    assert KEY not in result.stdout, result.stdout


@pytest.mark.parametrize("command", ["status", "send --sandbox"])
def test_a_key_in_the_metrics_path_is_hidden(tmp_path: Path, command: str) -> None:
    # helper-67 (r04): status, which resolves no key, and send --sandbox, whose key is the
    # emulator's, printed the real $GOROUTE_API_KEY in "cannot write the metrics file".
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    metrics = tmp_path / KEY / "invoicectl.prom"  # its directory is not there: not written
    args = [*command.split(), *([str(outbox)] if command != "status" else [])]
    result = subprocess.run(
        [sys.executable, "-m", "invoicectl", *args, "--metrics-file", str(metrics)],
        capture_output=True,
        text=True,
        env={**os.environ, "GOROUTE_API_KEY": KEY},
    )

    assert "cannot write the metrics file" in result.stderr, result.stderr
    assert_hidden(result.stdout + result.stderr)


@pytest.mark.parametrize("form", ["text", "json"])
@pytest.mark.parametrize("command", ["verify-export", "backup"])
def test_a_key_typed_as_an_audit_commands_path_is_hidden(
    tmp_path: Path, command: str, form: str
) -> None:
    """helper-93: `verify-export KEY` printed "KEY: holds no export", and `backup KEY` "backed
    up ... to .../KEY", where every other command hides a key pasted into a path."""
    journal = tmp_path / "j.db"
    subprocess.run(  # an empty outbox (exit 66), a journal made
        [sys.executable, "-m", "invoicectl", "scan", str(tmp_path), "--journal", str(journal)],
        capture_output=True,
    )
    args = [command, str(tmp_path / KEY), *(["--journal", str(journal)] * (command == "backup"))]
    result = subprocess.run(
        [sys.executable, "-m", "invoicectl", *args, *(["--json"] * (form == "json"))],
        capture_output=True,
        text=True,
        env={**os.environ, "GOROUTE_API_KEY": KEY},
    )

    assert result.returncode == (0 if command == "backup" else 1), result.stderr
    assert_hidden(result.stdout + result.stderr, "[redacted]")


def refused(args: list[str], environ: dict[str, str], code: int, *said: str) -> str:
    """The real process refusing a setting that holds the key: one line, never the key."""
    result = subprocess.run(
        [sys.executable, "-m", "invoicectl", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **environ},
    )
    said_all = result.stdout + result.stderr  # --json: the error is the JSON document
    assert result.returncode == code, said_all
    assert KEY not in said_all, said_all
    assert "holds an API key (not repeated here)" in said_all, said_all
    for words in said:
        assert words in said_all, said_all
    return said_all


def test_a_key_in_an_accepted_setting_is_refused_before_anything_runs(tmp_path: Path) -> None:
    # helper-67 (r09, r09b): a key in the base URL's path or the journal's was accepted, then
    # printed (doctor, send's warning), written in the outbox marker and bound in the journal.
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    (outbox / "a.xml").write_text("<Invoice/>", encoding="utf-8")
    with_key = {"GOROUTE_API_KEY": KEY}
    url = {**with_key, "GOROUTE_BASE_URL": f"http://127.0.0.1:9/peppol-api/{KEY}"}
    refused(["send", str(outbox)], url, 1, "base_url ($GOROUTE_BASE_URL)")
    journal = str(tmp_path / f"{KEY}.db")
    refused(["send", "--sandbox", str(outbox), "--journal", journal], with_key, 2, "--journal")
    refused(["status"], {**with_key, "INVOICECTL_JOURNAL": journal}, 1, "$INVOICECTL_JOURNAL")
    pg = f"postgresql://clerk:{KEY}@127.0.0.1:9/journal"
    refused(["status", "--journal", pg], with_key, 2, "journal (--journal)")
    assert list(outbox.iterdir()) == [outbox / "a.xml"]  # no marker, no turn
    assert not (tmp_path / f"{KEY}.db").exists()


def test_a_profile_named_by_its_key_is_refused(tmp_path: Path) -> None:
    key_file = write_key_file(tmp_path / "key")
    config = tmp_path / "config.toml"
    config.write_text(f'[profiles.{KEY}]\napi_key_file = "{key_file}"\n', encoding="utf-8")
    environ = {"INVOICECTL_CONFIG": str(config)}

    refused(["profiles"], environ, 1, f"the name of a profile (config file {config})")
    refused(["profiles", "--json"], environ, 1, "rename the profile")
    refused(["--profile", KEY, "status"], environ, 1, "rename the profile")
    refused(["status"], {**environ, "INVOICECTL_PROFILE": KEY}, 1, "rename the profile")


def test_doctor_refuses_a_key_in_the_journal_path_in_its_config_check(tmp_path: Path) -> None:
    key_file = write_key_file(tmp_path / "key")
    journal = str(tmp_path / f"{KEY}.db")

    result = runner.invoke(
        app, ["doctor", "--json", "--api-key-file", str(key_file), "--journal", journal]
    )

    checks = json.loads(result.stdout)["checks"]
    assert result.exit_code == 1, result.output
    assert checks[0]["status"] == "fail"
    assert "journal (--journal) holds an API key" in checks[0]["message"]
    assert KEY not in result.stdout


@pytest.mark.parametrize(
    ("key", "journal"),
    [
        # helper-71: a run of the key's characters is no key (the suite's own tmp paths were
        # refused: pytest named one after a test, "test_invoicectl_...").
        ("sk_live_invoicectl_receivers_0001", "test_invoicectl_receivers_list0/journal.db"),
        ("sk_test_invoicectl_sandbox", "invoicectl_sandbox/journal.db"),  # the emulator's key
        ("App", "App/journal.db"),  # a placeholder, or a word, in another profile's variable
        ("1", "2026-01/journal.db"),
    ],
)
def test_a_setting_that_only_shares_characters_with_a_key_is_taken(
    tmp_path: Path, key: str, journal: str
) -> None:
    (tmp_path / journal).parent.mkdir(parents=True)
    done = subprocess.run(
        [sys.executable, "-m", "invoicectl", "status", "--journal", str(tmp_path / journal)],
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(tmp_path), "GOROUTE_API_KEY": key},
    )
    assert "holds an API key" not in done.stdout + done.stderr
    assert "no journal at" in done.stderr  # it got as far as the journal

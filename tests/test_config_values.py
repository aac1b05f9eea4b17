"""Every setting checked once, from every source: one line naming the setting, its source and
what is allowed, before anything changes (issue 11, items 4, 6 and 8)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from logkit import said

from invoicectl.errors import ConfigError, UsageError
from invoicectl.settings import resolve

KEY = "sk_test_0123456789abcdefKEY"


def with_config(tmp_path: Path, text: str, **environ: str) -> dict[str, str]:
    config = tmp_path / "config.toml"
    config.write_text(text)
    return {"INVOICECTL_CONFIG": str(config), "GOROUTE_API_KEY": KEY, **environ}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('rate = "fast"', r"rate \(config file .*\) must be a whole number from 1 to 100000 "),
        ("rate = inf", "rate .* not inf"),
        ("rate = nan", "rate .* not nan"),
        ("rate = [1]", r"rate .* not \[1\]"),
        ("rate = 1000000000000000000000000000000", "rate .* from 1 to 100000"),
        ("rate = true", "rate .* not True"),
        ("rate = 1.5", "rate .* not 1.5"),
        ("rate = 0", "rate .* not 0"),
        ('batch_size = "x"', "batch_size .* not 'x'"),
        ("batch_size = 0", "batch_size .* not 0"),
        ("batch_size = -1", "batch_size .* not -1"),
        ("max_attempts = 0", "max_attempts .* from 1 to 100"),
        ("max_wait = -1", r"max_wait \(config file .*\) must be a number of seconds from 0"),
        ("max_wait = nan", "max_wait .* not nan"),
        ("concurrency = 100000", "concurrency .* from 1 to 1000 "),
        ("journal = 5", r"journal \(config file .*\) must be a non-empty text"),
        ('journal = ""', "journal .* non-empty text"),
        ("api_key_file = 5", "api_key_file .* non-empty text"),
        ('tier = "gold"', "tier .* 'standard' or 'professional', not 'gold'"),
        ('base_url = "ftp://example.test"', r"base_url .* must be an http\(s\) URL"),
        ('base_url = "https://goroute.test:99999"', "port from 1 to 65535"),
        ('base_url = "https://goroute.test:0"', "port from 1 to 65535"),
        ('base_url = "https://goroute.test:http"', "port from 1 to 65535"),
        ('base_url = "https://goroute.test/peppol-api?x=1"', "without a query string"),
        ("base_url = 7", "base_url .* non-empty text"),
    ],
)
def test_a_bad_config_value_is_one_line_naming_setting_source_and_range(
    tmp_path: Path, line: str, message: str
) -> None:
    environ = with_config(tmp_path, line + "\n")
    if not line.startswith("journal"):  # else the environment's journal would win
        environ["INVOICECTL_JOURNAL"] = str(tmp_path / "j.db")
    if line.startswith("api_key_file"):
        del environ["GOROUTE_API_KEY"]
    with pytest.raises(ConfigError, match=message) as raised:
        resolve(environ=environ)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("GOROUTE_BASE_URL", "http://127.0.0.1:99999", r"base_url \(\$GOROUTE_BASE_URL\) .*port"),
        ("GOROUTE_BASE_URL", "https://goroute.test/x#frag", "without a query string or fragment"),
        ("GOROUTE_BASE_URL", "gopher://goroute.test", r"must be an http\(s\) URL"),
    ],
)
def test_a_bad_environment_value_names_the_variable(
    tmp_path: Path, name: str, value: str, message: str
) -> None:
    environ = {"GOROUTE_API_KEY": KEY, "INVOICECTL_JOURNAL": str(tmp_path / "j.db"), name: value}
    (tmp_path / "none.toml").write_text("")  # a config file that sets nothing
    environ["INVOICECTL_CONFIG"] = str(tmp_path / "none.toml")
    with pytest.raises(ConfigError, match=message):
        resolve(environ=environ)


def test_a_bad_value_on_the_command_line_is_a_usage_error(tmp_path: Path) -> None:
    environ = with_config(tmp_path, "", INVOICECTL_JOURNAL=str(tmp_path / "j.db"))
    with pytest.raises(UsageError, match=r"max_wait \(the command line\) .* not nan"):
        resolve(max_wait=float("nan"), environ=environ)
    with pytest.raises(UsageError, match="rate .* from 1 to 100000"):
        resolve(rate=10**30, environ=environ)
    settings = resolve(environ=environ)
    with pytest.raises(UsageError, match="deadline .* not inf"):
        settings.send_options(deadline=float("inf"))


def test_credentials_in_the_base_url_are_refused_and_never_repeated(tmp_path: Path) -> None:
    url = "https://clerk:hunter2secret@goroute.test/peppol-api"
    environ = with_config(tmp_path, "", GOROUTE_BASE_URL=url)
    with pytest.raises(ConfigError, match="must not carry a user name or password") as raised:
        resolve(environ=environ)
    assert "hunter2secret" not in str(raised.value)
    assert "clerk" not in str(raised.value)


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("https://app.goroute.ai/peppol-api/", "https://app.goroute.ai/peppol-api"),
        ("https://app.goroute.ai/peppol-api//", "https://app.goroute.ai/peppol-api"),
        ("HTTPS://App.GoRoute.AI:443/peppol-api", "https://app.goroute.ai/peppol-api"),
        ("http://127.0.0.1:80/x/", "http://127.0.0.1/x"),
        ("http://[::1]:8080/", "http://[::1]:8080"),
        (" https://goroute.test ", "https://goroute.test"),
    ],
)
def test_one_environment_has_one_spelling(tmp_path: Path, given: str, kept: str) -> None:
    environ = with_config(tmp_path, "", GOROUTE_BASE_URL=given)
    assert resolve(environ=environ, need_key=False).base_url == kept


def test_a_key_typed_where_a_path_belongs_is_never_echoed(tmp_path: Path) -> None:
    """``--api-key-file "$KEY"``: the error names the option, not the value."""
    (tmp_path / "none.toml").write_text("")
    environ = {
        **os.environ,
        "INVOICECTL_CONFIG": str(tmp_path / "none.toml"),
        "INVOICECTL_JOURNAL": str(tmp_path / "j.db"),
    }
    environ.pop("GOROUTE_API_KEY", None)
    run = subprocess.run(
        [sys.executable, "-m", "invoicectl", "reconcile", "--api-key-file", KEY],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )
    assert run.returncode == 1
    assert KEY not in run.stdout + run.stderr
    assert "--api-key-file does not exist" in run.stderr
    assert len(said(run.stderr, 1).strip().splitlines()) == 1


def test_the_cli_exits_1_with_one_line_for_a_bad_config_file(tmp_path: Path) -> None:
    environ = {**os.environ, **with_config(tmp_path, 'rate = "fast"\n')}
    environ["INVOICECTL_JOURNAL"] = str(tmp_path / "j.db")
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    run = subprocess.run(
        [sys.executable, "-m", "invoicectl", "send", str(outbox)],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )
    assert run.returncode == 1
    lines = said(run.stderr, 1).strip().splitlines()
    assert len(lines) == 1
    assert "rate (config file" in lines[0]
    assert "from 1 to 100000" in lines[0]
    assert "Traceback" not in run.stderr
    # Nothing changed: the journal was not even created.
    assert not (tmp_path / "j.db").exists()


@pytest.mark.parametrize("where", ["option", "environment"])
def test_a_database_url_refused_for_a_control_character_is_quoted_without_its_password(
    tmp_path: Path, where: str
) -> None:
    """helper-67: a journal URL ending in a CR (a CRLF env file) was refused with its
    password quoted, into cron mail and log collectors."""
    url = "postgresql://inv:PgS3cretPW@db.internal/invoices\r"
    environ = {"HOME": str(tmp_path), "GOROUTE_API_KEY": "sk_test_x"}
    if where == "option":
        expected: type[Exception] = UsageError
        options = {"journal": url}
    else:
        expected, options = ConfigError, {}
        environ["INVOICECTL_JOURNAL"] = url

    with pytest.raises(expected) as refused:
        resolve(environ=environ, **options)

    message = str(refused.value)
    assert "PgS3cretPW" not in message
    assert "postgresql://inv:***@db.internal/invoices' (holding U+000D)" in message


def test_a_config_file_saved_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    """helper-93: a file Windows Notepad saved (UTF-8 with a byte-order mark) was refused as
    "Invalid statement (at line 1, column 1)", which tells a person nothing to act on."""
    environ = with_config(tmp_path, "rate = 7\n")
    config = Path(environ["INVOICECTL_CONFIG"])
    config.write_bytes(b"\xef\xbb\xbf" + config.read_bytes())
    environ["INVOICECTL_JOURNAL"] = str(tmp_path / "j.db")
    assert resolve(environ=environ).rate_per_minute == 7

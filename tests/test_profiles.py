"""Profiles (issue 16, item 1): ``[profiles.NAME]`` tables, ``--profile`` /
``$INVOICECTL_PROFILE``, the built-in ``sandbox``, the precedence of their values and the
``invoicectl profiles`` listing, which never shows a key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.cli import app
from invoicectl.errors import ConfigError, UsageError
from invoicectl.settings import resolve

runner = CliRunner()
FILE_KEY = "sk_live_FILEKEY_7f3a9c2e5b1d"
ENV_KEY = "sk_live_ENVKEY_4e8b0d6a2c9f"


def write_config(tmp_path: Path, text: str) -> dict[str, str]:
    """The config file, and an environment naming it (no $INVOICECTL_JOURNAL: a profile's
    journal would lose to it)."""
    config = tmp_path / "config.toml"
    config.write_text(text, encoding="utf-8")
    return {"INVOICECTL_CONFIG": str(config), "XDG_STATE_HOME": str(tmp_path / "state")}


def key_file(tmp_path: Path, secret: str = FILE_KEY) -> Path:
    path = tmp_path / "acme.key"
    path.write_text(secret + "\n")
    path.chmod(0o600)
    return path


def two_profiles(tmp_path: Path) -> dict[str, str]:
    return write_config(
        tmp_path,
        f"""
tier = "professional"
base_url = "https://top.example/api"
rate = 300
[profiles.acme]
base_url = "https://acme.example/api"
api_key_file = "{key_file(tmp_path)}"
rate = 40
sender = "0088:1111111111111"
[profiles.beta]
api_key_env = "BETA_KEY"
concurrency = 3
journal = "{tmp_path / "beta.db"}"
sender = "0007:2222222222"
""",
    )


def test_a_profile_s_values_come_between_the_environment_and_the_top_level_keys(
    tmp_path: Path,
) -> None:
    environ = two_profiles(tmp_path)

    acme = resolve(profile="acme", environ=environ, need_key=False)
    beta = resolve(profile="beta", environ={**environ, "BETA_KEY": ENV_KEY})
    overridden = resolve(
        profile="acme",
        rate=7,
        environ={**environ, "GOROUTE_BASE_URL": "https://env.example/api"},
        need_key=False,
    )

    assert (acme.base_url, acme.rate_per_minute, acme.concurrency) == (
        "https://acme.example/api",
        40,
        50,  # the top-level tier's
    )
    assert acme.sources["base_url"] == "profile acme" and acme.sources["rate"] == "profile acme"
    assert acme.sources["tier"] == "config file" and acme.tier == "professional"
    assert acme.journal == tmp_path / "state" / "invoicectl" / "journal-acme.db"
    assert acme.sender == "0088:1111111111111" and acme.profile == "acme"
    assert (beta.base_url, beta.rate_per_minute, beta.concurrency) == (
        "https://top.example/api",
        300,
        3,
    )
    assert beta.journal == tmp_path / "beta.db" and beta.sources["journal"] == "profile beta"
    assert beta.api_key is not None and beta.api_key.reveal() == ENV_KEY
    assert beta.sources["api_key"] == "$BETA_KEY (profile beta)"
    assert overridden.rate_per_minute == 7 and overridden.sources["rate"] == "option"
    assert overridden.base_url == "https://env.example/api"
    assert overridden.sources["base_url"] == "$GOROUTE_BASE_URL"


def test_no_profile_keeps_today_s_settings(tmp_path: Path) -> None:
    environ = two_profiles(tmp_path)

    plain = resolve(environ=environ, need_key=False)

    assert plain.profile is None and plain.sender is None
    assert (plain.base_url, plain.rate_per_minute) == ("https://top.example/api", 300)
    assert plain.journal == tmp_path / "state" / "invoicectl" / "journal.db"


def test_the_profile_comes_from_the_environment_unless_the_option_names_one(
    tmp_path: Path,
) -> None:
    environ = {**two_profiles(tmp_path), "INVOICECTL_PROFILE": "beta"}

    from_env = resolve(environ=environ, need_key=False)
    from_option = resolve(profile="acme", environ=environ, need_key=False)

    assert from_env.profile == "beta" and from_env.sources["profile"] == "$INVOICECTL_PROFILE"
    assert from_option.profile == "acme" and from_option.sources["profile"] == "option"


def test_sandbox_is_a_built_in_profile_and_the_flag_still_works(tmp_path: Path) -> None:
    environ = two_profiles(tmp_path)

    flag = resolve(sandbox=True, environ=environ)
    named = resolve(profile="sandbox", environ=environ)

    assert flag.sandbox and named.sandbox
    assert flag.base_url == named.base_url and flag.journal == named.journal
    assert flag.journal.name == "sandbox.db"
    assert flag.sources["base_url"] == "--sandbox"
    assert named.sources["base_url"] == "profile sandbox"
    with pytest.raises(UsageError, match="--sandbox and --profile acme"):
        resolve(sandbox=True, profile="acme", environ=environ)


def test_an_unknown_profile_names_the_known_ones(tmp_path: Path) -> None:
    environ = two_profiles(tmp_path)

    with pytest.raises(UsageError, match=r"unknown profile 'acne' \(--profile\); the known "
                       r"profiles: acme, beta, sandbox$"):  # fmt: skip
        resolve(profile="acne", environ=environ, need_key=False)
    with pytest.raises(ConfigError, match=r"\(\$INVOICECTL_PROFILE\)"):
        resolve(environ={**environ, "INVOICECTL_PROFILE": "acne"}, need_key=False)


def run_cli(*args: str, environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "INVOICECTL_JOURNAL"}
    return subprocess.run(
        [sys.executable, "-m", "invoicectl", *args],
        capture_output=True,
        text=True,
        env={**env, **environ},
        timeout=60,
    )


def test_the_option_is_global_before_or_after_the_command(tmp_path: Path, outbox: Path) -> None:
    environ = two_profiles(tmp_path)
    write_invoice(outbox, "INV-1")

    before = run_cli("--profile", "beta", "scan", str(outbox), "--json", environ=environ)
    after = run_cli("scan", str(outbox), "--profile=acme", "-q", environ=environ)
    unknown = run_cli("scan", str(outbox), "--profile", "acne", environ=environ)
    from_env = run_cli("status", environ={**environ, "INVOICECTL_PROFILE": "acne"})

    assert before.returncode == 0, before.stderr
    assert json.loads(before.stdout)["new"] == ["INV-1"]
    assert (tmp_path / "beta.db").exists()
    assert after.returncode == 0, after.stderr
    assert (tmp_path / "state" / "invoicectl" / "journal-acme.db").exists()
    assert not (tmp_path / "state" / "invoicectl" / "journal.db").exists()
    # From the command line a usage error (exit 2), from the environment a config error (1):
    # as for every other setting (config_values).
    assert unknown.returncode == 2
    assert "unknown profile 'acne' (--profile); the known profiles: acme, beta, sandbox" in (
        unknown.stderr
    )
    assert "Traceback" not in unknown.stderr
    assert from_env.returncode == 1 and "($INVOICECTL_PROFILE)" in from_env.stderr


BAD_PROFILES = {
    "wrong type": ("[profiles.acme]\nrate = \"fast\"\n", "profile 'acme' (config file",
                   "rate must be a whole number from 1 to 100000 (requests per minute), "
                   "not 'fast'"),
    "unknown key": ("[profiles.acme]\nbase_ur = \"https://x.example\"\n", "profile 'acme'",
                    "unknown key 'base_ur'"),
    "sender shape": ("[profiles.acme]\nsender = \"0088 123\"\n", "profile 'acme'",
                     "sender must be a Peppol id scheme:id"),
    "two key places": ("[profiles.acme]\napi_key_file = \"/k\"\napi_key_env = \"K\"\n",
                       "profile 'acme'", "api_key_file and api_key_env both given"),
    "same sender": ("[profiles.a]\nsender = \"0088:1\"\n[profiles.b]\nsender = \"0088:1\"\n",
                    "profiles 'a', 'b'", "same sender 0088:1"),
    # helper-67: the password was quoted (in cron mail, on stderr, in --json and doctor)
    "same database": ("[profiles.a]\njournal = \"postgresql://inv:PgS3cret@db/inv\"\n"
                      "[profiles.b]\njournal = \"postgresql://inv:PgS3cret@db/inv\"\n",
                      "profiles 'a', 'b'", "same journal postgresql://inv:***@db/inv:"),
    "not a table": ("[profiles]\nacme = 3\n", "profile 'acme'", "must be a table"),
    "the sandbox": ("[profiles.sandbox]\nrate = 3\n", "profile 'sandbox'", "built in"),
    "out of range": ("[profiles.acme]\nrate = 0\n", "profile 'acme' (config file",
                     "rate must be a whole number from 1 to 100000"),
    "unknown tier": ("[profiles.acme]\ntier = \"gold\"\n", "profile 'acme' (config file",
                     "tier must be 'standard' or 'professional', not 'gold'"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_PROFILES))
def test_a_bad_profile_is_one_line_naming_the_profile_and_key(tmp_path: Path, case: str) -> None:
    text, profile, problem = BAD_PROFILES[case]
    environ = write_config(tmp_path, text)

    result = runner.invoke(app, ["profiles"], env=environ)

    assert result.exit_code == 1, result.output  # a configuration error, as design.md says
    lines = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(lines) == 1 and profile in lines[0] and problem in lines[0], result.stderr
    assert "Traceback" not in result.stderr and "PgS3cret" not in result.output


def test_every_bad_profile_is_said_at_once(tmp_path: Path) -> None:
    """helper-93: values out of range (a rate of 0, a tier unknown) were found one a run, by
    the run that resolved that profile, and `profiles` listed nothing meanwhile."""
    environ = write_config(
        tmp_path,
        '[profiles.a]\nrate = "x"\ncolour = 1\n[profiles.b]\nsender = "nope"\n'
        '[profiles.c]\nrate = 0\nconcurrency = 100000\ntier = "gold"\n',
    )

    result = runner.invoke(app, ["profiles", "--json"], env=environ)

    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert error.count("\n") == 5 and "'colour'" in error and "'nope'" in error
    assert "not 0" in error and "not 100000" in error and "not 'gold'" in error


def test_the_listing_says_where_each_value_came_from_and_never_shows_a_key(
    tmp_path: Path,
) -> None:
    environ = {**two_profiles(tmp_path), "BETA_KEY": ENV_KEY}

    text = run_cli("profiles", environ=environ)
    as_json = run_cli("profiles", "--json", environ=environ)
    quiet = run_cli("profiles", "-q", environ=environ)

    assert text.returncode == as_json.returncode == quiet.returncode == 0, text.stderr
    listed = {one["name"]: one for one in json.loads(as_json.stdout)["profiles"]}
    assert list(listed) == ["acme", "beta", "sandbox"]
    assert listed["acme"]["sources"]["rate"] == "profile acme"
    assert listed["acme"]["sources"]["tier"] == "config file"
    assert listed["beta"]["sources"]["api_key"] == "$BETA_KEY (profile beta)"
    assert listed["beta"]["key_found"] and listed["acme"]["key_found"]
    assert listed["beta"]["sender"] == "0007:2222222222"
    assert "acme" in text.stdout and "[profile acme]" in text.stdout
    assert quiet.stdout == ""
    for result in (text, as_json, quiet):
        shown = result.stdout + result.stderr
        for secret in (FILE_KEY, ENV_KEY):
            assert secret not in shown
            assert secret[8:20] not in shown  # nor any recognisable part of it


def test_a_missing_key_is_listed_as_not_found_with_why(tmp_path: Path) -> None:
    environ = two_profiles(tmp_path)  # BETA_KEY unset

    result = runner.invoke(app, ["profiles", "--json"], env=environ)

    assert result.exit_code == 0
    beta = json.loads(result.stdout)["profiles"][1]
    assert beta["key_found"] is False and "BETA_KEY is not set" in beta["key_problem"]


def test_a_key_pasted_where_its_variable_s_name_goes_is_never_shown(tmp_path: Path) -> None:
    """Review 16: api_key_env takes a variable's name, and a key such as sk_live_... looks
    like one: neither `invoicectl profiles` nor a send may repeat it."""
    pasted = "sk_live_pastedPASTEDpasted01"
    environ = write_config(tmp_path, f'[profiles.acme]\napi_key_env = "{pasted}"\n')

    listed = runner.invoke(app, ["profiles", "--json"], env={**environ, "GOROUTE_API_KEY": ""})
    with pytest.raises(ConfigError) as refused:
        resolve(profile="acme", environ=environ)

    assert listed.exit_code == 0
    assert pasted not in listed.stdout and pasted[8:20] not in listed.stdout
    assert pasted not in str(refused.value) and "api_key_env of profile acme" in str(refused.value)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("{tmp}/metrics/send.prom", "{tmp}/metrics/send.prom"),
        ("~/send.prom", "{home}/send.prom"),
        ("{tmp}/metrics/send.prom", "{tmp}/metrics/../metrics/./send.prom"),
        ("{tmp}/metrics/send.prom", "{tmp}/linked/send.prom"),
    ],
    ids=["as written", "~ expanded", "dots", "a linked directory"],
)
def test_two_profiles_writing_one_metrics_file_are_refused(
    tmp_path: Path, first: str, second: str
) -> None:
    # Each run replaces the file: acme's figures vanished at beta's run, and its alerts with
    # them (absent() saw beta's series).
    home = tmp_path / "home"
    (tmp_path / "metrics").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "metrics")
    (home / "send.prom").parent.mkdir()
    paths = [path.format(tmp=tmp_path, home=home) for path in (first, second)]
    environ = write_config(
        tmp_path,
        f'[profiles.acme]\nmetrics_file = "{paths[0]}"\n'
        f'[profiles.beta]\nmetrics_file = "{paths[1]}"\n'
        f'[profiles.gamma]\nmetrics_file = "{tmp_path}/gamma.prom"\n',
    )
    environ["HOME"] = str(home)

    result = runner.invoke(app, ["--profile", "gamma", "status"], env=environ)

    assert result.exit_code == 1, result.output
    lines = [line for line in result.stderr.splitlines() if "error" in line]
    expected = os.path.realpath(home if "~" in first else tmp_path / "metrics") + "/send.prom"
    assert lines == [
        f"invoicectl: error: profiles 'acme', 'beta' have the same metrics_file {expected}: "
        "each run replaces the file, and with it the other profile's figures; give each "
        f"profile its own (config file {environ['INVOICECTL_CONFIG']})"
    ], result.stderr


def test_two_profiles_pinging_one_url_are_refused_without_showing_it(tmp_path: Path) -> None:
    url = "https://hc-ping.example/c0ffee-secret-uuid"
    environ = write_config(
        tmp_path,
        f'[profiles.acme]\nping_url = "{url}"\n[profiles.beta]\nping_url = "{url}/"\n',
    )

    result = runner.invoke(app, ["profiles", "--json"], env=environ)

    assert result.exit_code == 1, result.output
    error = json.loads(result.stdout)["error"]
    assert error.startswith(
        "profiles 'acme', 'beta' have the same ping_url (not shown: it is a secret): the monitor "
        "would take one's start and exit code for the other's; give each its own"
    ), error
    assert "c0ffee" not in result.output


def test_one_journal_spelt_two_ways_is_refused_before_any_run(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    environ = write_config(
        tmp_path,
        f'[profiles.acme]\njournal = "{tmp_path}/data/j.db"\n'
        f'[profiles.beta]\njournal = "{tmp_path}/data/../data/j.db"\n',
    )

    result = runner.invoke(app, ["profiles"], env=environ)

    assert result.exit_code == 1, result.output
    assert (
        f"profiles 'acme', 'beta' have the same journal {os.path.realpath(tmp_path)}/data/j.db"
        in result.stderr
    ), result.stderr


def test_profiles_with_metrics_files_of_their_own_are_fine(tmp_path: Path) -> None:
    environ = write_config(
        tmp_path,
        f'[profiles.acme]\nmetrics_file = "{tmp_path}/send-acme.prom"\n'
        f'[profiles.beta]\nmetrics_file = "{tmp_path}/send-beta.prom"\n',
    )

    result = runner.invoke(app, ["profiles"], env=environ)

    assert result.exit_code == 0, result.output

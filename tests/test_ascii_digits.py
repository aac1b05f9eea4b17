"""A number is read only in the digits 0-9, from every source: Python's ``int()`` and
``float()`` read any script's digits (``"٤٥٠"`` is 450), and a setting or option so written
is more likely pasted, or a spoof, than meant. One line naming the setting and the character."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer._click.types import FloatParamType, IntParamType
from typer.testing import CliRunner

from invoicectl.audit.verify import parse_subset
from invoicectl.cli import app
from invoicectl.cli.numbers import DigitsOnly
from invoicectl.errors import ConfigError, UsageError
from invoicectl.settings import resolve

ARABIC_450 = "\u0664\u0665\u0660"  # ٤٥٠
FULLWIDTH_45 = "\uff14\uff15"  # ４５
DEVANAGARI_30 = "\u0969\u0966"  # ३०
runner = CliRunner()


def config_environ(tmp_path: Path, text: str, **environ: str) -> dict[str, str]:
    config = tmp_path / "config.toml"
    config.write_text(text, encoding="utf-8")
    return {
        "INVOICECTL_CONFIG": str(config),
        "INVOICECTL_JOURNAL": str(tmp_path / "j.db"),
        **environ,
    }


@pytest.mark.parametrize(
    ("line", "setting", "char"),
    [
        (f'rate = "{ARABIC_450}"', "rate", "U+0664 (ARABIC-INDIC DIGIT FOUR)"),
        (f'concurrency = "{FULLWIDTH_45}"', "concurrency", "U+FF14 (FULLWIDTH DIGIT FOUR)"),
        (f'batch_size = "{ARABIC_450}"', "batch_size", "U+0664"),
        (f'max_attempts = "{DEVANAGARI_30}"', "max_attempts", "U+0969 (DEVANAGARI DIGIT THREE)"),
        (f'max_wait = "{DEVANAGARI_30}"', "max_wait", "U+0969"),
        (f'request_timeout = "{DEVANAGARI_30}"', "request_timeout", "U+0969"),
        (f'max_wait = "1.{ARABIC_450}"', "max_wait", "U+0664"),
    ],
)
def test_a_config_file_number_in_other_digits_is_refused(
    tmp_path: Path, line: str, setting: str, char: str
) -> None:
    environ = config_environ(tmp_path, line + "\n")

    with pytest.raises(ConfigError) as raised:
        resolve(environ=environ, need_key=False)

    message = str(raised.value)
    assert message.startswith(f"{setting} (config file "), message
    assert f"it holds {char}" in message, message
    assert message.endswith("a number is read only in the digits 0-9"), message
    assert "\n" not in message


def test_an_environment_number_in_other_digits_is_refused(tmp_path: Path) -> None:
    environ = config_environ(tmp_path, "", INVOICECTL_REQUEST_TIMEOUT=DEVANAGARI_30)

    with pytest.raises(ConfigError) as raised:
        resolve(environ=environ, need_key=False)

    assert str(raised.value) == (
        "request_timeout ($INVOICECTL_REQUEST_TIMEOUT) must be a number of seconds from 0.1 "
        f"to 3,600, not '{DEVANAGARI_30}': it holds U+0969 (DEVANAGARI DIGIT THREE): a number "
        "is read only in the digits 0-9"
    )


def test_the_same_numbers_in_ascii_digits_are_read(tmp_path: Path) -> None:
    environ = config_environ(
        tmp_path, 'rate = "450"\nmax_wait = " 2.5 "\n', INVOICECTL_REQUEST_TIMEOUT="30"
    )

    settings = resolve(environ=environ, need_key=False)

    assert (settings.rate_per_minute, settings.max_wait, settings.request_timeout) == (
        450,
        2.5,
        30.0,
    )


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["reconcile", "--rate", ARABIC_450], "--rate"),
        (["reconcile", "--concurrency", FULLWIDTH_45], "--concurrency"),
        (["reconcile", "--max-attempts", DEVANAGARI_30], "--max-attempts"),
        (["reconcile", "--max-wait", DEVANAGARI_30], "--max-wait"),
        (["send", ".", "--batch-size", ARABIC_450], "--batch-size"),
        (["send", ".", "--deadline", DEVANAGARI_30], "--deadline"),
        (["status", "--limit", FULLWIDTH_45], "--limit"),
        (["sandbox", "--port", ARABIC_450], "--port"),
        (["sandbox", "--error-rate", f"0.{ARABIC_450}"], "--error-rate"),
    ],
)
def test_an_option_in_other_digits_is_a_usage_error(args: list[str], option: str) -> None:
    # An unknown tier: were the number read, the command stops there, not serving for good.
    result = runner.invoke(app, [*args, "--tier", "none"] if args[0] == "sandbox" else args)

    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}'" in result.stderr, result.stderr
    assert "a number is read only in the digits 0-9" in result.stderr, result.stderr


def test_every_number_option_reads_only_ascii_digits() -> None:
    # An option declared ``int`` or ``float`` without ``cli.numbers``' type reads "٤٥٠".
    loose = [
        f"{name} {param.name}"
        for name, command in _commands(typer.main.get_command(app))
        for param in command.params
        if isinstance(param.type, IntParamType | FloatParamType)
        and not isinstance(param.type, DigitsOnly)
    ]
    numbers = [
        param.name
        for _, command in _commands(typer.main.get_command(app))
        for param in command.params
        if isinstance(param.type, DigitsOnly)
    ]

    assert loose == []
    assert len(numbers) >= 10  # the walk reaches the commands that take numbers


def _commands(command: Any, name: str = "invoicectl") -> list[tuple[str, Any]]:
    found = [(name, command)]
    for sub_name, sub in getattr(command, "commands", {}).items():
        found += _commands(sub, f"{name} {sub_name}")
    return found


def test_a_subset_in_other_digits_is_refused() -> None:
    with pytest.raises(UsageError, match=r"\(it holds U\+0661 \(ARABIC-INDIC DIGIT ONE\)"):
        parse_subset("\u0661\u0660%")
    assert parse_subset("10%") == 0.1

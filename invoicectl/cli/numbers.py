"""The types of the options that take a number: read in the digits 0-9 only.

click reads a number with Python's ``int()`` and ``float()``, which take any script's decimal
digits: ``--rate ٤٥٠`` (Arabic-Indic) ran at 450 a minute, ``--limit ４５`` (fullwidth) listed
45. A number so written on a command line is more likely pasted from a page, or a spoof, than
meant: it is refused, naming the character, as the settings' own check refuses it from the
environment or the config file (``config_values``). Every number option declares one of these
(``click_type=whole(min=1)``), help text unchanged; a test walks the commands for any other.
"""

from __future__ import annotations

from typing import Any

from typer._click.types import FloatParamType, FloatRange, IntParamType, IntRange, ParamType

from invoicectl.text import not_ascii_digits

__all__ = ["DigitsOnly", "number", "whole"]


class DigitsOnly(ParamType):
    """A number type's check first: text beyond ASCII is a usage error naming its first
    character (``Invalid value for '--rate': '٤٥٠': it holds U+0664 (...)``)."""

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, str) and (why := not_ascii_digits(value)) is not None:
            self.fail(f"{value!r}: {why}", param, ctx)
        return super().convert(value, param, ctx)


class _Whole(DigitsOnly, IntParamType):
    pass


class _WholeInRange(DigitsOnly, IntRange):
    pass


class _Number(DigitsOnly, FloatParamType):
    pass


class _NumberInRange(DigitsOnly, FloatRange):
    pass


def whole(min: int | None = None, max: int | None = None) -> ParamType:
    """An integer option's type (its range, if any: typer's ``min`` and ``max``)."""
    if min is None and max is None:
        return _Whole()
    return _WholeInRange(min=min, max=max)


def number(min: float | None = None, max: float | None = None) -> ParamType:
    """A float option's type (its range, if any: typer's ``min`` and ``max``)."""
    if min is None and max is None:
        return _Number()
    return _NumberInRange(min=min, max=max)

"""What ``-h`` shows beside each command's own help: the exit-code table, once, at the top
level (built from ``errors.MEANINGS``, so the help never drifts from the codes), a line in
every command's help pointing to it, and ``--version`` on every command.

Help is click's plain layout (``rich_markup_mode=None`` in ``app``): two columns whose
descriptions wrap at the terminal's width, with no panels and no rich import at all.
"""

from __future__ import annotations

import textwrap
from typing import Any

import typer.core

from invoicectl import __version__
from invoicectl.errors import _RANK, MEANINGS

POINTER = "Exit codes: the table in invoicectl --help."
_WIDTH = 78  # click's help at 80 columns: 78, less its own indent of 2


def exit_codes_table() -> str:
    """The table as a help paragraph click prints as it is (``\\b``), 78 columns wide."""
    rank = ", ".join(str(int(code)) for code in _RANK if code)
    lines = ["\b", f"Exit codes (when several apply, the first of {rank}):"]
    for code, meaning in MEANINGS.items():
        wrapped = textwrap.wrap(meaning, width=_WIDTH - 2 - 7)
        lines.append(f"{int(code):>5}  {wrapped[0]}")
        lines += [f"{'':>7}{more}" for more in wrapped[1:]]
    return "\n".join(lines)


def _show_version(ctx: Any, param: Any, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        print(f"invoicectl {__version__}")
        ctx.exit()


def fit(command: Any) -> None:
    """Give a command ``--version`` and the pointer to the exit-code table."""
    if not any("--version" in getattr(param, "opts", ()) for param in command.params):
        command.params.append(
            typer.core.TyperOption(
                param_decls=["--version"],
                is_flag=True,
                expose_value=False,
                is_eager=True,
                callback=_show_version,
                help="Show the version and exit.",
            )
        )
    command.epilog = command.epilog or POINTER

"""Where the command line writes: a rich console for data on stdout, ``say`` for stderr.

Data goes to stdout, diagnostics to stderr (design.md, "Command line"). Every line the CLI
writes on stderr (errors, "interrupted; state saved", the credentials and outage stops of
``send``, "report written to") goes through ``say``: on a terminal rich wraps it at the
terminal's width; anywhere else (a log file, a pipe, a test) it is written as it is, one line,
so that a log keeps one line per message however long it is.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


# Invoice IDs, file names and API answers are data, never rich markup or emoji codes: an ID
# such as "[/b]INV-1" stopped `scan` with a MarkupError, and "[red]INV-2" showed as "INV-2".
def stdout_console() -> Console:
    from rich.console import Console  # here: scan prints plain lines and never needs rich

    return Console(soft_wrap=not sys.stdout.isatty(), markup=False, emoji=False)


def say(message: str) -> None:
    """One diagnostic on stderr, never wrapped when stderr is not a terminal."""
    if not sys.stderr.isatty():
        sys.stderr.write(f"{message}\n")
        sys.stderr.flush()
        return
    from rich.console import Console

    Console(stderr=True, markup=False, emoji=False, highlight=False).print(message)


def say_error(message: str) -> None:
    """``invoicectl: error: <message>`` on stderr."""
    say(f"invoicectl: error: {message}")


def ask(question: str) -> bool:
    """A yes/no question on stderr, for a person at a terminal (a script passes ``--yes``)."""
    import typer

    return typer.confirm(question, err=True)

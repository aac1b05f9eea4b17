"""What a command asks to have done once it has ended, with its exit code (its metrics file):
registered by the command as it runs, done by the CLI group however the command ended
(``app._Commands.invoke``). The group knows nothing of what is registered, so that it imports
nothing of it."""

from __future__ import annotations

from collections.abc import Callable

_endings: list[Callable[[int], None]] = []


def at_end(finish: Callable[[int], None]) -> None:
    _endings.append(finish)


def run_endings(exit_code: int) -> None:
    """Each registered ending, in order, once (an ending says its own failures: none raises)."""
    while _endings:
        _endings.pop(0)(exit_code)

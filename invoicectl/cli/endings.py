"""What a command asks to have done once it has ended, with its exit code (its metrics file):
registered by the command as it runs, done by the CLI group however the command ended
(``app._Commands.invoke``). The group knows nothing of what is registered, so that it imports
nothing of it.

What the group registers for a command that ends before its run begins (a usage error, a
setting refused: ``unbegun_metrics``) is dropped once the run begins (``begun``): from then
on, the run's own endings say it."""

from __future__ import annotations

from collections.abc import Callable

_endings: list[Callable[[int], None]] = []
_unless_begun: list[Callable[[int], None]] = []


def at_end(finish: Callable[[int], None]) -> None:
    _endings.append(finish)


def at_end_unless_begun(finish: Callable[[int], None]) -> None:
    """``finish`` at the end, unless the command's run begins first (``begun``)."""
    _unless_begun.append(finish)


def begun() -> None:
    """The command's settings are resolved and its run begins: its own endings take over."""
    _unless_begun.clear()


def run_endings(exit_code: int) -> None:
    """Each registered ending, in order, once (an ending says its own failures: none raises)."""
    while _unless_begun:
        _unless_begun.pop(0)(exit_code)
    while _endings:
        _endings.pop(0)(exit_code)

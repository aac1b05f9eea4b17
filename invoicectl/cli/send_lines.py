"""Lines ``send`` says besides its report: at a first signal, and the command that goes on."""

from __future__ import annotations

from pathlib import Path

from invoicectl.cli.consoles import say


def say_stopping(signal_name: str, in_flight: int) -> None:
    """At a first signal, at once: what is left, and how to stop sooner."""
    say(f"invoicectl: {signal_name}: stopping: {in_flight} in flight; Ctrl-C again to abandon them")


def continue_command(
    directory: Path,
    recursive: bool,
    journal: Path | None,
    sandbox: bool,
    api_key_file: Path | None,
) -> str:
    """The ``send`` that continues this one: the same outbox, journal and key file."""
    import shlex

    words = ["invoicectl", "send", str(directory)]
    if recursive:
        words.append("--recursive")
    if journal is not None:
        words += ["--journal", str(journal)]
    if sandbox:
        words.append("--sandbox")
    if api_key_file is not None:
        words += ["--api-key-file", str(api_key_file)]
    return shlex.join(words)

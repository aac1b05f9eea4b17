"""Reading the CLI's log back (``invoicectl.loglines``): lines without their timestamps, and
the run's last line (``exit N: <cause>``) told apart from what the command itself said."""

from __future__ import annotations

import re
from typing import Any

from invoicectl.cli.app import answers_in_json
from invoicectl.cli.logsetup import RUN_COMMANDS
from invoicectl.loglines import STAMP

EXIT_LINE = re.compile(r"^exit (\d+): .+$")


def unstamped(text: str) -> str:
    """``text`` with each line's timestamp taken off; a line without one fails the test, so
    a test that reads through this also checks that every line carries one."""
    lines = text.splitlines(keepends=True)
    missing = [line for line in lines if not STAMP.match(line)]
    assert not missing, f"lines without a timestamp: {missing!r}"
    return "".join(STAMP.sub("", line, count=1) for line in lines)


def without_exit_line(stderr: str, code: int | None = None) -> str:
    """stderr as the command said it: the run's last line checked (``exit N: ...``, with
    ``code`` when given) and taken off."""
    lines = stderr.splitlines(keepends=True)
    last = EXIT_LINE.match(lines[-1].rstrip("\n")) if lines else None
    assert last is not None, f"no exit line last: {lines!r}"
    assert code is None or int(last.group(1)) == code, lines[-1]
    return "".join(lines[:-1])


def said(stderr: str, code: int | None = None) -> str:
    """A real process's stderr: every line stamped (checked), stamps and the exit line off."""
    return without_exit_line(unstamped(stderr), code)


def output_of(args: tuple[str, ...] | list[str], result: Any) -> str:
    """A ``CliRunner`` result's stdout then stderr, the exit line of a run command checked
    against the exit code and taken off: what the command itself said."""
    stderr = result.stderr
    if args and args[0] in RUN_COMMANDS and not answers_in_json(list(args)):
        stderr = without_exit_line(stderr, result.exit_code)
    return str(result.stdout) + stderr

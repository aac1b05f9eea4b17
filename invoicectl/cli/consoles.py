"""Where the command line writes: a rich console for data on stdout, ``say`` for stderr.

Data goes to stdout, diagnostics to stderr (design.md, "Command line"). Every line the CLI
writes on stderr (errors, "interrupted; state saved", the credentials and outage stops of
``send``, "report written to") goes through ``say``: on a terminal rich wraps it at the
terminal's width; anywhere else (a log file, a pipe, a test) it is written as it is, one line,
so that a log keeps one line per message however long it is.

A closed stdout or stderr (``invoicectl send | head -1``, ``2>&1 | head -1``), or one whose
file can take no more (a log on a full disk), stops the output, never the work
(``guard_streams``): once its reader has gone, what is written to it is dropped, the run goes
on to its end, pings its monitor and exits with its own code. One closed before the start
(``>&-``, ``2>&-`` in a crontab) is given /dev/null.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console

    from invoicectl.loglines import LogFormat
    from invoicectl.render.plain import PlainLines


# Invoice IDs, file names and API answers are data, never rich markup or emoji codes: an ID
# such as "[/b]INV-1" stopped `scan` with a MarkupError, and "[red]INV-2" showed as "INV-2".
def stdout_console() -> Console:
    from rich.console import Console  # here: scan prints plain lines and never needs rich

    return Console(soft_wrap=not sys.stdout.isatty(), markup=False, emoji=False)


def stdout_lines() -> Console | PlainLines:
    """``stdout_console()`` on a terminal; plain lines anywhere else."""
    from invoicectl.render.plain import PlainLines

    return stdout_console() if sys.stdout.isatty() else PlainLines(sys.stdout)


class ClosedPipeGuard:
    """A text stream that drops its writes once its reader has gone (EPIPE) or its file can
    take no more (a full log disk: ENOSPC, EIO, EFBIG), instead of raising inside whatever was
    writing: rich, at the first progress line after ``head`` exits, raised SystemExit from
    inside the send loop; a full disk under ``>> send.log 2>&1`` stopped the send, blamed on
    the journal (the error names no file)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.reader_gone = False
        self.failure: OSError | None = None  # the first write that failed

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                return self._stream.write(text)
            except OSError as error:
                self._gone(error)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._stream.flush()
            except OSError as error:
                self._gone(error)

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, ...
        return getattr(self._stream, name)

    @property
    def lost_output(self) -> str | None:
        """Why some output never arrived (a full disk, an I/O error), None if it all did or
        its reader left by choice (``| head``: a broken pipe)."""
        if self.failure is None or self.failure.errno == errno.EPIPE:
            return None
        return self.failure.strerror or type(self.failure).__name__

    def _gone(self, failure: OSError) -> None:
        """The reader (or the disk) has gone: what is still buffered, and every flush from now on
        (Python's own at exit included), goes to /dev/null rather than failing again."""
        self.reader_gone = True
        self.failure = failure
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self._stream.fileno())
            finally:
                os.close(devnull)
        except (OSError, ValueError):  # no file descriptor to redirect: writes are dropped
            pass


def guard_streams() -> None:
    """Make the process's stdout and stderr ``ClosedPipeGuard``s (once, for the whole
    process), a stream closed before the start first given /dev/null: Python then has no
    stream at all (None), and the next file the process opened would take its number."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if not _is_open(fd):
            _give_devnull(fd)
        if getattr(sys, name) is None:  # Python had no stream for it
            setattr(sys, name, os.fdopen(fd, "w", errors="backslashreplace", closefd=False))
        stream = getattr(sys, name)
        if not isinstance(stream, ClosedPipeGuard):
            setattr(sys, name, ClosedPipeGuard(stream))


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _give_devnull(fd: int) -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    if devnull != fd:  # the lowest free number: ``fd`` itself when 0 to ``fd`` - 1 are open
        os.dup2(devnull, fd)
        os.close(devnull)


# Narrower than this, a terminal gets a diagnostic as one plain line, unwrapped.
_NARROWEST = 20


def say(message: str) -> None:
    """One diagnostic on stderr, never wrapped when stderr is not a terminal."""
    # What stdout still buffers was written before this line: in a cron log (both streams one
    # file, stdout block-buffered) it comes first, the ``exit N:`` line last.
    with suppress(OSError, ValueError):  # ValueError: stdout closed
        sys.stdout.flush()
    if sys.stderr.isatty():
        from rich.console import Console

        console = Console(stderr=True, markup=False, emoji=False, highlight=False)
        # Narrower than a word (COLUMNS=0 or 1), rich drops the line or shreds it.
        if console.width >= _NARROWEST:
            console.print(message)
            return
    sys.stderr.write(f"{message}\n")
    sys.stderr.flush()


def warn_if_empty(files: int, directory: Path, recursive: bool) -> None:
    """A scan that found no ``*.xml`` at all says so in one line (its exit code is 66):
    a cron job pointed at a mistyped or unmounted path must not look like a quiet day."""
    if files == 0:
        where = " or below it" if recursive else " (its subdirectories only with --recursive)"
        say(f"invoicectl: warning: no *.xml file in {directory}{where}; is the path right?")


def stderr_bar_console() -> Console | None:
    """A console to draw a progress bar on stderr when it is a terminal; None otherwise
    (then progress is told in plain lines, through ``say``)."""
    if not sys.stderr.isatty():
        return None
    from rich.console import Console

    return Console(stderr=True, markup=False, emoji=False, highlight=False)


def say_error(message: str) -> None:
    """``invoicectl: error: <message>`` on stderr, each of its lines with what prints nothing
    escaped (a path holding a direction mark would show reordered: helper-93)."""
    from invoicectl.text import line_by_line

    say(f"invoicectl: error: {line_by_line(message)}")


def ask(question: str) -> bool:
    """A yes/no question on stderr, for a person at a terminal (a script passes ``--yes``)."""
    import typer

    return typer.confirm(question, err=True)


def tee_output(tail: Any) -> Any:
    """From here on, what stdout and stderr write is also given to ``tail.add`` (the
    health-check ping's tail, ``pings``): beneath a ``LineStream``, so that the tail holds
    the log's lines as written, timestamps included; the returned function flushes both and
    puts the streams back."""
    from invoicectl.loglines import LineStream
    from invoicectl.pings import TeeStream

    stdout, stderr = sys.stdout, sys.stderr
    beneath = {id(s): s.beneath for s in (stdout, stderr) if isinstance(s, LineStream)}
    for name, stream in (("stdout", stdout), ("stderr", stderr)):
        if isinstance(stream, LineStream):
            stream.beneath = TeeStream(stream.beneath, tail)
        else:
            setattr(sys, name, TeeStream(stream, tail))

    def restore() -> None:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        for stream in (stdout, stderr):
            if isinstance(stream, LineStream):
                stream.beneath = beneath[id(stream)]
        sys.stdout, sys.stderr = stdout, stderr

    return restore


def install_log_streams(fmt: LogFormat, *, wrap: bool, stdout_too: bool) -> Callable[[], None]:
    """Each stream that takes log lines under a ``loglines.LineStream``: one that is not a
    terminal, or any in the JSON format; stdout only when it carries no data (``logsetup``
    decides ``wrap`` and ``stdout_too``). The returned function ends an unfinished line and
    puts the streams back."""
    from invoicectl import loglines

    stdout, stderr = sys.stdout, sys.stderr

    def restore() -> None:
        loglines.uninstall()
        sys.stdout, sys.stderr = stdout, stderr

    if not wrap:
        return restore
    json_lines = fmt is loglines.LogFormat.json
    if json_lines or not sys.stderr.isatty():
        sys.stderr = loglines.install(sys.stderr, "stderr", fmt)
    if stdout_too and (json_lines or not sys.stdout.isatty()):
        sys.stdout = loglines.install(sys.stdout, "stdout", fmt)
    return restore

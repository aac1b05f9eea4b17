"""One send process per profile, run at the same time (``send --all-profiles``).

Each child is ``invoicectl --profile NAME send DIR --json``: its own journal, run lock, rate
budget and 24-hour windows, in its own process, so an account that answers 429s with long
Retry-After waits, or refuses the key, stalls nobody else. Their stderr lines reach ours as
they come, each tagged with its profile; their JSON documents are read whole at the end.

Children run in sessions of their own, so a terminal's Ctrl-C reaches this process only, and
each stop signal this process gets is passed on once to every child still running: a child
stops the way one send does (in order, state saved), a second signal as a second one does.
A child that dies (killed, crashed) is reported with how it died, never silently.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from types import FrameType
from typing import IO, Any

from invoicectl.interrupts import STOP_SIGNALS

# A child's stderr line starts with its own timestamp when stderr is a pipe; ours adds one.
_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z ")


@dataclass
class Finished:
    """How one profile's send process ended."""

    name: str
    returncode: int | None  # None: it could not be started
    document: dict[str, Any] | None  # its --json document, if it wrote one whole
    started_error: str | None = None  # why it could not be started

    @property
    def died(self) -> str | None:
        """The signal that killed it (``SIGKILL``), or None when it exited."""
        if self.returncode is None or self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"


@dataclass
class Children:
    """The running children and the signals passed on to them."""

    processes: dict[str, subprocess.Popen[str]] = field(default_factory=dict)
    signals: list[str] = field(default_factory=list)
    passed: dict[str, int] = field(default_factory=dict)  # how many of them each child got

    def pass_on(self, signum: int, frame: FrameType | None = None) -> None:
        self.signals.append(signal.Signals(signum).name)
        for name, process in self.processes.items():
            self.passed[name] = len(self.signals)
            if process.poll() is None:
                with suppress(ProcessLookupError):  # it ended between poll and kill
                    process.send_signal(signum)

    def started(self, name: str, process: subprocess.Popen[str], heard: int) -> None:
        """``process`` is running: from now on it gets every stop signal, and now those
        heard while it was starting (after the ``heard`` first), each once."""
        self.passed[name] = heard
        self.processes[name] = process
        while self.passed[name] < len(self.signals):
            missed = self.signals[self.passed[name]]
            self.passed[name] += 1
            with suppress(ProcessLookupError):
                process.send_signal(signal.Signals[missed])


def run_children(
    commands: Mapping[str, Sequence[str]],
    env: Mapping[str, str],
    on_line: Callable[[str, str], None],
) -> tuple[dict[str, Finished], list[str]]:
    """Run every profile's command at once; how each ended, and the stop signals heard."""
    children = Children()
    readers: list[threading.Thread] = []
    outputs: dict[str, list[str]] = {}
    failed: dict[str, str] = {}
    with _passing_signals_on(children):
        for name, command in commands.items():
            if children.signals:  # stopped before this one started: it never starts
                failed[name] = f"not started: stopped by {children.signals[0]} first"
                continue
            heard = len(children.signals)
            try:
                process = subprocess.Popen(
                    list(command),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    errors="backslashreplace",
                    env=dict(env),
                    start_new_session=True,
                )
            except OSError as error:
                failed[name] = f"could not start its send process: {error.strerror or error}"
                continue
            children.started(name, process, heard)
            outputs[name] = []
            assert process.stdout is not None and process.stderr is not None
            readers.append(_reader(process.stdout, outputs[name].append))
            readers.append(_reader(process.stderr, _lines_to(name, on_line)))
        for process in children.processes.values():
            _wait(process)
        for reader in readers:
            reader.join()
    finished = {
        name: Finished(name, process.returncode, _document("".join(outputs[name])))
        for name, process in children.processes.items()
    }
    finished.update({name: Finished(name, None, None, why) for name, why in failed.items()})
    return finished, children.signals


def _wait(process: subprocess.Popen[str]) -> None:
    while True:
        try:
            process.wait()
            return
        except KeyboardInterrupt:  # a handler of ours never raises; someone else's might
            continue


def _reader(stream: IO[str], take: Callable[[str], None]) -> threading.Thread:
    def read() -> None:
        with stream:
            for line in stream:
                take(line)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def _lines_to(name: str, on_line: Callable[[str, str], None]) -> Callable[[str], None]:
    def line(text: str) -> None:
        on_line(name, _STAMP.sub("", text.rstrip("\n")))

    return line


def _document(text: str) -> dict[str, Any] | None:
    try:
        document = json.loads(text)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


@contextmanager
def _passing_signals_on(children: Children) -> Iterator[None]:
    """While the children run, a stop signal is passed on to them, never raised here: this
    process waits for them to stop in order and then reports."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    for signum, handler in previous.items():
        if handler is not signal.SIG_IGN:  # nohup: stays ignored, for the children too
            signal.signal(signum, children.pass_on)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

"""SIGINT, SIGTERM and SIGHUP: never a silent death, and never one while state is being saved.

Outside a send's loop a stop signal raises ``Interrupted`` (a ``KeyboardInterrupt``) where the
program is, as Ctrl-C does: every journal write is its own transaction, so stopping between
them loses nothing, and the CLI says which signal stopped it and exits 130 (``raise_on_signals``,
installed by ``main``).

A send holds the signals from its lock to its saved state (``RunSignals``): while it scans, a
signal still raises; from the scan's end it is only recorded, and handed to the send loop
(``listening``) once that runs, where it stops the run the orderly way (``send.stopping``);
after the loop it is recorded again, for the exit code. A reconcile or a validate holds them
the same way, and a signal cancels its lookups where they wait (``run_cancelled_by_signals``):
GETs change nothing remote. Handlers are Python-level ones, put back as they were when the run
ends, so at no moment does the default action (death, with nothing said) apply; at the very
end ``main`` ignores them (``ignore_stop_signals``). A signal the process was started with
ignored (``nohup``, a background job) stays ignored.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, TypeVar

from invoicectl import event_loop

T = TypeVar("T")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """A stop signal, raised where the program was."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


def signal_name(error: KeyboardInterrupt) -> str:
    """The signal behind an interruption; Ctrl-C when Python raised it itself."""
    return error.signal_name if isinstance(error, Interrupted) else "SIGINT"


def raise_on_signals() -> None:
    """SIGTERM and SIGHUP end the program like Ctrl-C (SIGINT is Python's already)."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _raise)


def ignore_stop_signals() -> None:
    """For the last moments of the process, once its state is saved and its exit code
    chosen: Python's shutdown puts the default handlers back, and a signal then would kill
    it (exit -15, nothing said) instead of letting it exit with its code."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


@contextmanager
def stop_signals_ignored() -> Iterator[None]:
    """``ignore_stop_signals`` for a while, the handlers before it put back after (in the
    main thread: elsewhere nothing can be changed, and nothing is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    ignore_stop_signals()
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signal.Signals(signum).name)


class RunSignals:
    """The stop signals one run hears, from ``with`` to its end (see the module doc)."""

    def __init__(self) -> None:
        self.received: list[str] = []  # every signal, in order, by name
        self._raising = True
        self._listener: Callable[[str], None] | None = None
        self._delivered = 0
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> RunSignals:
        if threading.current_thread() is not threading.main_thread():
            return self  # only the main thread may set handlers; it hears the signals too
        for signum in STOP_SIGNALS:
            previous = signal.getsignal(signum)
            if previous is signal.SIG_IGN:
                continue
            self._previous[signum] = previous
            signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)

    def hold(self) -> None:
        """From now on a signal is recorded, not raised: the run stops at its own pace."""
        self._raising = False

    @property
    def undelivered(self) -> list[str]:
        """Signals recorded since the send loop last heard one (or at all)."""
        return self.received[self._delivered :]

    @contextmanager
    def listening(self, callback: Callable[[str], None]) -> Iterator[None]:
        """Inside a running event loop: each signal, recorded ones first, goes to
        ``callback`` (by name) on the loop."""
        import asyncio  # here: every command installs the handlers; only a send needs a loop

        loop = asyncio.get_running_loop()

        def deliver(name: str) -> None:
            self._delivered += 1
            callback(name)

        def listen(name: str) -> None:
            loop.call_soon_threadsafe(deliver, name)

        for name in self.undelivered:
            loop.call_soon(deliver, name)
        self._listener = listen
        self._raising = False
        try:
            yield
        finally:
            self._listener = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        self.received.append(name)
        if self._listener is not None:
            self._listener(name)
        elif self._raising:
            self._delivered = len(self.received)
            raise Interrupted(name)


def run_cancelled_by_signals(signals: RunSignals, main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, a stop signal cancelling ``main`` where it waits (never raised
    inside it, where asyncio would report it as a task's unretrieved exception), then raised
    as ``Interrupted`` here. For runs whose requests change nothing remote (reconcile's GETs,
    validations): a send's own loop stops in order instead (``send.stopping``)."""
    import asyncio

    async def cancellable() -> T:
        this = asyncio.current_task()
        assert this is not None

        def cancel(signal_name: str) -> None:
            this.cancel()

        with signals.listening(cancel):
            return await main

    signals.hold()
    try:
        return event_loop.run(cancellable())
    except asyncio.CancelledError:
        if not signals.received:
            raise
        raise Interrupted(signals.received[0]) from None

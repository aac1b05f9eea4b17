"""A small pool of forked worker processes: chunks of work out, answers back as they come.

The scan used ``concurrent.futures.ProcessPoolExecutor`` first. Every answer there passes a
queue-feeder thread, a manager thread and a Future in this process, and those threads compete
for the GIL and the machine's cores with the thread that stores the answers in the journal.
Here each worker has one pipe: this process sends a chunk down it and reads whichever answers
are ready. Reading 20,000 files this way cost this process 0.25 s of CPU instead of 0.35 s.

Workers are forked, so they inherit what ``work`` needs instead of unpickling it. They leave
Ctrl-C to this process, which decides, and they end when their pipe closes, whatever happened
to this process. Each sends its answers from a thread, so that it works on while this process
is not reading.
"""

from __future__ import annotations

import queue
import signal
import threading
import traceback
from collections.abc import Callable, Iterator
from multiprocessing import get_context
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, Generic, TypeVar

Item = TypeVar("Item")
Answer = TypeVar("Answer")

# A worker that does not end this long after its pipe closed is stopped.
_GRACE_SECONDS = 5.0


class WorkerFailed(Exception):
    """A worker raised, or ended without answering (killed, out of memory)."""


class ForkPool(Generic[Item, Answer]):
    """``workers`` processes, each running ``work`` on the chunks sent to it.

    ``submit`` hands a chunk to the least busy worker; while every worker already holds
    ``queue_depth`` chunks it first yields answers. ``drain`` yields the rest. Answers come
    in the order workers finish, not the order chunks were submitted.
    """

    def __init__(
        self,
        workers: int,
        work: Callable[[list[Item]], list[Answer]],
        setup: Callable[[], None] = lambda: None,
        queue_depth: int = 4,
    ) -> None:
        context = get_context("fork")
        self.queue_depth = queue_depth
        self.busy: dict[Connection, int] = {}
        self.processes: list[BaseProcess] = []
        for _ in range(workers):
            ours, theirs = context.Pipe()
            # A forked worker inherits this process's end of every pipe made so far; it
            # must close them, or a pipe this process closes never reads as closed.
            inherited = [*self.busy, ours]
            process = context.Process(
                target=_serve, args=(theirs, inherited, work, setup), daemon=True
            )
            process.start()
            theirs.close()
            self.busy[ours] = 0
            self.processes.append(process)

    def submit(self, chunk: list[Item]) -> Iterator[list[Answer]]:
        while min(self.busy.values()) >= self.queue_depth:
            yield from self._receive()
        connection = min(self.busy, key=self.busy.__getitem__)
        connection.send(chunk)
        self.busy[connection] += 1

    def drain(self) -> Iterator[list[Answer]]:
        while any(self.busy.values()):
            yield from self._receive()

    def close(self) -> None:
        """End the workers: at once when chunks are still out (this process gave up on
        them), else once they see their pipe closed."""
        abandoned = any(self.busy.values())
        for connection in self.busy:
            connection.close()
        self.busy = {}
        for process in self.processes:
            if abandoned:
                process.terminate()
            process.join(_GRACE_SECONDS)
            if process.is_alive():  # pragma: no cover - a worker stuck in a system call
                process.kill()
                process.join()
        self.processes = []

    def _receive(self) -> Iterator[list[Answer]]:
        for ready in wait([connection for connection, busy in self.busy.items() if busy]):
            assert isinstance(ready, Connection)
            try:
                failed, answer = ready.recv()
            except EOFError:
                raise WorkerFailed("a scan worker process ended without answering") from None
            self.busy[ready] -= 1
            if failed:
                raise WorkerFailed(f"a scan worker process failed:\n{answer}")
            yield answer


def _serve(
    connection: Connection,
    inherited: list[Connection],
    work: Callable[[list[Any]], list[Any]],
    setup: Callable[[], None],
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what Ctrl-C stops
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the parent's handler raises in Python
    signal.signal(signal.SIGHUP, signal.SIG_DFL)  # so does its SIGHUP handler
    for parents_end in inherited:
        parents_end.close()
    setup()
    # Answers leave through a thread of their own: while the parent is busy elsewhere (a
    # journal commit) and not reading, sending blocks, and the next chunk goes on meanwhile.
    # A first scan of 20,000 files spent 0.35 s a worker blocked in sending, and finished
    # about 0.1 s sooner with the thread.
    answers: queue.SimpleQueue[tuple[bool, Any] | None] = queue.SimpleQueue()
    threading.Thread(target=_send_all, args=(connection, answers), daemon=True).start()
    while True:
        try:
            chunk = connection.recv()
        except (EOFError, OSError):
            answers.put(None)
            return  # the parent closed the pipe, or is gone
        try:
            answers.put((False, work(chunk)))
        except Exception:
            answers.put((True, traceback.format_exc()))


def _send_all(connection: Connection, answers: queue.SimpleQueue[tuple[bool, Any] | None]) -> None:
    while (answer := answers.get()) is not None:
        try:
            connection.send(answer)
        except OSError:  # BrokenPipeError: the parent stopped listening
            return

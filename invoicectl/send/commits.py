"""Durable writes of concurrent requests, committed together (one sync for many).

The sender's write-ahead rule holds per request: its attempt row is durable before the
request leaves, and its answer is durable before the invoice counts as done. Committing each
on its own costs a sync of the disk per write, twice per invoice, on the event loop, which
caps a send at a couple of hundred invoices a second and spends most of the system time of a
send writing the same few pages again. Here a write waits for others to share its commit, at
most ``GROUP_WINDOW`` seconds after the group's first, and at once when every writer there is
(the send's workers) has joined; each writer goes on only once that commit is done: the rule
holds, the syncs are shared.

Why a window of time: the writers do not arrive together. The rate limiter starts requests
one interval apart (0.6 ms at 100,000 a minute), and answers come back as they come. The
group first lasted two passes of the event loop; once the client's requests cost less CPU
(``goroute.network``), the workers fell out of step and 10,000 invoices took 9,800-9,900
commits for 20,000 writes (5,000-5,500 before). Measured side by side, 3,000 invoices to the
emulator, 4 interleaved rounds: two passes 2,388 commits and 3.56 ms of CPU an invoice, a
window of 2 ms 1,376 and 3.09, of 4 ms 924 and 2.88 (6 and 8 ms: within noise of 4); the
send took 10.8 s with two passes, 8.5 s with 4 ms. A write waits 4 ms at most for its
commit: nothing next to a request's time on a real network; a send with one worker never
waits (its every group is full), nor do the last workers of a send for those that are gone.

Each write runs in a savepoint of its own (``write_batch``): one that raises is undone alone
and raises in its own writer. A commit that fails raises in every writer of the group, none
of whose writes is durable, as if the run had stopped just before them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from invoicectl.journal.interface import JournalBackend

T = TypeVar("T")

# The longest a write waits for others to share its commit (see the module doc).
GROUP_WINDOW = 0.004


class GroupCommits:
    """Used from the event loop's thread only. The tasks that write through it are made by
    ``writer``, which counts them while they run (``writers``): a group that holds a write of
    every one of them commits without waiting. Without such tasks, every group waits the
    window."""

    def __init__(self, journal: JournalBackend, window: float | None = None) -> None:
        self._journal = journal
        self.writers: int | None = None  # tasks made by ``writer`` and still running
        self._window = GROUP_WINDOW if window is None else window
        self._timer: asyncio.TimerHandle | None = None
        self._pending: list[tuple[Callable[[], Any], asyncio.Future[Any]]] = []
        self.commits = 0  # transactions committed
        self.writes = 0  # writes they held
        self.waited = 0  # groups that waited out the window (the others filled first)

    def writer(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """``work`` as a task that writes through these commits, counted while it runs."""
        task = asyncio.get_running_loop().create_task(work)
        self.writers = (self.writers or 0) + 1
        task.add_done_callback(self._left)
        return task

    def _left(self, _task: asyncio.Task[Any]) -> None:
        assert self.writers is not None
        self.writers -= 1
        if self._pending and len(self._pending) >= self.writers:
            asyncio.get_running_loop().call_soon(self._commit)  # the rest are all here

    async def durable(self, write: Callable[[], T]) -> tuple[T, bool]:
        """``write``'s value once it is committed, and whether the writer was cancelled
        meanwhile. A cancel does not interrupt the wait (it lasts the window at most, and a
        sync): the write is durable, or failed, when this returns, and the caller decides what
        the cancel means for it."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._pending.append((write, future))
        if self.writers is not None and len(self._pending) >= self.writers:
            loop.call_soon(self._commit)  # every writer is here: nobody else can join
        elif len(self._pending) == 1:
            self._timer = loop.call_later(self._window, self._window_ended)
        cancelled = False
        while True:
            try:
                return await asyncio.shield(future), cancelled
            except asyncio.CancelledError:
                if future.done() and not future.cancelled():
                    return future.result(), True  # raises the write's own error, if any
                cancelled = True

    def _window_ended(self) -> None:
        self._timer = None
        self.waited += 1
        self._commit()

    def _commit(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        group, self._pending = self._pending, []
        if not group:  # committed already, when the group filled
            return
        try:
            results = self._journal.write_batch([write for write, _future in group])
        except BaseException as error:  # nothing of the group is durable
            for _write, future in group:
                future.set_exception(error)
            if not isinstance(error, Exception):  # KeyboardInterrupt, SystemExit: on up
                raise
            return
        self.commits += 1
        self.writes += len(group)
        for (_write, future), result in zip(group, results, strict=True):
            if result.error is None:
                future.set_result(result.value)
            else:
                future.set_exception(result.error)

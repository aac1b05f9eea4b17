"""Durable writes of concurrent requests, committed together (one sync for many).

The sender's write-ahead rule holds per request: its attempt row is durable before the
request leaves, and its answer is durable before the invoice counts as done. Committing each
on its own costs a sync of the disk per write, twice per invoice, on the event loop, which
caps a send at a couple of hundred invoices a second and spends most of the system time of a
send writing the same few pages again. Here every write asked for while the event loop runs
its ready tasks, and in the pass after, waits for one commit at the end of that next pass
(``loop.call_soon`` twice), and each writer goes on only once that commit is done: the rule
holds, the syncs are shared.

Why a pass more: an answer wakes its writer in two passes (the socket's data, then the task),
and a worker's next attempt row follows its previous answer's commit, so writers woken
together reach ``durable`` a pass apart. Committing at the end of the first pass split them:
1,000 invoices to the emulator took 700-830 commits for 2,000 writes; waiting one pass more,
430-520 (each writer waits a pass of the loop longer; at ``--concurrency 50`` CPU per
invoice 0.9 of before, measured side by side, within this machine's noise).

Each write runs in a savepoint of its own (``write_batch``): one that raises is undone alone
and raises in its own writer. A commit that fails raises in every writer of the group, none
of whose writes is durable, as if the run had stopped just before them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from invoicectl.journal.interface import JournalBackend

T = TypeVar("T")


class GroupCommits:
    """Used from the event loop's thread only."""

    def __init__(self, journal: JournalBackend) -> None:
        self._journal = journal
        self._pending: list[tuple[Callable[[], Any], asyncio.Future[Any]]] = []
        self.commits = 0  # transactions committed
        self.writes = 0  # writes they held

    async def durable(self, write: Callable[[], T]) -> tuple[T, bool]:
        """``write``'s value once it is committed, and whether the writer was cancelled
        meanwhile. A cancel does not interrupt the wait (it lasts one pass of the loop and a
        sync): the write is durable, or failed, when this returns, and the caller decides what
        the cancel means for it."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._pending.append((write, future))
        if len(self._pending) == 1:
            loop.call_soon(loop.call_soon, self._commit)  # the end of the next pass
        cancelled = False
        while True:
            try:
                return await asyncio.shield(future), cancelled
            except asyncio.CancelledError:
                if future.done() and not future.cancelled():
                    return future.result(), True  # raises the write's own error, if any
                cancelled = True

    def _commit(self) -> None:
        group, self._pending = self._pending, []
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

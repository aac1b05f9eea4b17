"""``event_loop.run``: asyncio's loop, with sniffio told which library runs it (issue 13)."""

from __future__ import annotations

import asyncio
import threading

import pytest
import sniffio

from invoicectl import event_loop


def test_sniffio_is_told_asyncio_while_the_loop_runs_and_only_then() -> None:
    """httpcore asks sniffio at every lock it makes: the answer comes from the thread's name
    (no lookup of asyncio's current task), in tasks the loop starts too, and in no other
    thread; the name is put back when the loop ends."""
    seen_elsewhere: list[str | None] = []

    async def main() -> tuple[str | None, str | None, str]:
        async def in_a_task() -> str | None:
            return sniffio.thread_local.name

        other = threading.Thread(target=lambda: seen_elsewhere.append(sniffio.thread_local.name))
        other.start()
        other.join()
        task_name = await asyncio.create_task(in_a_task())
        return sniffio.thread_local.name, task_name, sniffio.current_async_library()

    assert sniffio.thread_local.name is None
    assert event_loop.run(main()) == ("asyncio", "asyncio", "asyncio")
    assert seen_elsewhere == [None]
    assert sniffio.thread_local.name is None


def test_the_name_is_put_back_when_the_run_fails() -> None:
    async def fails() -> None:
        raise LookupError("inside the loop")

    sniffio.thread_local.name = "something-else"
    try:
        with pytest.raises(LookupError):
            event_loop.run(fails())
        assert sniffio.thread_local.name == "something-else"
    finally:
        sniffio.thread_local.name = None

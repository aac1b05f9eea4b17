"""The scan's worker pool, with real forked processes."""

from __future__ import annotations

import os
import signal
import time

import pytest

from invoicectl.scan.forkpool import ForkPool, WorkerFailed


def squares(chunk: list[int]) -> list[int]:
    return [number * number for number in chunk]


def collect(pool: ForkPool[int, int], chunks: list[list[int]]) -> list[int]:
    answers: list[int] = []
    for chunk in chunks:
        for answer in pool.submit(chunk):
            answers.extend(answer)
    for answer in pool.drain():
        answers.extend(answer)
    return answers


def test_every_chunk_is_answered_once_whatever_the_order():
    pool = ForkPool(2, squares, queue_depth=2)
    try:
        answers = collect(pool, [list(range(start, start + 7)) for start in range(0, 700, 7)])
    finally:
        pool.close()
    assert sorted(answers) == [number * number for number in range(700)]


def test_workers_end_when_the_pool_closes():
    pool = ForkPool(2, squares)
    processes = list(pool.processes)
    collect(pool, [[1, 2, 3]])
    started = time.monotonic()
    pool.close()
    assert time.monotonic() - started < 2  # they saw their pipes close; nothing waited
    assert all(process.exitcode == 0 for process in processes)


def test_an_exception_in_a_worker_is_raised_here_with_its_traceback():
    def fails(chunk: list[int]) -> list[int]:
        raise ValueError(f"cannot handle {chunk}")

    pool = ForkPool(2, fails)
    try:
        with pytest.raises(WorkerFailed, match=r"(?s)ValueError: cannot handle \[1\]"):
            collect(pool, [[1]])
    finally:
        pool.close()


def test_a_worker_that_dies_is_reported_not_waited_for():
    def dies(chunk: list[int]) -> list[int]:
        os.kill(os.getpid(), signal.SIGKILL)
        return chunk

    pool = ForkPool(1, dies)
    try:
        with pytest.raises(WorkerFailed, match="ended without answering"):
            collect(pool, [[1]])
    finally:
        pool.close()


def test_chunks_still_out_are_abandoned_at_once_on_close():
    def slow(chunk: list[int]) -> list[int]:
        time.sleep(30)
        return chunk

    pool = ForkPool(2, slow)
    processes = list(pool.processes)
    for _ in pool.submit([1]):
        pass
    started = time.monotonic()
    pool.close()
    assert time.monotonic() - started < 5
    assert not any(process.is_alive() for process in processes)


def test_workers_leave_ctrl_c_to_this_process():
    pool = ForkPool(1, squares, setup=lambda: os.kill(os.getpid(), signal.SIGINT))
    try:
        assert collect(pool, [[3]]) == [9]  # the worker ignored the SIGINT it got
    finally:
        pool.close()

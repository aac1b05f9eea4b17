"""An exclusive ``flock`` waited for, a while at most: the marker's writers and the outbox's
gate each take turns so, and neither may wait on a stopped process for good."""

from __future__ import annotations

import fcntl
import time


def flock_within(fd: int, seconds: float, pause: float) -> bool:
    """``flock(LOCK_EX)`` on ``fd``, asked again every ``pause`` seconds; False when another
    holds it ``seconds`` on. An ``OSError`` other than the lock being held is the caller's."""
    end = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= end:
                return False
            time.sleep(pause)

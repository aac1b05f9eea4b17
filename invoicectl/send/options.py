"""How a send runs: pace, concurrency, retries, deadline, and the operator's new versions.

Settings build these (``Settings.send_options``); the sender reads them, and the history
check (``send/history.py``) reads the outbox, ``trust_new_journal`` and where to warn.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from invoicectl.defaults import DEFAULT_TIER, STOP_GRACE, TIERS
from invoicectl.goroute.retry import RetryPolicy
from invoicectl.journal.records import SendOrder


def _stderr(line: str) -> None:
    """The history check's warnings, one line each, when the caller gives no ``warn``."""
    sys.stderr.write(f"{line}\n")
    sys.stderr.flush()


@dataclass(frozen=True)
class SendOptions:
    rate_per_minute: int = TIERS[DEFAULT_TIER].rate_per_minute
    concurrency: int = TIERS[DEFAULT_TIER].concurrency
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    deadline: float | None = None  # seconds from the start of sending
    stop_grace: float = STOP_GRACE  # seconds in flight get after the deadline or a signal
    new_versions: tuple[str, ...] = ()
    order: SendOrder = SendOrder.due  # of new sends; replays always first
    check_receivers: bool = True  # a participant lookup before a receiver's first send
    refresh_receivers: bool = False  # look every receiver up again, however fresh
    validate: bool = False  # GoRoute's validation of each revision before its first send
    outbox: Path | None = None  # where the history marker lives; None: no marker
    # the outbox's subdirectories a recursive scan reads that hold markers (or turns) of
    # their own (``outbox_turns.marked_below``): read and written as the outbox's
    marked_below: tuple[Path, ...] = ()
    # the scan reads every directory under the outbox: the run holds a turn on them all,
    # and walks for ``marked_below`` again once it holds it (``runner.send``)
    recursive: bool = False
    trust_new_journal: bool = False  # send from a journal with no history without checking
    supplier: str | None = None  # only this supplier's invoices (scheme:id): a profile's sender
    skip_invoices: tuple[str, ...] = ()  # of that supplier, sent through another's account
    warn: Callable[[str], None] = field(default=_stderr, compare=False, repr=False)

    def marked(self) -> tuple[Path, ...]:
        """The directories whose markers the run reads and writes: the outbox first."""
        return () if self.outbox is None else (self.outbox, *self.marked_below)

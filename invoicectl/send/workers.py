"""A send as one of several workers on a PostgreSQL journal: claims, a lease, a shared budget.

A SQLite journal has one run at a time (its run lock) and needs none of this. On PostgreSQL
any number of ``invoicectl send`` processes, on any number of hosts, work the same journal:

- each registers as a worker with a lease in the server's clock, renewed by a heartbeat
  thread every lease / 3 (``journal.pg_workers.Heartbeat``); ``lease`` is 30 s, or
  ``INVOICECTL_WORKER_LEASE`` seconds;
- it claims its work a batch at a time (``next_batch``: its concurrency, or a sixteenth of
  what is left, at most 10 s of its rate limit): the plan (replays first, then new sends,
  as one run would take them), read and claimed in one write transaction, skipping what a
  live worker holds and taking over what a dead one held; the attempts a dead worker left
  unanswered are closed as unknown in that same transaction, so they are replayed under
  their key and bytes, and only while the key's 24-hour window is open (``plan``);
- every attempt row is written only if this worker still holds the claim and its lease
  (``pg_workers.check_claim``, in the attempt's transaction); a worker whose lease is lost
  (``lost``) starts no more requests;
- every process on the same API account (the key's fingerprint) takes its request slots from
  one budget in the database (``permits``), so the account sees at most its limit in any
  60 s however many workers run.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from invoicectl.errors import ConfigError
from invoicectl.journal.pg_workers import Heartbeat
from invoicectl.journal.records import TURN_WAIT, SendOrder
from invoicectl.lifecycle.plan import plan
from invoicectl.lifecycle.sending import close_unanswered

DEFAULT_LEASE = 30.0
# A claim takes this fraction of the plan when that is more than the run's concurrency. Each
# claim plans again, in its own transaction (every pending invoice, sorted): at
# ``concurrency`` a claim, a send's reads grew with the square of its work (2,000 invoices,
# 2.7 million rows read). A share of what is left keeps them in proportion (the plans add
# up to 16 times the work), and shrinks with the work, so no worker holds much of the end.
_SHARE_OF_PLAN = 16
# But never more than the rate limit lets it send in this many seconds: an operator's hold
# or abandon, and a scan's change, wait while a live worker holds the invoice (helper-74:
# 625 invoices a claim held for 12 minutes at 100 a minute). A slow send plans seldom
# anyway: at 100 a minute, a claim of 16 every 10 s.
_CLAIM_SECONDS = 10
_LEASE_VARIABLE = "INVOICECTL_WORKER_LEASE"


def lease_seconds(environ: dict[str, str] | None = None) -> float:
    """The lease length: ``INVOICECTL_WORKER_LEASE`` (seconds) or 30 s; a bad value is one
    line an operator can act on."""
    text = (os.environ if environ is None else environ).get(_LEASE_VARIABLE)
    if not text:
        return DEFAULT_LEASE
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0.5 <= value <= 3600:
        raise ConfigError(
            f"{_LEASE_VARIABLE}={text!r}: give the lease in seconds, between 0.5 and 3600"
        )
    return value


@contextmanager
def as_worker(journal: Any, settings: Any, options: Any, run_id: int) -> Iterator[Workers | None]:
    """This run as a worker of a PostgreSQL journal for the block; None for a SQLite one
    (its run lock makes the run the only one, and it takes the whole plan)."""
    if not hasattr(journal, "become_worker"):
        yield None
        return
    key = settings.api_key
    account = key.fingerprint if key is not None else "no key"
    most = max(1, options.rate_per_minute * _CLAIM_SECONDS // 60)
    with Workers(
        journal, run_id, order=options.order, account=account, lease=lease_seconds(), most=most
    ) as work:
        yield work


class Workers:
    """This process as a worker of the journal for one run; ``close()`` retires it."""

    def __init__(
        self, journal: Any, run_id: int, *, order: SendOrder, account: str, lease: float, most: int
    ) -> None:
        self.journal = journal
        self.order = order
        self.most = most  # the largest share of the plan a claim takes (``_CLAIM_SECONDS``)
        self.account = account
        self.worker_id = journal.become_worker(run_id, lease)
        self._waiting_since: float | None = None  # the first CheckUnderway's time
        # Lost, the run's connection is cut if it waits on a statement: the server stopped
        # answering, and the statement would wait for good.
        conn = journal.db.conn
        why = (
            f"this worker's lease was lost (its server answered nothing for {lease:g} s while "
            "a statement waited on it), so its connection was cut; what it held goes to the "
            "next send once the lease has run out"
        )
        self.heartbeat = Heartbeat(
            journal.path.connection_url(),
            self.worker_id,
            lease,
            stuck=lambda: conn.busy,
            on_stuck=lambda: conn.cut(why),
        ).start()

    @property
    def lost(self) -> bool:
        """The lease could not be renewed (the server away, the process paused past it):
        this worker must start no more requests; what it holds is another's to take."""
        return not self.heartbeat.alive

    def fill(self, queue: asyncio.Queue[tuple[str, bool]], limit: int) -> bool:
        """The next batch of claimed work into ``queue``; False when there is none left."""
        batch = self.next_batch(max(1, limit))
        for item in batch:
            queue.put_nowait(item)
        return bool(batch)

    def next_batch(self, limit: int) -> list[tuple[str, bool]]:
        """Up to ``limit`` (invoice ID, replay?), or a share of the plan up to ``most``
        (``_SHARE_OF_PLAN``) when that is more, now claimed by this worker, in the plan's
        order; empty when nothing is left that no live worker holds."""
        if self.lost:
            return []
        with self.journal.transaction():
            if self._waiting_since is not None and not self.journal.check_underway():
                self._waiting_since = None  # the check met has ended: a next one, anew
            close_unanswered(self.journal)  # a dead worker's requests: unknown, replayed
            planned = plan(self.journal, self.journal.clock(), self.order)
            candidates = [*planned.replays, *planned.pending]
            share = max(limit, min(len(candidates) // _SHARE_OF_PLAN, self.most))
            taken = self.journal.claim_invoices(candidates, share)
        replays = set(planned.replays)
        return [(invoice_id, invoice_id in replays) for invoice_id in taken]

    def may_wait_for_check(self) -> bool:
        """Whether a first send refused while another send's history check runs, or never
        ended (``CheckUnderway``), is asked again: for ``TURN_WAIT`` from the first refusal
        since a claim found no check underway (``next_batch``; a long run may meet several
        checks). Past it, the run leaves its first sends pending for the next (exit 75): a
        check whose host froze, or died with no send since to check again, waits no longer."""
        now = time.monotonic()
        self._waiting_since = self._waiting_since or now
        return now - self._waiting_since < TURN_WAIT

    def permits(self, interval: float, span: float, rate: int) -> float:
        """Seconds until this caller's slot in the account's shared budget."""
        return float(self.journal.reserve_slot(self.account, interval, span, rate))

    def close(self) -> None:
        """Claims given back at the run's end. If the server is away this fails: the lease
        then runs out, and the claims are taken over as a dead worker's."""
        self.heartbeat.stop()
        self.journal.retire_worker()

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

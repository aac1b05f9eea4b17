"""Several send workers on one PostgreSQL journal: leases, claims, and the shared rate budget.

Every statement here runs on the database server's clock (``clock_timestamp()``, as epoch
seconds): hosts' clocks differ, and a lease is only as good as the one clock every worker
compares it against. The tables (m014) are not in the chain: they say who works on what, not
what was sent (the attempts say that), and a lease renewed every few seconds would churn it.

Why a worker can never send an invoice another now holds (the races, in turn):

- **Claiming.** ``claim`` runs in a write transaction (``PgDatabase.atomic``: BEGIN, then the
  journal's one advisory write lock), so claimers take turns: two workers can never both see
  an invoice unclaimed and both take it. ``SELECT ... FOR UPDATE SKIP LOCKED`` would let them
  claim at once, but every other write (attempt rows, answers) takes the write lock anyway,
  so it would buy nothing and add a second locking rule to reason about.
- **A claim is alive** while its worker's ``lease_until`` is ahead of the server's clock. A
  dead worker's claims are taken over by whoever claims next; its lease is never renewed
  again (``renew`` only extends a lease that has not run out), so a worker that was paused
  (SIGSTOP, a VM freeze) past its lease finds it lost when it wakes, and stops.
- **The guard** (``check_claim``): the transaction that writes an attempt row checks, under
  the write lock, that this worker holds the claim and its lease has not run out. A takeover
  is a write too, so it cannot slip between that check and the attempt's commit. If the lease
  runs out in the milliseconds between check and commit, the taker sees the attempt row (it
  commits first) and replays it under the same key and bytes: GoRoute answers a replay with
  the first transaction, never a second delivery.
- **Other writes** to an invoice another live worker holds (``check_not_held``: a lost worker
  settling, an operator's ``hold``, ``reconcile``) are refused (``InvoiceBusy``), never
  interleaved with that worker's send.
- **Unanswered attempts** of a live worker's run are in flight, not abandoned: only a dead
  worker's are closed as unknown (``live_runs``), and so replayed under their key.
"""

from __future__ import annotations

import math
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from invoicectl.errors import InvoiceBusy, JournalError
from invoicectl.journal.pg_connection import WRITE_LOCK, cut_socket, network_limits
from invoicectl.journal.records import LiveClaims

NOW = "extract(epoch from clock_timestamp())::float8"

# Attempts whose run belongs to a worker whose lease has not run out: in flight, not abandoned.
LIVE_RUN = (
    f"EXISTS (SELECT 1 FROM workers w WHERE w.run_id = attempts.run_id AND w.lease_until > {NOW})"
)


class ClaimLost(JournalError):
    """This worker's lease ran out, or another worker took the invoice over: nothing sent."""


def idle_limit_ms(lease: float) -> int:
    """How long a worker's session may sit idle inside a transaction (``become_worker``)."""
    return max(1, int(lease * 500))


def register(db: Any, run_id: int, lease: float) -> int:
    """A new worker row with a lease of ``lease`` seconds from the server's now."""
    with db.atomic():
        (worker_id,) = db.execute(
            f"INSERT INTO workers (host, pid, run_id, lease_until) VALUES (?, ?, ?, {NOW} + ?)"
            " RETURNING id",
            (socket.gethostname(), os.getpid(), run_id, lease),
        ).fetchone()
    return int(worker_id)


def renew(conn: Any, worker_id: int, lease: float) -> bool:
    """Extend the lease, under the write lock (so a renewal and a takeover take turns); False
    when it had already run out: its claims may have been taken, it is lost for good."""
    with conn.transaction():
        conn.execute(f"SELECT pg_advisory_xact_lock({WRITE_LOCK})")
        row = conn.execute(
            f"UPDATE workers SET lease_until = {NOW} + %s WHERE id = %s AND lease_until > {NOW}"
            " RETURNING id",
            (lease, worker_id),
        ).fetchone()
    return row is not None


def retire(db: Any, worker_id: int) -> None:
    """The worker's end: its claims given back and its row gone."""
    with db.atomic():
        db.execute("DELETE FROM claims WHERE worker_id = ?", (worker_id,))
        db.execute("DELETE FROM workers WHERE id = ?", (worker_id,))


def claim(db: Any, worker_id: int, candidates: list[str], limit: int) -> list[str]:
    """Up to ``limit`` of ``candidates`` (in their order) that no live worker holds, this
    one included, now claimed by ``worker_id``; a dead worker's claims are taken over. Called
    in the write transaction that read the candidates (their states cannot move meanwhile)."""
    if not candidates or limit < 1:
        return []
    import json

    rows = db.execute(
        "SELECT c.invoice_id FROM json_array_elements_text(CAST(? AS json))"
        " WITH ORDINALITY AS c(invoice_id, n) WHERE NOT EXISTS (SELECT 1 FROM claims k"
        f" JOIN workers w ON w.id = k.worker_id WHERE k.invoice_id = c.invoice_id"
        f" AND w.lease_until > {NOW}) ORDER BY c.n LIMIT ?",
        (json.dumps(candidates), limit),
    ).fetchall()
    taken = [invoice_id for (invoice_id,) in rows]
    if taken:
        db.execute(
            "INSERT INTO claims (invoice_id, worker_id)"
            " SELECT value, ? FROM json_array_elements_text(CAST(? AS json))"
            " ON CONFLICT (invoice_id) DO UPDATE SET worker_id = excluded.worker_id",
            (worker_id, json.dumps(taken)),
        )
    return taken


def check_claim(db: Any, worker_id: int, invoice_id: str) -> None:
    """The guard, inside the attempt's write transaction: ``ClaimLost`` unless this worker
    holds ``invoice_id`` and its lease has not run out."""
    row = db.execute(
        "SELECT 1 FROM claims c JOIN workers w ON w.id = c.worker_id"
        f" WHERE c.invoice_id = ? AND c.worker_id = ? AND w.lease_until > {NOW}",
        (invoice_id, worker_id),
    ).fetchone()
    if row is None:
        raise ClaimLost(
            f"invoice {invoice_id}: this worker's lease ran out or another worker took it"
            " over; no request was sent for it"
        )


def check_not_held(db: Any, worker_id: int | None, invoice_id: str) -> None:
    """``InvoiceBusy`` when a live worker other than ``worker_id`` holds ``invoice_id``."""
    row = db.execute(
        "SELECT w.host, w.pid FROM claims c JOIN workers w ON w.id = c.worker_id"
        " WHERE c.invoice_id = ? AND c.worker_id != COALESCE(CAST(? AS BIGINT), 0)"
        f" AND w.lease_until > {NOW}",
        (invoice_id, worker_id),
    ).fetchone()
    if row is not None:
        error = ClaimLost if worker_id is not None else InvoiceBusy
        raise error(
            f"invoice {invoice_id} is being sent by a worker on {row[0]} (pid {row[1]});"
            " nothing was changed. Try again when that send has finished"
        )


def claimed_elsewhere(db: Any, worker_id: int | None) -> LiveClaims | None:
    """The invoices still to send or replay that live workers other than ``worker_id`` hold,
    and who holds them: what a run, or ``status``, says of them instead of "waiting" (a
    worker sends them now). A worker killed a moment ago holds its claims until its lease
    runs out (its heartbeat renews it no more); None when no other worker holds any."""
    rows = db.execute(
        f"SELECT w.id, w.host, w.pid, w.lease_until - {NOW}, c.invoice_id FROM claims c"
        " JOIN workers w ON w.id = c.worker_id JOIN invoices i ON i.invoice_id = c.invoice_id"
        " WHERE c.worker_id != COALESCE(CAST(? AS BIGINT), 0) AND i.state IN (?, ?)"
        f" AND w.lease_until > {NOW} ORDER BY w.id",
        (worker_id, "pending", "unknown"),
    ).fetchall()
    if not rows:
        return None
    holders = {row[0]: (row[1], row[2], float(row[3])) for row in rows}
    who = ", ".join(f"pid {pid} on {host}" for host, pid, _left in list(holders.values())[:3])
    if len(holders) == 1:
        sending, stopped = "another worker, which sends them", "it has stopped, the next send"
        stopped += " takes them over"
    else:
        sending = f"{len(holders)} other workers, which send them"
        stopped = "one has stopped, the next send takes its claims over"
    longest = math.ceil(max(left for _host, _pid, left in holders.values()))
    said = (
        f"{len(rows)} claimed by {sending} ({who}); if {stopped} once its lease has run out "
        f"(in {longest} s at most)"
    )
    return LiveClaims(frozenset(str(row[4]) for row in rows), said)


def reserve_slot(db: Any, account: str, interval: float, span: float, rate: int) -> float:
    """A request slot of ``account``'s shared budget: seconds from now until it starts.

    Slots are handed out one ``interval`` (= ``span`` / ``rate``) apart on the server's
    clock, under the write lock, so however many processes ask, any ``rate`` + 1 consecutive
    slots lie at least ``span`` (the API's 60 s window plus the limiter's margin) apart. A
    request starts at its slot or later (``RateLimiter``; one that wakes too late asks
    again): no 60 s window at the server sees more than ``rate``, with jitter under the
    margin. A slot not used (the run stopped) is a request not made: safe, a little slower."""
    with db.atomic():
        (now,) = db.execute(f"SELECT {NOW}").fetchone()
        db.execute(
            "DELETE FROM rate_starts WHERE account = ? AND slot < ?", (account, now - 2 * span)
        )
        (last,) = db.execute(
            "SELECT max(slot) FROM rate_starts WHERE account = ?", (account,)
        ).fetchone()
        slot = now if last is None else max(now, float(last) + interval)
        # The sliding window itself, should the rate have changed between runs.
        row = db.execute(
            "SELECT slot FROM rate_starts WHERE account = ? ORDER BY slot DESC LIMIT 1 OFFSET ?",
            (account, rate - 1),
        ).fetchone()
        if row is not None:
            slot = max(slot, float(row[0]) + span)
        db.execute("INSERT INTO rate_starts (account, slot) VALUES (?, ?)", (account, slot))
    return max(0.0, float(slot) - float(now))


class Heartbeat:
    """Renews a worker's lease every ``lease / 3`` seconds from a thread with a connection of
    its own (the event loop may be busy; the lease must not depend on it). ``alive`` turns
    False for good when a renewal finds the lease run out, or when no renewal has succeeded
    for a whole lease (the server away): the worker then starts no more requests."""

    def __init__(
        self,
        url: str,
        worker_id: int,
        lease: float,
        stuck: Callable[[], bool] = lambda: False,
        on_stuck: Callable[[], None] = lambda: None,
    ) -> None:
        self._url = url
        self.worker_id = worker_id
        self.lease = lease
        self._renewed = self._answered = time.monotonic()  # renewed; the server last heard
        self._lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-heartbeat", daemon=True)
        self._stuck, self._on_stuck = stuck, on_stuck
        self._conn: Any = None
        self._watch = threading.Thread(target=self._watch_lease, name="lease-watch", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        self._watch.start()
        return self

    def _watch_lease(self) -> None:
        """Once the lease is lost and the server has answered nothing for a whole lease, this
        thread's own connection cut, and the worker's (``on_stuck``) when ``stuck`` says it
        waits on a statement at two looks in a row: a worker whose server stopped answering
        mid-statement (helper-98: a frozen proxy, packets dropped) waited in it for good, deaf
        to SIGTERM, its session holding the run lock that keeps ``scan`` out. A server that
        answers, if only to refuse a renewal that waited on the write lock, is no server
        gone (helper-100: a lock held past a lease had healthy workers cut, their answers
        unrecorded); a worker that is not stuck stops by itself (``alive``). Touches no
        network itself."""
        looks = 0
        while not self._stop.wait(self.lease / 6):
            if self.alive or time.monotonic() - self._answered <= self.lease:
                looks = 0
                continue
            cut_socket(self._conn)
            looks = looks + 1 if self._stuck() else 0
            if looks == 2:
                self._on_stuck()
                return

    @property
    def alive(self) -> bool:
        # Short of the lease by a margin: the server's clock may run ahead of ours a little.
        if time.monotonic() - self._renewed > self.lease * 0.9:
            self._lost = True
        return not self._lost

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.lease)

    def _run(self) -> None:
        import psycopg

        conn: Any = None
        while not self._stop.wait(self.lease / 3):
            started = time.monotonic()
            try:
                if conn is None or conn.closed:
                    conn = self._conn = psycopg.connect(
                        self._url, autocommit=True, connect_timeout=5, **network_limits(self._url)
                    )
                    limit = idle_limit_ms(self.lease)
                    conn.execute(f"SET idle_in_transaction_session_timeout = {limit}")
                    # A renewal waiting on a lock past a beat is no renewal: ``alive`` then
                    # says so in time, instead of the thread waiting for as long as it lasts.
                    conn.execute(f"SET lock_timeout = {max(1, int(self.lease * 1000 / 3))}")
                if self._lost:  # for good: the beat only tells whether the server answers
                    conn.execute("SELECT 1")
                elif renew(conn, self.worker_id, self.lease):
                    self._renewed = started
                else:
                    self._lost = True
                self._answered = time.monotonic()
            except psycopg.Error as error:
                if error.sqlstate is not None:  # the server's own refusal: it is there
                    self._answered = time.monotonic()
                if conn is not None:
                    conn.close()
                conn = None  # tried again next beat; ``alive`` says when it is too late
        if conn is not None:
            conn.close()

"""Sending: every pending invoice, paced under the limit, each step in the journal first.

``Sender.run()`` is the library call behind ``invoicectl send`` (after its scan). It

1. turns attempts a dead run left unanswered into ``unknown``;
2. applies the operator's ``--new-version`` decisions;
3. replays ``unknown`` invoices whose key window is open, then sends ``pending`` ones, with
   ``concurrency`` requests at most in flight and starts paced by the ``RateLimiter``;
4. stops taking work on a stop request (signal, deadline, refused credentials, outage); what
   is in flight finishes, or after a deadline or a signal is abandoned (``send.stopping``).

It never prints: progress goes to ``on_progress``, each wait about to start (pacing, a
Retry-After hold, a backoff) to ``on_wait`` (``goroute.limiter.Wait``); it returns the summary.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from collections.abc import Callable
from typing import Any

from invoicectl.defaults import OUTAGE_AFTER
from invoicectl.errors import StoredCopyDamaged
from invoicectl.goroute.client import GoRouteClient, build_send_body
from invoicectl.goroute.limiter import OnWait, RateLimiter
from invoicectl.goroute.outcomes import (
    Accepted,
    AuthRefused,
    Outcome,
    RateLimited,
    Transient,
    WrongEndpoint,
    proves_api,
    redirected,
)
from invoicectl.goroute.retry import call_with_retry
from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.pg_workers import ClaimLost
from invoicectl.journal.records import Invoice, InvoiceState
from invoicectl.lifecycle.decisions import new_version
from invoicectl.lifecycle.evidence import CHECK_POLL, CheckUnderway, FoundMeanwhile
from invoicectl.lifecycle.holds import hold, hold_damaged, hold_meanwhile
from invoicectl.lifecycle.plan import held_for_reconcile, plan
from invoicectl.lifecycle.sending import (
    WorkItem,
    abandon_attempt,
    begin_attempt,
    claim_key,
    key_window_open,
    record_answer,
    replay_problem,
    settle,
    settled_unanswered,
    withdraw_attempt,
)
from invoicectl.lifecycle.transitions import TransitionRefused, current
from invoicectl.send.answer_check import SeenTransactions
from invoicectl.send.commits import GroupCommits
from invoicectl.send.exit_codes import judge_exit
from invoicectl.send.options import SendOptions
from invoicectl.send.pacing import recent_starts
from invoicectl.send.receivers import ReceiverChecks
from invoicectl.send.stopping import Stopping
from invoicectl.send.summary import HeldApart, InvoiceResult, Progress, SendSummary
from invoicectl.send.validations import Validations
from invoicectl.send.worksource import WorkSource
from invoicectl.ubl.encoding import document_text
from invoicectl.ubl.errors import InvalidDocument


class _WindowClosed(Exception):
    """A replay's key window closed while it waited: it is held for reconcile instead."""


class Sender:
    def __init__(
        self,
        journal: JournalBackend,
        client: GoRouteClient,
        options: SendOptions,
        run_id: int,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = asyncio.sleep,
        rng: random.Random | None = None,
        on_start: Callable[[SendSummary], None] = lambda summary: None,
        on_progress: Progress = lambda result, summary: None,
        on_wait: OnWait | None = None,
        bind: Callable[[], None] = lambda: None,
        on_durable_attempt: Callable[[int], None] = lambda attempt_id: None,
        stopping: Stopping | None = None,
        work: WorkSource | None = None,
    ) -> None:
        self.journal = journal
        self.work = work
        self.commits = GroupCommits(journal)
        self.seen = SeenTransactions(journal.transaction_owner)
        self._bind: Callable[[], None] | None = bind
        self.client = client
        self.rng = rng
        self.options = options
        self.monotonic = monotonic
        self.on_start = on_start
        self.on_progress = on_progress
        self.on_wait = on_wait
        self.on_durable_attempt = on_durable_attempt
        permits = None if work is None else work.permits
        self.limiter = RateLimiter(
            options.rate_per_minute, clock=monotonic, sleep=sleep, on_wait=on_wait, permits=permits
        )
        self.receivers = (
            ReceiverChecks(
                journal,
                client.lookup_participant,
                self.limiter,
                options.policy,
                refresh=options.refresh_receivers,
                should_stop=self.should_stop,
                on_wrong_url=self._wrong_url,
                rng=rng,
            )
            if options.check_receivers
            else None
        )
        self.validations = (
            Validations(
                journal,
                client.validate_document,
                self.limiter,
                options.policy,
                should_stop=self.should_stop,
                on_wrong_url=self._wrong_url,
                rng=rng,
            )
            if options.validate
            else None
        )
        self.summary = SendSummary(run_id=run_id)
        self.stopping = stopping or Stopping(grace=options.stop_grace)
        self._started = 0.0
        self._unanswered_in_a_row = 0
        self.held = HeldApart()

    def request_stop(self, reason: str) -> None:
        """Take no new work, for ``reason`` (``send.stopping``: what becomes of those in flight)."""
        self.stopping.stop(reason)

    def _wrong_url(self, why: str) -> None:
        self.summary.endpoint_message = why
        self.request_stop("wrong_url")

    def should_stop(self) -> bool:
        deadline = self.options.deadline
        if deadline is not None and self.monotonic() - self._started >= deadline:
            self.request_stop("deadline")
        if self.work is not None and self.work.lost:  # another worker may take over its work
            self.request_stop("lease_lost")
        elif self.journal.run_lock_lost():  # another run may be starting beside this one
            self.request_stop("lock_lost")
        return self.stopping.stopped

    # ---- the run --------------------------------------------------------------------------

    async def run(self) -> SendSummary:
        self._started = self.monotonic()
        self.journal.savepoints_in_memory()  # the grouped commits' savepoints: no temp files
        # A run just ended still has requests in the API's window (a shared budget counts them).
        if self.work is None:
            self.limiter.prime(self._started - ago for ago in recent_starts(self.journal, 60.0))
        for invoice_id in self.options.new_versions:
            new_version(self.journal, invoice_id, self.summary.run_id)
        planned = plan(self.journal, self.journal.clock(), self.options.order)
        self.summary.held = held_for_reconcile(self.journal, planned)
        work = [(invoice_id, True) for invoice_id in planned.replays]
        work += [(invoice_id, False) for invoice_id in planned.pending]
        self.summary.planned = len(work)
        self.summary.replays = len(planned.replays)
        self.on_start(self.summary)

        queue: asyncio.Queue[tuple[str, bool]] = asyncio.Queue()
        if self.work is None:
            for item in work:
                queue.put_nowait(item)
        tasks = max(1, min(self.options.concurrency, len(work)))
        self.stopping.workers = [self.commits.writer(self._worker(queue)) for _ in range(tasks)]
        if self.stopping.stopped:  # a signal came before the first worker started
            for worker in self.stopping.workers:
                worker.cancel()
        loop, limit = asyncio.get_running_loop(), self.options.deadline
        deadline = None if limit is None else loop.call_later(limit, self.request_stop, "deadline")
        results = await asyncio.gather(*self.stopping.workers, return_exceptions=True)
        if deadline is not None:
            deadline.cancel()
        self.stopping.close()
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                raise result

        elapsed = self.monotonic() - self._started
        self.summary.ended(self.stopping, self.limiter, self.commits, elapsed)
        self.summary.journal_counts = self.journal.state_counts()
        self.summary.checked(self.receivers, self.validations, self.held)
        judge_exit(self.summary, self.journal)
        return self.summary

    async def _worker(self, queue: asyncio.Queue[tuple[str, bool]]) -> None:
        while not self.should_stop():
            try:
                invoice_id, replay = queue.get_nowait()
            except asyncio.QueueEmpty:
                if self.work is None or not self.work.fill(queue, self.options.concurrency):
                    return
                continue
            try:
                result = await self._send_one(invoice_id, replay)
            except (ClaimLost, TransitionRefused, FoundMeanwhile, CheckUnderway) as refused:
                if self.work is None:
                    raise  # one run holds the journal: a refusal is a bug, never data
                # Nothing sent (the guard): left to the plan, asked again, or held (evidence).
                if isinstance(refused, ClaimLost):
                    self.request_stop("lease_lost")
                elif isinstance(refused, CheckUnderway) and self.work.may_wait_for_check():
                    await self.limiter.sleep(CHECK_POLL)
                    queue.put_nowait((invoice_id, replay))
                elif isinstance(refused, FoundMeanwhile) and hold_meanwhile(self.journal, refused):
                    self.summary.found_meanwhile += (invoice_id,)
                    self.summary.held += (invoice_id,)
                continue
            except Exception:  # a journal write failed, say: no new work; the run ends with it
                self.request_stop("failed")
                raise
            if result is not None:
                self._report(result)

    async def _send_one(self, invoice_id: str, replay: bool) -> InvoiceResult | None:
        # The key and its bytes, checked against their sha256; nothing written before a request.
        item = claim_key(self.journal, invoice_id, replay=replay)
        # The invoice as claimed, then as each write leaves it: under the run's lock nothing
        # else writes it, and every write is conditional on the row's state and key (save).
        record = item.invoice or current(self.journal, invoice_id)
        if self.work and record.key_first_used_at is None and self.journal.check_underway():
            raise CheckUnderway(invoice_id)  # asked before a lookup, or a slot of the budget
        answered: Invoice | None = None
        try:
            body = self._body(item)
        except StoredCopyDamaged as damage:  # this invoice only: the rest go on
            if hold_damaged(self.journal, invoice_id, damage).done:
                self.held.damage.append(invoice_id)
            return None
        except InvalidDocument as problem:  # taken by an older invoicectl: kept, not sent
            refused = f"its stored bytes cannot be sent as they are: {problem.reason}"
            self._hold(invoice_id, refused, "validation", self.held.validation)
            return None
        # An invoice its receiver cannot take spends no request.
        receivers = None if replay else self.receivers
        if receivers is not None:
            reason = await receivers.problem(record)
            if self.should_stop():  # a lookup met a redirect, say: nothing sent
                return None
            if reason is not None:
                self._hold(invoice_id, reason, "receiver check", self.held.receiver)
                return None
        validations = None if replay else self.validations
        if validations is not None:
            reason = await validations.problem(record)
            if self.should_stop():
                return None
            if reason is not None:
                self._hold(invoice_id, reason, "validation", self.held.validation)
                return None
        body_sha256 = hashlib.sha256(body).hexdigest()
        if replay and (mismatch := replay_problem(self.journal, item, body_sha256)):
            self._hold(invoice_id, mismatch, "replay check", self.held.replay)
            return None
        requests = 0

        async def one_request() -> Outcome:
            nonlocal requests, record, answered
            task = asyncio.current_task()
            assert task is not None
            if not key_window_open(self.journal, item, record):
                raise _WindowClosed  # waits outlasted the margin: a replay now is unsafe
            (attempt_id, record), cancelled = await self.commits.durable(
                lambda: begin_attempt(self.journal, self.summary.run_id, item, body_sha256)
            )
            self.on_durable_attempt(attempt_id)
            # Stopped while its row was committed, or (several workers) its lease lost
            # meanwhile: another worker may be taking the invoice over, so nothing leaves.
            if cancelled or self.should_stop():
                withdraw_attempt(self.journal, attempt_id, self.stopping.abandoned_by)
                raise asyncio.CancelledError  # the request never left: the key can go back
            self.stopping.in_flight.add(task)  # from the request leaving to its answer
            requests += 1
            try:
                try:
                    answer = await self.client.send_document(item.key, body)
                    outcome = self.seen.checked(invoice_id, item.key, answer)
                except asyncio.CancelledError:  # abandoned: the row says so, the rest unknown
                    abandon_attempt(self.journal, attempt_id, self.stopping.abandoned_by)
                    self.summary.requests += 1
                    raise
                answered, cut = await self.commits.durable(
                    lambda: self._record(attempt_id, item, outcome, record)
                )
                if cut:  # cancelled while its answer was committed: the answer stands
                    if self.stopping.abandoned_by is None:
                        raise asyncio.CancelledError  # a cancel from outside the stop: honoured
                    task.uncancel()  # abandoned: the worker ends at its next should_stop()
            finally:
                self.stopping.in_flight.discard(task)
            self.summary.observed(outcome.duration, isinstance(outcome, RateLimited))
            if isinstance(outcome, Transient | RateLimited):
                self.summary.retrying.add(invoice_id)  # until its call_with_retry ends
            return outcome

        try:
            outcome = await call_with_retry(
                one_request,
                policy=self.options.policy,
                limiter=self.limiter,
                should_stop=self.should_stop,
                rng=self.rng,
                on_wait=self.on_wait,
            )
        except asyncio.CancelledError:
            # Unused key back, or unknown: then it counts as unanswered, to be replayed.
            if settle(self.journal, item, None) is InvoiceState.unknown:
                unanswered = current(self.journal, invoice_id)
                self._report(InvoiceResult.of(unanswered, item.key, replay, requests))
            raise
        except _WindowClosed:
            outcome = None
        finally:
            self.summary.retrying.discard(invoice_id)
        if isinstance(outcome, AuthRefused):
            self.summary.auth_message = outcome.message or f"HTTP {outcome.http_status}"
            self.request_stop("credentials")
        elif isinstance(outcome, WrongEndpoint):
            self._wrong_url(outcome.message)
        if outcome is None or isinstance(outcome, AuthRefused | WrongEndpoint):
            # Stopped before a try or between tries, or the answer refused it: no final one.
            unknown = settled_unanswered(self.journal, item, outcome, tried=requests > 0)
            return InvoiceResult.of(unknown, item.key, replay, requests) if unknown else None
        if isinstance(outcome, RateLimited):
            # The limit outlasted --max-wait: the run is incomplete, the next one continues.
            self.request_stop("rate_limit")
        if isinstance(outcome, Transient | RateLimited):
            settle(self.journal, item, outcome)  # final answers were settled already
        if redirected(outcome):  # every request meets it: the base URL is wrong
            self._wrong_url(outcome.reason)
        self._watch_for_outage(outcome)
        invoice = answered or current(self.journal, invoice_id)  # a final answer's own record
        if isinstance(outcome, Accepted):
            self.summary.accepted_after(item.ingested_at, self.journal.clock())
        return InvoiceResult.of(invoice, item.key, replay, requests)

    def _hold(self, invoice_id: str, reason: str, by: str, held: list[str]) -> None:
        """Keep ``invoice_id`` from being sent (``holds.hold``), in ``held`` if this run did."""
        if hold(self.journal, invoice_id, reason, by=by).done:
            held.append(invoice_id)

    def _report(self, result: InvoiceResult) -> None:
        self.summary.results.append(result)
        self.on_progress(result, self.summary)

    def _watch_for_outage(self, outcome: Outcome) -> None:
        """Invoices that each used up their retries in a row: GoRoute is down; stop, not wait."""
        if not isinstance(outcome, Transient):
            self._unanswered_in_a_row = 0
            return
        self._unanswered_in_a_row += 1
        if self._unanswered_in_a_row >= OUTAGE_AFTER:
            self.summary.outage_reason = outcome.reason
            self.request_stop("outage")

    def _record(
        self, attempt_id: int, item: WorkItem, outcome: Outcome, was: Invoice
    ) -> Invoice | None:
        """The answer; the journal bound to the base URL with the first answer from the API
        there, in the answer's own transaction, so no key it may have seen goes unbound."""
        answered = record_answer(self.journal, attempt_id, item, outcome, was)
        if self._bind is not None and proves_api(outcome):
            self._bind()
            self._bind = None
        return answered

    def _body(self, item: WorkItem) -> bytes:
        """The request body, built from the stored bytes the key carries, never the file."""
        document = document_text(self.journal.content(item.sha256))
        return build_send_body(
            document,
            item.receiver_scheme,
            item.receiver_id,
            {"invoice_id": item.invoice_id, "sha256": item.sha256},
        )

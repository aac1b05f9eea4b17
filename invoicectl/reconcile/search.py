"""Asking GoRoute: every GET a reconcile makes, and the transactions-list search.

``Lookups`` runs them all with bounded concurrency, paced by the rate limiter and retried like
``send``, and stops everything at the first 401/403 (``CredentialsRefused``). A send with an
id is looked up by that id. Unanswered sends have none, so the transactions list is paged
through once for all of them (``Paging``): following the cursor, de-duplicating by id, noticing
when the API repeats itself or ignores the cursor, and stopping at the horizon (the earliest
first attempt less ``LOOK_BACK``) only while the list is provably newest first. What it found
and how far it got are a ``Search`` and its ``SearchSummary`` (``search_result``). The client:
anything with GoRoute's two lookups (``TransactionReader``), ``GoRouteClient`` in production.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from invoicectl.errors import ConfigError, CredentialsRefused
from invoicectl.goroute.limiter import RateLimiter
from invoicectl.goroute.outcomes import (
    AuthRefused,
    Outcome,
    Rejected,
    Transient,
    WrongEndpoint,
    refused_if_redirected,
)
from invoicectl.goroute.retry import RetryPolicy, call_with_retry
from invoicectl.goroute.transactions import Found, Transaction, TransactionPage
from invoicectl.reconcile.delivery_list import DeliveryRows, list_budget, worth_listing
from invoicectl.reconcile.matching import compare, first_time
from invoicectl.reconcile.paging import Paging, identity
from invoicectl.reconcile.progress import LookupProgress, OnLookup
from invoicectl.reconcile.search_result import LOOK_BACK, Search, SearchSummary
from invoicectl.reconcile.subjects import Subject

# Lookups in a row with no answer before a reconcile asks no more, as a send stops.
OUTAGE_AFTER = 3
NOT_ASKED = f"not asked: {OUTAGE_AFTER} lookups in a row got no answer in this run"


class TransactionReader(Protocol):
    """The two lookups reconcile makes; ``GoRouteClient`` is the one that asks GoRoute."""

    async def get_transaction(self, transaction_id: str) -> Outcome: ...

    async def list_transactions(
        self, *, limit: int, cursor: str | None
    ) -> TransactionPage | Outcome: ...


@dataclass(frozen=True)
class _Page(Outcome):
    """A transactions page, wrapped so the retry policy treats it as a settled answer."""

    page: TransactionPage = field(default_factory=lambda: TransactionPage(()))


class Lookups:
    """Every GET a reconcile makes: bounded concurrency, paced and retried like ``send``."""

    def __init__(
        self,
        client: TransactionReader,
        limiter: RateLimiter,
        policy: RetryPolicy,
        concurrency: int,
        on_progress: OnLookup | None = None,
    ) -> None:
        self._client = client
        self._on_progress = on_progress
        self.checked = 0  # invoices whose lookups are done (LookupProgress)
        self.to_check = 0
        self._per_id: dict[str, int] = {}  # invoices per transaction id to GET
        self._counted: set[str] = set()
        self._limiter = limiter
        self._policy = policy
        self._concurrency = concurrency
        self.transactions: dict[str, Outcome | None] = {}
        self.search: Search | None = None
        self.requests = 0
        self.delivery_pages = 0  # list pages read for accepted invoices' delivery status
        self.answered_by_list = 0  # accepted invoices those pages answered (no GET)
        self._refused: AuthRefused | WrongEndpoint | None = None
        self._unanswered = 0  # lookups in a row that ended with no answer (an outage: stop)

    @property
    def search_summary(self) -> SearchSummary:
        return self.search.summary if self.search else SearchSummary()

    async def run(self, subjects: list[Subject], *, list_limit: int, max_list_pages: int) -> None:
        # Accepted invoices' delivery status comes from the list where it may (delivery_list):
        # from the unanswered search's pages, or pages of its own; their GETs wait for it.
        following = [s for s in subjects if s.side.state == "accepted" and s.get_id]
        listing = worth_listing(len(following), list_limit)
        later = {s.get_id for s in following if s.get_id} if listing else set()
        ids = sorted({s.get_id for s in subjects if s.get_id} - later)
        searched = [s for s in subjects if s.search]
        wanted = {s.get_id for s in following if s.get_id}
        rows = DeliveryRows(wanted, list_budget(len(wanted), list_limit))
        for subject in subjects:
            if subject.get_id:
                self._per_id[subject.get_id] = self._per_id.get(subject.get_id, 0) + 1
        self.to_check = sum(self._per_id.values()) + len(searched)
        jobs: list[Callable[[], Awaitable[None]]] = []
        if searched:
            # First: its pages follow one another, so it should not wait behind the GETs.
            feed = self._feeding(rows) if listing else None
            jobs.append(lambda: self._search(searched, list_limit, max_list_pages, feed))
        elif listing:
            jobs.append(lambda: self._refresh_from_list(rows, list_limit))
        jobs.extend(self._get_job(txn_id) for txn_id in ids)
        await self._run_bounded(jobs)
        if listing:
            self._answer_from_list(following, rows)
            rest = sorted(later - set(self.transactions))
            await self._run_bounded([self._get_job(txn_id) for txn_id in rest])
        self._raise_refused()

    async def fetch(self, ids: Iterable[str]) -> bool:
        """GET the transactions in ``ids`` not looked up yet; whether there were any."""
        wanted = sorted(set(ids) - set(self.transactions))
        for txn_id in wanted:
            self._per_id[txn_id] = self._per_id.get(txn_id, 0) + 1
        self.to_check += len(wanted)
        await self._run_bounded([self._get_job(txn_id) for txn_id in wanted])
        self._raise_refused()
        return bool(wanted)

    def _raise_refused(self) -> None:
        if isinstance(self._refused, WrongEndpoint):
            raise ConfigError(f"{self._refused.message}; reconcile changed nothing")
        if self._refused is not None:
            refused = self._refused
            code = f" {refused.code}" if refused.code else ""
            raise CredentialsRefused(
                f"GoRoute refused the API key (HTTP {refused.http_status}{code}: "
                f"{refused.message or 'no message'}); reconcile changed nothing. "
                "Check GOROUTE_API_KEY or --api-key-file"
            )

    async def _refresh_from_list(self, rows: DeliveryRows, limit: int) -> None:
        """The list's pages for accepted invoices alone (no unanswered search to share)."""
        cursor: str | None = None
        while self._refused is None:
            outcome = await self._retried(self._page_call(limit, cursor))
            if not isinstance(outcome, _Page):
                break  # what it did not show falls back to its GET
            cursor = rows.take(outcome.page)
            self._checked(rows.rows)
            if cursor is None:
                break

    def _feeding(self, rows: DeliveryRows) -> Callable[[TransactionPage], object]:
        """The unanswered search's pages, handed to ``rows`` and counted as they come."""

        def feed(page: TransactionPage) -> None:
            rows.see(page)
            self._checked(rows.rows)

        return feed

    def _checked(self, txn_ids: Iterable[str]) -> None:
        """These ids' invoices have their answer (a GET's, or a row the list showed; one the
        GET must confirm counts once). Tells the progress hook when the count moves."""
        before = self.checked
        for txn_id in txn_ids:
            if txn_id not in self._counted:
                self._counted.add(txn_id)
                self.checked += self._per_id.get(txn_id, 0)
        if self.checked != before:
            self._tell()

    def _tell(self) -> None:
        if self._on_progress is not None:
            self._on_progress(LookupProgress(self.checked, self.to_check, self.requests))

    def _answer_from_list(self, following: list[Subject], rows: DeliveryRows) -> None:
        self.delivery_pages = rows.pages
        for subject in following:
            if subject.get_id is None:
                continue
            txn = rows.trusted(subject.get_id, subject.side.sent_sha256, _this_invoice(subject))
            if txn is not None:
                self.transactions[subject.get_id] = Found(transaction=txn)
                self.answered_by_list += 1

    async def search_numbers(
        self,
        wanted: set[str],
        *,
        limit: int,
        max_pages: int,
        horizon: datetime | None,
        out_of_time: Callable[[], bool] = lambda: False,
        feed: Callable[[TransactionPage], object] | None = None,
    ) -> Search:
        """The list search on its own, for invoice numbers no journal attempt dates (a send's
        history check): back to ``horizon`` while newest first, at most ``max_pages``, and no
        further page once ``out_of_time()``; every page read handed to ``feed``. A 401/403 is
        the search's ``failure``."""
        paging = Paging(limit, max_pages, horizon, out_of_time)
        await self._search_list(wanted, limit, paging, feed)
        assert self.search is not None
        return self.search

    async def _run_bounded(self, jobs: list[Callable[[], Awaitable[None]]]) -> None:
        queue: Iterator[Callable[[], Awaitable[None]]] = iter(jobs)

        async def worker() -> None:
            for job in queue:  # one shared iterator: each job is taken exactly once
                if self._refused is not None:
                    return
                await job()

        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(min(self._concurrency, len(jobs))):
                    group.create_task(worker())
        except BaseExceptionGroup as group_error:  # a bug or a cancellation, not an answer
            # The first says it: another lookup woken before the group cancelled it (one
            # queued on the shared budget's lock) fails the same way, the journal gone.
            raise group_error.exceptions[0] from None

    @property
    def outage(self) -> bool:
        """``OUTAGE_AFTER`` lookups in a row got no answer, after their retries: the rest
        are not asked (each would wait out its own retries: 629 s for 13 against a server
        answering a byte a second), and are ``lookup_failed`` for the next run."""
        return self._unanswered >= OUTAGE_AFTER

    def _get_job(self, txn_id: str) -> Callable[[], Awaitable[None]]:
        async def job() -> None:
            if self.outage:
                self.transactions[txn_id] = Transient(reason=NOT_ASKED)
            else:
                call = self._client.get_transaction
                self.transactions[txn_id] = await self._retried(lambda: call(txn_id))
            self._checked((txn_id,))

        return job

    async def _retried(self, call: Callable[[], Awaitable[Outcome]]) -> Outcome | None:
        async def attempt() -> Outcome:
            self.requests += 1
            outcome = refused_if_redirected(await call())  # a redirect: the base URL is wrong
            if isinstance(outcome, AuthRefused | WrongEndpoint) and self._refused is None:
                self._refused = outcome
            self._tell()
            return outcome

        outcome = await call_with_retry(
            attempt,
            policy=self._policy,
            limiter=self._limiter,
            should_stop=lambda: self._refused is not None or self.outage,
            on_wait=self._limiter.on_wait,
        )
        self._unanswered = self._unanswered + 1 if isinstance(outcome, Transient) else 0
        return outcome

    def _page_call(self, limit: int, cursor: str | None) -> Callable[[], Awaitable[Outcome]]:
        async def call() -> Outcome:
            answer = await self._client.list_transactions(limit=limit, cursor=cursor)
            return _Page(page=answer) if isinstance(answer, TransactionPage) else answer

        return call

    async def _search(
        self,
        subjects: list[Subject],
        limit: int,
        max_pages: int,
        feed: Callable[[TransactionPage], object] | None = None,
    ) -> None:
        wanted = {s.invoice_id for s in subjects}
        paging = Paging(limit, max_pages, _search_horizon(subjects))
        await self._search_list(wanted, limit, paging, feed)
        self.checked += len(subjects)  # the search answers them all at once, at its end
        self._tell()

    async def _search_list(
        self,
        wanted: set[str],
        limit: int,
        paging: Paging,
        feed: Callable[[TransactionPage], object] | None = None,
    ) -> None:
        """Page through the transactions list, keeping the wanted numbers, each id once (and
        every page read handed to ``feed``)."""
        found: dict[str, dict[str, Transaction]] = {}
        cursor: str | None = None
        while True:
            outcome = await self._retried(self._page_call(limit, cursor))
            while _page_too_large(outcome, cursor, limit):  # a server with a smaller cap
                smaller = max(_SMALLEST_PAGE, limit // 2)
                paging.max_pages = paging.max_pages * limit // smaller  # as many transactions
                limit = smaller
                outcome = await self._retried(self._page_call(limit, cursor))
            if not isinstance(outcome, _Page):
                summary = _summary(paging, False, "the transactions list did not answer")
                self.search = Search(_frozen(found), summary, failure=outcome)
                return
            page = outcome.page
            if feed is not None:
                feed(page)
            for txn in paging.take(page):
                number = (txn.invoice_number or "").strip()
                if number in wanted:
                    found.setdefault(number, {})[identity(txn)] = txn
            stop = paging.why_stop(page)
            if stop is not None:
                self.search = Search(_frozen(found), _summary(paging, *stop))
                return
            cursor = page.next_cursor
            assert cursor is not None  # why_stop stops when there is none


# The page size a first page refused as invalid (400) is asked for again with, halving, down to.
_SMALLEST_PAGE = 10


def _page_too_large(outcome: Outcome | None, cursor: str | None, limit: int) -> bool:
    """A first page refused with 400 (GoRoute documents no largest ``limit``; a server may
    take 50 and refuse 100), while a smaller page can still be asked for."""
    refused = isinstance(outcome, Rejected) and outcome.http_status == 400
    return refused and cursor is None and limit > _SMALLEST_PAGE


def _this_invoice(subject: Subject) -> Callable[[Transaction], bool]:
    return lambda txn: not compare(subject.invoice_id, subject.side, txn)


def _search_horizon(subjects: list[Subject]) -> datetime | None:
    """The oldest a counted transaction can be: the earliest first attempt, less LOOK_BACK."""
    times = [first_time(s.side) for s in subjects]
    if not times or any(t is None for t in times):
        return None
    return min(t for t in times if t is not None) - LOOK_BACK


def _summary(paging: Paging, complete: bool, note: str) -> SearchSummary:
    return SearchSummary(paging.pages, len(paging.ids), complete, note, paging.reached)


def _frozen(found: dict[str, dict[str, Transaction]]) -> dict[str, tuple[Transaction, ...]]:
    return {number: tuple(txns.values()) for number, txns in found.items()}

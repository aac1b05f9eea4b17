"""Reconcile: what really happened to every refused, unanswered or changed send, and what next.

``reconcile()`` reads the journal, asks GoRoute (GET requests only, through the same rate
limiter and retry policy as ``send``), and returns a ``ReconcileReport``: one ``Case`` per
invoice that needs a look, each with a ``Verdict``, both sides of the story (what the journal
tried to send, what the API holds) and the exact next step. It never sends a document, never
prints, never exits.

=================================  =================================  ======  ============  ====
verdict                            when                               person  --apply       exit
=================================  =================================  ======  ============  ====
already_sent                       key_reused; the existing           no      adopt it      4/0*
                                   transaction is this invoice
sent_then_failed                   key_reused or unknown; this        yes     nothing       4
                                   invoice's transaction ``failed``
different_document                 key_reused; the transaction        yes     nothing       4
                                   carries another invoice/receiver
not_found                          key_reused or accepted: GoRoute    yes     nothing       4
                                   does not know the transaction id
in_progress                        key_reused; this invoice's         no      nothing       75
                                   transaction is still on its way
unknown_found                      unknown; exactly one transaction   no      adopt it      4/0*
                                   matches (number and receiver)
unknown_ambiguous                  unknown; several transactions      yes     nothing       4
                                   match: already sent more than once
unknown_sent_earlier               unknown; the only match was        yes     nothing       4
                                   created before the first attempt:
                                   something else sent this invoice
unknown_not_found_window_open      unknown; no match, the key's       no      nothing       75
                                   window is open: ``send`` replays
unknown_not_found_window_closed    unknown; no match in a complete    yes     nothing       4
                                   search, window closed: a resend
                                   could duplicate it
unknown_search_incomplete          unknown; no match, but the search  yes     nothing       4
                                   did not reach back far enough,
                                   window closed
amended                            the file changed after its key     yes     nothing       4
                                   carried other content
delivered                          accepted; delivery now final       no      (recorded)    0
delivery_failed                    accepted; delivery failed          yes     (recorded)    4
delivery_pending                   accepted; delivery still on its    no      (recorded)    0
                                   way
needs_decision                     rejected with 409 (conflict)       yes     nothing       4
lookup_failed                      the API did not answer after       no**    nothing       75
                                   retries (5xx, timeouts, 429s)
=================================  =================================  ======  ============  ====

\\* 4 until ``--apply`` adopts the transaction, 0 once it has. \\*\\* yes, exit 4, when the API
refused the lookup itself (a 4xx other than 401/403/404).

The key's window is ``send``'s (``attempts.window_open``): 24 hours less ``REPLAY_MARGIN``, so
reconcile never calls a window open that ``send`` would hold. A transaction is this invoice's
only if its number and receiver match, its content hash (``metadata.sha256``, when GoRoute
gives one back) is the one the key carried, and, for an unanswered send, it was created after
the key's first attempt (less ``CLOCK_SLACK``). The list search looks ``LOOK_BACK`` further back
for earlier sends of the same invoice; older transactions are never counted, whatever the page
size, so the verdict does not depend on how the list happens to be paged.

Journal writes: ``--apply`` adopts (state ``accepted``, the transaction id, its status), one
SQLite transaction and one event row per invoice, and only if the invoice is still in the
state and under the key it was judged in. Delivery status of ``accepted`` invoices is always
recorded (``remote_status``, ``remote_checked_at``, an event when it changes), with or without
``--apply``: it is a fact about a transaction the journal already owns, not a decision. All
lookups finish before anything is written, so a 401/403 (``CredentialsRefused``) changes
nothing.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from invoicectl.attempts import KEY_WINDOW, REPLAY_MARGIN, window_open
from invoicectl.client import Found as FoundTransaction
from invoicectl.client import GoRouteClient, NotFound, Transaction, TransactionPage
from invoicectl.errors import CredentialsRefused, ExitCode, worst
from invoicectl.journal import Journal
from invoicectl.limiter import RateLimiter
from invoicectl.outcomes import AuthRefused, Outcome, RateLimited, Rejected, Transient
from invoicectl.retry import RetryPolicy, call_with_retry

# A transaction can look a little older than the first attempt that created it when the two
# clocks disagree. Anything older than this before the first attempt was not created by it.
CLOCK_SLACK = timedelta(minutes=10)
# How far before an unanswered send's first attempt the list search looks for an earlier send
# of the same invoice (found: a person decides). Older transactions are never counted.
LOOK_BACK = timedelta(days=7)
IN_PROGRESS_STATUSES = frozenset({"pending", "processing", "sending"})
CONFLICT = 409

Window = tuple[bool | None, str | None]  # (still open, closes at)


def utc_now() -> datetime:
    return datetime.now(UTC)


class Verdict(StrEnum):
    already_sent = "already_sent"
    sent_then_failed = "sent_then_failed"
    different_document = "different_document"
    not_found = "not_found"
    in_progress = "in_progress"
    unknown_found = "unknown_found"
    unknown_ambiguous = "unknown_ambiguous"
    unknown_sent_earlier = "unknown_sent_earlier"
    unknown_not_found_window_open = "unknown_not_found_window_open"
    unknown_not_found_window_closed = "unknown_not_found_window_closed"
    unknown_search_incomplete = "unknown_search_incomplete"
    amended = "amended"
    delivered = "delivered"
    delivery_failed = "delivery_failed"
    delivery_pending = "delivery_pending"
    needs_decision = "needs_decision"
    lookup_failed = "lookup_failed"


@dataclass(frozen=True)
class Guidance:
    """What a verdict means for the operator: a title, who acts, and the group's next step."""

    title: str
    needs_person: bool
    next_step: str
    exit_code: ExitCode
    adoptable: bool = False


GUIDANCE: Mapping[Verdict, Guidance] = {
    Verdict.already_sent: Guidance(
        "already sent",
        False,
        "`invoicectl reconcile --apply` adopts the existing transaction; nothing to resend",
        ExitCode.NEEDS_RECONCILE,
        adoptable=True,
    ),
    Verdict.sent_then_failed: Guidance(
        "sent, then failed",
        True,
        "delivery failed; send it again under a new key: `invoicectl send DIR --new-version ID`",
        ExitCode.NEEDS_RECONCILE,
    ),
    Verdict.different_document: Guidance(
        "different document",
        True,
        "investigate: the key carried another document (key collision); nothing was sent "
        "for this invoice under it",
        ExitCode.NEEDS_RECONCILE,
    ),
    Verdict.not_found: Guidance(
        "not found",
        True,
        "investigate: GoRoute does not know the transaction id; ask GoRoute support",
        ExitCode.NEEDS_RECONCILE,
    ),
    Verdict.in_progress: Guidance(
        "still in progress",
        False,
        "wait, then run `invoicectl reconcile` again",
        ExitCode.INCOMPLETE,
    ),
    Verdict.unknown_found: Guidance(
        "unanswered, found",
        False,
        "`invoicectl reconcile --apply` adopts the transaction found; nothing to resend",
        ExitCode.NEEDS_RECONCILE,
        adoptable=True,
    ),
    Verdict.unknown_ambiguous: Guidance(
        "unanswered, found more than once",
        True,
        "investigate: several transactions carry this invoice number and receiver "
        "(already delivered more than once?)",
        ExitCode.NEEDS_RECONCILE,
    ),
    Verdict.unknown_sent_earlier: Guidance(
        "unanswered, found only an earlier send",
        True,
        "investigate: GoRoute holds this invoice number for this receiver from before this "
        "journal's first attempt (sent by something else, or earlier); this journal's own send "
        "was not found. Do not send it again until you know the customer does not have it",
        ExitCode.NEEDS_RECONCILE,
    ),
    Verdict.unknown_not_found_window_open: Guidance(
        "unanswered, not found, window open",
        False,
        "`invoicectl send DIR` replays it under the same key, safe until the window closes",
        ExitCode.INCOMPLETE,
    ),
    Verdict.unknown_not_found_window_closed: Guidance(
        "unanswered, not found, window closed",
        True,
        "confirm with GoRoute that it was never delivered (a resend now could deliver a "
        "duplicate), then `invoicectl send DIR --new-version ID`",
        ExitCode.NEEDS_RECONCILE,
    ),
    Verdict.unknown_search_incomplete: Guidance(
        "unanswered, not found in an incomplete search, window closed",
        True,
        "the transactions list could not be searched far enough back: ask GoRoute whether it "
        "was delivered (a resend now could deliver a duplicate); if not, "
        "`invoicectl send DIR --new-version ID`",
        ExitCode.NEEDS_RECONCILE,
    ),
    Verdict.amended: Guidance(
        "amended",
        True,
        "either restore the file to the content sent and run `invoicectl scan DIR`, "
        "or send the new content under a new key: `invoicectl send DIR --new-version ID`",
        ExitCode.NEEDS_RECONCILE,
    ),
    Verdict.delivered: Guidance("delivered", False, "nothing: delivered", ExitCode.OK),
    Verdict.delivery_failed: Guidance(
        "delivery failed",
        True,
        "find out why with GoRoute; to send it again: `invoicectl send DIR --new-version ID`",
        ExitCode.NEEDS_RECONCILE,
    ),
    Verdict.delivery_pending: Guidance(
        "delivery in progress",
        False,
        "nothing yet; a later `invoicectl reconcile` follows it",
        ExitCode.OK,
    ),
    Verdict.needs_decision: Guidance(
        "needs a decision (409)",
        True,
        "ask GoRoute whether it was already delivered; "
        "if not, `invoicectl send DIR --new-version ID`",
        ExitCode.NEEDS_RECONCILE,
    ),
    Verdict.lookup_failed: Guidance(
        "lookup failed",
        False,
        "outcome unknown: the API did not answer; run `invoicectl reconcile` again later",
        ExitCode.INCOMPLETE,
    ),
}

# The order groups appear in: what needs a person first, what is fine last.
VERDICT_ORDER: tuple[Verdict, ...] = (
    Verdict.different_document,
    Verdict.not_found,
    Verdict.sent_then_failed,
    Verdict.unknown_ambiguous,
    Verdict.unknown_sent_earlier,
    Verdict.unknown_not_found_window_closed,
    Verdict.unknown_search_incomplete,
    Verdict.amended,
    Verdict.delivery_failed,
    Verdict.needs_decision,
    Verdict.lookup_failed,
    Verdict.already_sent,
    Verdict.unknown_found,
    Verdict.in_progress,
    Verdict.unknown_not_found_window_open,
    Verdict.delivery_pending,
    Verdict.delivered,
)


@dataclass(frozen=True)
class JournalSide:
    """What the journal holds and tried to send."""

    state: str
    document_type: str
    receiver: str | None
    idempotency_key: str | None = None
    sent_sha256: str | None = None  # the content the key carries
    current_sha256: str | None = None  # the content on disk now
    sent_revision: int | None = None  # 1-based, among this invoice's revisions
    current_revision: int | None = None
    first_attempt_at: str | None = None  # when the key first carried a request
    last_attempt_at: str | None = None
    last_http_status: int | None = None
    key_first_used_at: str | None = None
    transaction_id: str | None = None
    existing_transaction_id: str | None = None
    remote_status: str | None = None
    state_before_amend: str | None = None


@dataclass(frozen=True)
class ApiSide:
    """What GoRoute holds for the transaction the verdict is about."""

    transaction_id: str | None
    invoice_number: str | None = None
    receiver: str | None = None
    document_type: str | None = None
    status: str | None = None
    created_at: str | None = None
    delivered_at: str | None = None

    @classmethod
    def of(cls, txn: Transaction, fallback_id: str | None = None) -> ApiSide:
        return cls(
            transaction_id=txn.transaction_id or fallback_id,
            invoice_number=txn.invoice_number,
            receiver=txn.receiver or txn.receiver_id,
            document_type=txn.document_type,
            status=txn.status,
            created_at=txn.created_at,
            delivered_at=txn.delivered_at,
        )


@dataclass(frozen=True)
class Case:
    invoice_id: str
    verdict: Verdict
    needs_person: bool
    action: str  # the exact next command or step for this invoice
    journal: JournalSide
    api: ApiSide | None = None
    window_open: bool | None = None  # the key's 24 h window, where it matters
    window_closes_at: str | None = None
    detail: str = ""
    applied: bool = False  # --apply changed the journal for this case
    exit_code: ExitCode = ExitCode.OK

    @property
    def state(self) -> str:
        return self.journal.state


@dataclass(frozen=True)
class SearchSummary:
    """How far the transactions-list search went (for unanswered sends)."""

    pages: int = 0
    transactions: int = 0
    complete: bool = True
    note: str = ""


@dataclass(frozen=True)
class ReconcileReport:
    cases: tuple[Case, ...]
    applied: tuple[str, ...]  # invoice ids --apply changed
    recorded: tuple[str, ...]  # invoice ids whose delivery status was recorded
    exit_code: ExitCode
    apply: bool
    checked_at: str
    requests: int = 0
    search: SearchSummary = field(default_factory=SearchSummary)

    @property
    def counts(self) -> dict[Verdict, int]:
        """Cases per verdict, in ``VERDICT_ORDER``, verdicts without cases left out."""
        present = [case.verdict for case in self.cases]
        return {verdict: present.count(verdict) for verdict in VERDICT_ORDER if verdict in present}

    @property
    def needs_person(self) -> int:
        return sum(case.needs_person for case in self.cases)


async def reconcile(
    journal: Journal,
    client: GoRouteClient,
    *,
    limiter: RateLimiter,
    policy: RetryPolicy,
    apply: bool = False,
    now: Callable[[], datetime] = utc_now,
    list_limit: int = 100,
    max_list_pages: int = 50,
    concurrency: int = 10,
    check_delivery: bool = True,
    run_id: int | None = None,
) -> ReconcileReport:
    """Judge every invoice that needs a look; with ``apply``, adopt the unambiguous ones.

    Raises ``CredentialsRefused`` (exit 5) on a 401/403, before anything is written.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    subjects = _subjects(journal, check_delivery)
    lookups = _Lookups(client, limiter, policy, concurrency)
    await lookups.run(subjects, list_limit=list_limit, max_list_pages=max_list_pages)
    moment = now()
    cases = [_judge(subject, lookups, moment) for subject in subjects]
    checked_at = moment.isoformat()
    cases, applied, recorded = _write(journal, cases, apply, checked_at, run_id)
    ordered = tuple(sorted(cases, key=lambda c: (VERDICT_ORDER.index(c.verdict), c.invoice_id)))
    return ReconcileReport(
        cases=ordered,
        applied=tuple(applied),
        recorded=tuple(recorded),
        exit_code=worst(*(case.exit_code for case in ordered)),
        apply=apply,
        checked_at=checked_at,
        requests=lookups.requests,
        search=lookups.search_summary,
    )


# ---- what to look at ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Subject:
    invoice_id: str
    side: JournalSide
    # What to ask: GET this id, search the list, or nothing (amended, 409, recorded failure).
    get_id: str | None = None
    search: bool = False


def _subjects(journal: Journal, check_delivery: bool) -> list[_Subject]:
    subjects: list[_Subject] = []
    for row in journal.invoices("key_reused"):
        side = _journal_side(journal, row)
        existing = row["existing_transaction_id"]
        subjects.append(_Subject(row["invoice_id"], side, get_id=existing, search=not existing))
    for row in journal.invoices("unknown"):
        subjects.append(_Subject(row["invoice_id"], _journal_side(journal, row), search=True))
    for row in journal.invoices("amended"):
        subjects.append(_Subject(row["invoice_id"], _journal_side(journal, row)))
    for row in journal.invoices("rejected"):
        side = _journal_side(journal, row)
        if side.last_http_status == CONFLICT:
            subjects.append(_Subject(row["invoice_id"], side))
    if check_delivery:
        for row in journal.invoices("accepted"):
            status, txn_id = row["remote_status"], row["transaction_id"]
            if status == "delivered" or not txn_id:
                continue
            side = _journal_side(journal, row)
            get_id = None if status == "failed" else txn_id
            subjects.append(_Subject(row["invoice_id"], side, get_id=get_id))
    return subjects


def _journal_side(journal: Journal, row: sqlite3.Row) -> JournalSide:
    invoice_id, key = row["invoice_id"], row["idempotency_key"]
    shas = [revision["sha256"] for revision in journal.revisions(invoice_id)]
    attempts = [
        a for a in journal.attempts(invoice_id) if key is None or a["idempotency_key"] == key
    ]
    receiver = (
        f"{row['receiver_scheme']}:{row['receiver_id']}"
        if row["receiver_scheme"] and row["receiver_id"]
        else row["receiver_id"]
    )
    return JournalSide(
        state=row["state"],
        document_type=row["document_type"],
        receiver=receiver,
        idempotency_key=key,
        sent_sha256=row["key_sha256"],
        current_sha256=row["current_sha256"],
        sent_revision=_position(shas, row["key_sha256"]),
        current_revision=_position(shas, row["current_sha256"]),
        first_attempt_at=attempts[0]["started_at"] if attempts else None,
        last_attempt_at=attempts[-1]["started_at"] if attempts else None,
        last_http_status=attempts[-1]["http_status"] if attempts else None,
        key_first_used_at=row["key_first_used_at"],
        transaction_id=row["transaction_id"],
        existing_transaction_id=row["existing_transaction_id"],
        remote_status=row["remote_status"],
        state_before_amend=row["state_before_amend"],
    )


def _position(shas: list[str], sha: str | None) -> int | None:
    return shas.index(sha) + 1 if sha in shas else None


# ---- asking GoRoute ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Page(Outcome):
    """A transactions page, wrapped so the retry policy treats it as a settled answer."""

    page: TransactionPage = field(default_factory=lambda: TransactionPage(()))


@dataclass(frozen=True)
class _Search:
    by_number: Mapping[str, tuple[Transaction, ...]]
    summary: SearchSummary
    failure: Outcome | None = None


class _Lookups:
    """Every GET a reconcile makes: bounded concurrency, paced and retried like ``send``."""

    def __init__(
        self, client: GoRouteClient, limiter: RateLimiter, policy: RetryPolicy, concurrency: int
    ) -> None:
        self._client = client
        self._limiter = limiter
        self._policy = policy
        self._concurrency = concurrency
        self.transactions: dict[str, Outcome | None] = {}
        self.search: _Search | None = None
        self.requests = 0
        self._refused: AuthRefused | None = None

    @property
    def search_summary(self) -> SearchSummary:
        return self.search.summary if self.search else SearchSummary(complete=True)

    async def run(self, subjects: list[_Subject], *, list_limit: int, max_list_pages: int) -> None:
        ids = sorted({s.get_id for s in subjects if s.get_id})
        searched = [s for s in subjects if s.search]
        jobs: list[Callable[[], Awaitable[None]]] = []
        if searched:
            # First: its pages follow one another, so it should not wait behind the GETs.
            jobs.append(lambda: self._search(searched, list_limit, max_list_pages))
        jobs.extend(self._get_job(txn_id) for txn_id in ids)
        await self._run_bounded(jobs)
        if self._refused is not None:
            refused = self._refused
            code = f" {refused.code}" if refused.code else ""
            raise CredentialsRefused(
                f"GoRoute refused the API key (HTTP {refused.http_status}{code}: "
                f"{refused.message or 'no message'}); reconcile changed nothing. "
                "Check GOROUTE_API_KEY or --api-key-file"
            )

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
            if len(group_error.exceptions) == 1:
                raise group_error.exceptions[0] from None
            raise

    def _get_job(self, txn_id: str) -> Callable[[], Awaitable[None]]:
        async def job() -> None:
            self.transactions[txn_id] = await self._retried(
                lambda: self._client.get_transaction(txn_id)
            )

        return job

    async def _retried(self, call: Callable[[], Awaitable[Outcome]]) -> Outcome | None:
        async def attempt() -> Outcome:
            self.requests += 1
            outcome = await call()
            if isinstance(outcome, AuthRefused) and self._refused is None:
                self._refused = outcome
            return outcome

        return await call_with_retry(
            attempt,
            policy=self._policy,
            limiter=self._limiter,
            should_stop=lambda: self._refused is not None,
        )

    def _page_call(self, limit: int, cursor: str | None) -> Callable[[], Awaitable[Outcome]]:
        async def call() -> Outcome:
            answer = await self._client.list_transactions(limit=limit, cursor=cursor)
            return _Page(page=answer) if isinstance(answer, TransactionPage) else answer

        return call

    async def _search(self, subjects: list[_Subject], limit: int, max_pages: int) -> None:
        """Page through the transactions list, keeping the wanted numbers, each id once."""
        wanted = {s.invoice_id for s in subjects}
        paging = _Paging(limit, max_pages, _search_horizon(subjects))
        found: dict[str, dict[str, Transaction]] = {}
        cursor: str | None = None
        while True:
            outcome = await self._retried(self._page_call(limit, cursor))
            if not isinstance(outcome, _Page):
                summary = paging.summary(False, "the transactions list did not answer")
                self.search = _Search(_frozen(found), summary, failure=outcome)
                return
            page = outcome.page
            for txn in paging.take(page):
                number = (txn.invoice_number or "").strip()
                if number in wanted:
                    found.setdefault(number, {})[_identity(txn)] = txn
            stop = paging.why_stop(page)
            if stop is not None:
                self.search = _Search(_frozen(found), paging.summary(*stop))
                return
            cursor = page.next_cursor
            assert cursor is not None  # why_stop stops when there is none


class _Paging:
    """Where the list search stands: pages, the ids seen, the cursors given, the order seen.

    The stop at the horizon assumes newest first, which nothing documents: it is taken only
    while every ``created_at`` seen so far (within and across pages) is dated and
    non-increasing. Otherwise the search pages on to the end or to its page bound.
    """

    def __init__(self, limit: int, max_pages: int, horizon: datetime | None) -> None:
        self.limit = limit
        self.max_pages = max_pages
        self.horizon = horizon
        self.pages = 0
        self.fresh = 0  # new transactions on the last page
        self.ids: set[str] = set()
        self.cursors: set[str] = set()
        self.newest_first = True
        self.oldest: datetime | None = None  # the last created_at seen, while newest first

    def take(self, page: TransactionPage) -> list[Transaction]:
        """The page's transactions not seen before; notes the page and its order."""
        self.pages += 1
        fresh: list[Transaction] = []
        for txn in page.transactions:
            identity = _identity(txn)
            if identity not in self.ids:
                self.ids.add(identity)
                fresh.append(txn)
            created = _parse_time(txn.created_at)
            if created is None or (self.oldest is not None and created > self.oldest):
                self.newest_first = False
            self.oldest = created
        self.fresh = len(fresh)
        return fresh

    def why_stop(self, page: TransactionPage) -> tuple[bool, str] | None:
        """(complete, note) when the search should stop after this page, else None."""
        if not page.transactions:
            return True, "searched every transaction"
        if not self.fresh:
            return False, (
                "the API answered with transactions already seen (it may ignore the cursor); "
                "stopped paging"
            )
        horizon = self.horizon
        if horizon is not None and self.newest_first and self.oldest and self.oldest < horizon:
            return True, f"searched back to {horizon.isoformat()}, newest first"
        if not page.has_more:
            if len(page.transactions) >= self.limit and page.next_cursor is None:
                # No has_more, no cursor: a list that does not page. A full page says nothing
                # about what lies beyond it.
                return False, "full page and no cursor: older transactions not searched"
            return True, "searched every transaction"
        if page.next_cursor is None:
            return False, "the API says there are more transactions but gives no cursor to them"
        if page.next_cursor in self.cursors:
            return False, "the API returned a cursor it had already given; stopped paging"
        if self.pages >= self.max_pages:
            return False, f"stopped after {self.pages} pages; older transactions were not searched"
        self.cursors.add(page.next_cursor)
        return None

    def summary(self, complete: bool, note: str) -> SearchSummary:
        return SearchSummary(self.pages, len(self.ids), complete, note)


def _identity(txn: Transaction) -> str:
    """A transaction's id; a row without one is known by its whole content."""
    return txn.transaction_id or repr(sorted(txn.raw.items()))


def _search_horizon(subjects: list[_Subject]) -> datetime | None:
    """The oldest a counted transaction can be: the earliest first attempt, less LOOK_BACK."""
    times = [_first_time(s.side) for s in subjects]
    if not times or any(t is None for t in times):
        return None
    return min(t for t in times if t is not None) - LOOK_BACK


def _first_time(side: JournalSide) -> datetime | None:
    return _parse_time(side.key_first_used_at or side.first_attempt_at)


def _frozen(found: dict[str, dict[str, Transaction]]) -> dict[str, tuple[Transaction, ...]]:
    return {number: tuple(txns.values()) for number, txns in found.items()}


# ---- verdicts (pure) ----------------------------------------------------------------------


def _judge(subject: _Subject, lookups: _Lookups, now: datetime) -> Case:
    side = subject.side
    if side.state == "amended":
        return _amended(subject.invoice_id, side)
    if side.state == "rejected":
        return _conflict(subject.invoice_id, side)
    if side.state == "accepted":
        if subject.get_id is None:
            return _recorded_failure(subject.invoice_id, side)
        return _delivery(subject.invoice_id, side, lookups.transactions.get(subject.get_id))
    if subject.get_id is not None:
        return _key_reused(
            subject.invoice_id, side, subject.get_id, lookups.transactions.get(subject.get_id)
        )
    return _searched(subject.invoice_id, side, lookups.search, now)


def _case(
    invoice_id: str,
    verdict: Verdict,
    side: JournalSide,
    *,
    action: str | None = None,
    needs_person: bool | None = None,
    api: ApiSide | None = None,
    detail: str = "",
    window: Window = (None, None),
) -> Case:
    guidance = GUIDANCE[verdict]
    person = guidance.needs_person if needs_person is None else needs_person
    exit_code = ExitCode.NEEDS_RECONCILE if person else guidance.exit_code
    step = action if action is not None else guidance.next_step.replace("ID", invoice_id)
    return Case(
        invoice_id=invoice_id,
        verdict=verdict,
        needs_person=person,
        action=step,
        journal=side,
        api=api,
        window_open=window[0],
        window_closes_at=window[1],
        detail=detail,
        exit_code=exit_code,
    )


def _key_reused(invoice_id: str, side: JournalSide, txn_id: str, outcome: Outcome | None) -> Case:
    if isinstance(outcome, NotFound):
        return _case(
            invoice_id,
            Verdict.not_found,
            side,
            api=ApiSide(txn_id),
            detail=f"the 422 named transaction {txn_id}; GoRoute answers 404 for it",
        )
    if not isinstance(outcome, FoundTransaction):
        return _lookup_failed(invoice_id, side, outcome, ApiSide(txn_id))
    return _matched(invoice_id, side, outcome.transaction, txn_id, adopt=Verdict.already_sent)


def _matched(
    invoice_id: str,
    side: JournalSide,
    txn: Transaction,
    txn_id: str | None,
    *,
    adopt: Verdict,
    window: Window = (None, None),
) -> Case:
    """The verdict on a transaction that should be this invoice's."""
    api = ApiSide.of(txn, txn_id)
    differences = compare(invoice_id, side, txn)
    notes = _date_notes(side, txn)
    content = _content_difference(side, txn)
    if differences:
        verdict, detail = Verdict.different_document, differences + ([content] if content else [])
    elif content:
        return _case(
            invoice_id,
            Verdict.different_document,
            side,
            api=api,
            action=f"investigate: GoRoute's {api.transaction_id} is another version of "
            f"{invoice_id}, not the content this journal sent under key {side.idempotency_key}; "
            "if GoRoute's version is the right one, restore the file to it and run `invoicectl "
            f"scan DIR`; to send this content as well: `invoicectl send DIR --new-version "
            f"{invoice_id}`",
            detail="; ".join([content, *notes]),
            window=window,
        )
    elif txn.status == "failed":
        verdict, detail = Verdict.sent_then_failed, [f"transaction {api.transaction_id} failed"]
    elif adopt is Verdict.already_sent and txn.status in IN_PROGRESS_STATUSES:
        verdict, detail = Verdict.in_progress, [f"transaction {api.transaction_id} is {txn.status}"]
    else:
        status = txn.status or "no status given"
        return _case(
            invoice_id,
            adopt,
            side,
            api=api,
            action=f"`invoicectl reconcile --apply` adopts {api.transaction_id}",
            detail="; ".join(
                [f"transaction {api.transaction_id} is this invoice ({status})", *notes]
            ),
            window=window,
        )
    return _case(
        invoice_id, verdict, side, api=api, detail="; ".join(detail + notes), window=window
    )


def compare(invoice_id: str, side: JournalSide, txn: Transaction) -> list[str]:
    """How ``txn`` differs from the journal's invoice; [] when it is the same invoice.

    The receiver matches on scheme and id, or on the id alone when the API gives no scheme
    (case-insensitive: Peppol participant ids are). A missing document type is not a
    difference; a missing invoice number is, since nothing then ties the two together.
    """
    differences: list[str] = []
    number = (txn.invoice_number or "").strip()
    if not number:
        differences.append("the API record carries no invoice number to match")
    elif number != invoice_id:
        differences.append(f"invoice number: API {number}, journal {invoice_id}")
    if not _same_receiver(side.receiver, txn):
        shown = txn.receiver or txn.receiver_id
        differences.append(f"receiver: API {shown}, journal {side.receiver}")
    if txn.document_type and _squash(txn.document_type) != _squash(side.document_type):
        differences.append(f"document type: API {txn.document_type}, journal {side.document_type}")
    return differences


def _content_difference(side: JournalSide, txn: Transaction) -> str | None:
    """How the content differs, when GoRoute gives back the hash invoicectl sent with it.

    Every send carries ``metadata.sha256``, the hash of the content its key carries; a
    transaction whose hash is another one holds other content under the same invoice number.
    """
    theirs = txn.metadata.get("sha256")
    sent = side.sent_sha256
    if not isinstance(theirs, str) or not theirs.strip() or not sent:
        return None
    if theirs.strip().casefold() == sent.casefold():
        return None
    return (
        f"same invoice number, different content: the API's transaction carries sha256 "
        f"{theirs.strip()}, the journal sent sha256 {sent} under this key"
    )


def _same_receiver(journal_receiver: str | None, txn: Transaction) -> bool:
    if txn.receiver_id is None or journal_receiver is None:
        return True  # nothing to compare against; the invoice number carries the match
    scheme, sep, identifier = journal_receiver.partition(":")
    if not sep:
        scheme, identifier = "", journal_receiver
    if txn.receiver_id.casefold() != identifier.casefold():
        return False
    return txn.receiver_scheme is None or not scheme or txn.receiver_scheme == scheme


def _squash(text: str) -> str:
    return "".join(char for char in text.casefold() if char.isalnum())


def _date_notes(side: JournalSide, txn: Transaction) -> list[str]:
    created = _parse_time(txn.created_at)
    first = _parse_time(side.first_attempt_at or side.key_first_used_at)
    if created is None or first is None or created >= first - CLOCK_SLACK:
        return []
    return [
        f"created {txn.created_at}, before this journal's first attempt ({side.first_attempt_at}):"
        " something else sent it"
    ]


def _searched(invoice_id: str, side: JournalSide, search: _Search | None, now: datetime) -> Case:
    window = _window(side, now)
    if search is None or search.failure is not None:
        failure = search.failure if search else None
        return _lookup_failed(invoice_id, side, failure, None, window)
    matches = [
        txn for txn in search.by_number.get(invoice_id, ()) if not compare(invoice_id, side, txn)
    ]
    ours, earlier = _by_age(side, matches)
    if side.state == "key_reused":
        # The key carried a request before this journal's: a match may well be older.
        ours, earlier = ours + earlier, []
    if earlier:
        return _sent_earlier(invoice_id, side, ours, earlier, window)
    if len(ours) == 1:
        # A key_reused invoice whose 422 named no transaction is adopted like any other.
        adopt = Verdict.already_sent if side.state == "key_reused" else Verdict.unknown_found
        return _matched(invoice_id, side, ours[0], None, adopt=adopt, window=window)
    if ours:
        return _case(
            invoice_id,
            Verdict.unknown_ambiguous,
            side,
            detail=f"{len(ours)} transactions match: {_listed(ours)}",
            window=window,
        )
    return _not_found_in_list(invoice_id, side, search.summary, window)


def _by_age(
    side: JournalSide, matches: list[Transaction]
) -> tuple[list[Transaction], list[Transaction]]:
    """(created since the first attempt, created before it) among ``matches``.

    "Since" allows ``CLOCK_SLACK``; a match that cannot be dated cannot be shown to be this
    journal's send and counts as earlier. Matches older than ``LOOK_BACK`` before the first
    attempt are left out: the search does not always reach them, so counting the ones it
    happened to see would make the verdict depend on the page size.
    """
    first = _first_time(side)
    if first is None:
        return matches, []
    ours: list[Transaction] = []
    earlier: list[Transaction] = []
    for txn in matches:
        created = _parse_time(txn.created_at)
        if created is not None and created < first - LOOK_BACK:
            continue
        if created is None or created < first - CLOCK_SLACK:
            earlier.append(txn)
        else:
            ours.append(txn)
    return ours, earlier


def _sent_earlier(
    invoice_id: str,
    side: JournalSide,
    ours: list[Transaction],
    earlier: list[Transaction],
    window: Window,
) -> Case:
    first = side.key_first_used_at or side.first_attempt_at
    before = (
        f"created before this journal's first attempt under key {side.idempotency_key} "
        f"({first}): {_listed(earlier)}"
    )
    if ours:
        return _case(
            invoice_id,
            Verdict.unknown_ambiguous,
            side,
            detail=f"{len(ours) + len(earlier)} transactions match: since the first attempt "
            f"{_listed(ours)}; {before}",
            window=window,
        )
    open_, closes = window
    replay = (
        f"; while the key's window is open (until {closes}) `invoicectl send` replays this "
        "journal's request, which would deliver the invoice again"
        if open_
        else ""
    )
    return _case(
        invoice_id,
        Verdict.unknown_sent_earlier,
        side,
        api=ApiSide.of(earlier[0]) if len(earlier) == 1 else None,
        detail=f"only an earlier send matches, {before}; this journal's own send was not "
        f"found{replay}",
        window=window,
    )


def _listed(txns: list[Transaction]) -> str:
    return ", ".join(
        f"{t.transaction_id} ({t.status or 'no status'}, created {t.created_at or 'undated'})"
        for t in txns
    )


def _not_found_in_list(
    invoice_id: str,
    side: JournalSide,
    summary: SearchSummary,
    window: Window,
) -> Case:
    if summary.complete:
        searched = f"not in the {summary.transactions} transactions searched ({summary.note})"
    else:
        searched = (
            f"not found in the {summary.transactions} searched; the search was incomplete "
            f"({summary.note})"
        )
    open_, closes = window
    if side.state == "key_reused":
        return _case(
            invoice_id,
            Verdict.not_found,
            side,
            detail=f"the 422 carried no existing_transaction_id; {searched}",
            window=window,
        )
    if open_:
        return _case(
            invoice_id,
            Verdict.unknown_not_found_window_open,
            side,
            action=f"`invoicectl send DIR` replays it under key {side.idempotency_key} "
            f"(safe until {closes})",
            detail=searched,
            window=window,
        )
    when = f"closed at {closes}" if closes else "cannot be dated, so it counts as closed"
    verdict = (
        Verdict.unknown_not_found_window_closed
        if summary.complete
        else Verdict.unknown_search_incomplete
    )
    return _case(
        invoice_id,
        verdict,
        side,
        detail=f"{searched}; the replay window of key {side.idempotency_key} {when}: "
        "a resend could deliver a duplicate",
        window=window,
    )


def _window(side: JournalSide, now: datetime) -> Window:
    """(open, closes at) as ``send`` sees it: 24 h less the replay margin from first use."""
    started = _first_time(side)
    if started is None:
        return None, None
    closes = started + KEY_WINDOW - REPLAY_MARGIN
    return window_open(started.isoformat(), now), closes.isoformat()


def _amended(invoice_id: str, side: JournalSide) -> Case:
    sent, current = side.sent_sha256 or "?", side.current_sha256 or "?"
    before = (
        f"; before the change it was {side.state_before_amend}" if side.state_before_amend else ""
    )
    where = f" (transaction {side.transaction_id})" if side.transaction_id else ""
    return _case(
        invoice_id,
        Verdict.amended,
        side,
        action=f"restore the file to the content sent (sha256 {sent}), then `invoicectl scan "
        f"DIR`; or `invoicectl send DIR --new-version {invoice_id}` to send the new content "
        f"(sha256 {current}) under a new key",
        detail=f"key {side.idempotency_key} carried revision {side.sent_revision} "
        f"(sha256 {sent}) first on {side.first_attempt_at or side.key_first_used_at}{where}; "
        f"the file is now revision {side.current_revision} (sha256 {current}){before}",
    )


def _conflict(invoice_id: str, side: JournalSide) -> Case:
    return _case(
        invoice_id,
        Verdict.needs_decision,
        side,
        detail=f"GoRoute answered 409 (conflict, duplicate) on {side.last_attempt_at}",
    )


def _delivery(invoice_id: str, side: JournalSide, outcome: Outcome | None) -> Case:
    txn_id = side.transaction_id
    if isinstance(outcome, NotFound):
        return _case(
            invoice_id,
            Verdict.not_found,
            side,
            api=ApiSide(txn_id),
            detail=f"accepted as {txn_id}, but GoRoute answers 404 for it now",
        )
    if not isinstance(outcome, FoundTransaction):
        return _lookup_failed(invoice_id, side, outcome, ApiSide(txn_id))
    txn = outcome.transaction
    api = ApiSide.of(txn, txn_id)
    if txn.status == "delivered":
        return _case(
            invoice_id,
            Verdict.delivered,
            side,
            api=api,
            detail=f"delivered {txn.delivered_at or ''}".rstrip(),
        )
    if txn.status == "failed":
        return _case(
            invoice_id,
            Verdict.delivery_failed,
            side,
            api=api,
            detail=f"transaction {txn_id} failed",
        )
    return _case(
        invoice_id,
        Verdict.delivery_pending,
        side,
        api=api,
        detail=f"transaction {txn_id} is {txn.status or 'without a status'}",
    )


def _recorded_failure(invoice_id: str, side: JournalSide) -> Case:
    return _case(
        invoice_id,
        Verdict.delivery_failed,
        side,
        api=ApiSide(side.transaction_id, status="failed"),
        detail=f"transaction {side.transaction_id} failed (recorded earlier)",
    )


def _lookup_failed(
    invoice_id: str,
    side: JournalSide,
    outcome: Outcome | None,
    api: ApiSide | None,
    window: Window = (None, None),
) -> Case:
    refused = isinstance(outcome, Rejected)
    return _case(
        invoice_id,
        Verdict.lookup_failed,
        side,
        api=api,
        needs_person=refused,
        detail=_failure_text(outcome) + "; what happened is still unknown",
        window=window,
    )


def _failure_text(outcome: Outcome | None) -> str:
    if isinstance(outcome, Transient):
        return f"no usable answer after retries: {outcome.reason}"
    if isinstance(outcome, RateLimited):
        return "still rate limited (429) after waiting as long as --max-wait allows"
    if isinstance(outcome, Rejected):
        code = f" {outcome.code}" if outcome.code else ""
        return f"the API refused the lookup (HTTP {outcome.http_status}{code}: {outcome.message})"
    return "the lookup did not run"


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


# ---- writing --------------------------------------------------------------------------------


def _write(
    journal: Journal, cases: list[Case], apply: bool, checked_at: str, run_id: int | None
) -> tuple[list[Case], list[str], list[str]]:
    written: list[Case] = []
    applied: list[str] = []
    recorded: list[str] = []
    for case in cases:
        if _fresh_delivery_status(case) and journal.record_remote_status(
            case.invoice_id,
            transaction_id=case.journal.transaction_id or "",
            status=case.api.status if case.api else None,
            checked_at=checked_at,
            run_id=run_id,
        ):
            recorded.append(case.invoice_id)
        if apply and GUIDANCE[case.verdict].adoptable and _adopt(journal, case, checked_at, run_id):
            applied.append(case.invoice_id)
            adopted = f"adopted {case.api.transaction_id if case.api else ''}; state now accepted"
            case = replace(case, applied=True, exit_code=ExitCode.OK, action=adopted)
        written.append(case)
    return written, applied, recorded


def _fresh_delivery_status(case: Case) -> bool:
    """A delivery status just read from GoRoute (not a failure the journal already had)."""
    if case.verdict not in (Verdict.delivered, Verdict.delivery_failed, Verdict.delivery_pending):
        return False
    return case.journal.remote_status != "failed"


def _adopt(journal: Journal, case: Case, checked_at: str, run_id: int | None) -> bool:
    api = case.api
    if api is None or api.transaction_id is None:
        return False
    how = "the 422's existing transaction" if case.journal.state == "key_reused" else "found"
    return journal.adopt_transaction(
        case.invoice_id,
        expected_state=case.journal.state,
        idempotency_key=case.journal.idempotency_key,
        transaction_id=api.transaction_id,
        remote_status=api.status,
        checked_at=checked_at,
        accepted_at=api.created_at or checked_at,
        detail=f"reconcile adopted {api.transaction_id} ({how}, status {api.status or 'none'}) "
        f"for key {case.journal.idempotency_key}",
        run_id=run_id,
    )

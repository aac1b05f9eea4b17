"""How a send tells that its journal may have lost history in a long silence
(``silence_lost``; what the outbox's marker says, ``history_ahead.marked_lost``), and how far
back a check of it looks (``horizon_of``).

A journal rolled back together with its outbox (a VM snapshot restored, a whole disk's backup)
keeps a marker that agrees with it, so ``history_lost`` sees nothing, and the invoices it sent
after the snapshot read as never sent. Sent again under their keys within GoRoute's 24 hours,
they are answered with the first send; after them, a second copy is delivered. That can only
happen once every lost send is older than the window, and the journal's own last request is
older still: so a send whose journal has made no request for ``SILENCE`` first reads GoRoute's
transactions created since that last request, newest first, up to the first page holding one
of its own (``NewestRead``: one GET for a daily cron, at most ``SILENCE_PAGES``). One carrying the
number of an invoice this journal never sent makes the run check its history in full, as for
any journal that lost history. Those under numbers the journal does not hold are kept
(``Silence.seen``, a ``history_checks`` row): a restored outbox's files come back when the ERP
exports them again, after the silence has ended, and each send holds the invoices among them
(``seen_elsewhere``). Pages that stop short of the last request (the page bound, the time, a
list that says nothing of paging) are said in a warning: sends in between were not looked at.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from invoicectl.errors import JournalError
from invoicectl.goroute.times import parse_time
from invoicectl.goroute.transactions import Transaction, TransactionPage
from invoicectl.journal.failures import RESTORE
from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import Hold, Invoice, InvoiceState
from invoicectl.lifecycle.evidence import last_word
from invoicectl.lifecycle.window import KEY_WINDOW, REPLAY_MARGIN, moment
from invoicectl.text import first_few, one_line

if TYPE_CHECKING:
    from invoicectl.reconcile.search_result import SearchSummary

# The newest 20,000 transactions at most: 200 pages take 2 minutes at the standard tier's
# 100 requests a minute, once in a journal's life.
MAX_PAGES = 200
PAGE_SIZE = 100
# A journal that made no request for this long may have lost sends GoRoute no longer answers
# a replay of: the key window, less the margin a replay keeps.
SILENCE = KEY_WINDOW - REPLAY_MARGIN
# What a probe after a silence reads at most: the newest 2,000 transactions (20 GETs, 12 s
# at the standard tier's 100 requests a minute), back to this long before the journal's last
# request (GoRoute's clock and this machine's may differ by that much).
SILENCE_PAGES = 20
CLOCK_MARGIN = timedelta(minutes=15)


class RunClocks(Protocol):
    """What the check reads time from (``runs.Clocks``)."""

    @property
    def monotonic(self) -> Callable[[], float]: ...
    @property
    def sleep(self) -> Callable[[float], Awaitable[None]]: ...


def unfinished(journal: JournalBackend) -> str | None:
    """Why a send checks where a check begun never ended (stopped, refused, out of time, its
    process gone; another outbox's, or host's): the invoices it read are still unchecked."""
    if (begun := journal.unfinished_history_check()) is None:
        return None
    return f"the history check of the journal {journal.path} begun in {begun} did not finish"


class NewestPages(NamedTuple):
    """What GoRoute's newest transactions said (``silence_lost``'s probe)."""

    found: set[str]  # the numbers of the invoices asked about that they carry
    transactions: tuple[Transaction, ...] = ()  # every transaction read
    # None when they reach back to the time asked; else why they stop short of it
    short: str | None = None


class NewestRead:
    """The pages a silence probe reads, newest first, and whether one of them holds a
    transaction this journal has as its own (``anchored``): every send a rollback lost was
    made after the snapshot, so after each transaction the journal holds, and no older page
    can hold one. Taken only while every creation time read is dated and none is newer than
    one read before it: a daily cron's probe finds yesterday's sends on its first page, and
    reads no other however many it sent."""

    def __init__(self, journal: JournalBackend) -> None:
        self.journal = journal
        self.pages: list[TransactionPage] = []
        self.anchored = False
        self.newest_first = True
        self.oldest: datetime | None = None

    def read(self, page: TransactionPage) -> None:
        self.pages.append(page)
        ours = False
        for txn in page.transactions:
            created = parse_time(txn.created_at)
            if created is None or (self.oldest is not None and created > self.oldest):
                self.newest_first = False
            self.oldest = created
            if not ours and txn.transaction_id:
                ours = self.journal.transaction_owner(txn.transaction_id, "") is not None
        self.anchored = self.anchored or (ours and self.newest_first)

    def transactions(self) -> tuple[Transaction, ...]:
        return tuple(txn for page in self.pages for txn in page.transactions)


class Silence(NamedTuple):
    lost: str | None  # why the journal may have lost sends; None when nothing says so
    # GoRoute's transactions (as answered) created since the journal's last request under a
    # number it does not hold: held for when that number comes to the outbox (a restored
    # outbox's files exported again), by ``seen_elsewhere``
    seen: list[dict[str, Any]]


NOT_SILENT = Silence(None, [])
# history_checks.why of the rows that keep ``Silence.seen``; read back for this long.
SEEN_WHY = "seen at GoRoute while the journal was silent"
SEEN_FOR = timedelta(days=30)


def _request_time(journal: JournalBackend, started: str) -> datetime:
    """The last request's start, which the silence is reckoned from; one that is no time
    (the journal changed by hand) is refused before any request."""
    try:
        return moment(started)
    except ValueError:
        raise JournalError(
            f"the journal {journal.path} is damaged: a request's start time is no time "
            f"({one_line(started, 40)!r}; the journal changed by hand?); nothing was sent. "
            f"`invoicectl verify` shows what differs from the hash chain; {RESTORE}"
        ) from None


def silence_lost(
    journal: JournalBackend,
    sendable: Callable[[], list[Invoice]],
    probe: Callable[[list[Invoice], datetime], NewestPages | None],
    warn: Callable[[str], None],
) -> Silence:
    """What a journal silent past ``SILENCE`` may have lost; ``NOT_SILENT`` when it was not
    silent that long or has nothing to send now. ``probe`` reads GoRoute's transactions
    created since the time it is given, newest first (None: they could not be read). Pages
    that could not be read are a warning, not a reason: a key that may send but not list, or
    a list that is down, must not stop every send of a journal with its history."""
    last = journal.last_request_at()
    if last is None:
        return NOT_SILENT
    last_at = _request_time(journal, last)
    if journal.clock() - last_at < SILENCE:
        return NOT_SILENT
    invoices = sendable()
    if not invoices:
        return NOT_SILENT
    page = probe(invoices, last_at - CLOCK_MARGIN)
    silent = f"the journal {journal.path} has made no request since {last}"
    unnoticed = "a journal rolled back with its outbox would go unnoticed"
    if page is None:
        warn(
            f"invoicectl: warning: {silent}, and GoRoute's newest transactions could not be "
            f"read: {unnoticed}"
        )
        return NOT_SILENT
    seen = _unknown_since(journal, page.transactions, since=last_at - CLOCK_MARGIN)
    if not page.found:
        if page.short is not None:
            warn(
                f"invoicectl: warning: {silent}; GoRoute's {len(page.transactions)} newest "
                "transactions name none of its invoices, but do not reach back that far "
                f"({page.short}): sends a rollback with its outbox lost could lie behind them, "
                "unnoticed"
            )
        return Silence(None, seen)
    found = sorted(page.found)
    return Silence(
        f"{silent}, yet GoRoute's newest transactions include {len(found)} invoice(s) it never "
        f"sent ({first_few(found, 5)}): was it rolled back with its outbox (a VM snapshot or a "
        "disk backup restored), or does another system send these invoices?",
        seen,
    )


def _unknown_since(
    journal: JournalBackend, transactions: tuple[Transaction, ...], since: datetime
) -> list[dict[str, Any]]:
    """The transactions sent (not received) after ``since``, or undated, under a number the
    journal never sent a request for: it may hold none, or one held, invalid or pending. (An
    undated one may be as new as any: a hold for ``reconcile`` is the safe side.)"""
    unknown = []
    for txn in transactions:
        number = (txn.invoice_number or "").strip()
        created = parse_time(txn.created_at)
        if not number or (created is not None and created <= since) or _received(txn):
            continue
        invoice = journal.invoice(number)
        if invoice is None or invoice.key_first_used_at is None:
            unknown.append(_kept(txn))
    return unknown


def _received(txn: Transaction) -> bool:
    """An invoice the account received (``direction``; outbound, or none said, is sent)."""
    direction = str(txn.raw.get("direction") or "").strip().lower()
    return direction.startswith("in") or direction == "received"


def sent_only(txns: tuple[Transaction, ...]) -> tuple[Transaction, ...]:
    """Those of ``txns`` the account sent: a supplier's invoice to it under one of this
    journal's numbers is no send of it."""
    return tuple(txn for txn in txns if not _received(txn))


def _kept(txn: Transaction) -> dict[str, Any]:
    """What is kept of a transaction seen: the fields a hold's reason and reconcile's match
    read, not the whole answer."""
    return {name: getattr(txn, name) for name in _KEPT_FIELDS}


_KEPT_FIELDS = (
    "transaction_id",
    "invoice_number",
    "document_type",
    "receiver_scheme",
    "receiver_id",
    "status",
    "created_at",
)


def seen_elsewhere(
    journal: JournalBackend, among: Callable[[], list[Invoice]]
) -> list[tuple[Invoice, tuple[Transaction, ...]]]:
    """Each invoice of ``among()`` whose number silence probes of the last ``SEEN_FOR`` saw at
    GoRoute, when the journal did not hold it, with those transactions. ``among`` is asked
    only when a probe kept something, and only its numbers' transactions are read whole: a
    probe keeps up to ``SILENCE_PAGES`` pages of another system's sends."""
    outcomes = journal.history_check_outcomes(SEEN_WHY, (journal.clock() - SEEN_FOR).isoformat())
    if not outcomes:
        return []
    invoices = among()
    wanted = {invoice.invoice_id for invoice in invoices}
    seen: dict[str, dict[str | None, Transaction]] = {}
    for outcome in outcomes:
        for raw in outcome.get("seen_elsewhere", ()):
            number = str(raw.get("invoice_number") or "").strip() if isinstance(raw, dict) else ""
            if number in wanted:
                txn = Transaction.from_json(raw)
                seen.setdefault(number, {}).setdefault(txn.transaction_id, txn)
    return [
        (invoice, tuple(seen[invoice.invoice_id].values()))
        for invoice in invoices
        if invoice.invoice_id in seen
    ]


def horizon_of(invoices: list[Invoice], now: datetime) -> datetime | None:
    """How far back a send of these invoices can be: the oldest issue date less LOOK_BACK;
    None (search to the page bound) when one has no date, or one issued after ``now``."""
    from invoicectl.reconcile.search_result import LOOK_BACK

    dates = [issued_on(invoice, now) for invoice in invoices]
    if not dates or any(date is None for date in dates):
        return None
    return min(date for date in dates if date is not None) - LOOK_BACK


def issued_on(invoice: Invoice, now: datetime) -> datetime | None:
    """The issue date, a bound on when the invoice was sent; None when it bounds nothing:
    undated, pre-dated (issued after ``now``, so it may have been sent any time before), or
    before 2000 (a placeholder, 0001-01-01: reckoning ``LOOK_BACK`` back from it overflows)."""
    if not invoice.issue_date:
        return None
    try:
        issued = datetime.fromisoformat(invoice.issue_date[:10]).replace(tzinfo=UTC)
    except ValueError:
        return None
    return None if issued > now or issued.year < 2000 else issued


# What the check covers: every invoice this journal never sent a request for and may send one
# day, held or not (a release sends it), invalid or not (a fixed file makes it pending).
SENDABLE_SOME_DAY = (InvoiceState.pending, InvoiceState.invalid)


def never_sent(journal: JournalBackend) -> list[Invoice]:
    """The invoices this journal never sent a request for and may send one day."""
    invoices = journal.invoices(*SENDABLE_SOME_DAY)
    return sorted(
        (i for i in invoices if i.key_first_used_at is None and i.hold is not Hold.abandoned),
        key=lambda invoice: invoice.invoice_id,
    )


# After a loss of history, an invoice first met later (another outbox's file scanned after
# the restore: helper-94) may be one a lost run sent; one issued after the loss was found
# cannot be. For ``LOST_FOR``, each send checks the others first (``issued_before_a_loss``).
LOST_WHY = "history lost: what was issued by then is checked before its first send"
LOST_FOR = timedelta(days=90)


def note_loss(journal: JournalBackend, base_url: str, run_id: int) -> None:
    """A loss found and checked: invoices issued by tomorrow (time zones) are checked when
    first met, as those the check just judged were."""
    today = journal.clock().date()
    journal.record_history_check(
        base_url,
        run_id,
        LOST_WHY,
        {"found_on": today.isoformat(), "issued_until": (today + timedelta(days=1)).isoformat()},
    )


def issued_before_a_loss(journal: JournalBackend) -> tuple[str | None, list[Invoice]]:
    """Why a send checks again, a loss of history found in the last ``LOST_FOR``, and what:
    the pending invoices never sent, unheld and never judged (no evidence event: found,
    cleared or dismissed by an operator's ``release --force``), issued by the day after it,
    or undated, unreadable or pre-dated (``issued_on``: those bound nothing); (None, []) when
    there is none, nearly always."""
    now = journal.clock()
    noted = journal.history_check_outcomes(LOST_WHY, (now - LOST_FOR).isoformat())
    latest = max(noted, key=lambda outcome: str(outcome.get("issued_until", "")), default={})
    try:
        until = datetime.fromisoformat(str(latest["issued_until"])).replace(tzinfo=UTC)
    except (KeyError, ValueError):
        return None, []
    late = [
        invoice
        for invoice in never_sent(journal)
        if invoice.state is InvoiceState.pending
        and invoice.hold is None
        and ((issued := issued_on(invoice, now)) is None or issued <= until)
        and last_word(journal, invoice.invoice_id) is None
    ]
    if not late:
        return None, []
    named = first_few([invoice.invoice_id for invoice in late], 5)
    found = latest.get("found_on", "recently")
    return (
        f"the journal {journal.path} lost history (found on {found}), and {len(late)} "
        f"invoice(s) issued by then, or undated, were first met since ({named}): a lost run "
        "may have sent them"
    ), late


def new_versions(journal: JournalBackend, invoice_ids: tuple[str, ...]) -> list[Invoice]:
    """The invoices ``send --new-version`` is to send under their next key: a journal that
    lost the send of a later key than it knows would send that one's number again."""
    found = (journal.invoice(invoice_id) for invoice_id in invoice_ids)
    return [i for i in found if i is not None and i.key_first_used_at is not None]


def not_its_own(
    journal: JournalBackend, invoice: Invoice, txns: tuple[Transaction, ...]
) -> tuple[Transaction, ...]:
    """Those of ``txns`` the journal does not hold as a send of ``invoice`` (under an earlier
    key): what it never sent a request for has none."""
    if invoice.key_first_used_at is None:
        return txns
    own = {txn for _key, txn in journal.transactions_by_key(invoice.invoice_id)}
    return tuple(txn for txn in txns if txn.transaction_id is None or txn.transaction_id not in own)


def still_as_read(journal: JournalBackend, invoice: Invoice) -> Invoice | None:
    """The invoice as the journal holds it now, unless a send (another host's, on a shared
    journal) took it up since it was read before the search: a key of its own in use, or
    another key. Then what the search found may be that send, which is no finding. Any other
    change (a scan made an invalid one pending, say) leaves it to be judged as it is now."""
    now = journal.invoice(invoice.invoice_id)
    if now is None:
        return None
    sent = now.key_first_used_at is not None and invoice.key_first_used_at is None
    return None if sent or now.idempotency_key != invoice.idempotency_key else now


def covered(invoice: Invoice, summary: SearchSummary, now: datetime) -> bool:
    """Whether the search saw every transaction that could be a send of ``invoice``."""
    from invoicectl.reconcile.search_result import LOOK_BACK

    if summary.complete:
        return True
    issued, reached = issued_on(invoice, now), parse_time(summary.reached)
    return issued is not None and reached is not None and reached <= issued - LOOK_BACK


def to_be_sent(invoice: Invoice) -> bool:
    """Whether a check found nothing against ``invoice`` sends it: pending and not held, or
    here as a ``--new-version`` (its key used)."""
    is_sendable = invoice.state is InvoiceState.pending or invoice.key_first_used_at is not None
    return invoice.hold is None and is_sendable


def sendable_now(journal: JournalBackend) -> list[Invoice]:
    """The never-sent invoices this run may send: a run that sends none (most cron runs)
    asks nothing after a silence; the first that has one to send asks."""
    return [i for i in never_sent(journal) if i.state is InvoiceState.pending and i.hold is None]

"""How far the transactions-list search has got (``search``): its pages, the ids seen, the
cursors given, the order seen, and when it should stop."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from invoicectl.goroute.times import parse_time
from invoicectl.goroute.transactions import Transaction, TransactionPage


class Paging:
    """Where the list search stands: pages, the ids seen, the cursors given, the order seen.

    The stop at the horizon assumes newest first, which nothing documents: it is taken only
    while every ``created_at`` seen so far (within and across pages) is dated and
    non-increasing. Otherwise the search pages on to the end or to its page bound.

    Newest first may also mean most recently updated first, which looks the same on a page
    whose creation times happen not to rise: a transaction created long ago but updated
    today can come before one created yesterday. So the stop is judged by the latest time a
    transaction shows (``latest_time``): in either order, nothing after a transaction was
    created later than that.
    """

    def __init__(
        self,
        limit: int,
        max_pages: int,
        horizon: datetime | None,
        out_of_time: Callable[[], bool] = lambda: False,
    ) -> None:
        self.limit = limit
        self.max_pages = max_pages
        self.horizon = horizon
        self.out_of_time = out_of_time
        self.pages = 0
        self.fresh = 0  # new transactions on the last page
        self.ids: set[str] = set()
        self.cursors: set[str] = set()
        self.newest_first = True
        self.oldest: datetime | None = None  # the last created_at seen, while newest first
        # The latest time the last transaction seen shows: none after it was created later.
        self.bound: datetime | None = None
        self.pages_told = False  # the API has said something of paging on some page

    def take(self, page: TransactionPage) -> list[Transaction]:
        """The page's transactions not seen before; notes the page and its order."""
        self.pages += 1
        self.pages_told = self.pages_told or page.pages_told
        fresh: list[Transaction] = []
        for txn in page.transactions:
            known_as = identity(txn)
            if known_as not in self.ids:
                self.ids.add(known_as)
                fresh.append(txn)
            created = parse_time(txn.created_at)
            if created is None or (self.oldest is not None and created > self.oldest):
                self.newest_first = False
            self.oldest = created
            self.bound = latest_time(txn)
        self.fresh = len(fresh)
        return fresh

    def why_stop(self, page: TransactionPage) -> tuple[bool, str] | None:
        """(complete, note) when the search should stop after this page, else None."""
        if not page.transactions:
            if not page.has_more:
                return True, "searched every transaction"
            # An empty page that says more follows is followed as any page (a server may
            # filter a page down to nothing): it proves nothing about the pages after it.
        elif not self.fresh:
            return False, (
                "the API answered with transactions already seen (it may ignore the cursor); "
                "stopped paging"
            )
        horizon = self.horizon
        if horizon is not None and self.newest_first and self.bound and self.bound < horizon:
            return True, f"searched back to {horizon.isoformat()}, newest first"
        if not page.has_more:
            if not self.pages_told:
                # No has_more, no cursor, on any page: a list that says nothing of paging may
                # stop at a page size of its own, below the limit asked, as well as at its end.
                return False, (
                    "the API's list says nothing of paging (no has_more, no cursor): older "
                    "transactions may lie beyond the ones it returned"
                )
            return True, "searched every transaction"
        if page.next_cursor is None:
            return False, "the API says there are more transactions but gives no cursor to them"
        if page.next_cursor in self.cursors:
            return False, "the API returned a cursor it had already given; stopped paging"
        if self.pages >= self.max_pages:
            return False, f"stopped after {self.pages} pages; older transactions were not searched"
        if self.out_of_time():
            return False, (
                f"stopped at the time limit after {self.pages} pages; older transactions were "
                "not searched"
            )
        self.cursors.add(page.next_cursor)
        return None

    @property
    def reached(self) -> str | None:
        """How far back the search is known to have read, while newest first: every
        transaction created since was seen."""
        return self.bound.isoformat() if self.newest_first and self.bound else None


def latest_time(txn: Transaction) -> datetime | None:
    """The latest of the times ``txn`` shows (created, updated, delivered); None without
    its creation time."""
    created = parse_time(txn.created_at)
    if created is None:
        return None
    shown = (parse_time(txn.updated_at), parse_time(txn.delivered_at))
    return max([created, *(moment for moment in shown if moment is not None)])


def identity(txn: Transaction) -> str:
    """A transaction's id; a row without one is known by its whole content."""
    return txn.transaction_id or repr(sorted(txn.raw.items()))

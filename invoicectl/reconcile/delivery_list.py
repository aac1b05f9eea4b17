"""Refreshing accepted invoices' delivery status from the transactions list, not one GET each.

A list page answers about a hundred invoices; a GET answers one. When unanswered sends are
searched for in the list anyway, its pages serve here too (``see``) and no page is read twice;
otherwise ``take`` pages on its own. ``DeliveryRows`` gathers the
list's rows for the transaction ids the journal follows, page by page, and ``trusted`` says
which row may stand in for that transaction's GET. Everything else falls back to the GET, so
the list can only save requests, never decide a verdict the GET would not:

- only a row carrying the very transaction id the journal holds counts (never a row matched by
  invoice number alone), and only if it is this invoice (``matching.compare``: number,
  receiver, document type) with the content hash the key carried, when GoRoute gives one back;
- an id the list shows twice with different contents is contradicting itself: GET;
- ``delivered`` is taken only with its ``delivered_at``; ``failed`` is never taken from the list
  (it leads a person to resend under a new key, so the GET confirms it: failures are few);
  a status still on its way is taken (it asks nothing of anyone: reconcile runs again);
- an id the list does not show is never "not found": its GET says so or not.

Paging stops when every wanted id was seen, at an empty or last page, at a cursor given twice
or a page with nothing new, or past ``list_budget`` pages at the first page that answered fewer
than two wanted ids (from there a GET each costs less); a page that does not answer stops it
too. Each stop only leaves more GETs.
"""

from __future__ import annotations

from collections.abc import Callable

from invoicectl.goroute.transactions import Transaction, TransactionPage

# Statuses a list row may report in place of a GET (goroute-api.md B: "failed" is not one).
ON_THE_WAY = frozenset({"pending", "processing", "sending"})


def list_budget(wanted: int, limit: int) -> int:
    """Pages at most: two for every page's worth of ids wanted (1 request per half a page),
    so that a list that shows few of them costs little before the GETs."""
    return max(1, -(-2 * wanted // max(1, limit)))


def worth_listing(wanted: int, limit: int) -> bool:
    """One GET answers one invoice; a page is worth it from two on."""
    return wanted >= 2 and limit >= 2


class DeliveryRows:
    """The list's rows for the wanted transaction ids, and where the paging stands."""

    def __init__(self, wanted: set[str], budget: int) -> None:
        self.wanted = wanted
        self.budget = budget
        self.rows: dict[str, list[Transaction]] = {}
        self.pages = 0
        self.cursors: set[str] = set()
        self._seen: set[str] = set()

    def take(self, page: TransactionPage) -> str | None:
        """Keep the page's wanted rows; the cursor to follow, or None to stop paging."""
        self.pages += 1
        fresh, answered = self.see(page)
        cursor = page.next_cursor
        if not fresh or self.wanted.issubset(self.rows):
            return None
        if self.pages >= self.budget and answered < 2:  # past the budget, only while it pays
            return None
        if not page.has_more or cursor is None or cursor in self.cursors:
            return None
        self.cursors.add(cursor)
        return cursor

    def see(self, page: TransactionPage) -> tuple[int, int]:
        """Keep the page's wanted rows (a page the unanswered search read, or ours): (ids
        not seen before, wanted ids not seen before)."""
        fresh = answered = 0
        for txn in page.transactions:
            txn_id = txn.transaction_id
            if txn_id is None:
                continue
            if txn_id not in self._seen:
                fresh += 1
                self._seen.add(txn_id)
            if txn_id in self.wanted:
                answered += txn_id not in self.rows
                self.rows.setdefault(txn_id, []).append(txn)
        return fresh, answered

    def trusted(
        self,
        txn_id: str,
        sent_sha256: str | None,
        this_invoice: Callable[[Transaction], bool],
    ) -> Transaction | None:
        """The row that may stand in for ``txn_id``'s GET, or None: GET it. ``this_invoice``:
        whether a row is the journal's invoice (``matching.compare`` finds no difference)."""
        rows = self.rows.get(txn_id)
        if not rows or any(_content(row) != _content(rows[0]) for row in rows):
            return None
        txn = rows[0]
        if not this_invoice(txn):
            return None
        sha256 = txn.metadata.get("sha256")
        if sha256 is not None and sha256 != sent_sha256:
            return None
        if txn.status == "delivered":
            return txn if txn.delivered_at else None
        return txn if txn.status in ON_THE_WAY else None


def _content(txn: Transaction) -> str:
    return repr(sorted(txn.raw.items()))

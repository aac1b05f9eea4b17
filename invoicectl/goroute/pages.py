"""A transactions-list answer read into its ``TransactionPage``, whichever shape it came in.

``GET /api/v1/transactions`` answers ``{"transactions": [...], "next_cursor", "has_more"}`` or a
bare list (goroute-api.md B and C). A page with an entry that is not a transaction object is
not read at all: skipping entries would let reconcile report "not found" for a send that
exists. A cursor that could not be sent back (``identifiers.usable_cursor``) is not followed.
"""

from __future__ import annotations

from invoicectl.goroute.answers import Answer, unexpected_shape
from invoicectl.goroute.identifiers import usable_cursor
from invoicectl.goroute.jsontext import text_of
from invoicectl.goroute.outcomes import Outcome
from invoicectl.goroute.transactions import Transaction, TransactionPage


def page_of(answer: Answer) -> TransactionPage | Outcome:
    """The page a 2xx list answer holds, or the ``Transient`` of an unexpected shape."""
    data = answer.data
    if isinstance(data, list):
        items, next_cursor, has_more, told = data, None, False, False
    elif isinstance(data, dict) and isinstance(data.get("transactions"), list):
        items = data["transactions"]
        next_cursor = text_of(data.get("next_cursor"))
        more = data.get("has_more")
        has_more = more if isinstance(more, bool) else next_cursor is not None
        told = isinstance(more, bool) or next_cursor is not None
        if not usable_cursor(next_cursor):
            # Not followed (it would not fit in a URL): the search then says it stopped
            # short because the API gave no cursor, never that it saw everything.
            next_cursor = None
    else:
        return unexpected_shape(answer, "a transactions list")
    if not all(isinstance(item, dict) for item in items):
        return unexpected_shape(answer, "a list of transaction objects")
    transactions = tuple(Transaction.from_json(item) for item in items)
    return TransactionPage(
        transactions=transactions, next_cursor=next_cursor, has_more=has_more, pages_told=told
    )

"""What the transactions-list search found, as plain data: ``Search`` and its ``SearchSummary``.

``search.Lookups`` fills them in; ``unanswered`` judges by them and ``ReconcileReport`` carries
the summary. ``LOOK_BACK`` is how far before an unanswered send's first attempt a transaction
still counts: the search stops there, and the judging leaves anything older out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from invoicectl.goroute.outcomes import Outcome
from invoicectl.goroute.transactions import Transaction

# How far before an unanswered send's first attempt the list search looks for an earlier send
# of the same invoice (found: a person decides). Older transactions are never counted.
LOOK_BACK = timedelta(days=7)


@dataclass(frozen=True)
class SearchSummary:
    """How far the transactions-list search went (for unanswered sends)."""

    pages: int = 0
    transactions: int = 0
    complete: bool = True
    note: str = ""
    # The oldest creation time seen while the list was newest first: every transaction
    # created since then was seen. None when nothing is known of the order.
    reached: str | None = None


@dataclass(frozen=True)
class Search:
    """What the list search found, per wanted invoice number, and how far it got."""

    by_number: Mapping[str, tuple[Transaction, ...]]
    summary: SearchSummary
    failure: Outcome | None = None

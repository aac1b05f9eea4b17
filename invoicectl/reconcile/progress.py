"""How far a reconcile's lookups have got, as plain data for whoever shows progress.

``Lookups`` calls an ``OnLookup`` hook after each request it makes and whenever invoices are
answered: how many of the invoices that need a lookup have theirs, and how many requests it
took so far. Waits (pacing, Retry-After) are told by the limiter's own hook
(``goroute.limiter.Wait``). The hook is called in the event loop and must return at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LookupProgress:
    checked: int  # invoices whose lookups are done (answered by a GET or a list page)
    total: int  # invoices that need a lookup (amended files and 409s need none)
    requests: int  # requests made so far, retries included


OnLookup = Callable[[LookupProgress], None]

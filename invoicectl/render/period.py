"""``status --since/--until``: a period report, the invoices per state and per day.

An invoice counts on the UTC day it was first recorded in the journal (scanned), in the state
it is in now; an accepted invoice whose delivery failed counts under ``delivery_failed``, not
``accepted``, so each invoice is in exactly one column and ``total`` adds them up. Plain data
in (``journal.day_counts``), a table, JSON or CSV out (CSV for the accountant).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, timedelta
from typing import IO, Any

from invoicectl.journal.records import InvoiceState

DELIVERY_FAILED = "delivery_failed"
COLUMNS = (
    *(str(state) for state in InvoiceState if state is not InvoiceState.accepted),
    "accepted",
    DELIVERY_FAILED,
)
FIELDS = ("day", *COLUMNS, "total")


def period_bounds(since: date, until: date) -> tuple[str, str]:
    """The journal's bounds for ``since`` to ``until``, both days included (but 9999-12-31,
    many a script's "no end": there is no day after it to bound it, nor anything on it)."""
    return since.isoformat(), (until + timedelta(days=1) if until < date.max else until).isoformat()


def period_rows(counts: Iterable[tuple[str, str, bool, int]]) -> list[dict[str, Any]]:
    """One record per day that has invoices (FIELDS), then a ``total`` record for the period."""
    days: dict[str, dict[str, Any]] = {}
    for day, state, failed, count in counts:
        tally = days.setdefault(day, {"day": day, **dict.fromkeys(COLUMNS, 0), "total": 0})
        tally[DELIVERY_FAILED if failed else state] += count
        tally["total"] += count
    tallies = [days[day] for day in sorted(days)]
    total: dict[str, Any] = {"day": "total"}
    for column in (*COLUMNS, "total"):
        total[column] = sum(tally[column] for tally in tallies)
    return [*tallies, total]


def write_period_table(
    stream: IO[str], tallies: list[dict[str, Any]], since: str, until: str
) -> None:
    """Plain aligned columns, one day a line, then the period's total in words."""
    widths = [max(len(field), 10) for field in FIELDS]
    stream.write("  ".join(f.rjust(w) for f, w in zip(FIELDS, widths, strict=True)) + "\n")
    for tally in tallies:
        cells = (str(tally[field]) for field in FIELDS)
        stream.write("  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)) + "\n")
    total = tallies[-1]
    stream.write(
        f"{total['total']} invoices first recorded from {since} to {until}: "
        f"{total['accepted']} accepted, {total[DELIVERY_FAILED]} delivery failed, "
        f"{total['rejected']} rejected, {total['invalid']} invalid, "
        f"{total['pending']} pending, "
        f"{total['unknown'] + total['key_reused'] + total['amended']} to reconcile\n"
    )

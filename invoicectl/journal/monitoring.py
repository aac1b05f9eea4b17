"""What a monitor, ``status`` and the exit policy ask of the journal (the counts, and
``invoicectl/metrics.py``'s questions), each answered from an index.

They are asked after every run, of a journal that may hold a million invoices; each question
here reads an index range of the unsettled invoices (m010's ``invoices_state_id`` and
``invoices_in_delivery``, m013's ``invoices_unfinished``) or of the runs
(``runs_command_ended``), never the history. A state or hold written by hand is one line
(``failures.explain_never_written``), never counted as another.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from invoicectl.errors import JournalError
from invoicectl.journal.database import JournalBase
from invoicectl.journal.failures import explain_never_written
from invoicectl.journal.monitoring_schema import DELIVERY_FAILED
from invoicectl.journal.monitoring_schema import UNFINISHED as _UNFINISHED
from invoicectl.journal.records import Hold, InvoiceState

_Read = TypeVar("_Read")

# Accepted is nearly every invoice of an old journal: it is counted as the rest (the total, a
# count SQLite keeps cheap, less the others), so the counts cost the two index ranges beside
# accepted and the NULLs (a UNION ALL: an OR of them reads the whole index), not the journal's
# years. A state written by hand, none at all too, lies in those: found, not counted as accepted.
_BESIDE_ACCEPTED = "SELECT state, count(*) FROM invoices WHERE state {}{} GROUP BY state"
_SIDES = ("< 'accepted'", "> 'accepted'", "IS NULL")
_NOT_ABANDONED = f" AND (hold IS NULL OR hold <> '{Hold.abandoned}')"


def _known(kind: Callable[[str], _Read], value: str) -> _Read:
    """``value`` read as ``kind``: one no invoicectl writes (the journal changed by hand) is
    one line."""
    try:
        return kind(value)
    except ValueError as error:
        raise JournalError(explain_never_written(None, error)) from None


class MonitoringRecords(JournalBase):
    def refuse_unwritten(self) -> None:
        """One line (``JournalError``) for a state or hold no invoicectl writes, read from
        the index ranges beside accepted and the holds: what a send checks before it starts."""
        self._beside_accepted(on_hold=True)
        self.hold_counts()

    def _beside_accepted(self, *, on_hold: bool) -> list[tuple[InvoiceState, int]]:
        """(state, count) of every state but accepted (``on_hold=False``: but those on
        hold), from the state index's ranges each side of it; one no invoicectl writes is
        refused in one line."""
        unheld = "" if on_hold else " AND hold IS NULL"
        beside = " UNION ALL ".join(_BESIDE_ACCEPTED.format(side, unheld) for side in _SIDES)
        return [(_known(InvoiceState, state), n) for state, n in self.db.execute(beside)]

    def delivery_failure_count(self, *, on_hold: bool = True) -> int:
        """Accepted invoices whose delivery failed, but those abandoned, settled outside
        invoicectl (``on_hold=False``: nor those held, which ask for their hold's decision
        instead), counted from their own index."""
        unheld = " AND hold IS NOT 'abandoned'" if on_hold else " AND hold IS NULL"
        (count,) = self.db.execute(
            f"SELECT count(*) FROM invoices WHERE {DELIVERY_FAILED}{unheld}"
        ).fetchone()
        return int(count)

    def day_counts(self, since: str, before: str) -> list[tuple[str, str, bool, int]]:
        """(day, state, delivery failed, count) of the invoices first recorded on each UTC day
        from ``since`` up to, not including, ``before`` (ISO dates), by day: a period report.
        By invoices_created (m012): a month of a journal of years reads only that month."""
        rows = self.db.execute(
            f"SELECT substr(created_at, 1, 10) AS day, state, {DELIVERY_FAILED}, count(*)"
            " FROM invoices WHERE created_at >= ? AND created_at < ?"
            " GROUP BY day, state, 3 ORDER BY day",
            (since, before),
        ).fetchall()
        return [(day, _known(InvoiceState, state), bool(bad), n) for day, state, bad, n in rows]

    def hold_counts(self) -> dict[Hold, int]:
        """Invoices per kind of hold."""
        counts = dict.fromkeys(Hold, 0)
        rows = self.db.execute(
            "SELECT hold, count(*) FROM invoices WHERE hold IS NOT NULL GROUP BY hold"
        )
        counts.update((_known(Hold, hold), count) for hold, count in rows)
        return counts

    def invoice_total(self) -> int:
        """How many invoices the journal holds (SQLite counts them from the table's pages;
        the PostgreSQL journal keeps the number: ``pg_journal``)."""
        (total,) = self.db.execute("SELECT count(*) FROM invoices").fetchone()
        return int(total)

    def state_counts(self, *, on_hold: bool = True) -> dict[InvoiceState, int]:
        """Invoices per state (``on_hold=False``: but those on hold); a file that yields no
        invoice ID counts as invalid."""
        counts = dict.fromkeys(InvoiceState, 0)
        counts.update(self._beside_accepted(on_hold=on_hold))
        rest = self.invoice_total()
        if not on_hold:  # invoices_held
            (held,) = self.db.execute(
                "SELECT count(*) FROM invoices WHERE hold IS NOT NULL"
            ).fetchone()
            rest -= held
        counts[InvoiceState.accepted] = rest - sum(counts.values())
        (unidentified,) = self.db.execute("SELECT count(*) FROM unidentified_files").fetchone()
        counts[InvoiceState.invalid] += unidentified
        return counts

    # ---- what invoicectl/metrics.py asks ---------------------------------------------

    def oldest_unfinished(self) -> dict[str, str]:
        """State -> the oldest ``ingested_at`` (when the content now to be sent was first seen)
        among the invoices in it, for each unfinished state that holds any, but those
        abandoned: settled outside invoicectl, they wait for nothing."""
        rows = self.db.execute(
            f"SELECT state, min(ingested_at) FROM invoices WHERE {_UNFINISHED}{_NOT_ABANDONED}"
            " GROUP BY state"
        )
        return {str(state): str(oldest) for state, oldest in rows}

    def keys_first_used_between(self, after: str, until: str) -> int:
        """Invoices with a used key and no final answer (unknown, or pending with its key
        used: what a send replays), not abandoned, whose key was first used in (``after``,
        ``until``]."""
        (count,) = self.db.execute(
            f"SELECT count(*) FROM invoices WHERE {_UNFINISHED}{_NOT_ABANDONED}"
            " AND state IN ('pending', 'unknown')"
            " AND key_first_used_at > ? AND key_first_used_at <= ?",
            (after, until),
        ).fetchone()
        return int(count)

    def last_runs(self, commands: tuple[str, ...]) -> dict[str, tuple[str | None, str | None]]:
        """Command -> (when its last run started, when its last run with exit 0 finished),
        for each of ``commands`` that ever ran."""
        found: dict[str, tuple[str | None, str | None]] = {}
        for command in commands:
            (started,) = self.db.execute(
                "SELECT max(started_at) FROM runs WHERE command = ?", (command,)
            ).fetchone()
            if started is None:
                continue
            (succeeded,) = self.db.execute(
                "SELECT max(finished_at) FROM runs WHERE command = ? AND exit_code = 0",
                (command,),
            ).fetchone()
            found[command] = (str(started), None if succeeded is None else str(succeeded))
        return found

    def run_outcomes(self, run_id: int) -> dict[str, int]:
        """Requests of run ``run_id`` per recorded outcome (``no_answer``: none recorded)."""
        rows = self.db.execute(
            "SELECT coalesce(outcome, 'no_answer'), count(*) FROM attempts WHERE run_id = ?"
            " GROUP BY 1",
            (run_id,),
        )
        return {str(outcome): int(count) for outcome, count in rows}

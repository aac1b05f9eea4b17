"""What a monitor asks of the journal (``invoicectl/metrics.py``), each answered from an index.

The metrics are written after every run, of a journal that may hold a million invoices; each
question here reads an index range of the unfinished invoices (m013's ``invoices_unfinished``,
m010's ``invoices_in_delivery``) or of the runs (``runs_command_ended``), never the history.
"""

from __future__ import annotations

from invoicectl.journal.database import JournalBase
from invoicectl.journal.monitoring_schema import UNFINISHED as _UNFINISHED


class MonitoringRecords(JournalBase):
    def oldest_unfinished(self) -> dict[str, str]:
        """State -> the oldest ``ingested_at`` (when the content now to be sent was first seen)
        among the invoices in it, for each unfinished state that holds any."""
        rows = self.db.execute(
            f"SELECT state, min(ingested_at) FROM invoices WHERE {_UNFINISHED} GROUP BY state"
        )
        return {str(state): str(oldest) for state, oldest in rows}

    def keys_first_used_between(self, after: str, until: str) -> int:
        """Invoices with a used key and no final answer (unknown, or pending with its key
        used: what a send replays) whose key was first used in (``after``, ``until``]."""
        (count,) = self.db.execute(
            f"SELECT count(*) FROM invoices WHERE {_UNFINISHED}"
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

"""The requests a run that ended moments ago made: they still count in the API's window."""

from __future__ import annotations

from datetime import datetime, timedelta

from invoicectl.journal.interface import JournalBackend
from invoicectl.lifecycle.window import moment


def recent_starts(journal: JournalBackend, seconds: float) -> list[float]:
    """How long ago (seconds) each request of the last ``seconds`` started. A start the
    wall clock puts in the future (it was set back since) is taken as now: counted as
    recent, it would otherwise hold the limiter for as long as the clock jumped. So is one
    that is no time at all (the journal changed by hand)."""
    now = journal.clock()
    since = (now - timedelta(seconds=seconds)).isoformat()
    return [_ago(now, started) for started in journal.attempt_starts_since(since)]


def _ago(now: datetime, started: str) -> float:
    try:
        return max(0.0, (now - moment(started)).total_seconds())
    except (ValueError, TypeError):
        return 0.0

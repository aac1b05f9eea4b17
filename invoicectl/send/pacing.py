"""The requests a run that ended moments ago made: they still count in the API's window."""

from __future__ import annotations

from datetime import datetime, timedelta

from invoicectl.journal.interface import JournalBackend


def recent_starts(journal: JournalBackend, seconds: float) -> list[float]:
    """How long ago (seconds) each request of the last ``seconds`` started. A start the
    wall clock puts in the future (it was set back since) is taken as now: counted as
    recent, it would otherwise hold the limiter for as long as the clock jumped."""
    now = journal.clock()
    since = (now - timedelta(seconds=seconds)).isoformat()
    return [
        max(0.0, (now - datetime.fromisoformat(started)).total_seconds())
        for started in journal.attempt_starts_since(since)
    ]

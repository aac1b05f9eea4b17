"""The indexes the monitoring queries read (``journal/monitoring.py``), as migrations m012 and
m013 made them: apart from the queries, so that the migrations import them without the
journal's classes."""

from __future__ import annotations

# Accepted, and GoRoute says the delivery failed: a person must decide (m012's index repeats
# this WHERE exactly, so a count or a page of them reads only them in a journal of millions).
DELIVERY_FAILED = "state = 'accepted' AND remote_status = 'failed'"
# Exactly the WHERE of m013's partial index invoices_unfinished, so that SQLite uses it.
UNFINISHED = "state IN ('pending', 'unknown', 'key_reused', 'amended')"
# Migration m013 (shipped: never edited; a change is a new migration).
MONITORING_INDEXES = f"""
    -- The oldest invoice of each unfinished state, and the keys whose 24-hour window is
    -- closing. Only the unfinished are in it, a few among a million accepted: it costs the
    -- sends of accepted invoices nothing, and the queries below read it alone.
    CREATE INDEX invoices_unfinished ON invoices(state, ingested_at, key_first_used_at)
        WHERE {UNFINISHED};
    -- The last run, and the last successful run, of each command.
    CREATE INDEX runs_command_started ON runs(command, started_at);
    CREATE INDEX runs_command_ended ON runs(command, exit_code, finished_at);
"""

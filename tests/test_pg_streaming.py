"""A PostgreSQL journal's big reads stream, as SQLite's do: ``status --format json`` of any
size in flat memory (issue 16). psycopg's own cursor fetches a whole result at ``execute``;
the journal's streamed reads use a server-side cursor, a batch of rows at a time."""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg
import pytest

from invoicectl.journal import open_journal
from invoicectl.journal.pg_connection import STREAM_BATCH
from invoicectl.locations import JournalURL

AT = "2026-01-15T10:00:00+00:00"
_FILL = """
INSERT INTO invoices (invoice_id, document_type, current_sha256, source_path, state,
                      idempotency_key, transaction_id, remote_status, ingested_at,
                      created_at, updated_at)
SELECT 'INV-' || lpad(i::text, 7, '0'), 'Invoice', lpad(i::text, 64, '0'),
       '/outbox/INV-' || lpad(i::text, 7, '0') || '.xml', 'accepted',
       'invoice-INV-' || lpad(i::text, 7, '0'), 'tx-' || i, 'delivered', %s, %s, %s
FROM generate_series(1, %s) AS i
"""


def filled(url: str, count: int) -> JournalURL:
    """A journal of ``count`` accepted invoices, written by plain SQL (fast)."""
    location = JournalURL(url)
    open_journal(location).close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(_FILL, (AT, AT, AT, count))
    return location


def test_a_listing_is_read_a_batch_at_a_time_and_other_reads_go_on_between(pg_url):
    """Before: psycopg's client cursor held all 2,500 rows from the first; no server cursor."""
    location = filled(pg_url, 2500)
    with open_journal(location) as journal:
        listed = journal.listed()
        first = next(listed)
        (cursors,) = journal.db.execute("SELECT count(*) FROM pg_cursors").fetchone()
        assert cursors == 1  # the listing's, on the server
        assert journal.invoice("INV-0002000") is not None  # another read between two rows
        rest = [row.invoice_id for row in listed]
        (after,) = journal.db.execute("SELECT count(*) FROM pg_cursors").fetchone()
    assert first.invoice_id == "INV-0000001" and len(rest) == 2499 > STREAM_BATCH
    assert rest[-1] == "INV-0002500"
    assert after == 0  # let go once read


def test_a_listing_stopped_early_lets_its_cursor_go(pg_url):
    location = filled(pg_url, 10)
    with open_journal(location) as journal:
        listed = journal.listed()
        next(listed)
        listed.close()  # the reader stopped (a closed pipe, a page shown)
        (cursors,) = journal.db.execute("SELECT count(*) FROM pg_cursors").fetchone()
    assert cursors == 0


_PEAK_RSS = """
import os, resource, subprocess, sys
with open(os.devnull, "w") as sink:
    done = subprocess.run(
        [sys.executable, "-m", "invoicectl", "status", "--format", "json", "--journal",
         sys.argv[1]], stdout=sink, stderr=subprocess.PIPE, text=True)
assert done.returncode in (0, 4), done.stderr
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def _peak_rss_kb(location: JournalURL) -> int:
    result = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, location.connection_url()],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ,
    )
    assert result.returncode == 0, result.stderr
    return int(result.stdout.split()[-1])


@pytest.mark.slow
def test_status_json_of_a_large_postgresql_journal_keeps_its_memory_flat(pg_server):
    """The real command's peak RSS with 60,000 invoices against an empty journal. Before:
    about 30 MB more (the whole result in psycopg's client cursor); now within 12 MB."""
    empty = _peak_rss_kb(filled(pg_server.new_database(), 0))
    large = _peak_rss_kb(filled(pg_server.new_database(), 60_000))
    assert large < empty + 12_000, (empty, large)

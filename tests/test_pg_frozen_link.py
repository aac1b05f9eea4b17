"""A worker whose link to PostgreSQL stops answering mid-statement ends (helper-98).

Its connection to the server went through a proxy that froze: the statement waited for good,
the worker ignored SIGTERM, and its session kept the run lock that refuses ``scan``. Once its
lease is lost (``pg_workers.Heartbeat``), its connections are cut and it stops: exit 75.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from sendkit import assert_each_delivered_once, emulator
from test_pg_workers import _drain, _outbox, _scanned, _worker

from invoicectl.sandbox import BackgroundServer

pytestmark = pytest.mark.slow

RELAY = Path(__file__).with_name("tcprelay.py")


def test_a_worker_whose_server_link_freezes_stops_once_its_lease_is_lost(pg_url, tmp_path):
    parts = urlsplit(pg_url)
    relay = subprocess.Popen(
        [sys.executable, str(RELAY), str(parts.port)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert relay.stdout is not None
        port = int(relay.stdout.readline())
        relayed = parts._replace(netloc=f"{parts.username}@127.0.0.1:{port}").geturl()
        outbox, ids = _outbox(tmp_path, 60)
        _scanned(pg_url, outbox)
        sandbox = emulator(latency_ms=20)
        with BackgroundServer(sandbox) as server:
            worker = _worker(outbox, relayed, server.base_url, "--rate", "1200", lease=2.0)
            time.sleep(2.0)  # some sent, the rest on their way
            relay.send_signal(signal.SIGSTOP)
            try:
                _, stderr = worker.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.communicate()
                pytest.fail("the worker still waited on its frozen link after 60 s")
            relay.send_signal(signal.SIGCONT)
            relay.kill()
            _drain(outbox, pg_url, server.base_url, ids)
            stats = sandbox.stats()
    finally:
        relay.kill()
        relay.communicate()
    assert worker.returncode == 75, stderr
    assert "this worker's lease was lost (its server answered nothing for 2 s" in stderr
    assert "check that the server is running" not in stderr and "Traceback" not in stderr
    assert_each_delivered_once(stats, ids)


def test_every_connection_has_tcp_s_own_checks_unless_the_url_sets_them(pg_url):
    """A network cut that drops packets is found in about a minute, not the system's two
    hours: TCP keepalives and a user timeout on each connection the journal opens."""
    from invoicectl.journal.pg_database import open_pg_database
    from invoicectl.locations import JournalURL

    given = f"{pg_url}?keepalives_idle=7"
    for url, idle in ((pg_url, "30"), (given, "7")):
        database = open_pg_database(JournalURL(url))
        try:
            options = {o.keyword: o.val for o in database.conn.raw.pgconn.info}  # type: ignore[attr-defined]
        finally:
            database.close()
        assert options[b"keepalives"] == b"1"
        assert options[b"keepalives_idle"] == idle.encode()
        assert options[b"tcp_user_timeout"] == b"60000"


def test_a_server_that_answers_slowly_never_has_a_worker_cut(pg_url, tmp_path):
    """helper-100: another session held the journal's write lock past a worker's lease while
    its requests were in flight; the renewals, refused after waiting on that lock, counted
    as a server gone, the connection was cut, and answers GoRoute had given went unrecorded."""
    import psycopg

    from invoicectl.journal.pg_connection import WRITE_LOCK

    outbox, ids = _outbox(tmp_path, 40)
    _scanned(pg_url, outbox)
    sandbox = emulator(latency_ms=1500)
    with BackgroundServer(sandbox) as server:
        worker = _worker(
            outbox, pg_url, server.base_url, "--rate", "1200", "--concurrency", "4", lease=2.0
        )
        time.sleep(2.5)  # requests in flight
        with psycopg.connect(pg_url) as holder:
            holder.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            time.sleep(5.0)  # two and a half leases
        _, stderr = worker.communicate(timeout=120)
        delivered = {i for i, count in sandbox.stats()["per_invoice"].items() if count}
    with psycopg.connect(pg_url) as witness:
        unanswered = {
            invoice_id
            for (invoice_id,) in witness.execute(
                "SELECT invoice_id FROM attempts WHERE outcome IS NULL OR outcome = 'unknown'"
            )
        }
    assert "answered nothing" not in stderr, stderr
    assert not delivered & unanswered, (sorted(delivered & unanswered), stderr)


def test_the_tcp_checks_leave_a_service_file_its_say() -> None:
    """helper-100: arguments override pg_service.conf, so a URL naming a service gets none."""
    from invoicectl.journal.pg_connection import network_limits

    assert network_limits("postgresql://u@h/db")["keepalives_idle"] == "30"
    assert "keepalives_idle" not in network_limits("postgresql://u@h/db?keepalives_idle=5")
    assert network_limits("postgresql:///db?service=journal") == {}


def test_a_cut_is_the_reason_only_until_a_journal_is_opened_again(pg_url) -> None:
    """helper-101: the reason of a cut was kept for the whole process: any later lost
    connection, of any journal opened since, was blamed on a lease lost."""
    from invoicectl.journal.pg_connection import why_cut
    from invoicectl.journal.pg_database import open_pg_database
    from invoicectl.locations import JournalURL

    first = open_pg_database(JournalURL(pg_url))
    first.conn.cut("this worker's lease was lost")  # type: ignore[attr-defined]
    assert why_cut() == "this worker's lease was lost"
    first.close()
    open_pg_database(JournalURL(pg_url)).close()
    assert why_cut() is None

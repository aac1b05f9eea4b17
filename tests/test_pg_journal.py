"""The PostgreSQL journal on a real server (tests/pgserver.py): a send, its guarantees, and
what an operator sees when the server is away. The journal's own behaviour on both backends
is in the tests parametrised by ``journal_at`` (conftest)."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest
from hostile import HostileServer, Request, Wire, answer_json
from pgserver import free_port
from sendkit import assert_each_delivered_once, emulator, send, settings_for
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.cli import app
from invoicectl.errors import ExitCode, JournalLocked
from invoicectl.journal import locked_journal, open_journal
from invoicectl.journal.migrations import MIGRATIONS
from invoicectl.journal.pg_database import PG_MIGRATIONS
from invoicectl.journal.records import InvoiceState
from invoicectl.locations import JournalURL, journal_location, redacted
from invoicectl.sandbox import DEFAULT_API_KEY, BackgroundServer

REPO = Path(__file__).resolve().parents[1]


def test_a_send_through_a_postgresql_journal_delivers_each_invoice_once(pg_url, tmp_path):
    outbox = tmp_path / "outbox"
    shutil.copytree(REPO / "sample_invoices", outbox)
    sandbox = emulator()
    settings = settings_for(pg_url)

    _report, summary = send(settings, outbox, sandbox.transport())
    _again, second = send(settings, outbox, sandbox.transport())

    assert summary.exit_code == ExitCode.OK
    assert second.planned == 0 and second.requests == 0
    with open_journal(journal_location(pg_url)) as journal:
        counts = journal.state_counts()
        accepted = [invoice.invoice_id for invoice in journal.invoices(InvoiceState.accepted)]
        attempts = [journal.attempts(invoice_id) for invoice_id in accepted]
    assert counts[InvoiceState.accepted] == 13
    assert all(len(each) == 1 and each[0].outcome == "accepted" for each in attempts)
    assert_each_delivered_once(sandbox.stats(), accepted)


def test_the_stored_bytes_come_back_exactly(pg_url, tmp_path):
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    path = write_invoice(outbox, "INV-BYTES", note="€ æøå ünïcode")
    send(settings_for(pg_url), outbox, emulator().transport())
    with open_journal(journal_location(pg_url)) as journal:
        invoice = journal.invoice("INV-BYTES")
        assert invoice is not None
        assert journal.content(invoice.current_sha256) == path.read_bytes()


def test_a_second_run_on_the_same_database_is_refused_while_one_runs(pg_url):
    location = journal_location(pg_url)
    with (
        locked_journal(location, "send"),
        pytest.raises(JournalLocked, match="one run at a time"),
        locked_journal(location, "reconcile"),
    ):
        pass
    with locked_journal(location, "reconcile"):  # let go when the first ended
        pass


def test_migrations_are_applied_once_and_a_newer_schema_is_refused(pg_url):
    open_journal(journal_location(pg_url)).close()
    open_journal(journal_location(pg_url)).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        (applied,) = conn.execute("SELECT count(*) FROM journal_migrations").fetchone()
        conn.execute("INSERT INTO journal_migrations VALUES ('m999_future', 'x')")
    assert applied == len(MIGRATIONS) + len(PG_MIGRATIONS)  # shared, then pg001_invoice_total
    with pytest.raises(Exception, match="newer invoicectl") as refused:
        open_journal(journal_location(pg_url))
    assert str(refused.value).startswith(f"the journal {journal_location(pg_url)} was written")


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "GOROUTE_API_KEY": DEFAULT_API_KEY, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "invoicectl", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=environ,
    )


def test_an_unreachable_server_is_one_line_exit_75_and_never_the_password():
    url = f"postgresql://clerk:hunter2-secret@127.0.0.1:{free_port()}/invoices"

    for args in (["status"], ["send", str(REPO / "sample_invoices")], ["doctor"]):
        done = _cli(*args, "--journal", url)
        said = done.stdout + done.stderr
        assert "hunter2" not in said
        assert "Traceback" not in said
        if args[0] != "doctor":
            assert done.returncode == ExitCode.INCOMPLETE, said
            assert "postgresql://clerk:***@127.0.0.1" in said and "cannot be reached" in said


def test_a_password_never_shows_in_a_location():
    url = "postgresql://clerk:hunter2@db.example:5432/inv?sslmode=require&password=other"
    location = journal_location(url)
    assert isinstance(location, JournalURL)
    assert "hunter2" not in str(location) + repr(location) and "other" not in str(location)
    assert location.connection_url() == url
    assert redacted("postgresql://clerk@db/inv") == "postgresql://clerk@db/inv"


def test_status_reads_a_postgresql_journal(pg_url, tmp_path):
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    write_invoice(outbox, "INV-S1")
    send(settings_for(pg_url), outbox, emulator().transport())

    result = CliRunner().invoke(app, ["status", "--journal", pg_url, "--json"])

    assert result.exit_code == 0, result.output
    assert '"INV-S1"' in result.output


def test_commands_that_read_the_sqlite_file_itself_say_what_to_do_instead(pg_url, tmp_path):
    for args in (["backup", str(tmp_path / "copy.db")],):
        result = CliRunner().invoke(app, [*args, "--journal", pg_url])
        assert result.exit_code == ExitCode.USAGE, result.output
        assert "works on a SQLite journal" in result.output


@pytest.mark.parametrize("password", ["hunter%zz2", "hunter2 x"])
def test_a_password_libpq_cannot_parse_is_never_echoed_and_is_not_run_again(password):
    """Review 16: libpq quotes a URL token it cannot parse (a bare '%', a space), and a
    password is such a token; the line masks it, and exit 1 (fix the URL), not 75."""
    url = f"postgresql://clerk:{password}@127.0.0.1:{free_port()}/invoices"

    done = _cli("status", "--journal", url)

    said = done.stdout + done.stderr
    assert "hunter" not in said and "Traceback" not in said
    assert done.returncode == ExitCode.COULD_NOT_RUN, said
    assert "postgresql://clerk:***@127.0.0.1" in said


def test_a_connection_lost_mid_send_is_exit_75_and_never_says_nothing_was_changed(pg_url, tmp_path):
    """Review 16: the server ends the journal's connection while a request is out (its
    attempt row committed). The line must not say "nothing was changed" (a request left),
    and the run is incomplete (75: run again), as any lost connection mid-run; the next run
    after the lost worker's lease has run out (1 s here) replays under the same key."""
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    write_invoice(outbox, "INV-L1")
    reply = answer_json(202, {"transaction_id": "tx-1"})
    cut = [True]

    def cutting(request: Request, wire: Wire) -> None:
        if cut:  # the first request only
            cut.clear()
            with psycopg.connect(pg_url, autocommit=True) as conn:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE application_name = 'invoicectl' AND pid <> pg_backend_pid()"
                )
        reply(request, wire)

    with HostileServer(cutting) as server:
        base = {"GOROUTE_BASE_URL": server.base_url, "INVOICECTL_WORKER_LEASE": "1"}
        args = ["send", str(outbox), "--journal", pg_url, "--trust-new-journal"]
        first = _cli(*args, "--no-receiver-check", env=base)
        time.sleep(1.5)  # its claim is the lost worker's until the lease runs out
        second = _cli(*args, "--no-receiver-check", env=base)
        keys = [request.headers.get("idempotency-key") for request in server.requests]

    said = first.stdout + first.stderr
    assert "Traceback" not in said
    assert first.returncode == ExitCode.INCOMPLETE, said
    assert "nothing was changed" not in said and "everything committed before is kept" in said
    assert second.returncode == ExitCode.OK, second.stderr
    assert keys == ["invoice-INV-L1", "invoice-INV-L1"]  # replayed under its key


def test_doctor_checks_the_server_and_says_how_far_apart_the_clocks_are(pg_url):
    result = CliRunner().invoke(app, ["doctor", "--journal", pg_url, "--json"])

    document = json.loads(result.output)
    journal = next(check for check in document["checks"] if check["name"] == "journal")
    assert journal["status"] == "ok", journal
    assert "schema up to date" in journal["message"]
    assert (
        "s behind the server's" in journal["message"]
        or "ahead of the server's" in journal["message"]
    )
    with open_journal(journal_location(pg_url)) as opened:
        assert abs(opened.clock_offset()) < 5  # one machine: the same clock


def test_the_command_that_continues_a_stopped_send_never_shows_the_password(pg_url, tmp_path):
    """`continue with: invoicectl send ... --journal URL` carried the URL as typed, password
    and all, to stderr, `send --json` and a ping's output tail; then, masked, it lost the
    "//" of a URL with no host and became a SQLite path (helper-50). It is the URL as typed
    without its password, which libpq takes from PGPASSWORD or ~/.pgpass."""
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    for number in range(40):
        write_invoice(outbox, f"INV-P{number}")
    with_password = pg_url.replace("postgresql://postgres@", "postgresql://postgres:S3cretPw@")
    assert with_password != pg_url  # the test server trusts loopback: the password is unused
    port = pg_url.split("@127.0.0.1:")[1].split("/")[0]
    database = pg_url.rsplit("/", 1)[1]
    no_host = f"postgresql:///{database}?host=127.0.0.1&port={port}&user=postgres"

    sandbox = emulator(latency_ms=200.0)
    with BackgroundServer(sandbox) as server:
        for given, suggested in ((with_password, pg_url), (no_host, no_host)):
            done = _cli(
                "send", str(outbox), "--journal", given, "--deadline", "0.3", "--json",
                env={"GOROUTE_BASE_URL": server.base_url},
            )  # fmt: skip
            said = done.stdout + done.stderr
            assert "S3cretPw" not in said
            continuing = json.loads(done.stdout)["continue_with"]
            assert continuing.endswith(f"--journal {shlex.quote(suggested)}"), continuing


class CutAfterStartup:
    """A TCP proxy to the test server that lets a connection start, then closes it at the
    client's first query: a backend ended as the journal is being opened."""

    def __init__(self, port: int) -> None:
        import socket

        self.target = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        import socket

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            ready = threading.Event()
            threading.Thread(target=self._down, args=(server, client, ready), daemon=True).start()
            threading.Thread(target=self._up, args=(client, server, ready), daemon=True).start()

    @staticmethod
    def _down(server, client, ready: threading.Event) -> None:
        with contextlib.suppress(OSError):  # the other side closed both
            while data := server.recv(65536):
                client.sendall(data)
                if b"Z\x00\x00\x00\x05I" in data:  # ReadyForQuery, idle: the start is done
                    ready.set()

    @staticmethod
    def _up(client, server, ready: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                if ready.is_set():
                    break
                server.sendall(data)
        client.close()
        server.close()

    def close(self) -> None:
        self.listener.close()


def test_a_connection_lost_while_the_journal_opens_is_exit_75_like_one_never_made(pg_url):
    """Lost at a SET or a migration check, it was exit 1 ("a bug or a setting") where a
    server not reached is exit 75, for the same message: a cron monitor was told two things."""
    port = int(pg_url.split("@127.0.0.1:")[1].split("/")[0])
    proxy = CutAfterStartup(port)
    try:
        cut = pg_url.replace(f"127.0.0.1:{port}", f"127.0.0.1:{proxy.port}")
        done = _cli("status", "--journal", cut + "?sslmode=disable")
    finally:
        proxy.close()
    said = done.stdout + done.stderr
    assert "Traceback" not in said
    assert "cannot be reached" in said, said
    assert done.returncode == ExitCode.INCOMPLETE, said


@pytest.mark.parametrize("wrong", ["database", "user"])
def test_a_login_the_server_refuses_is_exit_1_not_a_server_to_try_again(pg_url, wrong):
    """helper-67: a wrong password, user or database was "cannot be reached ... check that
    the server is running", exit 75: a monitor read it as passing, and no later run would do
    better until someone fixed the URL."""
    # The session's server: postgresql://postgres@127.0.0.1:PORT/DATABASE
    if wrong == "database":
        url = pg_url.rpartition("/")[0] + "/nosuchdb"
    else:
        url = pg_url.replace("://postgres@", "://nobody@", 1)

    done = _cli("status", "--journal", url)

    said = done.stdout + done.stderr
    assert done.returncode == ExitCode.COULD_NOT_RUN, said
    assert "refused the login" in said and "Traceback" not in said

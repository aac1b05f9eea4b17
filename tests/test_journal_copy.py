"""``invoicectl journal copy --to postgresql://...`` (issue 16, item 5): a SQLite journal made
by real scans and sends, copied into an empty PostgreSQL journal on a real server
(tests/pgserver.py), checked, and sent from; the SQLite file left as it was."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pgserver import free_port
from sendkit import assert_each_delivered_once, emulator, send, settings_for
from test_output_contract import check_golden
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.cli import app
from invoicectl.errors import ExitCode
from invoicectl.journal import Journal, open_journal
from invoicectl.journal.copying import CopyMismatch, CopyRefused, copy_journal
from invoicectl.journal.records import InvoiceState
from invoicectl.locations import JournalURL
from invoicectl.sandbox import DEFAULT_API_KEY

runner = CliRunner()


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


def made_journal(tmp_path: Path) -> tuple[Path, Path]:
    """A journal from real scans and sends: sent invoices, an amended one (its file changed
    after it was accepted), a held one, a revision before sending, an invalid file."""
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    journal = tmp_path / "journal.db"
    for number in range(1, 6):
        write_invoice(outbox, f"INV-{number}")
    write_invoice(outbox, "INV-HELD")
    (outbox / "broken.xml").write_text("<nope")
    settings = settings_for(journal)
    sandbox = emulator()
    assert invoke("scan", str(outbox), "--journal", str(journal)).exit_code == 3
    held = invoke("hold", "INV-HELD", "--reason", "ask first", "--journal", str(journal))
    assert held.exit_code == 0, held.output
    send(settings, outbox, sandbox.transport())
    write_invoice(outbox, "INV-2", note="a changed amount")  # amended: sent, then changed
    write_invoice(outbox, "INV-NEW", note="first")
    assert invoke("scan", str(outbox), "--journal", str(journal)).exit_code in (0, 3, 4)
    write_invoice(outbox, "INV-NEW", note="second")  # a second revision before any send
    send(settings, outbox, sandbox.transport())
    return journal, outbox


def table_rows(location: Path | JournalURL, table: str) -> list[tuple[Any, ...]]:
    key = {"blobs": "sha256", "invoices": "invoice_id", "chain": "seq"}.get(table, "id")
    if isinstance(location, Path):
        with sqlite3.connect(location) as conn:
            return [tuple(row) for row in conn.execute(f"SELECT * FROM {table} ORDER BY {key}")]
    with psycopg.connect(location.connection_url()) as conn:
        return [tuple(row) for row in conn.execute(f"SELECT * FROM {table} ORDER BY {key}")]


def public_tables(url: str) -> int:
    with psycopg.connect(url) as conn:
        (tables,) = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone()
    return int(tables)


def test_a_copy_holds_every_row_and_the_sqlite_file_is_as_it_was(tmp_path, pg_url):
    journal, _outbox = made_journal(tmp_path)
    before = sha256_of(journal)
    with Journal(journal) as opened:
        states = {invoice.invoice_id: invoice.state for invoice in opened.invoices()}
        journal_id = opened.identity().journal_id
        head = opened.chain_head()
    assert states["INV-2"] == InvoiceState.amended
    sidecars = sorted(path.name for path in tmp_path.iterdir())

    result = invoke("journal", "copy", "--journal", str(journal), "--to", pg_url)

    assert result.exit_code == 0, result.output
    assert sha256_of(journal) == before
    # SQLite's read-only connection makes the WAL's index beside the file, and writes nothing.
    new = {path.name for path in tmp_path.iterdir()} - set(sidecars)
    assert new <= {"journal.db-wal", "journal.db-shm", "journal.db.moved"}
    assert (
        not (tmp_path / "journal.db-wal").exists()
        or not (tmp_path / "journal.db-wal").stat().st_size
    )
    assert f"chain head {head[0]}:" in result.stdout
    target = JournalURL(pg_url)
    for table in ("invoices", "revisions", "attempts", "events", "runs", "blobs", "chain"):
        assert table_rows(target, table) == table_rows(journal, table), table
    with open_journal(target) as copied:
        assert {i.invoice_id: i.state for i in copied.invoices()} == states
        assert copied.invoice_total() == len(states)  # the server's count follows the copy
        assert copied.identity().journal_id == journal_id
        assert copied.chain_head() == head
        invoice = copied.invoice("INV-2")
        assert invoice is not None and invoice.hold is None
        held = copied.invoice("INV-HELD")
        assert held is not None and held.hold == "held"
        for each in copied.invoices():
            assert copied.content(each.current_sha256) is not None


def test_the_json_document_has_the_golden_keys(tmp_path, pg_url):
    journal, _outbox = made_journal(tmp_path)

    result = invoke("journal", "copy", "--journal", str(journal), "--to", pg_url, "--json")

    document = json.loads(result.stdout)
    assert result.exit_code == 0 == document["exit_code"]
    check_golden("journal_copy", document)
    assert document["tables"]["invoices"] == 7
    assert document["chain_head"]["seq"] > 0 and document["blobs_checked"] >= 7


def test_new_rows_in_the_copy_follow_the_copied_ids(tmp_path, pg_url):
    journal, _outbox = made_journal(tmp_path)
    copy_journal(journal, JournalURL(pg_url))
    with Journal(journal) as source:
        last_event = max(row[0] for row in table_rows(journal, "events"))
        head = source.chain_head()
    with open_journal(JournalURL(pg_url)) as copied:
        copied.add_event("INV-1", "note", "after the copy")
        events = table_rows(JournalURL(pg_url), "events")
        assert events[-1][0] == last_event + 1
        assert copied.chain_head()[0] == head[0] + 1


def test_a_target_that_holds_invoices_is_refused_and_left_as_it_was(tmp_path, pg_url):
    journal, outbox = made_journal(tmp_path)
    target = JournalURL(pg_url)
    send(settings_for(pg_url), outbox, emulator().transport())  # the target has a history
    before = {table: table_rows(target, table) for table in ("invoices", "runs", "chain")}

    result = invoke("journal", "copy", "--journal", str(journal), "--to", pg_url)

    assert result.exit_code == ExitCode.USAGE
    assert "is not empty" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert {table: table_rows(target, table) for table in before} == before


def test_a_source_that_is_not_a_journal_is_refused(tmp_path, pg_url):
    not_sqlite = tmp_path / "notes.db"
    not_sqlite.write_text("not a database at all\n" * 10)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE things (id INTEGER PRIMARY KEY)")
    looping = tmp_path / "loop.db"
    looping.symlink_to(looping)  # was "no SQLite journal at"
    directory = tmp_path / "journal.d"
    directory.mkdir()
    fifo = tmp_path / "journal.fifo"
    os.mkfifo(fifo)
    empty = tmp_path / "empty.db"
    empty.touch()
    linked = tmp_path / "linked.db"
    os.link(shutil.copy(other, tmp_path / "first name.db"), linked)
    # helper-56: the first two were "no SQLite journal at", the empty file "not a SQLite
    # database", and the hard link was copied; now each is the line every command says.
    for source, said in (
        (directory, "is not a regular file but a directory"),
        (fifo, "is not a regular file but a FIFO (named pipe)"),
        (empty, "is empty (0 bytes)"),
        (linked, "is one of 2 names (hard links) of the same file"),
        (not_sqlite, "not a SQLite database"),
        (other, "holds no invoicectl journal"),
        (tmp_path / "missing.db", "no SQLite journal at"),
        (looping, "cannot be looked at: Too many levels of symbolic links"),
    ):
        result = invoke("journal", "copy", "--journal", str(source), "--to", pg_url)
        assert result.exit_code == ExitCode.USAGE, result.output
        assert said in result.stderr
    assert public_tables(pg_url) == 0  # the target was never given a journal's tables


def test_a_source_at_an_older_schema_is_refused_unchanged(tmp_path, pg_url):
    journal, _outbox = made_journal(tmp_path)
    with sqlite3.connect(journal) as conn:
        conn.execute("DELETE FROM _sqlite_migrations WHERE name = 'm013_indexes_for_monitoring'")
    conn.close()
    before = sha256_of(journal)

    with pytest.raises(CopyRefused, match="older schema .*m013"):
        copy_journal(journal, JournalURL(pg_url))
    assert sha256_of(journal) == before


def test_an_unreachable_target_is_exit_75_and_never_shows_the_password(tmp_path):
    journal, _outbox = made_journal(tmp_path)
    url = f"postgresql://invoicectl:s3cret-pw@127.0.0.1:{free_port()}/journal"

    result = invoke("journal", "copy", "--journal", str(journal), "--to", url)
    as_json = invoke("journal", "copy", "--journal", str(journal), "--to", url, "--json")

    assert result.exit_code == ExitCode.INCOMPLETE == as_json.exit_code
    assert "cannot be reached" in result.stderr
    for text in (result.stdout, result.stderr, as_json.stdout, as_json.stderr):
        assert "s3cret-pw" not in text
    assert json.loads(as_json.stdout)["exit_code"] == ExitCode.INCOMPLETE


def test_a_copy_that_fails_half_way_leaves_the_target_empty(tmp_path, pg_url):
    journal, _outbox = made_journal(tmp_path)
    with sqlite3.connect(journal) as conn:  # a row PostgreSQL cannot hold: text in a number
        conn.execute("UPDATE runs SET pid = 'not a number' WHERE id = 1")
    conn.close()

    with pytest.raises(CopyMismatch, match="rolled back"):
        copy_journal(journal, JournalURL(pg_url))

    for table in ("invoices", "blobs", "revisions", "attempts"):
        assert table_rows(JournalURL(pg_url), table) == [], table


def test_a_blob_whose_bytes_do_not_hash_to_its_sha256_fails_the_check(tmp_path, pg_url):
    journal, _outbox = made_journal(tmp_path)
    with sqlite3.connect(journal) as conn:
        (sha256,) = conn.execute("SELECT sha256 FROM blobs LIMIT 1").fetchone()
        conn.execute("UPDATE blobs SET data = ?, codec = NULL WHERE sha256 = ?", (b"x", sha256))
    conn.close()

    result = invoke("journal", "copy", "--journal", str(journal), "--to", pg_url)

    assert result.exit_code == 1
    assert "table blobs" in result.stderr and sha256[:16] in result.stderr
    assert table_rows(JournalURL(pg_url), "invoices") == []


def test_the_copy_waits_for_no_run_and_refuses_while_one_holds_the_journal(tmp_path, pg_url):
    from invoicectl.journal.runlock import RunLock

    journal, _outbox = made_journal(tmp_path)
    with RunLock(journal, command="send"):
        result = invoke("journal", "copy", "--journal", str(journal), "--to", pg_url)
    assert result.exit_code == ExitCode.LOCKED
    assert "holds the journal" in result.stderr
    assert public_tables(pg_url) == 0  # the target was not even migrated


def test_sending_after_the_copy_delivers_each_invoice_once(tmp_path, pg_url):
    """Send from SQLite with answers lost, copy, send from PostgreSQL: the accepted are not
    sent again, the unanswered replayed under their key, the history check content."""
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    ids = [f"INV-{number:03}" for number in range(1, 41)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    journal = tmp_path / "journal.db"
    sandbox = emulator(drop_rate=0.3)
    send(settings_for(journal), outbox, sandbox.transport(), policy=_no_retry())
    checks = table_rows(journal, "history_checks")
    with Journal(journal) as source:
        unknown = {i.invoice_id: i.idempotency_key for i in source.invoices(InvoiceState.unknown)}
        accepted = [i.invoice_id for i in source.invoices(InvoiceState.accepted)]
    assert unknown and accepted  # some answers were lost, some were not

    copied = invoke("journal", "copy", "--journal", str(journal), "--to", pg_url)
    assert copied.exit_code == 0, copied.output
    sandbox.set_faults(drop_rate=0.0)
    _report, summary = send(settings_for(pg_url), outbox, sandbox.transport())

    assert summary.exit_code == ExitCode.OK, summary
    with open_journal(JournalURL(pg_url)) as target:
        assert {i.invoice_id for i in target.invoices(InvoiceState.accepted)} == set(ids)
        for invoice_id, key in unknown.items():
            invoice = target.invoice(invoice_id)
            assert invoice is not None and invoice.idempotency_key == key
            replays = target.attempts(invoice_id)
            assert len(replays) == 2 and {a.idempotency_key for a in replays} == {key}
        for invoice_id in accepted:
            assert len(target.attempts(invoice_id)) == 1  # never sent again
    # The marker names this journal and its last run: no second check of GoRoute's history.
    assert table_rows(JournalURL(pg_url), "history_checks") == checks
    assert_each_delivered_once(sandbox.stats(), ids)


def _no_retry() -> Any:
    from invoicectl.goroute.retry import RetryPolicy

    return RetryPolicy(max_attempts=1, max_wait=0.1, backoff_initial=0.01, backoff_max=0.01)


def test_a_copy_that_reads_back_otherwise_is_rolled_back_naming_the_table(tmp_path, pg_url):
    """The server changes what it is given (a trigger stands for any such fault): the rows
    read back are not the source's, and nothing of the copy is kept."""
    journal, _outbox = made_journal(tmp_path)
    assert invoke("status", "--journal", pg_url).exit_code in (0, 75)  # migrates the target
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN NEW.reason := 'changed on the way'; RETURN NEW; END $$"
        )
        conn.execute(
            "CREATE TRIGGER touch BEFORE INSERT ON invoices FOR EACH ROW EXECUTE FUNCTION touch()"
        )

    result = invoke("journal", "copy", "--journal", str(journal), "--to", pg_url)

    assert result.exit_code == 1
    assert "the copy of table invoices" in result.stderr and "rolled back" in result.stderr
    for table in ("invoices", "blobs", "attempts", "runs", "events"):
        assert table_rows(JournalURL(pg_url), table) == [], table


def test_the_row_digest_tells_a_value_of_another_type():
    from invoicectl.journal.copy_checks import RowDigest

    def digest(*row: Any) -> str:
        made = RowDigest()
        made.add(row)
        return made.hexdigest()

    forms = [(1,), ("1",), (1.0,), (b"1",), (None,), ("",), ("a", "b"), ("ab",), ("a\n",)]
    assert len({digest(*row) for row in forms}) == len(forms)


@pytest.mark.slow
def test_a_copy_killed_half_way_leaves_the_target_empty_and_can_be_run_again(tmp_path, pg_url):
    """kill -9 while the rows stream in: the server rolls the transaction back; the next
    copy finds the target empty and completes."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from historykit import add_history

    journal = tmp_path / "journal.db"
    with Journal(journal) as opened:
        add_history(opened, 4000)
    before = sha256_of(journal)
    args = [sys.executable, "-m", "invoicectl", "journal", "copy", "--journal", str(journal)]
    child = subprocess.Popen(
        [*args, "--to", pg_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    copying = False
    with psycopg.connect(pg_url, autocommit=True) as watch:
        deadline = time.monotonic() + 60
        while child.poll() is None and time.monotonic() < deadline and not copying:
            (copying,) = watch.execute(
                "SELECT count(*) > 0 FROM pg_stat_activity WHERE query LIKE 'COPY %'"
                " AND state = 'active' AND pid != pg_backend_pid()"
            ).fetchone()
    os.kill(child.pid, signal.SIGKILL)
    child.communicate(timeout=60)
    assert copying, "the copy ended before it could be killed"

    for table in ("invoices", "blobs", "attempts", "runs", "revisions"):
        assert table_rows(JournalURL(pg_url), table) == [], table
    again = invoke("journal", "copy", "--journal", str(journal), "--to", pg_url, "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["tables"]["invoices"] == 4000
    assert sha256_of(journal) == before


def test_a_database_of_something_else_or_a_newer_journal_is_refused(tmp_path, pg_server):
    journal, _outbox = made_journal(tmp_path)
    other = pg_server.new_database()
    with psycopg.connect(other, autocommit=True) as conn:
        conn.execute("CREATE TABLE customers (id int)")
    newer = pg_server.new_database()
    assert invoke("status", "--journal", newer).exit_code in (0, 75)  # a journal, migrated
    with psycopg.connect(newer, autocommit=True) as conn:
        conn.execute("INSERT INTO journal_migrations VALUES ('m099_from_the_future', 'now')")

    foreign = invoke("journal", "copy", "--journal", str(journal), "--to", other)
    future = invoke("journal", "copy", "--journal", str(journal), "--to", newer)

    assert foreign.exit_code == ExitCode.USAGE == future.exit_code
    assert "holds tables that are not a journal's (customers)" in foreign.stderr
    assert "newer invoicectl (migrations m099_from_the_future)" in future.stderr
    assert public_tables(other) == 1  # no journal's tables made beside the customers


def test_after_a_copy_the_sqlite_file_is_an_archive_no_run_writes(tmp_path, pg_url, monkeypatch):
    """Both journals carry one identity and continue from one chain head: a send from the
    old file after the move would look, to the new journal, like nothing was sent."""
    journal, outbox = made_journal(tmp_path)
    assert invoke("journal", "copy", "--journal", str(journal), "--to", pg_url).exit_code == 0
    before = sha256_of(journal)
    write_invoice(outbox, "INV-AFTER")
    monkeypatch.setenv("GOROUTE_API_KEY", DEFAULT_API_KEY)

    link = tmp_path / "elsewhere" / "journal.db"  # as a cron job may name it
    link.parent.mkdir()
    link.symlink_to(journal)

    refused = [
        invoke(*command, "--journal", str(path))
        for command in (["send", str(outbox)], ["scan", str(outbox)], ["release", "INV-HELD"])
        for path in (journal, link)
    ]

    for result in refused:
        assert result.exit_code == ExitCode.COULD_NOT_RUN, result.output
        assert "is an archive now" in result.output and "postgresql://" in result.output
    assert sha256_of(journal) == before
    assert invoke("status", "--journal", str(journal)).exit_code in (0, 3, 4)  # reading: yes
    (tmp_path / "journal.db.moved").unlink()  # how a person undoes the move
    assert invoke("scan", str(outbox), "--journal", str(journal)).exit_code in (0, 3, 4)


def test_a_committed_copy_whose_note_cannot_be_written_says_it_is_committed(tmp_path, pg_url):
    """The note beside the file could not be written after the commit (here a directory
    squats its temporary name): the copy said only 'cannot use ...', and exit 1 reads as
    rolled back while PostgreSQL held it all (found by a review of several servers)."""
    from invoicectl.errors import JournalError
    from invoicectl.journal.moved import note_of

    journal, _outbox = made_journal(tmp_path)
    squatter = note_of(journal).with_name(note_of(journal).name + ".partial")
    squatter.mkdir()

    with pytest.raises(JournalError, match=r"is committed, but .* could not be written"):
        copy_journal(journal, JournalURL(pg_url))

    assert table_rows(JournalURL(pg_url), "invoices") != []  # committed, as it says


def test_a_copy_killed_between_its_commit_and_its_note_is_completed_by_a_rerun(
    tmp_path, pg_url, monkeypatch
):
    """Killed after PostgreSQL committed and before ``journal.db.moved`` was written: a rerun
    said the target "is not empty ... nothing was written", and the SQLite file went on
    sending beside a PostgreSQL journal of the same identity (found by a crash review). The
    rerun finds its own journal there (journal_id and chain head) and writes the note."""
    journal, outbox = made_journal(tmp_path)
    assert invoke("journal", "copy", "--journal", str(journal), "--to", pg_url).exit_code == 0
    note = tmp_path / "journal.db.moved"
    note.unlink()  # as the kill left it: committed, no note
    target = JournalURL(pg_url)
    before = {table: table_rows(target, table) for table in ("invoices", "chain", "events")}
    with Journal(journal) as opened:
        journal_id = opened.identity().journal_id
        head = opened.chain_head()

    result = invoke("journal", "copy", "--journal", str(journal), "--to", pg_url)

    assert result.exit_code == 0, result.output
    said = " ".join(result.stdout.split())
    assert said == (
        f"the earlier copy of {journal} to {pg_url} had completed: the target holds this "
        f"journal ({journal_id}, chain head {head[0]}:{head[1][:16]} equal in both); nothing "
        "was copied again. The note that makes the SQLite file an archive is written now."
    )
    assert json.loads(note.read_text())["moved_to"] == pg_url
    assert {table: table_rows(target, table) for table in before} == before
    write_invoice(outbox, "INV-AFTER")
    monkeypatch.setenv("GOROUTE_API_KEY", DEFAULT_API_KEY)
    sent = invoke("send", str(outbox), "--journal", str(journal))
    assert sent.exit_code == ExitCode.COULD_NOT_RUN and "is an archive now" in sent.output


def test_export_after_the_move_gives_advice_that_can_be_followed(tmp_path, pg_url):
    """helper-61: `export` of the PostgreSQL journal said "copy it to SQLite to export from
    it", and no command copies a journal to SQLite. What it says now is what works: the
    archive's export, and `verify` on PostgreSQL."""
    journal, _ = made_journal(tmp_path)
    assert invoke("journal", "copy", "--journal", str(journal), "--to", pg_url).exit_code == 0
    dest = tmp_path / "audit"

    refused = invoke("export", str(dest), "--journal", pg_url)

    assert refused.exit_code == ExitCode.USAGE, refused.output
    assert refused.stderr.splitlines()[0] == (
        f"invoicectl: error: export works on a SQLite journal, not {pg_url}: invoicectl cannot"
        " export from PostgreSQL yet: what was sent before a `journal copy` to it exports from"
        " the SQLite file copied (an archive now: --journal /path/to/journal.db); `invoicectl"
        " verify` checks this journal, hash chain included; what was sent since has no signed"
        " export"
    )
    assert not dest.exists()
    exported = invoke("export", str(dest), "--journal", str(journal))  # the archive
    assert exported.exit_code == 0, exported.output
    checked = invoke("verify-export", str(dest))
    assert checked.exit_code == 0, checked.output
    verified = invoke("verify", "--journal", pg_url)
    assert verified.exit_code == 0, verified.output

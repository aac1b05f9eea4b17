"""What the hash chain covers, how an old journal gets it, and what that costs in memory.

Every table whose rows are evidence is chained: invoices, attempts, the audit trail, and
(from m011) revisions, runs, history checks and the environment binding. An upgrade chains
what a journal of years holds a batch at a time, and ``verify`` and ``export`` read it in
flat memory: the peak of Python's allocations does not grow with the journal.
"""

from __future__ import annotations

import json
import sqlite3
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
from auditkit import fill, strip_chain
from backends import chain_findings, witness_execute, witness_rows
from sendkit import emulator, send, settings_for
from ublfactory import write_invoice

from invoicectl.audit import findings
from invoicectl.audit.export import export
from invoicectl.audit.signing import load_or_create
from invoicectl.audit.verify import verify
from invoicectl.journal import Journal, open_journal
from invoicectl.journal.chain import append_rows, start
from invoicectl.locations import Location

IDS = [f"C-{number:03d}" for number in range(4)]


@pytest.fixture
def sent(journal_at: Location, outbox: Path) -> Location:
    path = journal_at
    for invoice_id in IDS:
        write_invoice(outbox, invoice_id)
    send(settings_for(path), outbox, emulator().transport())
    return path


def kinds(path: Location) -> list[str]:
    return [kind for (kind,) in witness_rows(path, "SELECT kind FROM chain ORDER BY seq")]


def count(path: Location, table: str) -> int:
    return int(witness_rows(path, f"SELECT count(*) FROM {table}")[0][0])


def test_revisions_runs_history_checks_and_the_binding_are_chained(sent: Location):
    chained = kinds(sent)
    assert chained.count("revision") == count(sent, "revisions") == len(IDS)
    assert chained.count("run") == 2 * count(sent, "runs")  # at its start and at its end
    # A journal's first send checks once: the check begun, then its end (2d2ad6a).
    assert chained.count("history_check") == count(sent, "history_checks") == 2
    outcomes = witness_rows(sent, "SELECT outcome FROM history_checks ORDER BY id")
    assert [json.loads(outcome) for (outcome,) in outcomes][0] == {"begun": True}
    assert chained.count("environment") == 1
    assert chain_findings(sent) == []


def test_a_due_date_read_again_is_chained_with_its_revision(sent: Location):
    ((revision_id, sha256),) = witness_rows(
        sent, "SELECT id, sha256 FROM revisions WHERE invoice_id = 'C-001'"
    )
    with open_journal(sent) as journal:
        journal.record_due_date("C-001", sha256, "2030-01-31")
    ((payload,),) = witness_rows(
        sent, "SELECT payload FROM chain WHERE kind = 'revision' ORDER BY seq DESC LIMIT 1"
    )
    event = json.loads(payload)
    assert event["key"] == revision_id
    assert json.loads(event["row"]["facts"])["due_date"] == "2030-01-31"
    assert chain_findings(sent) == []


def test_verify_counts_every_problem_and_keeps_the_first_to_list(
    sent: Location, monkeypatch: pytest.MonkeyPatch
):
    """A journal damaged in every row (an UPDATE by hand) was one finding per row, all kept
    in memory to the end: a million of them for a journal of a million."""
    monkeypatch.setattr(findings, "LISTED", 2)
    witness_execute(sent, "UPDATE invoices SET source_path = 'changed by hand'")

    result = verify(sent)

    assert result.problems == len(IDS) and not result.ok
    assert len(result.findings) == 2 and result.unlisted == len(IDS) - 2
    assert result.summary().startswith(f"{len(IDS)} problem(s) ({len(IDS) - 2} more not listed)")
    assert result.as_dict()["problems_not_listed"] == len(IDS) - 2


def test_an_upgrade_chains_every_row_a_journal_already_holds(tmp_path: Path, outbox: Path):
    """m009's genesis and m011's coverage event, then one event per row there. (SQLite's
    only: a PostgreSQL journal is made with the chain, never upgraded to it.)"""
    sent = tmp_path / "journal.db"
    for invoice_id in IDS:
        write_invoice(outbox, invoice_id)
    send(settings_for(sent), outbox, emulator().transport())
    strip_chain(sent)
    Journal(sent).close()
    chained = kinds(sent)
    assert chained[0] == "genesis"
    coverage = chained.index("coverage")
    assert chained[1:coverage].count("invoice") == len(IDS)
    assert chained[coverage + 1 :].count("revision") == len(IDS)
    assert chained[coverage + 1 :].count("run") == count(sent, "runs")
    with sqlite3.connect(sent) as conn:
        (payload,) = conn.execute("SELECT payload FROM chain WHERE kind = 'coverage'").fetchone()
    assert json.loads(payload)["tables"] == ["revisions", "runs", "history_checks", "environment"]
    assert verify(sent).findings == []


def test_an_upgrade_writes_events_in_the_form_the_write_methods_do(tmp_path: Path):
    """chain.start writes rows that were there before the chain as append_rows writes a
    row it has just seen written: one form for an auditor to read."""
    made = {}
    for name, write in (("append_rows", append_rows), ("start", None)):
        conn = sqlite3.connect(tmp_path / f"{name}.db", isolation_level=None)
        conn.executescript(
            "CREATE TABLE blobs (sha256 TEXT PRIMARY KEY);"
            "CREATE TABLE identity (id INTEGER PRIMARY KEY, journal_id TEXT);"
            "CREATE TABLE invoices (invoice_id TEXT PRIMARY KEY, state TEXT, n INTEGER);"
            "CREATE TABLE attempts (id INTEGER PRIMARY KEY, invoice_id TEXT, duration REAL);"
            "CREATE TABLE events (id INTEGER PRIMARY KEY, invoice_id TEXT, detail TEXT);"
            "CREATE TABLE chain (seq INTEGER PRIMARY KEY, kind TEXT, invoice_id TEXT,"
            " payload TEXT, hash TEXT);"
            "INSERT INTO invoices VALUES ('A-1', 'accepted', 3), ('Ü/2', NULL, NULL);"
            "INSERT INTO attempts VALUES (7, 'A-1', 0.25);"
            "INSERT INTO events VALUES (9, NULL, 'é');"
        )
        start(conn, "2026-01-01T00:00:00+00:00")
        if write is not None:  # the same rows again, as the write methods chain them
            write(conn, "invoices", ["A-1", "Ü/2"], "2026-01-01T00:00:00+00:00")
            write(conn, "attempts", [7], "2026-01-01T00:00:00+00:00")
            write(conn, "events", [9], "2026-01-01T00:00:00+00:00")
        rows = conn.execute("SELECT kind, invoice_id, payload FROM chain ORDER BY seq").fetchall()
        made[name] = [(kind, invoice_id, json.loads(payload)) for kind, invoice_id, payload in rows]
    backfilled, appended = made["start"][1:], made["append_rows"][5:]
    for event in (*backfilled, *appended):
        event[2].pop("seq")
    assert appended == backfilled


def peak(work: Callable[[], object]) -> int:
    """The peak of Python's own allocations while ``work`` runs (SQLite's page cache, which
    is bounded by its cache size, is not counted)."""
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def journals(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """A small and a three times larger journal from before the chain (auditkit.fill)."""
    import sqlite_utils.migrations  # noqa: F401  (imported before the first measurement)

    made = {}
    for size in (1000, 3000):
        made[size] = tmp_path_factory.mktemp(f"journal{size}") / "journal.db"
        fill(made[size], size)
    return made


@pytest.fixture(scope="module")
def upgrade_peaks(journals: dict[int, Path]) -> dict[int, int]:
    return {size: peak(lambda p=path: Journal(p).close()) for size, path in journals.items()}


@pytest.mark.slow
def test_an_upgrade_of_a_large_journal_reads_it_in_batches(upgrade_peaks: dict[int, int]):
    assert upgrade_peaks[3000] < 1.5 * upgrade_peaks[1000], upgrade_peaks


@pytest.mark.slow
def test_verify_of_a_large_journal_runs_in_flat_memory(
    journals: dict[int, Path], upgrade_peaks: dict[int, int]
):
    results = {}
    peaks = {}
    for size, path in journals.items():
        peaks[size] = peak(lambda p=path, s=size: results.__setitem__(s, verify(p)))
    assert results[3000].findings == [] and results[3000].blobs_checked == 3000
    assert results[3000].attempts_checked == 3000
    assert peaks[3000] < 1.5 * peaks[1000], peaks


@pytest.mark.slow
def test_export_of_a_large_journal_holds_little_per_invoice(
    journals: dict[int, Path], upgrade_peaks: dict[int, int], tmp_path: Path
):
    """What an export must hold grows with it (the manifest lists every file, and is signed
    whole): a few hundred bytes an invoice, not the invoices' events."""
    from datetime import UTC, datetime

    key, _ = load_or_create(tmp_path / "key.pem")
    peaks = {
        size: peak(lambda p=path, s=size: export(p, tmp_path / f"x{s}", key, now=datetime.now(UTC)))
        for size, path in journals.items()
    }
    per_invoice = (peaks[3000] - peaks[1000]) / 2000
    assert per_invoice < 1000, (per_invoice, peaks)
    from invoicectl.audit.verify_export import verify_export

    checked = {
        size: peak(lambda s=size: verify_export(tmp_path / f"x{s}")) for size in journals
    }  # the manifest it checks, parsed: under 2 KB an invoice, not the part's every path
    per_invoice = (checked[3000] - checked[1000]) / 2000
    assert per_invoice < 2500, (per_invoice, checked)


def test_verify_and_export_read_the_journal_as_it_was_when_they_began(tmp_path: Path, outbox: Path):
    """A send that commits while verify reads must not make its new rows look written
    outside invoicectl (they came after the chain was read): one read transaction.
    (SQLite's: verify and export read the SQLite file.)"""
    from invoicectl.journal.audit import AuditReader

    sent = tmp_path / "journal.db"
    for invoice_id in IDS:
        write_invoice(outbox, invoice_id)
    send(settings_for(sent), outbox, emulator().transport())

    with AuditReader(sent) as reader:
        before = reader.head()
        reader.begin_last_events()
        with Journal(sent) as journal:
            journal.add_event("C-001", "note", "written while an audit reads")
        assert reader.head() == before
        assert [key for key, *_ in reader.rows_and_last_events("events")] == []
    with AuditReader(sent) as reader:
        assert reader.head()[0] == before[0] + 1


def test_no_command_deletes_what_the_chain_and_the_archive_rest_on():
    """Retention (issue 14): stored bytes, revisions, attempts and the chain are never
    deleted by invoicectl; a prune, if one is added, must come with its own rules."""
    import re

    package = Path(__file__).resolve().parents[1] / "invoicectl"
    deleting = re.compile(r"DELETE\s+FROM\s+(blobs|revisions|attempts|chain|invoices)\b", re.I)
    found = [
        f"{path.relative_to(package)}: {match.group(0)}"
        for path in package.rglob("*.py")
        for match in deleting.finditer(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_a_journal_whose_chain_alone_was_taken_away_is_refused_not_chained_anew(
    tmp_path: Path, outbox: Path
):
    """Rows edited, then the chain and its two migrations' records removed: any command
    applied m009 and m011 again and started a fresh chain over the forged rows, which verify
    then called whole (found by a review for auditors)."""
    from invoicectl.errors import JournalError

    path = tmp_path / "journal.db"
    write_invoice(outbox, "INV-1")
    send(settings_for(path), outbox, emulator().transport())
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE attempts SET transaction_id = 'txn_FORGED'")
        conn.execute("DROP TABLE chain")
        conn.execute(
            "DELETE FROM _sqlite_migrations WHERE name IN"
            " ('m009_audit_chain', 'm011_chain_covers_revisions_and_runs')"
        )
    conn.close()

    with pytest.raises(JournalError, match="lacks migration m009_audit_chain but records later"):
        open_journal(path).close()
    with sqlite3.connect(path) as conn:  # nothing was changed
        assert (
            conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'chain'").fetchone()[0]
            == 0
        )
    conn.close()

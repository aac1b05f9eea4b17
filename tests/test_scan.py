"""Ingest rules against a real journal file and real files (design.md, "The journal")."""

from __future__ import annotations

import base64
import hashlib
import os
import random
import sqlite3
import stat
from datetime import timedelta
from pathlib import Path

import lz4.frame
import pytest
from backends import another_journal
from conftest import SHARED
from journalkit import force
from sqlite_utils import Database
from sqlite_utils.migrations import Migrations
from test_unreadable_files import unprivileged
from ublfactory import invoice_xml, write_invoice

from invoicectl.errors import JournalError, JournalLocked, UsageError
from invoicectl.journal import Journal, locked_journal, open_journal, peek_stored
from invoicectl.journal.audit import AuditReader
from invoicectl.journal.migrations import m001_initial
from invoicectl.journal.runlock import RunLock
from invoicectl.lifecycle.decisions import check_new_version
from invoicectl.lifecycle.holds import release
from invoicectl.locations import Location
from invoicectl.scan.ingest import OpenScan, scan_directory
from invoicectl.send.outbox_turns import marked_below


@pytest.fixture
def journal(journal_at: Location):
    with open_journal(journal_at) as opened:
        yield opened


def states(journal: Journal) -> dict[str, str]:
    return {row.invoice_id: row.state for row in journal.invoices()}


def test_new_files_become_pending_and_keep_their_exact_bytes(journal: Journal, outbox: Path):
    path = write_invoice(outbox, "INV-1")
    write_invoice(outbox, "INV-2", currency="SEK")

    report = scan_directory(journal, outbox)

    assert sorted(report.new) == ["INV-1", "INV-2"]
    assert states(journal) == {"INV-1": "pending", "INV-2": "pending"}
    row = journal.invoice("INV-1")
    assert row.receiver_scheme == "9915" and row.receiver_id == "phase4-test-receiver"
    assert journal.content(row.current_sha256) == path.read_bytes()


def test_rescan_of_unchanged_directory_changes_nothing(journal: Journal, outbox: Path):
    for number in range(5):
        write_invoice(outbox, f"INV-{number}")
    scan_directory(journal, outbox)
    before = list(journal.invoices())

    report = scan_directory(journal, outbox)

    assert (report.new, report.changed, report.unchanged) == ([], [], 5)
    assert list(journal.invoices()) == before


def test_changed_file_never_sent_replaces_the_revision_to_send(journal: Journal, outbox: Path):
    path = write_invoice(outbox, "INV-1", amount="100.00")
    scan_directory(journal, outbox)
    write_invoice(outbox, "INV-1", amount="110.00")

    report = scan_directory(journal, outbox)

    assert report.changed == ["INV-1"]
    row = journal.invoice("INV-1")
    assert row.state == "pending" and row.payable_amount == "110.00"
    assert journal.content(row.current_sha256) == path.read_bytes()
    assert len(journal.revisions("INV-1")) == 2


def test_a_scan_stopped_before_settling_is_settled_by_the_next(
    journal: Journal, outbox: Path, monkeypatch: pytest.MonkeyPatch
):
    write_invoice(outbox, "INV-1", amount="310.00", currency="SEK")
    (outbox / "INV-2.xml").write_bytes(
        invoice_xml("INV-2").replace(b'schemeID="9915"', b"")  # no receiver scheme
    )

    def stop(self: Journal) -> None:
        raise KeyboardInterrupt  # after the bytes and revisions were committed

    with monkeypatch.context() as patch:
        patch.setattr(type(journal), "name_known_content", stop)
        with pytest.raises(KeyboardInterrupt):
            scan_directory(journal, outbox)
    revisions = journal.db.execute("SELECT * FROM revisions").fetchall()
    assert journal.invoices() == [] and len(revisions) == 2

    report = scan_directory(journal, outbox)  # the files' stats prove them unchanged

    assert sorted(report.new) == ["INV-1", "INV-2"]
    one, two = journal.invoice("INV-1"), journal.invoice("INV-2")
    assert (one.state, one.currency, one.payable_amount) == ("pending", "SEK", "310.00")
    assert (one.receiver_scheme, one.sender_endpoint) == ("9915", "0088:7300010000001")
    assert two.state == "invalid" and "no schemeID" in two.reason


def test_two_files_with_one_id_make_it_invalid_naming_both(journal: Journal, outbox: Path):
    write_invoice(outbox, "INV-1", name="a.xml", amount="1.00")
    write_invoice(outbox, "INV-1", name="b.xml", amount="2.00")

    report = scan_directory(journal, outbox)

    row = journal.invoice("INV-1")
    assert row.state == "invalid"
    assert row.reason == (
        "invoice ID INV-1 is in 2 files with different content (a.xml, b.xml); "
        "keep one file per invoice ID"
    )
    assert [problem.subject for problem in report.invalid] == ["INV-1"]

    (outbox / "b.xml").unlink()
    scan_directory(journal, outbox)
    assert journal.invoice("INV-1").state == "pending"


def test_identical_copies_of_one_invoice_are_not_a_conflict(journal: Journal, outbox: Path):
    write_invoice(outbox, "INV-1", name="a.xml")
    write_invoice(outbox, "INV-1", name="copy-of-a.xml")

    report = scan_directory(journal, outbox)

    assert report.invalid == [] and states(journal) == {"INV-1": "pending"}


def test_repeated_ids_among_many_files_read_by_workers(journal: Journal, outbox: Path):
    for number in range(250):
        write_invoice(outbox, f"INV-{number:03}")
    write_invoice(outbox, "COPY-1", name="z-copy.xml")
    write_invoice(outbox, "COPY-1", name="a-copy.xml")
    write_invoice(outbox, "CLASH-1", name="m-clash.xml", amount="1.00")
    write_invoice(outbox, "CLASH-1", name="b-clash.xml", amount="2.00")

    report = scan_directory(journal, outbox, workers=2)  # answers come back out of order

    assert len(report.new) == 252 and report.unchanged == 0
    assert journal.invoice("COPY-1").source_path == str(outbox / "a-copy.xml")
    assert journal.invoice("COPY-1").state == "pending"
    assert [problem.subject for problem in report.invalid] == ["CLASH-1"]
    assert "b-clash.xml, m-clash.xml" in report.invalid[0].reason
    again = scan_directory(journal, outbox, workers=2)
    assert again.unchanged == 251 and [p.subject for p in again.invalid] == ["CLASH-1"]


def test_file_without_id_is_recorded_by_path_until_fixed(journal: Journal, outbox: Path):
    broken = outbox / "broken.xml"
    broken.write_bytes(b"<Invoice><unclosed></Invoice>")

    report = scan_directory(journal, outbox)

    assert [problem.subject for problem in report.invalid] == ["broken.xml"]
    (row,) = journal.unidentified_files()
    assert row.path == str(broken) and row.reason
    assert journal.state_counts()["invalid"] == 1

    broken.write_bytes(invoice_xml("INV-9"))
    scan_directory(journal, outbox)
    assert journal.unidentified_files() == []
    assert states(journal) == {"INV-9": "pending"}


def test_every_file_gets_an_answer_and_one_bad_file_stops_nothing(journal: Journal, outbox: Path):
    write_invoice(outbox, "GOOD-1")
    (outbox / "empty.xml").write_bytes(b"")
    (outbox / "folder.xml").mkdir()
    (outbox / "dangling.xml").symlink_to(outbox / "nowhere.xml")
    write_invoice(outbox, "GOOD-2")

    report = scan_directory(journal, outbox)

    assert report.files == 5
    assert sorted(report.new) == ["GOOD-1", "GOOD-2"]
    assert sorted(problem.subject for problem in report.invalid) == [
        "dangling.xml",
        "empty.xml",
        "folder.xml",
    ]


def test_content_changed_after_sending_is_amended_and_restored_if_reverted(
    journal: Journal, outbox: Path
):
    write_invoice(outbox, "INV-1", amount="100.00")
    scan_directory(journal, outbox)
    sent = journal.invoice("INV-1").current_sha256
    force(journal, "INV-1", state="accepted", idempotency_key="invoice-INV-1", key_sha256=sent)

    write_invoice(outbox, "INV-1", amount="999.00")
    report = scan_directory(journal, outbox)

    row = journal.invoice("INV-1")
    assert report.amended == ["INV-1"]
    assert row.state == "amended" and row.key_sha256 == sent
    assert "will not be sent under that key" in row.reason

    write_invoice(outbox, "INV-1", amount="100.00")
    scan_directory(journal, outbox)
    assert journal.invoice("INV-1").state == "accepted"


def test_correction_of_a_rejected_invoice_gets_a_new_key_version(journal: Journal, outbox: Path):
    write_invoice(outbox, "INV-1", amount="100.00")
    scan_directory(journal, outbox)
    sent = journal.invoice("INV-1").current_sha256
    force(journal, "INV-1", state="rejected", idempotency_key="invoice-INV-1", key_sha256=sent)

    write_invoice(outbox, "INV-1", amount="101.00")
    scan_directory(journal, outbox)

    row = journal.invoice("INV-1")
    assert (row.state, row.key_version, row.idempotency_key) == ("pending", 2, None)


def accepted_from_a_xml(journal: Journal, outbox: Path) -> str:
    """INV-1 scanned from ``a.xml`` and accepted under its first key: the sha256 sent."""
    write_invoice(outbox, "INV-1", name="a.xml")
    scan_directory(journal, outbox)
    sent = journal.invoice("INV-1").current_sha256
    force(journal, "INV-1", state="accepted", idempotency_key="invoice-INV-1", key_sha256=sent)
    return sent


def test_a_sent_invoice_caught_in_a_duplicate_keeps_its_state_and_is_reported(
    journal: Journal, outbox: Path
):
    """An accepted invoice was once made invalid by a second file with its number: what
    GoRoute holds does not change with the outbox, so it stays accepted, held while the clash
    is reported by every scan (an operator's release included), until one file is left."""
    sent = accepted_from_a_xml(journal, outbox)
    write_invoice(outbox, "INV-1", name="b.xml", amount="5.00")

    for _ in range(2):
        report = scan_directory(journal, outbox)
        assert [problem.subject for problem in report.invalid] == ["INV-1"]
        assert [problem.subject for problem in report.clashing] == ["INV-1"]
        row = journal.invoice("INV-1")
        assert (row.state, row.hold, row.held_by) == ("accepted", "held", "duplicate check")
        assert release(journal, "INV-1", by="operator").done
    assert journal.invoice("INV-1").hold is None  # released: a scan elsewhere leaves it so

    scan_directory(journal, outbox)
    (outbox / "b.xml").unlink()
    assert scan_directory(journal, outbox).invalid == []
    row = journal.invoice("INV-1")
    assert (row.state, row.current_sha256, row.hold) == ("accepted", sent, None)
    assert journal.events("INV-1")[-1].detail.startswith("by duplicate check: one file left")


def test_a_duplicate_over_an_edit_keeps_the_state_it_was_sent_in(journal: Journal, outbox: Path):
    """An accepted invoice whose file changed (amended over accepted), then a second file
    with its number: the hold once replaced ``accepted`` beneath the edit with ``amended``,
    and a new version then delivered it twice. Beneath stays accepted, whatever comes."""
    accepted_from_a_xml(journal, outbox)
    write_invoice(outbox, "INV-1", name="a.xml", amount="7.00")
    scan_directory(journal, outbox)
    write_invoice(outbox, "INV-1", name="b.xml", amount="5.00")
    scan_directory(journal, outbox)
    (outbox / "b.xml").unlink()
    scan_directory(journal, outbox)

    row = journal.invoice("INV-1")
    assert (row.state, row.state_before_amend) == ("amended", "accepted")
    with pytest.raises(UsageError, match="amended over accepted"):
        check_new_version(journal, "INV-1", journal.clock() + timedelta(days=2))


def test_a_duplicate_then_an_edit_keeps_the_state_it_was_sent_in(journal: Journal, outbox: Path):
    """An accepted invoice caught in a duplicate, whose own file then changes too: amended
    over accepted, and back to accepted when the file holds what was sent again."""
    accepted_from_a_xml(journal, outbox)
    write_invoice(outbox, "INV-1", name="b.xml", amount="5.00")
    scan_directory(journal, outbox)
    assert journal.invoice("INV-1").state == "accepted"

    (outbox / "b.xml").unlink()
    write_invoice(outbox, "INV-1", name="a.xml", amount="7.00")
    scan_directory(journal, outbox)
    row = journal.invoice("INV-1")
    assert (row.state, row.state_before_amend) == ("amended", "accepted")

    write_invoice(outbox, "INV-1", name="a.xml")  # back to exactly what was sent
    scan_directory(journal, outbox)
    assert journal.invoice("INV-1").state == "accepted"


def test_parallel_scan_records_the_same_as_a_serial_one(
    journal_at: Location, outbox: Path, request: pytest.FixtureRequest
):
    for number in range(300):
        write_invoice(outbox, f"INV-{number:04d}", amount=f"{number}.00")
    (outbox / "bad.xml").write_bytes(b"not xml")
    write_invoice(outbox, "INV-0001", name="dup.xml", amount="7.77")

    results = []
    for workers in (1, 2):
        where = journal_at if workers == 1 else another_journal(journal_at, request, "j2")
        with open_journal(where) as journal:
            report = scan_directory(journal, outbox, workers=workers)
            results.append((sorted(report.new), sorted(map(str, report.invalid)), states(journal)))
    assert results[0] == results[1]
    assert results[0][2]["INV-0001"] == "invalid"


def test_recursive_scan_descends_only_when_asked(journal: Journal, outbox: Path):
    (outbox / "2026" / "11").mkdir(parents=True)
    write_invoice(outbox / "2026" / "11", "DEEP-1")
    write_invoice(outbox, "TOP-1")

    assert scan_directory(journal, outbox).new == ["TOP-1"]
    assert scan_directory(journal, outbox, recursive=True).new == ["DEEP-1"]


def test_a_recursive_run_over_a_tree_deeper_than_the_system_can_name(
    journal: Journal, outbox: Path
):
    """os.walk descends by recursion: RecursionError about 1,000 directories down, the whole
    scan (and send) stopped, in the scan's walk and in the one for markers below. Past what
    the system can name (PATH_MAX), a directory cannot be listed: said, as for permissions."""
    write_invoice(outbox, "TOP-1")
    levels = deep_chain(outbox, 2100, {1000: "DEEP-1", 2100: "LOST-1"})
    try:
        report = scan_directory(journal, outbox, recursive=True)
        marked = marked_below(outbox)
    finally:
        remove_deep_chain(outbox, 2100)
    assert sorted(report.new) == ["DEEP-1", "TOP-1"]
    ((subject, reason),) = report.invalid
    assert len(subject) > 3900 and set(subject) == {"d", "/"}
    assert reason == (
        "cannot list this directory (File name too long); the invoices in it were not scanned"
    )
    assert marked == (levels[1000],)


def deep_chain(top: Path, depth: int, invoices: dict[int, str]) -> dict[int, Path]:
    """``depth`` directories ``d``, one in the other, and an invoice and a send marker at the
    levels ``invoices`` names (made relative to a descriptor: past PATH_MAX no path can name
    them; os.makedirs, recursive, would stop as the walk did)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(1, depth + 1):
            os.mkdir("d", dir_fd=fd)
            below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
            if level in invoices:
                for name, data in (
                    (".invoicectl-journal", b""),
                    ("i.xml", invoice_xml(invoices[level])),
                ):
                    written = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
                    os.write(written, data)
                    os.close(written)
    finally:
        os.close(fd)
    return {level: top.joinpath(*["d"] * level) for level in invoices}


def remove_deep_chain(top: Path, depth: int) -> None:
    """From the bottom up, through ``..`` (shutil.rmtree, recursive, could not)."""
    fd = os.open(top.joinpath(*["d"] * min(depth, 1000)), os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth - min(depth, 1000)):
        below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = below
    for _ in range(depth):
        for name in os.listdir(fd):
            os.unlink(name, dir_fd=fd)
        above = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = above
        os.rmdir("d", dir_fd=fd)
    os.close(fd)


def test_a_directory_named_xml_is_descended_not_refused_in_a_recursive_scan(
    journal: Journal, outbox: Path
):
    (outbox / "2024.xml").mkdir()
    write_invoice(outbox / "2024.xml", "DEEP-1")
    (outbox / "linked.xml").symlink_to(outbox / "2024.xml")

    report = scan_directory(journal, outbox, recursive=True)

    assert report.new == ["DEEP-1"]
    assert [(problem.subject, problem.reason) for problem in report.invalid] == [
        ("linked.xml", "a directory, not a file, although its name ends in .xml")
    ]


def test_a_pending_invoice_whose_file_now_holds_another_id_is_held(journal: Journal, outbox: Path):
    """A number corrected in its file after a scan: sending both would deliver one invoice
    twice under two numbers. The old one is held, the new one admitted, once."""
    write_invoice(outbox, "TYPO-1O0", name="a.xml")
    write_invoice(outbox, "KEPT-1", name="b.xml")
    scan_directory(journal, outbox)
    write_invoice(outbox, "TYPO-100", name="a.xml")
    (outbox / "b.xml").rename(outbox / "c.xml")  # moved, not replaced: nothing to hold
    write_invoice(outbox, "NEW-1", name="b.xml")

    report = scan_directory(journal, outbox)

    assert sorted(report.new) == ["NEW-1", "TYPO-100"]
    assert [problem.subject for problem in report.replaced] == ["TYPO-1O0"]
    assert "its file a.xml now holds invoice TYPO-100" in report.replaced[0].reason
    held = journal.invoice("TYPO-1O0")
    assert held is not None and (held.state, held.hold) == ("pending", "held")
    assert journal.invoice("KEPT-1").hold is None  # type: ignore[union-attr]
    assert [cause.code for cause in report.exit_causes()][-1] == 4
    assert scan_directory(journal, outbox).replaced == []  # held once, not again


def test_journal_is_private_and_in_wal_mode(tmp_path: Path):
    path = tmp_path / "deep" / "journal.db"
    with Journal(path) as journal:
        assert journal.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert journal.db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_invoice_bytes_are_stored_packed_and_read_back_exact(journal: Journal, outbox: Path):
    path = write_invoice(outbox, "INV-1", note="Lieferung für Åkerlund")
    # An embedded attachment is base64: LZ4 cannot shrink it, so it is kept as read.
    attachment = base64.b64encode(random.Random(7).randbytes(300_000)).decode()
    large = write_invoice(outbox, "INV-2", note=attachment)

    scan_directory(journal, outbox)

    stored = {
        row["sha256"]: (row["codec"], len(row["data"]), row["size"])
        for row in journal.db.execute("SELECT sha256, codec, data, size FROM blobs")
    }
    for invoice_id, file, codec in (("INV-1", path, "lz4"), ("INV-2", large, None)):
        sha256 = journal.invoice(invoice_id).current_sha256
        assert journal.content(sha256) == file.read_bytes()
        assert stored[sha256][0] == codec and stored[sha256][2] == file.stat().st_size
    assert stored[journal.invoice("INV-1").current_sha256][1] < path.stat().st_size / 2


@pytest.mark.parametrize(
    ("codec", "damage", "message"),
    [
        ("lz4", lambda data: data[:-9] + b"\0" * 9, "no longer match|cannot be read back"),
        ("lz4", lambda data: b"junk" + data, "cannot be read back"),
        (None, lambda data: data.replace(b"1250.00", b"9250.00"), "no longer match"),
        ("zip", lambda data: data, "cannot be read back"),
    ],
)
def test_damaged_stored_bytes_are_never_handed_out(
    journal: Journal, outbox: Path, codec, damage, message
):
    path = write_invoice(outbox, "INV-1")
    scan_directory(journal, outbox)
    sha256 = journal.invoice("INV-1").current_sha256
    original = path.read_bytes() if codec is None else lz4.frame.compress(path.read_bytes())
    journal.db.execute(
        "UPDATE blobs SET codec = ?, data = ? WHERE sha256 = ?",
        (codec, damage(original), sha256),
    )

    with pytest.raises(JournalError, match=message):
        journal.content(sha256)


def test_a_journal_from_before_packing_reads_its_bytes(tmp_path: Path, outbox: Path):
    path = tmp_path / "journal.db"
    with sqlite3.connect(path) as conn:  # as invoicectl 0.1 left it: 4 KB pages, m001 only
        conn.execute("PRAGMA journal_mode = WAL")
        database = Database(conn)
        only_m001 = Migrations("invoicectl")
        only_m001()(m001_initial)
        only_m001.apply(database)
        data = invoice_xml("OLD-1")
        sha256 = hashlib.sha256(data).hexdigest()
        conn.execute(
            "INSERT INTO blobs (sha256, size, data) VALUES (?, ?, ?)", (sha256, len(data), data)
        )

    with Journal(path) as journal:
        assert journal.content(sha256) == data
        assert journal.db.execute("PRAGMA page_size").fetchone()[0] == 4096
        write_invoice(outbox, "NEW-1")
        scan_directory(journal, outbox)
        assert (
            journal.content(journal.invoice("NEW-1").current_sha256)
            == (outbox / "NEW-1.xml").read_bytes()
        )


def test_a_journal_from_before_stats_carried_ids_names_unchanged_files(
    tmp_path: Path, outbox: Path
):
    path = tmp_path / "journal.db"
    write_invoice(outbox, "OLD-1")
    with Journal(path) as journal:
        scan_directory(journal, outbox)
        # As invoicectl 0.2 left it: file_stats without invoice IDs, m003 not applied.
        journal.db.execute("UPDATE file_stats SET invoice_id = NULL")
        journal.db.execute(
            "DELETE FROM _sqlite_migrations WHERE name = 'm003_file_stats_invoice_id'"
        )
        journal.db.execute("ALTER TABLE file_stats DROP COLUMN invoice_id")

    with Journal(path) as journal:
        (invoice_id,) = journal.db.execute("SELECT invoice_id FROM file_stats").fetchone()
        assert invoice_id == "OLD-1"  # filled in by the migration
        report = scan_directory(journal, outbox)
        assert report.unchanged == 1 and report.new == [] and report.invalid == []


def test_stats_are_looked_up_only_under_a_directory_scanned_before(
    journal: Journal, tmp_path: Path
):
    for name in ("out", "out2", "out-b"):
        (tmp_path / name).mkdir()
        write_invoice(tmp_path / name, f"{name}-1")
    scan_directory(journal, tmp_path / "out2")
    scan_directory(journal, tmp_path / "out-b")

    assert journal.has_stats_under(str(tmp_path / "out2"))
    assert journal.has_stats_under(str(tmp_path / "out2") + "/")
    assert not journal.has_stats_under(str(tmp_path / "out"))  # a prefix of two that are
    assert not journal.has_stats_under(str(tmp_path / "out2" / "sub"))
    assert journal.has_stats_under(str(tmp_path))


def test_a_new_journal_uses_16_kb_pages(tmp_path: Path):
    """SQLite's page size (PostgreSQL's is the server's, 8 KB)."""
    with Journal(tmp_path / "journal.db") as journal:
        assert journal.db.execute("PRAGMA page_size").fetchone()[0] == 16384


def test_journal_from_a_newer_version_is_refused(tmp_path: Path):
    path = tmp_path / "journal.db"
    Journal(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at)"
            " VALUES ('invoicectl', 'm999_future', 'x')"
        )
    with pytest.raises(JournalError, match=f"the journal {path} was written by a newer invoicectl"):
        Journal(path)
    # verify and export read it without opening it to write: named there too (helper-83)
    with AuditReader(path) as reader, pytest.raises(JournalError, match=f"journal {path} was"):
        reader.up_to_date()


def test_corpus_scan_reports_every_repeated_id(journal: Journal):
    corpus = SHARED / "corpus" / "ubl"
    if not corpus.is_dir():
        pytest.skip(f"the shared corpus is not at {corpus}")
    expected_ids: dict[str, set[str]] = {}
    for line in (SHARED / "corpus" / "EXPECTED.tsv").read_text().splitlines()[1:]:
        name, _, invoice_id, *_ = line.split("\t")
        expected_ids.setdefault(invoice_id, set()).add(name)
    repeated = {
        invoice_id
        for invoice_id, names in expected_ids.items()
        if len({(corpus / name).read_bytes() for name in names}) > 1
    }

    report = scan_directory(journal, corpus)

    reported = {p.subject for p in report.invalid if "files with different content" in p.reason}
    assert reported == repeated
    assert report.files == len(list(corpus.glob("*.xml")))


def test_a_rewrite_that_keeps_size_and_mtime_is_still_noticed(journal: Journal, outbox: Path):
    path = write_invoice(outbox, "INV-1", amount="100.00")
    scan_directory(journal, outbox)
    # Pretend the last scan happened long after the file was written, so its stat is trusted.
    journal.db.execute("UPDATE file_stats SET checked_at_ns = checked_at_ns + 60000000000")
    before = os.stat(path)

    path.write_bytes(invoice_xml("INV-1", amount="900.00"))  # same length
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # mtime put back, ctime moves

    report = scan_directory(journal, outbox)
    assert report.changed == ["INV-1"]
    assert journal.invoice("INV-1").payable_amount == "900.00"


def test_an_unchanged_file_with_a_trusted_stat_is_not_read_again(journal: Journal, outbox: Path):
    write_invoice(outbox, "INV-1", amount="1.00")
    scan_directory(journal, outbox)
    first = journal.invoice("INV-1").current_sha256
    write_invoice(outbox, "INV-1", amount="2.00")
    scan_directory(journal, outbox)
    # Make the trusted stat cache lie about the content: only a scan that believes it
    # without reading the file can go back to the first revision.
    journal.db.execute(
        "UPDATE file_stats SET sha256 = ?, checked_at_ns = checked_at_ns + 60000000000",
        (first,),
    )

    report = scan_directory(journal, outbox)

    assert report.changed == ["INV-1"]
    assert journal.invoice("INV-1").current_sha256 == first


def test_a_file_name_that_is_not_utf8_is_scanned_like_any_other(journal: Journal, outbox: Path):
    odd = os.fsdecode(bytes(outbox) + b"/\xffactura.xml")
    Path(odd).write_bytes(invoice_xml("INV-ODD"))
    os.mkfifo(outbox / "pipe.xml")

    report = scan_directory(journal, outbox)

    assert report.new == ["INV-ODD"]
    assert journal.invoice("INV-ODD").source_path.endswith("\\xffactura.xml")
    assert [(p.subject, p.reason) for p in report.invalid] == [
        ("pipe.xml", "a named pipe (FIFO), not a file; invoicectl reads regular files only")
    ]
    assert scan_directory(journal, outbox).unchanged == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_an_unlistable_subdirectory_is_answered_not_skipped(tmp_path: Path):
    """Root lists anything, so the scan runs in a forked child as uid 65534."""
    import shutil
    import tempfile

    shared = Path(tempfile.mkdtemp(prefix="invoicectl-unlisted-"))
    try:
        shared.chmod(0o777)
        write_invoice(shared, "TOP-1")
        (shared / "locked").mkdir()
        write_invoice(shared / "locked", "HIDDEN-1")
        (shared / "locked").chmod(0o700)  # root's: nobody cannot list it

        def scan() -> str:
            with Journal(shared / "journal.db") as journal:
                report = scan_directory(journal, shared, recursive=True, workers=1)
            answer = "\n".join(f"{p.subject}\t{p.reason}" for p in report.invalid)
            return answer + f"\nNEW\t{','.join(report.new)}"

        answer = unprivileged(scan)
        assert "NEW\tTOP-1" in answer, answer
        assert "locked\tcannot list this directory (Permission denied)" in answer, answer
    finally:
        (shared / "locked").chmod(0o755)
        shutil.rmtree(shared, ignore_errors=True)


# --- a head start for large first scans ----------------------------------------------------


def test_peek_reads_what_a_journal_holds_without_creating_or_locking_it(
    tmp_path: Path, outbox: Path
):
    missing = tmp_path / "none" / "journal.db"
    assert peek_stored(missing, str(outbox)) == frozenset()
    assert not missing.parent.exists()

    path = tmp_path / "journal.db"
    write_invoice(outbox, "INV-1")
    with Journal(path) as journal:
        scan_directory(journal, outbox)
        (held,) = journal.db.execute("SELECT sha256 FROM revisions").fetchone()
        assert peek_stored(path, str(outbox)) is None  # stats decide a re-scan
        for directory in (str(outbox) + "2", str(tmp_path / "elsewhere")):  # never scanned
            stored = peek_stored(path, directory)
            assert stored is not None and held in stored and "0" * 64 not in stored

    not_a_journal = tmp_path / "notes.db"
    not_a_journal.write_text("just text")
    assert peek_stored(not_a_journal, str(outbox)) is None


def test_a_large_first_scan_starts_reading_before_the_journal_opens(tmp_path: Path, outbox: Path):
    for number in range(1100):
        write_invoice(outbox, f"INV-{number:04}")
    path = tmp_path / "journal.db"

    with OpenScan(outbox, journal_path=path) as scan:
        assert scan.head is not None and scan.head.handed_out > 0
        assert not path.exists()  # nothing written before the journal is opened
        with Journal(path) as journal:
            report = scan.into(journal)

    assert len(report.new) == 1100 and report.invalid == []
    with Journal(path) as journal, OpenScan(outbox, journal_path=path) as again:
        assert again.head is None  # the stats now tell which files to read
        assert again.into(journal).unchanged == 1100


def test_a_head_start_knows_content_the_journal_already_holds(tmp_path: Path, outbox: Path):
    for number in range(1100):
        write_invoice(outbox, f"INV-{number:04}")
    path = tmp_path / "journal.db"
    with Journal(path) as journal:
        scan_directory(journal, outbox)
    moved = tmp_path / "moved"
    outbox.rename(moved)

    with OpenScan(moved, journal_path=path) as scan, Journal(path) as journal:
        assert scan.head is not None
        report = scan.into(journal)

    assert report.new == [] and report.unchanged == 1100


def test_a_head_start_is_stopped_when_the_journal_cannot_be_opened(tmp_path: Path, outbox: Path):
    for number in range(1100):
        write_invoice(outbox, f"INV-{number:04}")
    path = tmp_path / "journal.db"

    with pytest.raises(JournalLocked), OpenScan(outbox, journal_path=path) as scan:
        assert scan.head is not None
        workers = list(scan.head.reader.pool.processes)
        with RunLock(path, command="send"), locked_journal(path, "scan", create=True):
            pass

    assert workers and not any(process.is_alive() for process in workers)


@pytest.mark.parametrize(
    "decomposed", ["Faktura-O\u0308l-7", "INV-1\u200b"], ids=["NFD", "zero-width space"]
)
def test_a_lookalike_number_an_older_invoicectl_sent_is_amended_by_a_new_file(
    journal: Journal, outbox: Path, decomposed: str
):
    """An older invoicectl sent "Faktura-Öl-7" written decomposed (NFD), or "INV-1" with a
    zero-width space after it (str.strip keeps one). Refused outright, the ERP's corrected
    re-export was unidentified, not tied to the invoice sent, and its reason said to save
    the number otherwise: a new number, sent a second time (helper-50, helper-54)."""
    write_invoice(outbox, decomposed, name="a.xml", amount="1250.00")
    scan_directory(journal, outbox)
    first = journal.invoice(decomposed)
    assert first is not None and first.state.value == "invalid"  # never sent by this one
    force(  # as the older invoicectl left it: sent and accepted under its key
        journal,
        decomposed,
        state="accepted",
        reason=None,
        idempotency_key="invoice-x",
        key_sha256=first.current_sha256,
        key_first_used_at=journal.now(),
        transaction_id="txn_1",
    )
    write_invoice(outbox, decomposed, name="a.xml", amount="1300.00")

    report = scan_directory(journal, outbox)

    assert report.amended == [decomposed]
    assert journal.invoice(decomposed).state.value == "amended"
    assert not [p for p in report.invalid if p.subject == "a.xml"]  # not unidentified


def test_a_journal_named_as_sqlites_memory_database_is_a_file_that_is_kept(
    tmp_path: Path, outbox: Path, monkeypatch: pytest.MonkeyPatch
):
    """helper-67: `--journal :memory:` opened SQLite's database in memory: a send under it
    said "2 accepted", and every attempt, the chain and the runs were gone when it ended."""
    monkeypatch.chdir(tmp_path)
    write_invoice(outbox, "M-1")
    with open_journal(Path(":memory:")) as journal:
        scan_directory(journal, outbox)
    with open_journal(Path(":memory:")) as journal:
        assert journal.invoice("M-1") is not None
    assert (tmp_path / ":memory:").stat().st_size > 0

"""A re-scan of an outbox that keeps its old files (issue 13, item 4): an unchanged file
costs an ``lstat`` and a comparison in SQL against the stat the journal recorded, and is
never read; any change of size, mtime, ctime or inode, or a stat recorded too soon after
the file's last change, has it read again. Counted on a real outbox, never timed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ublfactory import write_invoice

from invoicectl.journal import Journal, open_journal
from invoicectl.locations import Location
from invoicectl.scan import worker
from invoicectl.scan.candidates import find_candidates
from invoicectl.scan.ingest import scan_directory
from invoicectl.scan.reader import scan_files
from invoicectl.scan.scanned import RACY_NS


@pytest.fixture
def journal(journal_at: Location):
    with open_journal(journal_at) as opened:
        yield opened


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files a scan reads in this process (``workers=1``)."""
    names: list[str] = []
    read_one = worker.scan_one

    def counted(name, key, place, known):  # type: ignore[no-untyped-def]
        names.append(name)
        return read_one(name, key, place, known)

    monkeypatch.setattr(worker, "scan_one", counted)  # the reader imports it as it reads
    return names


def _trusted(journal: Journal) -> None:
    """Stats recorded as if well after each file's last change (a test writes its files a
    moment before scanning them: a real outbox's files are older than that)."""
    journal.db.execute(f"UPDATE file_stats SET checked_at_ns = ctime_ns + {2 * RACY_NS}")


def test_a_rescan_of_unchanged_files_reads_none(
    journal: Journal, outbox: Path, reads: list[str]
) -> None:
    for number in range(1200):  # more than two windows of lookups
        write_invoice(outbox, f"INV-{number:04d}")
    assert scan_directory(journal, outbox, workers=1).files == 1200
    assert len(reads) == 1200
    _trusted(journal)
    reads.clear()

    report = scan_directory(journal, outbox, workers=1)

    assert (report.unchanged, report.new, report.changed, reads) == (1200, [], [], [])


def test_unchanged_files_never_come_back_to_python(journal: Journal, outbox: Path) -> None:
    """The journal takes the unchanged files into the scan itself (one statement a window):
    the reader answers none of them, and a window with one changed file answers that one."""
    for number in range(1200):
        write_invoice(outbox, f"INV-{number:04d}")
    scan_directory(journal, outbox, workers=1)
    _trusted(journal)
    (outbox / "INV-0700.xml").write_bytes((outbox / "INV-0700.xml").read_bytes() + b"\n")
    journal.begin_scan()

    answers = scan_files(
        find_candidates(outbox),
        outbox,
        journal.stored_contents,
        lambda prefix, found: journal.take_unchanged(prefix, found, RACY_NS),
        workers=1,
    )

    assert [answer.name for answer in answers] == ["INV-0700.xml"]
    assert journal.files_found() == 1199  # the others: the journal took them itself


def test_a_file_whose_size_mtime_ctime_or_inode_moved_is_read_again(
    journal: Journal, outbox: Path, reads: list[str]
) -> None:
    for name in ("SIZE", "MTIME", "CTIME", "INODE", "SAME"):
        write_invoice(outbox, f"INV-{name}")
    scan_directory(journal, outbox, workers=1)
    _trusted(journal)
    (outbox / "INV-SIZE.xml").write_bytes((outbox / "INV-SIZE.xml").read_bytes() + b"\n")
    mtime = outbox / "INV-MTIME.xml"
    os.utime(mtime, ns=(mtime.stat().st_atime_ns, mtime.stat().st_mtime_ns + 1))
    os.chmod(outbox / "INV-CTIME.xml", 0o640)  # only ctime moves
    copy = outbox / "copy.tmp"
    copy.write_bytes((outbox / "INV-INODE.xml").read_bytes())
    os.rename(copy, outbox / "INV-INODE.xml")  # a new inode, same bytes
    reads.clear()

    report = scan_directory(journal, outbox, workers=1)

    assert sorted(reads) == ["INV-CTIME.xml", "INV-INODE.xml", "INV-MTIME.xml", "INV-SIZE.xml"]
    assert report.changed == ["INV-SIZE"]  # the others hold the same bytes as before
    assert report.unchanged == 4


def test_a_stat_recorded_too_soon_after_a_change_proves_nothing(
    journal: Journal, outbox: Path, reads: list[str]
) -> None:
    write_invoice(outbox, "INV-1")
    scan_directory(journal, outbox, workers=1)
    journal.db.execute(f"UPDATE file_stats SET checked_at_ns = ctime_ns + {RACY_NS}")
    reads.clear()

    scan_directory(journal, outbox, workers=1)

    assert reads == ["INV-1.xml"]


def test_the_journal_takes_only_files_whose_every_stat_field_matches(
    journal: Journal, outbox: Path
) -> None:
    write_invoice(outbox, "INV-1")
    scan_directory(journal, outbox, workers=1)
    _trusted(journal)
    ((path, size, mtime, ctime, inode, _, sha256),) = journal.db.execute(
        "SELECT path, size, mtime_ns, ctime_ns, inode, checked_at_ns, sha256 FROM file_stats"
    ).fetchall()
    prefix = str(outbox) + "/"
    same = {path: f"{size}:{mtime}:{ctime}:{inode}"}
    moved = [
        {prefix + "elsewhere": f"{size}:{mtime}:{ctime}:{inode}"},
        {path: f"{size + 1}:{mtime}:{ctime}:{inode}"},
        {path: f"{size}:{mtime + 1}:{ctime}:{inode}"},
        {path: f"{size}:{mtime}:{ctime + 1}:{inode}"},
        {path: f"{size}:{mtime}:{ctime}:{inode + 1}"},
    ]

    def taken(found: dict[str, str], racy_ns: int = RACY_NS, unless: tuple[str, ...] = ()):
        journal.begin_scan()
        read_again = journal.take_unchanged(prefix, found, racy_ns, unless)
        rows = journal.db.execute("SELECT invoice_id, sha256, name, path FROM temp.scan")
        return read_again, [tuple(row) for row in rows]

    assert taken(same) == (set(), [("INV-1", sha256, "INV-1.xml", path)])
    for found in moved:
        assert taken(found) == (set(found), []), found
    assert taken(same, 3 * RACY_NS) == ({path}, [])  # recorded too soon
    assert taken(same, unless=(sha256,)) == ({path}, [])  # its stored copy is damaged
    assert taken({**same, **moved[0]}) == (set(moved[0]), [("INV-1", sha256, "INV-1.xml", path)])


def test_a_known_content_read_again_keeps_its_invoice_id_with_its_stat(
    journal: Journal, outbox: Path, reads: list[str]
) -> None:
    """A file read again whose bytes the journal holds (touched, copied in) is hashed, not
    parsed; its stat is recorded with its revision's invoice ID all the same, so that the
    next re-scan names it without a lookup."""
    write_invoice(outbox, "INV-1")
    scan_directory(journal, outbox, workers=1)
    (outbox / "copy.xml").write_bytes((outbox / "INV-1.xml").read_bytes())
    os.utime(outbox / "INV-1.xml", ns=(1, 2))
    reads.clear()

    report = scan_directory(journal, outbox, workers=1)

    assert sorted(reads) == ["INV-1.xml", "copy.xml"] and report.unchanged == 1
    ids = journal.db.execute("SELECT path, invoice_id FROM file_stats ORDER BY path")
    assert [tuple(row) for row in ids] == [
        (str(outbox / "INV-1.xml"), "INV-1"),
        (str(outbox / "copy.xml"), "INV-1"),
    ]


class _AskedOnce:
    """Contents held, answered for many at once; asking one at a time is a failure."""

    def __init__(self, held: set[str]) -> None:
        self.held = held
        self.asked: list[list[str]] = []

    def among(self, sha256s: list[str]) -> set[str]:
        self.asked.append(sorted(sha256s))
        return self.held & set(sha256s)

    def __contains__(self, sha256: object) -> bool:
        raise AssertionError("a worker asked about one content at a time")


def test_a_worker_asks_the_journal_once_a_chunk_which_contents_it_holds(
    journal: Journal, outbox: Path
) -> None:
    """Read and hashed first, the chunk's contents are looked up in one question: those the
    journal holds are not parsed again (no invoice ID from the worker), the others are."""
    write_invoice(outbox, "OLD-1")
    write_invoice(outbox, "NEW-1")
    (outbox / "empty.xml").write_bytes(b"")
    scan_directory(journal, outbox, workers=1)
    old = journal.invoice("OLD-1").current_sha256
    new = journal.invoice("NEW-1").current_sha256
    known = _AskedOnce({old})
    place = worker.Place.at(str(outbox), str(outbox))

    answers = worker.scan_many(
        [("OLD-1.xml", None), ("empty.xml", None), ("NEW-1.xml", None)], place, known
    )

    assert known.asked == [sorted([old, new])]
    assert [(a.name, a.sha256, a.invoice_id) for a in answers] == [
        ("OLD-1.xml", old, None),
        ("empty.xml", None, None),
        ("NEW-1.xml", new, "NEW-1"),
    ]
    assert answers[1].reason == "the file is empty (0 bytes)"
    stored = journal.stored_contents(unless={new})
    assert stored.among([old, new, "0" * 64]) == {old}

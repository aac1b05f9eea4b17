"""Scan's summary counts files, each in exactly one category (issue 12, item 11).

Five files gave "3 new ... 3 invalid" (an ID in two files with different content was counted
new and invalid, and its second file nowhere); on a re-scan two files sharing an ID fell in no
category. The lists in the report name invoice IDs; ``file_counts`` and the summary line
count files, and add up to the files scanned.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from ublfactory import invoice_xml, write_invoice

from invoicectl.journal import open_journal
from invoicectl.locations import JournalURL, Location
from invoicectl.scan.ingest import scan_directory
from invoicectl.scan.report import ScanReport

CATEGORIES = ("new", "unchanged", "changed", "amended", "invalid")


def counted(report: ScanReport) -> dict[str, int]:
    """The summary line's counts, as scan prints them: ``{"new": 2, ...}``; each one is
    also in ``file_counts`` (``scan --json``)."""
    head, _, counts = report.summary_lines()[0].partition(" files: ")
    assert head == f"scanned {report.files}"
    shown = {name: int(count) for count, name in (part.split(" ") for part in counts.split(", "))}
    assert getattr(report, "file_counts", shown) == shown  # (before the fix: no such field)
    return shown


def _five_files(outbox: Path) -> None:
    write_invoice(outbox, "A")
    write_invoice(outbox, "B")
    write_invoice(outbox, "C", name="c1.xml", amount="1.00")
    write_invoice(outbox, "C", name="c2.xml", amount="2.00")
    (outbox / "broken.xml").write_bytes(b"<Invoice")


def test_an_id_in_two_files_counts_both_files_as_invalid_and_not_as_new(
    journal_at: Location, outbox: Path
) -> None:
    _five_files(outbox)
    with open_journal(journal_at) as journal:
        report = scan_directory(journal, outbox)
    assert counted(report) == {"new": 2, "unchanged": 0, "changed": 0, "amended": 0, "invalid": 3}
    assert report.summary_lines()[0] == (
        "scanned 5 files: 2 new, 0 unchanged, 0 changed, 0 amended, 3 invalid"
    )


def test_a_rescan_puts_both_files_of_a_shared_id_in_a_category(
    journal_at: Location, outbox: Path
) -> None:
    _five_files(outbox)
    write_invoice(outbox, "D", name="d1.xml")
    write_invoice(outbox, "D", name="d2.xml")  # the same content twice: one invoice, two files
    with open_journal(journal_at) as journal:
        first = scan_directory(journal, outbox)
        again = scan_directory(journal, outbox)
    assert counted(first) == {"new": 4, "unchanged": 0, "changed": 0, "amended": 0, "invalid": 3}
    assert counted(again) == {"new": 0, "unchanged": 4, "changed": 0, "amended": 0, "invalid": 3}


def test_a_changed_file_beside_an_unchanged_copy_is_one_file_each(
    journal_at: Location, outbox: Path
) -> None:
    write_invoice(outbox, "A")
    write_invoice(outbox, "B", name="b1.xml")
    write_invoice(outbox, "B", name="b2.xml")
    with open_journal(journal_at) as journal:
        scan_directory(journal, outbox)
        _touch_later(write_invoice(outbox, "A", amount="9.99"))
        report = scan_directory(journal, outbox)
    assert counted(report) == {"new": 0, "unchanged": 2, "changed": 1, "amended": 0, "invalid": 0}


def _touch_later(path: Path) -> None:
    """A rewrite the stats can tell from the first write, however fast the test runs."""
    later = time.time() + 5
    os.utime(path, (later, later))


# Each file: an invoice ID from a small pool and one of two contents, or a broken file.
_FILES = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["P", "Q", "R"]), st.sampled_from(["1.00", "2.00"])),
        st.just(None),
    ),
    max_size=7,
)


@hypothesis_settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(first=_FILES, second=_FILES)
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_file_counts_always_add_up_and_invalid_counts_files(
    tmp_path_factory, request: pytest.FixtureRequest, backend: str, first: list, second: list
) -> None:
    root = tmp_path_factory.mktemp("scan")
    outbox = root / "outbox"
    outbox.mkdir()
    where: Location = root / "j.db"
    if backend == "postgresql":  # a new database for each example
        where = JournalURL(request.getfixturevalue("pg_server").new_database())
    with open_journal(where) as journal:
        for files in (first, second):
            for old in outbox.iterdir():
                old.unlink()
            for number, file in enumerate(files):
                path = outbox / f"f{number}.xml"
                if file is None:
                    path.write_bytes(b"not xml")
                else:
                    path.write_bytes(invoice_xml(file[0], amount=file[1]))
                _touch_later(path)
            report = scan_directory(journal, outbox)
            counts = counted(report)
            assert sorted(counts) == sorted(CATEGORIES)
            assert all(count >= 0 for count in counts.values()), counts
            assert sum(counts.values()) == report.files == len(files)
            contents: dict[str, set[str]] = {}
            for file in files:
                if file is not None:
                    contents.setdefault(file[0], set()).add(file[1])
            clashing = sum(1 for file in files if file is not None and len(contents[file[0]]) > 1)
            broken = files.count(None)
            assert counts["invalid"] == clashing + broken, (files, counts)

"""The markers' writers (``send/marker.py``): several at once keep every entry, and one
journal has one marker whatever name reaches it (helper-94)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from invoicectl.send.marker import Marker, journal_marker, read_marker, write_marker

_WRITERS = 4
_WRITES = 60


def _write_often(path: str, entry: str) -> None:
    for run in range(_WRITES):
        marker = Marker(f"id-{entry}", "/j.db", entry, run, "2026-12-07T00:00:00Z", "host")
        assert write_marker(Path(path), marker) is None


def test_writers_at_once_keep_each_others_entries(tmp_path: Path) -> None:
    """``send --all-profiles``: each profile's send writes its own entry of one outbox's
    marker as it goes, and each write used to replace the file with what it had read before
    another's write landed."""
    path = tmp_path / "marker"
    entries = [f"https://api.test (profile p{number})" for number in range(_WRITERS)]
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_write_often, args=(str(path), e)) for e in entries]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)

    assert [writer.exitcode for writer in writers] == [0] * _WRITERS
    for entry in entries:
        marker, problem = read_marker(path, entry)
        assert problem is None and marker is not None, entry
        assert marker.run_id == _WRITES - 1


def test_a_journal_reached_through_a_link_has_the_one_marker(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    journal = tmp_path / "real" / "journal.db"
    journal.touch()
    (tmp_path / "link.db").symlink_to(journal)
    (tmp_path / "linked-dir").symlink_to(tmp_path / "real")

    assert (
        journal_marker(tmp_path / "link.db")
        == journal_marker(tmp_path / "linked-dir" / "journal.db")
        == journal_marker(journal)
        == (tmp_path / "real" / "journal.db.marker",)
    )

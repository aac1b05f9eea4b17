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


def test_a_journal_reached_through_links_has_one_marker_beside_its_real_path(
    tmp_path: Path,
) -> None:
    """helper-94: two links to one journal kept a marker each, beside each link; the real
    path's is the one all share, and a link's own is kept beside it too (helper-100)."""
    (tmp_path / "real").mkdir()
    journal = tmp_path / "real" / "journal.db"
    journal.touch()
    (tmp_path / "link.db").symlink_to(journal)
    (tmp_path / "linked-dir").symlink_to(tmp_path / "real")
    real = tmp_path / "real" / "journal.db.marker"

    assert journal_marker(journal) == (real,)
    assert journal_marker(tmp_path / "link.db") == (real, tmp_path / "link.db.marker")
    assert journal_marker(tmp_path / "linked-dir" / "journal.db") == (
        real,
        tmp_path / "linked-dir" / "journal.db.marker",
    )


def test_a_link_pointed_at_a_restored_copy_tells_the_runs_it_lost(tmp_path: Path) -> None:
    """helper-100: the journal a link names restored by pointing the link at an older copy
    (taken before a run that sent another outbox); with its marker beside the real path
    only, nothing told, and that run's invoices could go out again after their key's window."""
    import os
    import sqlite3
    import subprocess
    import sys

    from sendkit import emulator
    from ublfactory import write_invoice

    from invoicectl.sandbox import DEFAULT_API_KEY, BackgroundServer

    for name in ("a", "b", "out-a", "out-b"):
        (tmp_path / name).mkdir()
    link = tmp_path / "journal.db"
    link.symlink_to(tmp_path / "a" / "journal.db")
    write_invoice(tmp_path / "out-a", "A-1")
    write_invoice(tmp_path / "out-b", "B-1")

    def send(outbox: str) -> str:
        environ = {
            **os.environ,
            "GOROUTE_BASE_URL": server.base_url,
            "GOROUTE_API_KEY": DEFAULT_API_KEY,
            "INVOICECTL_JOURNAL": str(link),
        }
        done = subprocess.run(
            [sys.executable, "-m", "invoicectl", "send", str(tmp_path / outbox)],
            env=environ,
            capture_output=True,
            text=True,
        )
        return done.stderr

    with BackgroundServer(emulator()) as server:
        send("out-a")
        source, copy = (sqlite3.connect(tmp_path / d / "journal.db") for d in ("a", "b"))
        source.backup(copy)  # the backup, before out-b's run
        source.close()
        copy.close()
        send("out-b")
        link.unlink()
        link.symlink_to(tmp_path / "b" / "journal.db")  # restored: the link at the backup
        write_invoice(tmp_path / "out-a", "A-2")
        said = send("out-a")

    assert f"has lost history: its marker {link}.marker says it sent in run 2 (" in said

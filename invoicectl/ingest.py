"""Scanning an outbox into the journal: the library call behind ``invoicectl scan``."""

from __future__ import annotations

from pathlib import Path

from invoicectl.errors import ConfigError
from invoicectl.journal import Journal, ScanReport
from invoicectl.scanner import find_candidates, scan_files


def scan_directory(
    journal: Journal, directory: Path, *, recursive: bool = False, workers: int | None = None
) -> ScanReport:
    """Hash, parse and record every ``*.xml`` under ``directory``; every file gets an answer."""
    root = directory.expanduser().absolute()
    if not root.is_dir():
        raise ConfigError(f"the outbox {directory} is not a directory")
    paths = find_candidates(root, recursive)
    known = journal.known_contents()
    return journal.ingest(scan_files(paths, root, known.keys(), workers=workers), root)

"""An export's files made durable: each written once, never over another, and synced
before the part is renamed into place."""

from __future__ import annotations

import os
from pathlib import Path


def write_new(path: Path, data: bytes) -> None:
    with path.open("xb") as file:
        file.write(data)


def sync_part(work: Path) -> None:
    """Every file of the part on disk before the rename makes it visible. One ``sync`` of
    the file systems where the OS has it (a part of 100,000 invoices is 200,000 files, and
    an fsync each costs minutes), else an fsync of each file."""
    if hasattr(os, "sync"):
        os.sync()
    else:  # pragma: no cover - no such platform in CI
        for path in work.rglob("*"):
            if path.is_file():
                with path.open("rb+") as file:
                    os.fsync(file.fileno())
    fsync_dir(work)


def fsync_dir(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)

"""An export's files made durable: each written once, never over another, and synced
before the part is renamed into place."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from invoicectl.journal.runlock import alive
from invoicectl.text import decimal


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


def first_missing(dest: Path) -> Path | None:
    """The outermost directory of ``dest`` that does not exist yet (the export makes it, and
    removes it again if it fails), or None when ``dest`` exists."""
    missing = None
    for directory in (dest, *dest.parents):
        if directory.exists() or directory.is_symlink():
            break
        missing = directory
    return missing


def clear_partials(dest: Path) -> None:
    """The work directories of exports killed before they finished; never a live one's (two
    exports into one DEST at once: each takes its own, and one's rename of a part onto the
    number the other took fails, leaving that part as it is)."""
    if dest.is_dir():
        for child in dest.iterdir():
            pid = child.name.rpartition(".partial-")[2]
            if child.name.startswith(".") and decimal(pid) and not alive(int(pid)):
                shutil.rmtree(child, ignore_errors=True)


def undo_part(work: Path, dest: Path, made: Path | None) -> None:
    """This export's work directory removed, and the directories it made if nothing else
    was written there meanwhile (another export into the same new DEST)."""
    shutil.rmtree(work, ignore_errors=True)
    for directory in (dest, *dest.parents) if made is not None else ():
        try:
            directory.rmdir()
        except OSError:
            return
        if directory == made:
            return

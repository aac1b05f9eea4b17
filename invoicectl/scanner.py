"""Finding, reading, hashing and parsing the files of an outbox.

Parsing dominates ingest (design.md, "Measured pitfalls"), so large directories are read by a
small pool of worker processes. Content the journal already knows (by sha256) is hashed but
not parsed again, which keeps a re-scan cheap. Work is handed out in windows so that memory
stays flat however many files there are.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from itertools import islice
from multiprocessing import get_context
from pathlib import Path

from invoicectl import ubl

# Below this many files a process pool costs more to start than it saves.
_POOL_THRESHOLD = 200
_WINDOW = 512


@dataclass(frozen=True)
class ScannedFile:
    path: Path  # as found under the scanned directory
    name: str  # relative to the scanned directory, for messages
    sha256: str | None = None  # None when the file could not be read
    size: int | None = None
    data: bytes | None = None  # only for content the journal does not know yet
    facts: ubl.InvoiceFacts | None = None
    reason: str | None = None  # why the file yields no invoice ID

    @property
    def known(self) -> bool:
        """The journal already holds this content; it was hashed, not parsed."""
        return self.sha256 is not None and self.data is None and self.reason is None


def find_candidates(root: Path, recursive: bool = False) -> list[Path]:
    """Every entry named ``*.xml`` (any case), sorted, including directories and broken links,
    which then get a reason of their own instead of vanishing."""
    entries = root.rglob("*") if recursive else root.iterdir()
    found = [
        path
        for path in entries
        if path.name.lower().endswith(".xml") and not _inside_symlinked_dir(path, root)
    ]
    return sorted(found)


def _inside_symlinked_dir(path: Path, root: Path) -> bool:
    # rglob does not follow directory symlinks, but be explicit: a link leading out of the
    # outbox must not pull other directories in.
    return any(parent.is_symlink() for parent in path.relative_to(root).parents if parent.parts)


def scan_files(
    paths: list[Path],
    root: Path,
    known_sha256: Collection[str],
    workers: int | None = None,
) -> Iterator[ScannedFile]:
    """Read, hash and (for new content) parse each path, in order."""
    workers = workers if workers is not None else _default_workers(len(paths))
    if workers <= 1:
        yield from (_scan_one(path, root, known_sha256) for path in paths)
        return
    with ProcessPoolExecutor(
        max_workers=workers,
        mp_context=get_context("fork"),
        initializer=_init_worker,
        initargs=(root, frozenset(known_sha256)),
    ) as pool:
        for window in _windows(paths, _WINDOW):
            yield from pool.map(_scan_in_worker, window, chunksize=32)


def _default_workers(count: int) -> int:
    if count < _POOL_THRESHOLD:
        return 1
    return max(1, min(4, os.cpu_count() or 1))


def _windows(items: Iterable[Path], size: int) -> Iterator[list[Path]]:
    iterator = iter(items)
    while window := list(islice(iterator, size)):
        yield window


def _scan_one(path: Path, root: Path, known_sha256: Collection[str]) -> ScannedFile:
    name = _display_name(path, root)
    try:
        data = ubl.read_document(path, root)
    except ubl.InvalidDocument as error:
        return ScannedFile(path=path, name=name, reason=error.reason)
    sha256 = hashlib.sha256(data).hexdigest()
    if sha256 in known_sha256:
        return ScannedFile(path=path, name=name, sha256=sha256, size=len(data))
    try:
        facts = ubl.parse_document(data)
    except ubl.InvalidDocument as error:
        return ScannedFile(path, name, sha256, len(data), data, reason=error.reason)
    return ScannedFile(path, name, sha256, len(data), data, facts=facts)


def _display_name(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


_worker_state: dict[str, object] = {}


def _init_worker(root: Path, known_sha256: frozenset[str]) -> None:
    _worker_state["root"] = root
    _worker_state["known"] = known_sha256


def _scan_in_worker(path: Path) -> ScannedFile:
    root = _worker_state["root"]
    known = _worker_state["known"]
    assert isinstance(root, Path) and isinstance(known, frozenset)
    return _scan_one(path, root, known)

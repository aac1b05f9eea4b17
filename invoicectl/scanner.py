"""Finding, reading, hashing and parsing the files of an outbox.

Parsing dominates ingest (design.md, "Measured pitfalls"), so many files are read by a small
pool of worker processes. Content the journal already knows (by sha256) is hashed but not
parsed again, and a file whose ``lstat`` is unchanged since it was last hashed is not read at
all (see ``StatCheck``), which keeps a re-scan cheap. Work is handed out in windows so that
memory stays flat however many files there are.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from itertools import islice
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from invoicectl import ubl

# Below this many files to read, a process pool costs more to start than it saves.
_POOL_THRESHOLD = 200
_WINDOW = 512
# A file changed within this long before it was checked may still be being written, in the
# same timestamp tick: its stat proves nothing and it is hashed again next time.
_RACY_NS = 2_000_000_000


@dataclass(frozen=True)
class StatKey:
    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int
    checked_at_ns: int

    def proves_unchanged(self, cached: StatKey) -> bool:
        same = (self.size, self.mtime_ns, self.ctime_ns, self.inode) == (
            cached.size,
            cached.mtime_ns,
            cached.ctime_ns,
            cached.inode,
        )
        return same and cached.checked_at_ns - cached.ctime_ns > _RACY_NS


def stat_key(path: Path) -> StatKey | None:
    """The regular file's identity now; None for links, directories and the unreadable."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return StatKey(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, time.time_ns())


@dataclass(frozen=True)
class ScannedFile:
    """One file's answer. Only small things cross back from a worker process: the bytes
    travel only when the journal does not hold them yet."""

    path: Path  # as found under the scanned directory
    name: str  # relative to the scanned directory, for messages
    sha256: str | None = None  # None when the file could not be read
    size: int | None = None
    invoice_id: str | None = None  # None for known content (the journal knows its ID)
    facts_json: str | None = None  # what ubl.parse_document found, for new content
    data: bytes | None = None  # the exact bytes, for new content
    reason: str | None = None  # why the file yields no invoice ID
    stat: StatKey | None = None  # lstat taken before the bytes were read


# path -> the StatKey and sha256 recorded when it was last hashed, if any
CachedStat = Callable[[Path], tuple[StatKey, str] | None]


def find_candidates(root: Path, recursive: bool = False) -> list[Path]:
    """Every entry named ``*.xml`` (any case), sorted, including directories and broken links,
    which then get a reason of their own instead of vanishing. Symbolic links to directories
    are not descended into."""
    found: list[Path] = []
    if recursive:
        for directory, _subdirs, files in os.walk(root):
            found.extend(Path(directory, name) for name in files if _is_xml(name))
            found.extend(Path(directory, name) for name in _subdirs if _is_xml(name))
    else:
        with os.scandir(root) as entries:
            found.extend(Path(entry.path) for entry in entries if _is_xml(entry.name))
    return sorted(found)


def _is_xml(name: str) -> bool:
    return name.lower().endswith(".xml")


def scan_files(
    paths: list[Path],
    root: Path,
    known_sha256: Collection[str],
    cached_stat: CachedStat = lambda path: None,
    workers: int | None = None,
) -> Iterator[ScannedFile]:
    """Each path's answer: unchanged files from their stat, the rest read, hashed and parsed."""
    to_read: list[tuple[Path, StatKey | None]] = []
    for path in paths:
        key = stat_key(path)
        cached = cached_stat(path) if key is not None else None
        if key is not None and cached is not None and key.proves_unchanged(cached[0]):
            yield ScannedFile(
                path, _display_name(path, root), cached[1], key.size, stat=cached[0]
            )
        else:
            to_read.append((path, key))
    yield from _read_all(to_read, root, known_sha256, workers)


def _read_all(
    to_read: list[tuple[Path, StatKey | None]],
    root: Path,
    known_sha256: Collection[str],
    workers: int | None,
) -> Iterator[ScannedFile]:
    workers = workers if workers is not None else _default_workers(len(to_read))
    if workers <= 1:
        yield from (_scan_one(path, key, root, known_sha256) for path, key in to_read)
        return
    with ProcessPoolExecutor(
        max_workers=workers,
        mp_context=get_context("fork"),
        initializer=_init_worker,
        initargs=(root, frozenset(known_sha256)),
    ) as pool:
        for window in _windows(to_read, _WINDOW):
            yield from pool.map(_scan_in_worker, window, chunksize=32)


def _default_workers(count: int) -> int:
    if count < _POOL_THRESHOLD:
        return 1
    return max(1, min(4, os.cpu_count() or 1))


def _windows(
    items: Iterable[tuple[Path, StatKey | None]], size: int
) -> Iterator[list[tuple[Path, StatKey | None]]]:
    iterator = iter(items)
    while window := list(islice(iterator, size)):
        yield window


def _scan_one(
    path: Path, key: StatKey | None, root: Path, known_sha256: Collection[str]
) -> ScannedFile:
    name = _display_name(path, root)
    try:
        data = ubl.read_document(path, root)
    except ubl.InvalidDocument as error:
        return ScannedFile(path, name, reason=error.reason)
    sha256 = hashlib.sha256(data).hexdigest()
    if sha256 in known_sha256:
        return ScannedFile(path, name, sha256, len(data), stat=key)
    try:
        facts = ubl.parse_document(data)
    except ubl.InvalidDocument as error:
        return ScannedFile(path, name, sha256, len(data), reason=error.reason)
    return ScannedFile(
        path,
        name,
        sha256,
        len(data),
        invoice_id=facts.invoice_id,
        facts_json=json.dumps(facts_record(facts)),
        data=data,
        stat=key,
    )


def facts_record(facts: ubl.InvoiceFacts) -> dict[str, Any]:
    """The facts as the journal keeps them (a revision's ``facts`` JSON)."""
    return {
        "document_type": facts.document_type,
        "invoice_id": facts.invoice_id,
        "issue_date": facts.issue_date,
        "currency": facts.currency,
        "payable_amount": facts.payable_amount,
        "supplier_endpoint": _endpoint_record(facts.supplier_endpoint),
        "customer_endpoint": _endpoint_record(facts.customer_endpoint),
        "problem": facts.problem,
    }


def _endpoint_record(endpoint: ubl.Endpoint | None) -> dict[str, str] | None:
    return None if endpoint is None else {"scheme": endpoint.scheme, "id": endpoint.id}


def _display_name(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


_worker_state: dict[str, Any] = {}


def _init_worker(root: Path, known_sha256: frozenset[str]) -> None:
    _worker_state["root"] = root
    _worker_state["known"] = known_sha256


def _scan_in_worker(item: tuple[Path, StatKey | None]) -> ScannedFile:
    path, key = item
    return _scan_one(path, key, _worker_state["root"], _worker_state["known"])

"""Reading the files of an outbox (``scan_files``): here when they are few, by a pool of
forked workers (``forkpool``) when many.

Parsing dominates ingest (design.md, "Measured pitfalls"), so many files are read by a small
pool of worker processes while this process stores what they found. A file whose ``lstat`` is
unchanged since it was last hashed is not read at all (see ``StatKey``), which keeps a re-scan
cheap. Files are looked up and handed out in small windows, with a bounded number in flight,
so that memory stays flat however many files there are.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from invoicectl.scan.scanned import ScannedFile, StatKey, Wire, as_text, from_wire, stat_key

if TYPE_CHECKING:
    from invoicectl.scan.forkpool import ForkPool

# Below this many files to read, a process pool costs more to start than it saves.
_POOL_THRESHOLD = 200
# Files whose cached stats are looked up in one query.
_WINDOW = 512
# Files handed to a worker at once (fewer when they are large), and chunks in flight per
# worker: enough that no worker waits while this process stores (a commit that checkpoints
# the WAL waits on the disk: with 4 chunks a worker, a first scan of 20,000 files took 4 %
# longer), few enough that the bytes in flight stay bounded however large the files. Smaller
# chunks cost more in inter-process overhead than they gain in balance.
_CHUNK = 64
_CHUNK_BYTES = 4 * 1024 * 1024
_CHUNKS_IN_FLIGHT_PER_WORKER = 8


# (the directory's path prefix, path -> "size:mtime_ns:ctime_ns:inode" of files just
# stat'ed) -> the paths to read: the others, proved unchanged since they were last hashed,
# the journal took into the scan itself (``journal.take_unchanged``)
Unchanged = Callable[[str, dict[str, str]], Container[str]]


# whether the journal holds a content (``sha256 in ...``, one lookup each); made only if some
# file must be read
KnownSha256 = Callable[[], Container[str]]


class HeadStart(NamedTuple):
    """The first files of a scan, handed to worker processes before the journal was open."""

    reader: _Reader
    handed_out: int  # names[:handed_out] are with the workers
    answered: list[ScannedFile]  # what came back while handing them out


def start_reading(
    names: Sequence[str], root: Path, known_sha256: Container[str], workers: int | None = None
) -> HeadStart | None:
    """Hand the first files to workers now, as many as they queue: None when there are too
    few files for a pool. Every file is read (no stats are looked up): for a directory the
    journal holds no stats for, as on a first scan."""
    workers = workers or _default_workers()
    if workers <= 1 or len(names) < _POOL_THRESHOLD:
        return None
    reader = _Reader(root, lambda: known_sha256, workers)
    count = min(len(names), workers * _CHUNKS_IN_FLIGHT_PER_WORKER * _CHUNK)
    directory = str(root)
    answered = [
        answer
        for name in names[:count]
        for answer in reader.add(name, stat_key(os.path.join(directory, name)))
    ]
    return HeadStart(reader, count, answered)


def scan_files(
    names: Sequence[str],
    root: Path,
    known_sha256: KnownSha256,
    unchanged: Unchanged | None = None,
    workers: int | None = None,
    head: HeadStart | None = None,
) -> Iterator[ScannedFile]:
    """Each file's answer: the files read, hashed and parsed. Those ``unchanged`` proves
    unchanged since they were last hashed are answered by the journal itself, not here.

    ``names`` are relative to ``root``, an absolute path. Answers come in no set order: a
    pool answers as its workers finish. ``unchanged`` is None when the journal holds no
    stats under ``root``. With ``head``, its first files are with the workers already, and
    its reader reads the rest.
    """
    directory = str(root)
    reader = head.reader if head is not None else _Reader(root, known_sha256, workers)
    # Names are looked up from the directory itself: the kernel walks one name, not the
    # whole path, for each (0.35 µs of a re-scan's file here).
    try:
        directory_fd: int | None = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        directory_fd = None
    try:
        if head is not None:
            yield from head.answered
            names = names[head.handed_out :]
        prefix = directory if directory.endswith(os.sep) else directory + os.sep
        text_prefix = as_text(prefix)
        for window in _windows(names, _WINDOW):
            # Taken before the window's lstats, so never later than any of them: a file
            # changed meanwhile looks racy (read again next time), never settled.
            checked_at_ns = time.time_ns()
            stats = _regular_files(window, prefix, directory_fd)
            if unchanged is None:
                for name, st in zip(window, stats, strict=True):
                    yield from reader.add(name, _key(st, checked_at_ns))
                continue
            paths = [text_prefix + (name if name.isascii() else as_text(name)) for name in window]
            found = {
                path: f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}"
                for path, st in zip(paths, stats, strict=True)
                if st is not None
            }
            shared = _shared(paths, stats, found)
            read_again = unchanged(text_prefix, found) if found else set()
            if not read_again and not shared and len(found) == len(window):
                continue  # every file of the window unchanged: the journal has them all
            for name, path, st in zip(window, paths, stats, strict=True):
                if st is None or path in read_again or path in shared:
                    yield from reader.add(name, _key(st, checked_at_ns))
        yield from reader.finish()
    finally:
        reader.close()
        if directory_fd is not None:
            os.close(directory_fd)


def _shared(
    paths: list[str], stats: list[os.stat_result | None], found: dict[str, str]
) -> set[str]:
    """Paths that two names of the window share (names that are not UTF-8 can come out as
    one text): not looked up, so each of their files is read and answered."""
    if len(found) == sum(st is not None for st in stats):
        return set()
    seen: set[str] = set()
    shared: set[str] = set()
    for path, st in zip(paths, stats, strict=True):
        if st is not None:
            if path in seen:
                shared.add(path)
            seen.add(path)
    for path in shared:
        del found[path]
    return shared


def _regular_files(
    names: list[str], prefix: str, directory_fd: int | None
) -> list[os.stat_result | None]:
    """Each regular file's ``lstat``; None for links, directories and the unreadable."""
    found: list[os.stat_result | None] = []
    for name in names:
        try:
            if directory_fd is None:
                st = os.lstat(prefix + name)
            else:
                st = os.lstat(name, dir_fd=directory_fd)
        except OSError:
            found.append(None)
            continue
        found.append(st if stat.S_ISREG(st.st_mode) else None)
    return found


def _key(st: os.stat_result | None, checked_at_ns: int) -> StatKey | None:
    if st is None:
        return None
    return StatKey(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, checked_at_ns)


def _windows(items: Iterable[str], size: int) -> Iterator[list[str]]:
    iterator = iter(items)
    while window := list(islice(iterator, size)):
        yield window


class _Reader:
    """Reads, hashes and parses files: here when they are few, in a process pool when many.

    With a pool, files go out in chunks and at most a few chunks per worker are in flight:
    adding a file past that yields answers first, in the order the workers finish them.
    """

    def __init__(self, root: Path, known_sha256: KnownSha256, workers: int | None) -> None:
        self.root = root
        self.known_sha256 = known_sha256
        self.workers = workers
        self.known: Container[str] | None = None
        self.pool: ForkPool[tuple[str, StatKey | None], Wire] | None = None
        # Files not handed out yet: until the pool starts, and for the next chunk.
        self.waiting: list[tuple[str, StatKey | None]] = []
        self.chunk: list[tuple[str, StatKey | None]] = []
        self.chunk_bytes = 0

    def add(self, name: str, key: StatKey | None) -> Iterator[ScannedFile]:
        if self.pool is not None:
            yield from self._add_to_chunk(name, key)
            return
        self.waiting.append((name, key))
        if self.workers is None and len(self.waiting) >= _POOL_THRESHOLD:
            self.workers = _default_workers()
        if self.workers is None:
            return
        if self.workers <= 1:
            yield from self._here()
            return
        self._start_pool(self.workers)
        waiting, self.waiting = self.waiting, []
        for waiting_name, waiting_key in waiting:
            yield from self._add_to_chunk(waiting_name, waiting_key)

    def finish(self) -> Iterator[ScannedFile]:
        if self.pool is None:
            yield from self._here()
            return
        if self.chunk:
            yield from self._hand_out()
        for answers in self.pool.drain():
            yield from map(from_wire, answers)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None

    def _here(self) -> Iterator[ScannedFile]:
        if not self.waiting:
            return
        # Imported when a file is read: a re-scan of unchanged files reads none, and never
        # loads the parser (lxml).
        from invoicectl.scan.worker import Place, scan_one

        place = Place.at(str(self.root), str(self.root))
        known = self._known()
        waiting, self.waiting = self.waiting, []
        for name, key in waiting:
            yield scan_one(name, key, place, known)

    def _start_pool(self, workers: int) -> None:
        # Imported here: a small scan, and every other command, never needs a pool. The
        # workers are forked after, so they inherit the parser imported.
        from invoicectl.scan.forkpool import ForkPool
        from invoicectl.scan.worker import init_worker, scan_chunk

        root, known = self.root, self._known()
        self.pool = ForkPool(
            workers,
            scan_chunk,
            setup=lambda: init_worker(root, known),
            queue_depth=_CHUNKS_IN_FLIGHT_PER_WORKER,
        )

    def _add_to_chunk(self, name: str, key: StatKey | None) -> Iterator[ScannedFile]:
        self.chunk.append((name, key))
        self.chunk_bytes += key.size if key is not None else 0
        if len(self.chunk) >= _CHUNK or self.chunk_bytes >= _CHUNK_BYTES:
            yield from self._hand_out()

    def _hand_out(self) -> Iterator[ScannedFile]:
        assert self.pool is not None
        chunk, self.chunk, self.chunk_bytes = self.chunk, [], 0
        for answers in self.pool.submit(chunk):
            yield from map(from_wire, answers)

    def _known(self) -> Container[str]:
        if self.known is None:
            self.known = self.known_sha256()
        return self.known


def _default_workers() -> int:
    return max(1, min(4, os.cpu_count() or 1))

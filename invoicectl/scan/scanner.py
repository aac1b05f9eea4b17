"""Finding, reading, hashing and parsing the files of an outbox.

Parsing dominates ingest (design.md, "Measured pitfalls"), so many files are read by a small
pool of worker processes while this process stores what they found. Content the journal
already knows (by sha256) is hashed but not parsed again, and a file whose ``lstat`` is
unchanged since it was last hashed is not read at all (see ``StatKey``), which keeps a re-scan
cheap. Files are looked up and handed out in small windows, with a bounded number in flight,
so that memory stays flat however many files there are.

Everything that crosses between processes is plain: names and answers are strings, numbers
and bytes in named tuples, which pickle in well under half the time of dataclasses holding
Paths.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from invoicectl import ubl
from invoicectl.journal import packing
from invoicectl.journal.records import CachedStat

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
# A file changed within this long before it was checked may still be being written, in the
# same timestamp tick: its stat proves nothing and it is hashed again next time.
_RACY_NS = 2_000_000_000


class StatKey(NamedTuple):
    """A regular file's identity (``lstat``) and when it was taken."""

    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int
    checked_at_ns: int

    def proves_unchanged(self, cached: tuple[int, ...]) -> bool:
        """Whether ``cached``, a StatKey's fields as the journal recorded them, proves the
        file the same: same identity, and recorded well after its last change."""
        size, mtime_ns, ctime_ns, inode, checked_at_ns = cached
        same = self[:4] == (size, mtime_ns, ctime_ns, inode)
        return same and checked_at_ns - ctime_ns > _RACY_NS


def stat_key(path: str | Path) -> StatKey | None:
    """The regular file's identity now; None for links, directories and the unreadable."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return StatKey(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, time.time_ns())


class ScannedFile(NamedTuple):
    """One file's answer. The bytes travel back from a worker only when the journal does
    not hold them yet, and packed as the journal keeps them (``packing.pack``)."""

    path: str  # absolute, under the scanned directory: the journal's key for the file
    name: str  # relative to the scanned directory, for messages
    sha256: str | None = None  # None when the file could not be read
    size: int | None = None
    invoice_id: str | None = None  # None for known content read again (the journal knows it)
    facts_json: str | None = None  # what ubl.parse_document found, for new content
    columns: tuple[str | None, ...] | None = None  # invoice_columns of those facts
    stored: bytes | None = None  # the exact bytes as packed, for new content
    codec: str | None = None  # how ``stored`` is packed
    reason: str | None = None  # why the file yields no invoice ID
    # The lstat taken before the bytes were read, to remember; None when the file was not
    # read (its stat is already in the journal) or is not a regular file.
    stat: StatKey | None = None


# paths -> for those hashed before, the StatKey and sha256 recorded then
CachedStats = Callable[[list[str]], dict[str, CachedStat]]


# the sha256 of every content the journal holds; asked only if some file must be read
KnownSha256 = Callable[[], Collection[str]]


def find_candidates(
    root: Path, recursive: bool = False, unlisted: list[ScannedFile] | None = None
) -> list[str]:
    """The name, relative to ``root``, of every entry named ``*.xml`` (any case), sorted,
    including directories and broken links, which then get a reason of their own instead of
    vanishing. Symbolic links to directories are not descended into. A subdirectory that
    cannot be listed is answered in ``unlisted``: its files cannot be, so it must be."""
    if not recursive:
        with os.scandir(root) as entries:
            return sorted(entry.name for entry in entries if _is_xml(entry.name))

    def cannot_list(error: OSError) -> None:
        if unlisted is not None and error.filename is not None:
            path = os.fsdecode(error.filename)
            reason = (
                f"cannot list this directory ({error.strerror}); the invoices in it were not "
                "scanned: fix its permissions"
            )
            name = os.path.relpath(path, root)
            unlisted.append(ScannedFile(as_text(path), as_text(name), reason=reason))

    found: list[str] = []
    for directory, subdirs, files in os.walk(root, onerror=cannot_list):
        relative = os.path.relpath(directory, root)
        prefix = "" if relative == os.curdir else relative + os.sep
        found.extend(prefix + name for name in files if _is_xml(name))
        found.extend(prefix + name for name in subdirs if _is_xml(name))
    # Component by component, as paths sort: a/x.xml before a-b/x.xml.
    return sorted(found, key=lambda name: name.split(os.sep))


def _is_xml(name: str) -> bool:
    return name.lower().endswith(".xml")


class HeadStart(NamedTuple):
    """The first files of a scan, handed to worker processes before the journal was open."""

    reader: _Reader
    handed_out: int  # names[:handed_out] are with the workers
    answered: list[ScannedFile]  # what came back while handing them out


def start_reading(
    names: Sequence[str], root: Path, known_sha256: Collection[str], workers: int | None = None
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
    cached_stats: CachedStats | None = None,
    workers: int | None = None,
    head: HeadStart | None = None,
) -> Iterator[ScannedFile]:
    """Each file's answer: unchanged files from their stat, the rest read, hashed and parsed.

    ``names`` are relative to ``root``, an absolute path. Answers come in no set order: a
    file proved unchanged is answered at once, and a pool answers as its workers finish.
    ``cached_stats`` is None when the journal holds no stats under ``root``. With ``head``,
    its first files are with the workers already, and its reader reads the rest.
    """
    directory = str(root)
    reader = head.reader if head is not None else _Reader(root, known_sha256, workers)
    try:
        if head is not None:
            yield from head.answered
            names = names[head.handed_out :]
        for window in _windows(names, _WINDOW):
            paths = [os.path.join(directory, name) for name in window]
            cached = cached_stats([as_text(path) for path in paths]) if cached_stats else {}
            for name, path in zip(window, paths, strict=True):
                key = stat_key(path)
                hit = cached.get(as_text(path)) if key is not None and cached else None
                if key is not None and hit is not None and key.proves_unchanged(hit.key):
                    yield ScannedFile(
                        as_text(path), as_text(name), hit.sha256, key.size, hit.invoice_id
                    )
                else:
                    yield from reader.add(name, key)
        yield from reader.finish()
    finally:
        reader.close()


def as_text(name: str) -> str:
    """A file name as text for the journal and messages. Names are bytes on Linux; one that
    is not UTF-8 keeps its odd bytes as \\xNN escapes instead of failing the whole scan."""
    if name.isascii():  # the common case, and a round trip would change nothing
        return name
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


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
        self.known: Collection[str] | None = None
        self.pool: ForkPool[tuple[str, StatKey | None], ScannedFile] | None = None
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
            yield from answers

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None

    def _here(self) -> Iterator[ScannedFile]:
        if not self.waiting:
            return
        place = _Place(str(self.root), str(self.root))
        known = self._known()
        waiting, self.waiting = self.waiting, []
        for name, key in waiting:
            yield _scan_one(name, key, place, known)

    def _start_pool(self, workers: int) -> None:
        # Imported here: a small scan, and every other command, never needs a pool.
        from invoicectl.scan.forkpool import ForkPool

        root, known = self.root, self._known()
        self.pool = ForkPool(
            workers,
            _scan_chunk,
            setup=lambda: _init_worker(root, known),
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
            yield from answers

    def _known(self) -> Collection[str]:
        if self.known is None:
            self.known = self.known_sha256()
        return self.known


def _default_workers() -> int:
    return max(1, min(4, os.cpu_count() or 1))


class _Place(NamedTuple):
    """Where a process finds the files: ``directory`` (absolute) names them in answers, and
    ``read_root`` is what ``ubl.read_document`` opens them under and checks them against."""

    directory: str
    read_root: str


def _scan_one(
    name: str, key: StatKey | None, place: _Place, known_sha256: Collection[str]
) -> ScannedFile:
    data_path = os.path.join(place.read_root, name)
    path, name = as_text(os.path.join(place.directory, name)), as_text(name)
    try:
        data = ubl.read_document(data_path, place.read_root)
    except ubl.InvalidDocument as error:
        return ScannedFile(path, name, reason=error.reason)
    sha256 = hashlib.sha256(data).hexdigest()
    if sha256 in known_sha256:
        return ScannedFile(path, name, sha256, len(data), stat=key)
    try:
        facts = ubl.parse_document(data)
    except ubl.InvalidDocument as error:
        return ScannedFile(path, name, sha256, len(data), reason=error.reason)
    codec, stored = packing.pack(data)
    record = facts_record(facts)
    return ScannedFile(
        path,
        name,
        sha256,
        len(data),
        invoice_id=facts.invoice_id,
        facts_json=json.dumps(record),
        columns=invoice_columns(record),
        stored=stored,
        codec=codec,
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


# The invoices columns a revision's facts fill, in the order invoice_columns gives them.
INVOICE_COLUMNS = (
    "document_type",
    "receiver_scheme",
    "receiver_id",
    "sender_endpoint",
    "issue_date",
    "currency",
    "payable_amount",
    "problem",
)


def invoice_columns(record: dict[str, Any]) -> tuple[str | None, ...]:
    """A facts record (``facts_record``) as the values of ``INVOICE_COLUMNS``."""
    customer = record.get("customer_endpoint") or {}
    supplier = record.get("supplier_endpoint")
    return (
        record["document_type"],
        customer.get("scheme"),
        customer.get("id"),
        f"{supplier['scheme']}:{supplier['id']}" if supplier else None,
        record.get("issue_date"),
        record.get("currency"),
        record.get("payable_amount"),
        record.get("problem"),
    )


_worker_state: dict[str, Any] = {}


def _init_worker(root: Path, known_sha256: Collection[str]) -> None:
    # A worker runs inside the scanned directory: ubl.read_document then resolves a name
    # with one lstat instead of one per component of the directory's path, and the answer
    # is the same, since "." resolves to the directory's real path. The worker is a process
    # of its own, so its working directory is nobody else's.
    try:
        os.chdir(root)
        read_root = os.curdir
    except OSError:
        read_root = str(root)
    _worker_state["place"] = _Place(str(root), read_root)
    _worker_state["known"] = known_sha256


def _scan_chunk(chunk: list[tuple[str, StatKey | None]]) -> list[ScannedFile]:
    place, known = _worker_state["place"], _worker_state["known"]
    return [_scan_one(name, key, place, known) for name, key in chunk]

"""What a scan knows of one file, as plain data: its identity (``StatKey``), its answer
(``ScannedFile``), and its name as text (``as_text``).

Everything that crosses between processes is plain: names and answers are strings, numbers
and bytes in named tuples, which pickle in well under half the time of dataclasses holding
Paths.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import Any, NamedTuple

# A file changed within this long before it was checked may still be being written, in the
# same timestamp tick: its stat proves nothing and it is hashed again next time. A stat
# proves a file unchanged when size, mtime, ctime and inode are the same and it was recorded
# more than this after the file's ctime: the journal compares, a window of files per query
# (``unchanged_files``).
RACY_NS = 2_000_000_000


class StatKey(NamedTuple):
    """A regular file's identity (``lstat``) and when it was taken."""

    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int
    checked_at_ns: int


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
    columns: tuple[str | None, ...] | None = None  # fact_columns of those facts
    stored: bytes | None = None  # the exact bytes as packed, for new content
    codec: str | None = None  # how ``stored`` is packed
    reason: str | None = None  # why the file yields no invoice ID
    # The lstat taken before the bytes were read, to remember; None when the file was not
    # read (its stat is already in the journal) or is not a regular file.
    stat: StatKey | None = None


# A ScannedFile as it crosses from a worker process: a plain tuple, its stat one too. A named
# tuple pickles through a Python-level __getnewargs__ and unpickles through its Python-level
# __new__: 20,000 answers took the workers 0.29 s to pickle and this process 0.16 s to
# unpickle, against 0.15 s (the conversion included) and 0.12 s as plain tuples.
Wire = tuple[Any, ...]
_new = tuple.__new__


def to_wire(answer: ScannedFile) -> Wire:
    """``answer`` as a worker sends it (``from_wire`` makes it again)."""
    if answer.stat is None:
        return tuple(answer)
    return (*answer[:-1], tuple(answer.stat))


def from_wire(wire: Wire) -> ScannedFile:
    """The ``ScannedFile`` a worker sent as ``to_wire``."""
    if wire[-1] is None:
        return _new(ScannedFile, wire)
    return _new(ScannedFile, (*wire[:-1], _new(StatKey, wire[-1])))


def as_text(name: str) -> str:
    """A file name as text for the journal and messages. Names are bytes on Linux; one that
    is not UTF-8 keeps its odd bytes as \\xNN escapes instead of failing the whole scan."""
    if name.isascii():  # the common case, and a round trip would change nothing
        return name
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")

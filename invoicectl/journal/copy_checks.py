"""What a journal copy checks, and the two ways it says no (``copying``): the schemas the
two journals are at, a digest over rows that tells a value read back as another type, and
every blob's bytes against its sha256."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from invoicectl.errors import ExitCode, JournalError, UsageError
from invoicectl.journal.migrations import MIGRATIONS
from invoicectl.journal.packing import unpack
from invoicectl.locations import JournalURL

NOTHING_WRITTEN = "nothing was written"


@dataclass(frozen=True)
class TableCopy:
    name: str
    rows: int
    digest: str  # sha256 over the rows in key order (``RowDigest``)


class CopyRefused(UsageError):
    """The source or the target is not one a copy may use: nothing was read into or written
    to the target (exit 2)."""


class CopyMismatch(JournalError):
    """The copy read back from PostgreSQL is not the source's, or could not be written: the
    transaction was rolled back, the target holds none of it (exit 1)."""

    exit_code = ExitCode.COULD_NOT_RUN


def same_migrations(applied: set[str], what: str, *, upgrade: bool) -> None:
    ours = [migration.__name__ for migration in MIGRATIONS]
    if unknown := applied - set(ours):
        raise CopyRefused(
            f"{what} was written by a newer invoicectl (migrations {', '.join(sorted(unknown))});"
            f" upgrade invoicectl, then copy; {NOTHING_WRITTEN}"
        )
    missing = [name for name in ours if name not in applied]
    if missing and upgrade:
        raise CopyRefused(
            f"{what} is at an older schema (it lacks {', '.join(missing)}): open it once with"
            f" this invoicectl (invoicectl status) to bring it up to date, then copy;"
            f" {NOTHING_WRITTEN}"
        )


def listed(columns: Iterable[str]) -> str:
    return ", ".join(f'"{column}"' for column in columns)


class RowDigest:
    """sha256 over rows, each value with its type: a value read back as another type (text
    for bytes, a float for an integer) does not give the source's digest."""

    def __init__(self) -> None:
        self._sha = hashlib.sha256()
        self.rows = 0

    def add(self, row: Sequence[Any]) -> None:
        update = self._sha.update
        for value in row:
            if value is None:
                update(b"N")
            elif isinstance(value, bool):
                update(b"?1" if value else b"?0")
            elif isinstance(value, int):
                update(b"I%d;" % value)
            elif isinstance(value, float):
                update(b"F" + repr(value).encode() + b";")
            elif isinstance(value, str):
                data = value.encode("utf-8", "surrogatepass")
                update(b"S%d:" % len(data) + data)
            else:
                data = bytes(value)
                update(b"B%d:" % len(data) + data)
        update(b"\n")
        self.rows += 1

    def hexdigest(self) -> str:
        return self._sha.hexdigest()


class BlobCheck:
    """Every blob read back: its bytes, unpacked, hash to its sha256 and have its size. The
    first that does not is raised by ``settle``, once the table's rows are known to be the
    source's: the damage is then the source's own, and the line says so."""

    def __init__(self, columns: list[str]) -> None:
        self._at = [columns.index(name) for name in ("sha256", "size", "codec", "data")]
        self.count = 0
        self._problem: str | None = None

    def settle(self) -> None:
        if self._problem is not None:
            raise CopyMismatch(self._problem)

    def check(self, row: Sequence[Any], target: JournalURL) -> None:
        sha256, size, codec, data = (row[index] for index in self._at)
        try:
            content = unpack(codec, bytes(data))
        except (ValueError, RuntimeError) as error:
            content, why = None, f"cannot be unpacked ({error})"
        if content is not None:
            why = "" if hashlib.sha256(content).hexdigest() == sha256 else "do not hash to it"
            if not why and len(content) != size:
                why = f"are {len(content)} bytes, not the {size} recorded"
        if why and self._problem is None:
            self._problem = (
                f"the copy of table blobs in {target}: blob {str(sha256)[:16]}'s bytes {why},"
                " as in the source (invoicectl verify on the SQLite journal names it): the copy"
                " was rolled back, the target holds none of it"
            )
        self.count += 1

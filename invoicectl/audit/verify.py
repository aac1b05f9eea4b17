"""``invoicectl verify``: does the journal still hold what it wrote? In the spirit of
``restic check``.

The checks, each reporting every problem it meets as one ``Finding`` and going on to the
next (a damaged file stops only the check that meets the damage; nothing stops ``verify``):

1. the file itself: not empty, an SQLite header, not shorter than its header says;
   SQLite's integrity check;
2. the chain, event by event: no sequence number missing, every hash equal to
   ``sha256(previous hash || payload)``, every payload in canonical form, its seq, kind and
   invoice ID those of its row; every chain head a run recorded still in the chain; the
   journal's identity that of its genesis (``chain_check``);
3. every stored blob against its sha256 (``subset``: a random share of them), and every
   attempt's body sha256 against the body rebuilt from the blob it carried (``blob_check``);
4. every row the chain covers (invoices, attempts, the audit trail, revisions, runs,
   history checks, the environment binding) against its last event (``chain_check``).

Everything streams: memory stays flat whatever the journal's size (tests/test_audit_chain.py),
and whatever it finds (the first ``findings.LISTED`` problems are kept to list, the rest counted).
"""

from __future__ import annotations

import math
import os
import random
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from invoicectl.audit.blob_check import check_blobs
from invoicectl.audit.chain_check import (
    ChainState,
    check_chain,
    check_identity,
    check_rows,
    check_run_heads,
)
from invoicectl.audit.findings import Finding, Verification
from invoicectl.errors import UsageError
from invoicectl.journal.audit import AuditReader
from invoicectl.journal.chain import COVERED
from invoicectl.journal.sqlite_open import not_regular, several_names
from invoicectl.locations import JournalURL, Location
from invoicectl.text import not_ascii_digits, one_line

__all__ = ["Finding", "Verification", "parse_subset", "verify"]

_SQLITE_MAGIC = b"SQLite format 3\x00"


def parse_subset(text: str | None) -> float:
    """``--read-data-subset``: "10%" (or "0.1"), as a share in (0, 1]."""
    if text is None:
        return 1.0
    try:
        share = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        share = math.nan
    foreign = not_ascii_digits(text)  # float() reads "١٠%" as 10%
    if foreign is not None or not 0 < share <= 1:
        raise UsageError(
            f"--read-data-subset {text!r}: give a percentage above 0% and at most 100%, e.g. 10%"
            + (f" ({foreign})" if foreign else "")
        )
    return share


def verify(
    path: Location, *, subset: float = 1.0, rng: random.Random | None = None
) -> Verification:
    """Every check of the module docstring on the journal at ``path``, read-only."""
    if isinstance(path, JournalURL):
        return _verify_database(path, subset, rng)
    result = Verification(str(path))
    if kind := not_regular(path):
        result.add("journal", f"not a regular file but {kind}")
        return result
    try:
        path.stat()
    except (FileNotFoundError, NotADirectoryError):
        result.add("journal", f"no journal file at {path}")
        return result
    except OSError as error:  # links that loop, no permission to look
        result.add("journal", f"cannot be looked at: {error.strerror or error}")
        return result
    if several := several_names(path):  # every other command refuses it; its rows are read
        result.add("journal", several)
    if not _file_holds_a_database(path, result):
        return result
    try:
        reader = AuditReader(path)
    except sqlite3.Error as error:
        result.add("journal", f"cannot be opened: {error}")
        return result
    with reader:
        _step(result, "the integrity check", lambda: _integrity(path, result))
        _checks(reader, result, subset, rng)
    return result


def _verify_database(
    location: JournalURL, subset: float, rng: random.Random | None
) -> Verification:
    """``verify`` on a PostgreSQL journal: the same checks but SQLite's file checks (the
    server keeps its own pages); unreachable, one line and exit 75 (``JournalUnreachable``)."""
    from invoicectl.journal.pg_audit import PgAuditReader

    result = Verification(str(location))
    result.file_checks = False
    with PgAuditReader(location) as reader:
        _checks(reader, result, subset, rng)
    return result


def _checks(
    reader: AuditReader, result: Verification, subset: float, rng: random.Random | None
) -> None:
    """The chain, the run heads, the identity, the blobs and every covered row."""
    if not _is_journal(reader, result):
        return
    state = ChainState()
    # On PostgreSQL a step that fails would abort the snapshot's transaction for every step
    # after it: each runs inside a savepoint of its own there.
    guard: Callable[[], AbstractContextManager[Any]] = getattr(reader, "isolated", nullcontext)

    def step(name: str, check: Callable[[], None]) -> None:
        _step(result, name, check, guard)

    step("the chain check", lambda: _check_chain(reader, result, state))
    step("the run heads check", lambda: check_run_heads(reader, result))
    step("the identity check", lambda: check_identity(reader, result, state))
    step("the blob check", lambda: check_blobs(reader, result, subset, rng))
    if not state.complete:
        result.add(
            "journal",
            "the rows were not checked against their events: the chain could not be read",
        )
        return
    gone = set(_lacking(reader))  # named once already: its rows went with it
    for table in COVERED:
        if table in state.covered and table not in gone:
            step(f"the {table} check", lambda t=table: _check_rows(reader, result, t))  # type: ignore[misc]


def _check_chain(reader: AuditReader, result: Verification, state: ChainState) -> None:
    """``check_chain``, a payload that is not UTF-8 read with its odd bytes kept: named by
    the check, which reads on, instead of stopping it and every row check after it."""
    conn = reader.conn
    if not isinstance(conn, sqlite3.Connection):  # PostgreSQL's text is UTF-8 always
        check_chain(reader, result, state)
        return
    conn.text_factory = _keeping_odd_bytes
    try:
        check_chain(reader, result, state)
    finally:
        conn.text_factory = str


def _check_rows(reader: AuditReader, result: Verification, table: str) -> None:
    """``check_rows``; a table holding text that is not UTF-8 (written outside invoicectl)
    is checked again with its odd bytes kept as they are, so that every row is still
    compared with its event and the damaged ones are named, instead of the check stopping
    at the first of them."""
    found, rows = result.problems, result.rows_checked
    try:
        check_rows(reader, result, table)
    except sqlite3.OperationalError as error:
        if "decode to UTF-8" not in str(error):
            raise
        result.rewind(found)
        result.rows_checked = rows
        reader.conn.text_factory = _keeping_odd_bytes
        try:
            check_rows(reader, result, table)
        finally:
            reader.conn.text_factory = str


def _keeping_odd_bytes(value: bytes) -> str:
    return value.decode("utf-8", "surrogateescape")


def _step(
    result: Verification,
    name: str,
    check: Callable[[], None],
    guard: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> None:
    """One check; whatever stops it is one finding, and the next check runs."""
    try:
        with guard():
            check()
    except sqlite3.DatabaseError as error:
        result.add("journal", f"{name} stopped: the file cannot be read ({error})")
    except Exception as error:  # damage no check foresaw: reported, never a traceback
        if os.environ.get("INVOICECTL_DEBUG") == "1":
            raise
        result.add("journal", f"{name} stopped: {type(error).__name__}: {one_line(str(error))}")


def _lacking(reader: AuditReader) -> list[str]:
    try:
        return reader.lacking()
    except Exception:  # the schema unreadable: the checks say what they meet
        return []


def _file_holds_a_database(path: Path, result: Verification) -> bool:
    """The file's own shape, before SQLite reads it: empty, no header, or shorter than its
    header says (a copy cut short, a disk that lost its tail). False when nothing more can
    be read from it."""
    size = path.stat().st_size
    if size == 0:
        result.add("journal", "the file is empty (0 bytes): truncated, or never written")
        return False
    with path.open("rb") as file:
        header = file.read(100)
    if len(header) < 100 or not header.startswith(_SQLITE_MAGIC):
        result.add(
            "journal",
            "not an SQLite database: its header is missing or damaged (truncated or overwritten)",
        )
        return False
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # The header's page count holds when its change counter matches (SQLite's rule); with
    # frames in the -wal a checkpoint may be growing the file, so only a journal whose
    # -wal is empty must be as long as its header says.
    counted = pages > 0 and header[24:28] == header[92:96]
    wal = Path(f"{path}-wal")
    settled = not wal.exists() or wal.stat().st_size == 0
    if counted and settled and size < pages * page_size:
        result.add(
            "journal",
            f"truncated: the file holds {size} bytes, its header says {pages * page_size}"
            f" ({pages} pages of {page_size} bytes)",
        )
    return True


def _integrity(path: Path, result: Verification) -> None:
    """SQLite's integrity check, on a connection of its own: damage it meets (a table that
    is not evidence, say) leaves the chain and row checks' connection able to read on."""
    with AuditReader(path) as own:
        for line in own.integrity_problems():
            result.add("journal", f"SQLite integrity check: {line}")


def _is_journal(reader: AuditReader, result: Verification) -> bool:
    try:
        if not reader.has_table("invoices"):
            result.add("journal", "holds no invoicectl journal (no invoices table)")
            return False
        if not reader.has_table("chain"):
            result.add(
                "journal", "has no chain yet: open it once with this invoicectl (invoicectl status)"
            )
            return False
        if lacking := reader.lacking():
            result.add("journal", f"its schema lacks {', '.join(lacking)} (dropped by hand?)")
    except sqlite3.DatabaseError as error:
        result.add("journal", f"cannot be read ({error})")
        return False
    return True

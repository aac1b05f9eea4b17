"""Copying a SQLite journal into an empty PostgreSQL journal (``invoicectl journal copy``).

Every table the journal keeps (blobs as stored, codec too; revisions, invoices, attempts,
runs, events, the chain, identity, environment, history checks, receivers, validations,
file stats, unidentified files, unfinished work) is copied row for row, ids as they are, in
one PostgreSQL transaction, then read back and checked before that transaction commits:

    refused first   a source that is not a journal, or not at this invoicectl's schema; a
                    target that holds anything but what its migrations wrote, or tables that
                    are not a journal's (exit 2, nothing written)
    copied          each table streamed in key order from the SQLite file (opened read-only,
                    in one read transaction, under its run lock: no send changes it) into
                    PostgreSQL with ``COPY``, a batch at a time, so memory stays flat
    checked         per table the row count and a digest over every row in key order, read
                    back from PostgreSQL, equal the source's; the chain's head equal; every
                    blob's bytes hash to its sha256
    committed       only then; any failure or mismatch rolls the whole copy back

The identity columns' sequences are moved past the copied ids, so the next row PostgreSQL
numbers follows the last SQLite numbered. The target's own identity and genesis (which its
migrations wrote) give way to the source's: the journal keeps its journal_id, so a send's
outbox marker recognises it (``send/history.py``), and its chain goes on from the source's
head.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from invoicectl.errors import JournalError
from invoicectl.journal.copy_checks import CopyMismatch, CopyRefused, TableCopy
from invoicectl.journal.copy_source import check_source_file, opened_source
from invoicectl.journal.copy_target import BATCH, Target, pg_errors, probe_target
from invoicectl.journal.database import utc_now
from invoicectl.journal.moved import note_move, note_of
from invoicectl.journal.runlock import RunLock
from invoicectl.locations import JournalURL

__all__ = ["CopyMismatch", "CopyRefused", "CopyReport", "TableCopy", "copy_journal"]


@dataclass(frozen=True)
class CopyReport:
    """What a copy did: plain data for the command's lines and ``--json``."""

    source: str
    target: str  # never with a password (``JournalURL``'s str)
    journal_id: str | None
    tables: tuple[TableCopy, ...]
    chain_seq: int
    chain_head: str
    blobs_checked: int
    seconds: float
    # The target already held this journal (its journal_id and chain head): an earlier copy
    # committed and was stopped before its note (``moved``), which this run wrote.
    completed_earlier: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            "journal_id": self.journal_id,
            "tables": {table.name: table.rows for table in self.tables},
            "rows": sum(table.rows for table in self.tables),
            "chain_head": {"seq": self.chain_seq, "hash": self.chain_head},
            "blobs_checked": self.blobs_checked,
            "verified": True,
            "completed_earlier": self.completed_earlier,
            "seconds": round(self.seconds, 3),
        }

    def lines(self) -> list[str]:
        if self.completed_earlier:
            return [
                f"the earlier copy of {self.source} to {self.target} had completed: the target"
                f" holds this journal ({self.journal_id}, chain head {self.chain_seq}:"
                f"{self.chain_head[:16]} equal in both); nothing was copied again. The note"
                " that makes the SQLite file an archive is written now."
            ]
        width = max(len(table.name) for table in self.tables)
        rows = [f"  {table.name:<{width}}  {table.rows:>10,}" for table in self.tables]
        return [
            f"copied {self.source} to {self.target} in {self.seconds:.1f} s:",
            *rows,
            f"chain head {self.chain_seq}:{self.chain_head[:16]} equal in both;"
            f" {self.blobs_checked:,} blobs hash to their sha256; every table's rows read"
            " back equal the source's. The SQLite file is as it was.",
        ]


def copy_journal(
    source: Path,
    target: JournalURL,
    *,
    batch: int = BATCH,
    monotonic: Callable[[], float] = time.monotonic,
) -> CopyReport:
    """Copy the SQLite journal at ``source`` into the empty PostgreSQL journal ``target``,
    check the copy, and commit it; ``CopyRefused`` (exit 2), ``CopyMismatch`` (exit 1) or
    ``JournalUnreachable`` (exit 75) with nothing left in the target otherwise."""
    started = monotonic()
    check_source_file(source)
    with RunLock(source, command="journal copy"), opened_source(source) as reader:
        tables = reader.tables()
        probe_target(target)
        from invoicectl.journal.pg_journal import PgJournal, pg_run_lock

        with pg_errors(target), PgJournal(target) as journal, pg_run_lock(journal, "journal copy"):
            writer = Target(cast(Any, journal.db.conn).raw, target)
            seq, head = reader.head()
            # Killed between the commit and the note: this run finds its own copy there.
            earlier = writer.holds(reader.journal_id, (seq, head))
            copied, checked = ((), 0) if earlier else writer.copy_all(reader, tables, batch)
        # Committed: from now on the file is an archive (``moved``), still under its lock.
        _note_committed_move(source, target)
    return CopyReport(
        source=str(source),
        target=str(target),
        journal_id=reader.journal_id,
        tables=copied,
        chain_seq=seq,
        chain_head=head,
        blobs_checked=checked,
        seconds=monotonic() - started,
        completed_earlier=earlier,
    )


def _note_committed_move(source: Path, target: JournalURL) -> None:
    """``note_move``, after the commit: a note that cannot be written (a full disk, a name
    taken) must not read as a copy rolled back, since the target holds it all."""
    at = utc_now().isoformat()
    try:
        note_move(source, str(target), at)
    except OSError as error:
        raise JournalError(
            f"the copy to {target} is committed, but {note_of(source)} could not be written "
            f"({error.strerror or error}): the SQLite file is not yet marked as an archive. Do "
            f'not send from it again: set journal = "{target}" now, and write that note '
            f'by hand: {{"moved_to": "{target}", "at": "{at}"}}'
        ) from None

"""Scanning an outbox into the journal: the rules behind ``invoicectl scan``.

Every file gets an answer. New content becomes a revision (and its bytes are stored once);
then each invoice ID seen in the scan is settled as design.md says. This module orchestrates
and counts: the journal stores what was found and answers the common cases (new and
unchanged) set-wise (``journal.scans``), so memory stays flat and a re-scan stays cheap; what
each of the rest becomes is the lifecycle's decision (``lifecycle.scanning``), one ID at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Container, Iterable
from itertools import chain
from pathlib import Path

from invoicectl.errors import ConfigError, InvoiceBusy, StoredCopyDamaged
from invoicectl.journal import peek_stored
from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import (
    DUPLICATE_CHECK,
    InvoiceState,
    ScannedCopy,
    fact_columns,
)
from invoicectl.lifecycle.holds import damaged_content, hold, lift_clash, lift_repaired
from invoicectl.lifecycle.scanning import Seen, admit_fresh, hold_duplicate, settle_seen
from invoicectl.lifecycle.sending import close_unanswered
from invoicectl.locations import expand_user
from invoicectl.scan.candidates import find_candidates
from invoicectl.scan.reader import HeadStart, KnownSha256, Unchanged, scan_files, start_reading
from invoicectl.scan.report import Problem, ScanReport
from invoicectl.scan.scanned import RACY_NS, ScannedFile, as_text
from invoicectl.scan.suppliers import SupplierFilter
from invoicectl.text import one_line

# A write transaction stores at most this many files, or about this many bytes of them.
# Each commit writes again every page it changed, and the blobs' and revisions' indexes on
# sha256 take their rows all over: a first scan of 20,000 files wrote 353 MB to the WAL and
# the database (a 127 MB journal) in commits of 500 files, 285 MB in commits of 2,000, with
# 0.1-0.2 s less CPU; 5,000 saved little more.
_COMMIT_EVERY = 2000
_COMMIT_BYTES = 16 * 1024 * 1024
# A directory with fewer files is scanned in well under a second: no head start.
_HEAD_START_FILES = 1000


def scan_directory(
    journal: JournalBackend,
    directory: Path,
    *,
    recursive: bool = False,
    workers: int | None = None,
    supplier: str | None = None,
    skip: Collection[str] = (),
    names: Collection[str] | None = None,
) -> ScanReport:
    """Hash, parse and record every ``*.xml`` under ``directory``; with ``supplier``
    (``scheme:id``), only the files of that supplier's invoices, less the invoice IDs in
    ``skip`` (``SupplierFilter``); with ``names``, only those of the files found."""
    with OpenScan(
        directory, recursive=recursive, workers=workers, supplier=supplier, skip=skip, names=names
    ) as scan:
        return scan.into(journal)


def outbox_root(directory: Path) -> Path:
    """The outbox as an absolute path (``~`` expanded); ConfigError when it is no directory."""
    root = expand_user(directory, "the outbox").absolute()
    if not root.is_dir():
        raise ConfigError(f"the outbox {directory} is not a directory")
    return root


def scanning(
    directory: Path,
    *,
    recursive: bool = False,
    supplier: str | None = None,
    skip: Collection[str] = (),
    names: Path | None = None,
) -> Callable[[JournalBackend], ScanReport]:
    """A scan of ``directory``, for a run to make once it holds the journal. ``names``: a
    file of the names (as found, NUL-separated) to take, the others left unread: what
    ``send --all-profiles`` routed to this profile, so that no profile reads, parses or
    hashes the files of another's supplier, on a first scan or any other."""

    def scan(journal: JournalBackend) -> ScanReport:
        only = (
            None if names is None else set(names.read_text("utf-8", "surrogateescape").split("\0"))
        )
        return scan_directory(
            journal, directory, recursive=recursive, supplier=supplier, skip=skip, names=only
        )

    return scan


def _names(path: Path) -> list[str]:
    return path.read_text("utf-8", "surrogateescape").split("\0")


class OpenScan:
    """One scan of one directory, from listing its files to the report.

    Given the journal's path, it is opened before the journal is. Then a first scan of a
    large directory (the journal holds no stats under it) hands its first files to the worker
    processes at once, and they read and parse while the journal's libraries load and the run
    lock is taken: most of a scan's start-up is imports, with one core idle. What the journal
    holds is read for that without the lock, read-only (``peek_stored``); content
    stored since is recognised when settling, as for any file.
    """

    def __init__(
        self,
        directory: Path,
        *,
        recursive: bool = False,
        workers: int | None = None,
        journal_path: Path | None = None,
        supplier: str | None = None,
        skip: Collection[str] = (),
        names: Collection[str] | None = None,
    ) -> None:
        self.root = outbox_root(directory)
        self.supplier = supplier
        self.skip = frozenset(skip)
        self.workers = workers
        self.unlisted: list[ScannedFile] = []
        self.names = find_candidates(self.root, recursive, self.unlisted)
        found = len(self.names)
        if names is not None:
            self.names = [name for name in self.names if name in names]
        # Routed to another profile's send (``send --all-profiles``): files, just not ours.
        self.routed_away = found - len(self.names)
        self.head: HeadStart | None = None
        if journal_path is not None and len(self.names) >= _HEAD_START_FILES:
            known = peek_stored(journal_path, as_text(str(self.root)))
            if known is not None:
                self.head = start_reading(self.names, self.root, known, workers)

    def __enter__(self) -> OpenScan:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.head is not None:  # never handed on: the journal could not be opened
            self.head.reader.close()

    def into(self, journal: JournalBackend) -> ScanReport:
        # A directory never scanned into this journal has no stats to look up (a first scan).
        has_stats = journal.has_stats_under(as_text(str(self.root)))
        head, self.head = self.head, None  # scan_files closes its reader
        known, cached = _reading_again(journal, damaged_content(journal), has_stats)
        scanned = scan_files(self.names, self.root, known, cached, workers=self.workers, head=head)
        found: Iterable[ScannedFile] = chain(self.unlisted, scanned)
        only = None if self.supplier is None else SupplierFilter(self.supplier, self.skip)
        report = Ingest(journal, self.root).run(found if only is None else only.kept(found))
        report.left_for_others = self.routed_away + (only.left if only is not None else 0)
        report.supplier_untold = only.untold if only is not None else []
        return report


def _reading_again(
    journal: JournalBackend, damaged: set[str], has_stats: bool
) -> tuple[KnownSha256, Unchanged | None]:
    """What the journal knows, less the contents whose stored copy a send found damaged:
    a file holding one of those is read again, whatever its stats say, so that its bytes
    (checked against the sha256) can replace the damaged copy."""

    def unchanged(prefix: str, found: dict[str, str]) -> Container[str]:
        return journal.take_unchanged(prefix, found, RACY_NS, unless=damaged)

    def known() -> Container[str]:
        return journal.stored_contents(unless=damaged)

    return known, unchanged if has_stats else None


class Ingest:
    """One scan of one directory into the journal."""

    def __init__(self, journal: JournalBackend, root: Path) -> None:
        self.journal = journal
        self.root = root
        self.report = ScanReport()
        # Files renumbered while another host sent their invoice: held once admitted.
        self._being_sent: list[tuple[str, str, str, str]] = []

    def run(self, scanned: Iterable[ScannedFile]) -> ScanReport:
        journal = self.journal
        # A request a dead run left unanswered may have been delivered: its invoice is
        # unknown before any file is compared, so that an edit since makes it amended over
        # unknown (a send to look up), never over pending (as if nothing had gone out).
        self.report.left_unanswered = close_unanswered(journal)
        journal.begin_scan()
        with journal.bulk_writes():
            self._store(scanned)
        with journal.transaction():
            journal.name_known_content()
            journal.group_by_id()
            self._hold_the_replaced()
            self._settle_new()
            self._hold_the_renumbered()
            self.report.unchanged += journal.count_unchanged(unless=InvoiceState.invalid)
            self._settle_the_rest()
            self._lift_settled_clashes()
            invalid_ids = [problem.subject for problem in self.report.invalid]
            unidentified = self._record_unidentified()
            self.report.count_files(invalid_ids, journal.files_of_shared_ids(), unidentified)
            self._date_the_undated()
        self.report.repaired = lift_repaired(journal)
        return self.report

    def _store(self, scanned: Iterable[ScannedFile]) -> None:
        now = self.journal.now()
        batch: list[ScannedFile] = []
        held = 0
        for item in scanned:
            batch.append(item)
            held += len(item.stored) if item.stored is not None else 0
            if len(batch) >= _COMMIT_EVERY or held >= _COMMIT_BYTES:
                # Bounded write transactions keep the WAL and memory small; a crash mid-scan
                # leaves only revisions, which the next scan settles.
                with self.journal.transaction():
                    self.journal.store_found(batch, now)
                batch.clear()
                held = 0
        with self.journal.transaction():
            self.journal.store_found(batch, now)
        # The files found unchanged the journal took in itself: every file has its row.
        self.report.files = self.journal.files_found()

    def _hold_the_replaced(self) -> None:
        """A pending invoice whose file now holds another invoice ID, and no file its own,
        is held: its number corrected in the file, most likely, and sending both would
        deliver one invoice twice under two numbers. A person decides which stands."""
        for invoice_id, name, other in self.journal.replaced_in_place():
            replaced_by = f"now holds invoice {one_line(other, 80)};"
            if self._released_before(invoice_id, replaced_by):
                continue
            reason = (
                f"its file {one_line(name)} {replaced_by} if "
                f"{invoice_id} was a mistake for it, `invoicectl abandon {invoice_id}`, to send "
                f"both, `invoicectl release {invoice_id}`"
            )
            try:
                held = hold(self.journal, invoice_id, reason, by="scan").done
            except InvoiceBusy:  # another host sends it now: its file's new number waits
                self.report.busy.append(invoice_id)
                self._being_sent.append((other, name, invoice_id, "being sent"))
                continue
            if held:
                self.report.replaced.append(Problem(invoice_id, reason))

    def _hold_the_renumbered(self) -> None:
        """A new invoice whose file held one sent before, with no answer that settles it
        (or one another host sends now), is held: its number corrected in the file, most
        likely, and the first may be delivered. A person decides, after reconcile."""
        found = self.journal.renumbered_after_sending()
        for invoice_id, name, sent, state in [*found, *self._being_sent]:
            held = f"its file {one_line(name)} held invoice {one_line(sent, 80)}"
            if self._released_before(invoice_id, held):
                continue
            reason = (
                f"{held}, sent ({state}); if {invoice_id} is it renumbered, sending it could "
                f"deliver it twice: `invoicectl reconcile` says whether GoRoute has {sent}; "
                f"if so `invoicectl abandon {invoice_id}`; if not `invoicectl abandon {sent}` "
                f"and `invoicectl release {invoice_id}`; to send both, `invoicectl release "
                f"{invoice_id}`"
            )
            try:
                if hold(self.journal, invoice_id, reason, by="scan").done:
                    self.report.replaced.append(Problem(invoice_id, reason))
            except InvoiceBusy:  # a live send worker holds it: nothing changed, next scan
                self.report.busy.append(invoice_id)

    def _released_before(self, invoice_id: str, replaced_by: str) -> bool:
        """Whether an operator released the invoice from this same replacement's hold: the
        decision to send both stands (the next scan still finds the file renumbered)."""
        return any(
            event.kind == "release" and replaced_by in (event.detail or "")
            for event in self.journal.events(invoice_id)
        )

    def _settle_new(self) -> None:
        """IDs the journal has never seen, in exactly one content: admitted in one go."""
        # Content the journal already held (a scan stopped before settling it) came
        # without its columns: take them from the revision's facts.
        for invoice_id, sha256, scan_row in self.journal.fresh_without_columns():
            self.journal.fill_columns(
                scan_row, fact_columns(self.journal.facts(invoice_id, sha256))
            )
        new, invalid = admit_fresh(self.journal)
        self.report.new.extend(new)
        self.report.invalid.extend(Problem(*problem) for problem in invalid)

    def _settle_the_rest(self) -> None:
        """Changed content, duplicates, and invalid invoices that may have been fixed."""
        found: dict[str, dict[str, ScannedCopy]] = {}
        for copy in self.journal.unsettled_files(recheck=InvoiceState.invalid):
            found.setdefault(copy.invoice_id, {}).setdefault(copy.sha256, copy)
        for invoice_id, distinct in found.items():
            copies = list(distinct.values())
            try:
                if len(copies) > 1:
                    reason = _duplicate_reason(invoice_id, copies)
                    seen = hold_duplicate(self.journal, copies, reason)
                else:
                    seen = settle_seen(self.journal, copies[0])
            except InvoiceBusy:  # a live send worker holds it: nothing changed, next scan
                self.report.busy.append(invoice_id)
                continue
            self._count(invoice_id, seen)

    def _lift_settled_clashes(self) -> None:
        """Sent invoices held while files disagreed on their number, now found in one
        content: the hold is lifted. A scan that did not find the ID leaves it."""
        for invoice in self.journal.held_by(DUPLICATE_CHECK):
            if self.journal.found_in_one_content(invoice.invoice_id):
                lift_clash(self.journal, invoice)

    def _count(self, invoice_id: str, seen: Seen) -> None:
        if seen.new:
            self.report.new.append(invoice_id)
        if seen.unchanged:
            self.report.unchanged += 1
        if seen.changed:
            self.report.changed.append(invoice_id)
        if seen.problem is not None:
            self.report.invalid.append(Problem(invoice_id, seen.problem))
        if seen.clash and seen.problem is not None:
            self.report.clashing.append(Problem(invoice_id, seen.problem))
        if seen.amended:
            self.report.amended.append(invoice_id)

    def _date_the_undated(self) -> None:
        """Pending invoices first read before due dates were (a journal migrated to m005):
        read their stored bytes again, once, so a send can take the soonest due first. A
        journal that never held such invoices pays nothing for it."""
        if not self.journal.unfinished("due_dates"):
            return
        from invoicectl.ubl.errors import InvalidDocument  # here: most scans parse nothing
        from invoicectl.ubl.facts import parse_document

        self.journal.finished("due_dates")
        for invoice_id, sha256 in self.journal.undated(InvoiceState.pending):
            try:
                due_date = parse_document(self.journal.content(sha256)).due_date
            except InvalidDocument:  # it parsed when it was stored; keep it undated
                due_date = None
            except StoredCopyDamaged:  # a send holds it until a rescan repairs the copy
                continue
            self.journal.record_due_date(invoice_id, sha256, due_date)

    def _record_unidentified(self) -> int:
        """The files of this scan that yield no invoice ID, as problems: how many."""
        # A file fixed or removed since the last scan of this directory is no longer a problem.
        prefix = as_text(str(self.root).rstrip("/")) + "/"  # as the files' paths were stored
        problems = [Problem(*problem) for problem in self.journal.record_unidentified(prefix)]
        self.report.invalid.extend(problems)
        return len(problems)


def _duplicate_reason(invoice_id: str, copies: list[ScannedCopy]) -> str:
    # File names may hold line breaks; a reason is one line.
    names = sorted(one_line(copy.name) for copy in copies)
    return (
        f"invoice ID {one_line(invoice_id, 80)} is in {len(names)} files with different "
        f"content ({', '.join(names)}); keep one file per invoice ID"
    )

"""What a scan found, as plain data: counts, and one line per invoice a person must look at."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from invoicectl.errors import Cause, ExitCode
from invoicectl.text import one_line

# What ``scan`` says of each file, in the order it says it.
CATEGORIES = ("new", "unchanged", "changed", "amended", "invalid")


class Problem(NamedTuple):
    subject: str  # an invoice ID, or a file name when the file yields no ID
    reason: str


@dataclass
class ScanReport:
    files: int = 0
    new: list[str] = field(default_factory=list)
    unchanged: int = 0
    changed: list[str] = field(default_factory=list)
    amended: list[str] = field(default_factory=list)
    invalid: list[Problem] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)  # damaged stored copies rewritten
    # Files per category (``CATEGORIES``), each file in exactly one, so they add up to
    # ``files``; the lists above name invoice IDs, and two files may share one.
    file_counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))
    # Files a supplier filter left for other profiles (``ingest.SupplierFilter``): not in
    # ``files``, nor in the JSON document (``send --all-profiles`` lists them itself).
    left_for_others: int = 0
    # Of those, the files whose supplier cannot be told (``suppliers.SupplierFilter.untold``).
    supplier_untold: list[Problem] = field(default_factory=list)
    # Invoices of other suppliers this journal held all the same (``lifecycle.suppliers``),
    # by a profile's send; ``status`` shows them on hold.
    held_for_others: list[str] = field(default_factory=list)
    # Changed files whose invoice a live send worker holds (a shared PostgreSQL journal):
    # settled by a later scan, once that send has finished with it.
    busy: list[str] = field(default_factory=list)
    # Pending invoices held because their file now holds another invoice ID (``Ingest``).
    replaced: list[Problem] = field(default_factory=list)
    # Sent invoices in several files with different content (also in ``invalid``): they keep
    # their state, GoRoute holding what was sent, so only the scan can say they need a fix.
    clashing: list[Problem] = field(default_factory=list)
    # Invoices a run that stopped (killed, its host lost) sent with no answer recorded, found
    # by this run: now ``unknown``, replayed under the same key inside its 24-hour window.
    left_unanswered: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        document = asdict(self)
        del document["left_for_others"], document["held_for_others"], document["clashing"]
        for rare in ("busy", "replaced", "supplier_untold", "left_unanswered"):
            if not document[rare]:
                del document[rare]
        return document

    @property
    def input_code(self) -> ExitCode:
        """``NO_INPUT`` when the outbox held no ``*.xml`` at all (a mistyped or unmounted
        path, most often; never a silent 0), else ``OK``. Files of other suppliers are
        there: a filtered scan that took none is not an empty outbox."""
        return ExitCode.NO_INPUT if self.files == 0 and not self.left_for_others else ExitCode.OK

    def exit_causes(self) -> list[Cause]:
        """What ``scan``'s exit code is chosen from: invalid files (3), no ``*.xml`` (66)."""
        causes = [Cause(ExitCode.OK, f"{self.files} files scanned")]
        if self.invalid:
            invalid = self.file_counts["invalid"] or len(self.invalid)
            causes.append(Cause(ExitCode.NEEDS_FIX, f"{invalid} invalid file{_s(invalid)}"))
        if self.replaced:
            held = len(self.replaced)
            causes.append(
                Cause(
                    ExitCode.NEEDS_RECONCILE,
                    f"{held} invoice{_s(held)} held: {_its(held)} file now holds another invoice",
                )
            )
        if self.input_code is not ExitCode.OK:
            causes.append(Cause(self.input_code, "no *.xml file in the outbox"))
        return causes + self._untold_causes()

    def _untold_causes(self) -> list[Cause]:
        untold = len(self.supplier_untold)
        whose = f"{untold} file{_s(untold)} whose supplier cannot be told"
        return [Cause(ExitCode.NEEDS_FIX, whose)] if untold else []

    def send_causes(self) -> list[Cause]:
        """What a send's exit code takes from its scan besides the journal's states: sent
        invoices whose files disagree (3), no ``*.xml`` (66)."""
        causes = []
        if self.clashing:
            clashing = f"{len(self.clashing)} sent, in several files with different content"
            causes.append(Cause(ExitCode.NEEDS_FIX, clashing))
        if self.input_code is not ExitCode.OK:
            causes.append(Cause(self.input_code, "the outbox holds no *.xml file"))
        return causes + self._untold_causes()

    def count_files(
        self, invalid_ids: Iterable[str], shared: Mapping[str, int], unidentified: int
    ) -> None:
        """``file_counts``: a file is in its invoice ID's category, the first of invalid,
        amended, changed and new that the ID is in, else unchanged; a file that yields no ID
        is invalid. ``shared``: the IDs found in several files, and in how many;
        ``unidentified``: how many files yielded no ID."""
        placed: set[str] = set()
        counts = dict.fromkeys(CATEGORIES, 0)
        for category, ids in (
            ("invalid", list(invalid_ids)),
            ("amended", self.amended),
            ("changed", self.changed),
            ("new", self.new),
        ):
            for invoice_id in set(ids) - placed:
                counts[category] += shared.get(invoice_id, 1)
            placed.update(ids)
        counts["invalid"] += unidentified
        counts["unchanged"] = self.files - sum(counts.values())
        self.file_counts = counts

    def summary_lines(self) -> list[str]:
        """What ``scan`` prints: the counts, then one line per invalid or amended invoice."""
        shown = ", ".join(f"{self.file_counts[category]} {category}" for category in CATEGORIES)
        lines = [f"scanned {self.files} files: {shown}"]
        # A subject is a file name when no ID was found: it may hold a line break. An ID may
        # hold a mark that turns the rest of a terminal's line around: every one is escaped.
        lines += [
            f"  invalid  {one_line(problem.subject)}: {one_line(problem.reason)}"
            for problem in self.invalid
        ]
        lines += [
            f"  amended  {shown}: changed after it was sent; see `invoicectl show {shown}`"
            for shown in map(one_line, self.amended)
        ]
        lines += [
            f"  repaired {shown}: its damaged stored copy was rewritten from the file; "
            "no longer held"
            for shown in map(one_line, self.repaired)
        ]
        lines += [
            f"  held     {one_line(problem.subject)}: {one_line(problem.reason)}"
            for problem in self.replaced
        ]
        lines += [
            f"  unknown  {shown}: a run that stopped (killed, or its host lost?) sent it and "
            "recorded no answer; replayed under the same key inside its 24-hour window"
            for shown in map(one_line, self.left_unanswered)
        ]
        lines += [
            f"  busy     {shown}: its file changed while a send worker holds it; the "
            "next scan settles it"
            for shown in map(one_line, self.busy)
        ]
        lines += [
            f"  untold   {one_line(problem.subject)}: {one_line(problem.reason)}; its "
            "supplier cannot be told, so no profile's send takes it"
            for problem in self.supplier_untold
        ]
        return lines


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def _its(count: int) -> str:
    return "its" if count == 1 else "their"

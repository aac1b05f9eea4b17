"""What a scan found, as plain data: counts, and one line per invoice a person must look at."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary_lines(self) -> list[str]:
        """What ``scan`` prints: the counts, then one line per invalid or amended invoice."""
        lines = [
            f"scanned {self.files} files: {len(self.new)} new, {self.unchanged} unchanged, "
            f"{len(self.changed)} changed, {len(self.amended)} amended, "
            f"{len(self.invalid)} invalid"
        ]
        lines += [f"  invalid  {problem.subject}: {problem.reason}" for problem in self.invalid]
        lines += [
            f"  amended  {invoice_id}: changed after it was sent; "
            f"see `invoicectl show {invoice_id}`"
            for invoice_id in self.amended
        ]
        lines += [
            f"  repaired {invoice_id}: its damaged stored copy was rewritten from the file; "
            "no longer held"
            for invoice_id in self.repaired
        ]
        return lines

"""What ``verify`` and ``verify-export`` report: one ``Finding`` per problem, and the tally."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from invoicectl.journal.chain import ZERO_HASH
from invoicectl.text import one_line


@dataclass(frozen=True)
class Finding:
    """One problem, on one line whatever made it: a subject or problem quoting what was read
    (a file name in an export, a damaged row) has its line breaks and escape sequences
    written as escapes, so a name cannot print a line of its own (a forged "ok")."""

    subject: str  # "journal", "chain event 17", "invoice INV-1", "blob 3f2a…", "run 4"
    problem: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "subject", one_line(self.subject))
        object.__setattr__(self, "problem", one_line(self.problem))

    def line(self) -> str:
        return f"{self.subject}: {self.problem}"


# The findings a verification keeps to list: a journal damaged in every row (a hand-made
# UPDATE of a million) is counted in full, in memory that does not grow with it.
LISTED = 1000


@dataclass
class Verification:
    journal: str
    findings: list[Finding] = field(default_factory=list)  # the first LISTED problems
    problems: int = 0  # every problem found, listed or not
    events: int = 0
    head_seq: int = 0
    head_hash: str = ZERO_HASH
    blobs: int = 0
    blobs_checked: int = 0
    attempts_checked: int = 0
    rows_checked: int = 0
    # The SQLite file's own checks (its shape, SQLite's integrity check): a PostgreSQL
    # journal has none, the server keeps its own pages, and the summary says so.
    file_checks: bool = True

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def unlisted(self) -> int:
        return self.problems - len(self.findings)

    def add(self, subject: str, problem: str) -> None:
        self.problems += 1
        if len(self.findings) < LISTED:
            # What a damaged row holds (a line break, bytes not UTF-8) stays on its line:
            # Finding escapes it.
            self.findings.append(Finding(subject, problem))

    def rewind(self, problems: int) -> None:
        """Forget the problems found after the first ``problems`` (a check run again)."""
        self.problems = problems
        del self.findings[problems:]

    def summary(self) -> str:
        unlisted = f" ({self.unlisted} more not listed)" if self.unlisted else ""
        return (
            f"{'ok' if self.ok else f'{self.problems} problem(s)'}{unlisted}: {self.events} chain"
            f" events, head {self.head_seq}:{self.head_hash[:16]}; {self.blobs_checked} of"
            f" {self.blobs} blobs read; {self.attempts_checked} attempt bodies rebuilt;"
            f" {self.rows_checked} rows against their events"
            + ("" if self.file_checks else "; no SQLite file checks (a PostgreSQL journal)")
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "journal": self.journal,
            "ok": self.ok,
            "head": {"seq": self.head_seq, "hash": self.head_hash},
            "events": self.events,
            "blobs": self.blobs,
            "blobs_checked": self.blobs_checked,
            "attempts_checked": self.attempts_checked,
            "rows_checked": self.rows_checked,
            "problems": [{"subject": f.subject, "problem": f.problem} for f in self.findings],
            "problems_not_listed": self.unlisted,  # found beyond the first LISTED
        }

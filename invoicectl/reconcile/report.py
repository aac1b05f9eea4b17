"""``ReconcileReport``: what one reconcile returns, for the CLI to render and exit by.

The cases in display order, what ``--apply`` changed, which delivery statuses were recorded,
the exit code (the worst of the cases'), and how many requests and how far the list search
went. Plain data: ``render/reconcile.py`` turns it into a table, JSON or CSV.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from invoicectl.errors import Cause, ExitCode, explain
from invoicectl.reconcile.search_result import SearchSummary
from invoicectl.reconcile.verdicts import VERDICT_ORDER, Case, Verdict


@dataclass(frozen=True)
class ReconcileReport:
    cases: tuple[Case, ...]
    applied: tuple[str, ...]  # invoice ids --apply changed
    recorded: tuple[str, ...]  # invoice ids whose delivery status was recorded
    exit_code: ExitCode
    apply: bool
    checked_at: str
    requests: int = 0
    search: SearchSummary = field(default_factory=SearchSummary)
    held: tuple[str, ...] = ()  # invoice ids --apply held: not to be sent on their own
    # Invoices on hold it had nothing to look up for (no transaction, no unanswered send: a
    # history check's "not checked", an operator's hold): each hold's reason says what to do.
    on_hold: int = 0

    @property
    def counts(self) -> dict[Verdict, int]:
        """Cases per verdict, in ``VERDICT_ORDER``, verdicts without cases left out."""
        present = [case.verdict for case in self.cases]
        return {verdict: present.count(verdict) for verdict in VERDICT_ORDER if verdict in present}

    def exit_causes(self) -> list[Cause]:
        """The cases per exit code and verdict (``2 delivery failed``): the exit code is the
        worst of the cases', so these are what it was chosen from."""
        found: dict[tuple[ExitCode, Verdict], int] = {}
        for case in self.cases:
            found[case.exit_code, case.verdict] = found.get((case.exit_code, case.verdict), 0) + 1
        causes = [
            Cause(code, f"{count} {verdict.replace('_', ' ')}")
            for (code, verdict), count in found.items()
        ]
        if self.on_hold:
            held = f"{self.on_hold} on hold, nothing to look up (`invoicectl status` says why)"
            causes.append(Cause(ExitCode.NEEDS_RECONCILE, held))
        return causes or [Cause(ExitCode.OK, "nothing to reconcile")]

    @property
    def exit_cause(self) -> str:
        return explain(self.exit_code, self.exit_causes())

    @property
    def needs_person(self) -> int:
        return sum(case.needs_person for case in self.cases)

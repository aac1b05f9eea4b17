"""What a run will do and what the journal asks of a person: the plan and the exit policy.

``plan`` orders a send's work: replays of unanswered sends whose key window is open first,
then new sends in the order they arrived; unanswered sends whose window closed are held for
reconcile, and so are those reconcile found at GoRoute from a send this journal's cannot account
for (``evidence``: a replay would deliver them again); an invoice an operator holds is in no
part of it. ``attention`` turns the journal's
states and holds into design.md's exit code.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from invoicectl.errors import Cause, ExitCode, worst
from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import DUPLICATE_CHECK, Hold, InvoiceState, LiveClaims, SendOrder
from invoicectl.lifecycle.evidence import FOUND_BEFORE, HISTORY_CHECK, KINDS, standing_evidence
from invoicectl.lifecycle.window import window_open


@dataclass(frozen=True)
class Plan:
    replays: tuple[str, ...]  # unknown, key window open: replayed first
    pending: tuple[str, ...]  # never sent yet: in the run's order (soonest due first)
    held: tuple[str, ...]  # left for reconcile: the window closed, or ``found``
    found: tuple[str, ...] = ()  # window open, but found at GoRoute already (``evidence``)


def plan(journal: JournalBackend, now: datetime, order: SendOrder = SendOrder.due) -> Plan:
    """Replays first (unanswered sends whose key window is open), then new sends in
    ``order`` (soonest due first, by default).

    A ``pending`` invoice whose key has already been used (a request may have reached the
    API) is treated like an unanswered one: replayed inside its window, held after it.
    """
    replays: list[str] = []
    held: list[str] = []
    for invoice_id, first_used_at in journal.sent_without_answer():
        (replays if window_open(first_used_at, now) else held).append(invoice_id)
    found = _found_already(journal, replays)
    if found:
        left = set(found)
        replays = [invoice_id for invoice_id in replays if invoice_id not in left]
        held += found
    return Plan(tuple(replays), tuple(journal.never_sent(order)), tuple(held), tuple(found))


def held_for_reconcile(journal: JournalBackend, planned: Plan) -> tuple[str, ...]:
    """What a run's summary names as held for reconcile: the plan's (a window closed, or
    found at GoRoute) and those a history check holds (GoRoute holds their number already),
    which the plan leaves out as it leaves out every hold."""
    checked = tuple(invoice.invoice_id for invoice in journal.held_by(HISTORY_CHECK))
    return planned.held + checked


def _found_already(journal: JournalBackend, invoice_ids: list[str]) -> list[str]:
    """Those of ``invoice_ids`` with evidence standing: read one by one only for the few a
    query marks (an evidence event, or a verdict that found them)."""
    marked = journal.marked(invoice_ids, FOUND_BEFORE, KINDS) if invoice_ids else set()
    found = []
    for invoice_id in sorted(marked):
        invoice = journal.invoice(invoice_id)
        if invoice is not None and standing_evidence(journal, invoice) is not None:
            found.append(invoice_id)
    return found


def attention(journal: JournalBackend, now: datetime) -> ExitCode:
    """What the journal's states ask of a person: 3 fix, 4 reconcile (or an operator's hold
    to decide, or an accepted invoice whose delivery failed: reconcile's ``delivery_failed``
    verdict is 4 too, and the resend under a new key is a person's call), 75 the next run. An
    abandoned invoice asks nothing more."""
    return worst(*(cause.code for cause in attention_causes(journal, now)))


def attention_causes(journal: JournalBackend, now: datetime) -> list[Cause]:
    """``attention``'s code as its causes, each with its count in words (``2 rejected``):
    the exit code and the run's last line come from this one reading of the journal."""
    counts = journal.state_counts(on_hold=False)
    planned = plan(journal, now)
    held, found_already = planned.held, planned.found
    waiting, live = left_to_next_send(journal, planned)
    on_hold = journal.hold_counts()[Hold.held] - len(clashes_past_asking(journal))
    failed = journal.delivery_failure_count(on_hold=False)
    found = [
        (ExitCode.NEEDS_RECONCILE, counts[InvoiceState.key_reused], "key_reused"),
        (ExitCode.NEEDS_RECONCILE, counts[InvoiceState.amended], "amended"),
        (
            ExitCode.NEEDS_RECONCILE,
            len(held) - len(found_already),
            "unanswered past the 24-hour window",
        ),
        (ExitCode.NEEDS_RECONCILE, len(found_already), "unanswered and found sent earlier"),
        (ExitCode.NEEDS_RECONCILE, on_hold, "on hold"),
        (ExitCode.NEEDS_RECONCILE, failed, "delivery failed"),
        (ExitCode.NEEDS_FIX, counts[InvoiceState.invalid], "invalid"),
        (ExitCode.NEEDS_FIX, counts[InvoiceState.rejected], "rejected"),
        # Sent, or replayed safely, by the next send: a pending invoice whose key carried a
        # request (a run killed before its answer was recorded) is a replay, not a first send.
        (ExitCode.INCOMPLETE, len(waiting.pending), "waiting to be sent"),
        (ExitCode.INCOMPLETE, len(waiting.replays), "unanswered, replayed by the next send"),
    ]
    causes = [Cause(code, f"{count} {what}") for code, count, what in found if count > 0]
    if live is not None:  # another worker sends them now (a shared journal)
        causes.append(Cause(ExitCode.INCOMPLETE, live.who))
    return causes


def left_to_next_send(journal: JournalBackend, planned: Plan) -> tuple[Plan, LiveClaims | None]:
    """The plan's pending and replays less what live workers hold now (a shared journal's
    claims: sent, or in flight, by another worker, neither waiting nor unanswered), and those
    claims."""
    live = journal.claimed_elsewhere()
    if live is None:
        return planned, None
    if live.whole_plan:  # a SQLite journal's send running in another process
        taken = planned.replays + planned.pending
        if not taken:
            return planned, None
        claims = LiveClaims(frozenset(taken), f"{len(taken)} {live.who}")
        return replace(planned, pending=(), replays=()), claims
    pending = tuple(i for i in planned.pending if i not in live.invoice_ids)
    replays = tuple(i for i in planned.replays if i not in live.invoice_ids)
    return replace(planned, pending=pending, replays=replays), live


def clashes_past_asking(journal: JournalBackend) -> set[str]:
    """Accepted invoices the duplicate check holds whose delivery did not fail: the hold
    keeps only a new version from them, refused anyway until their delivery fails, so they
    ask nothing of a person (a scan that finds both files says so, exit 3); their files,
    archived once sent, may never be scanned again to lift it."""
    held = journal.held_by(DUPLICATE_CHECK)
    return {
        i.invoice_id
        for i in held
        if i.state is InvoiceState.accepted and i.remote_status != "failed"
    }

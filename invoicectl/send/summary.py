"""What a send run comes to, as plain data: per invoice, per run, and for a dry run.

The sender fills these; rendering (``render.send``) and ``--json`` read them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from invoicectl.errors import Cause, ExitCode, explain, worst
from invoicectl.journal.records import Invoice, InvoiceState
from invoicectl.lifecycle.window import moment
from invoicectl.send.stopping import SIGNAL_NAMES

# Stops the next run gets past on its own: it continues where this one ended.
_INTERRUPTIONS = SIGNAL_NAMES | {"deadline", "outage", "rate_limit"}
# Why a SQLite send stopped taking work ("lock_lost"), after "its run lock file was".
LOCK_LOST = (
    "removed or replaced during the run (a clean-up of old files?), so another run may have "
    "started beside this one"
)


@dataclass(frozen=True)
class InvoiceResult:
    invoice_id: str
    state: InvoiceState
    key: str
    transaction_id: str | None = None
    existing_transaction_id: str | None = None
    reason: str | None = None
    replay: bool = False
    requests: int = 0

    @classmethod
    def of(cls, invoice: Invoice, key: str, replay: bool, requests: int) -> InvoiceResult:
        """An invoice's result as a send of it under ``key`` left it."""
        return cls(
            invoice_id=invoice.invoice_id,
            state=invoice.state,
            key=key,
            transaction_id=invoice.transaction_id,
            existing_transaction_id=invoice.existing_transaction_id,
            reason=invoice.reason,
            replay=replay,
            requests=requests,
        )


@dataclass
class HeldApart:
    """The invoices a run held itself as it went, by why (``SendSummary.checked``)."""

    receiver: list[str] = field(default_factory=list)  # their receiver does not take them
    validation: list[str] = field(default_factory=list)  # invalid, or unsendable bytes
    damage: list[str] = field(default_factory=list)  # stored copy damaged
    replay: list[str] = field(default_factory=list)  # not the key or body a request carried


@dataclass
class SendSummary:
    run_id: int
    planned: int = 0
    replays: int = 0
    held: tuple[str, ...] = ()
    results: list[InvoiceResult] = field(default_factory=list)
    # The first stop: signal, deadline, credentials, wrong_url, outage, rate_limit.
    stopped_by: str | None = None
    stops: tuple[str, ...] = ()  # every stop, in order; signals by name ("SIGTERM")
    abandoned_by: str | None = None  # what abandoned requests in flight (they are unknown)
    abandoned: int = 0  # requests abandoned in flight
    grace_ran_out: bool = False  # abandoned when the grace after the stop ran out
    continue_with: str | None = None  # the command that continues an interrupted run (CLI's)
    auth_message: str | None = None
    endpoint_message: str | None = None  # stopped_by "wrong_url": which URL answered what
    outage_reason: str | None = None
    elapsed: float = 0.0
    request_latencies: list[float] = field(default_factory=list)
    ingest_to_accept: list[float] = field(default_factory=list)
    waited_for_rate: float = 0.0
    waited_for_retry_after: float = 0.0
    rate_limited_answers: int = 0
    requests: int = 0
    exit_code: ExitCode = ExitCode.OK
    exit_causes: tuple[Cause, ...] = ()  # what chose exit_code, in words (send/exit_codes.py)
    journal_counts: dict[InvoiceState, int] = field(default_factory=dict)
    receiver_lookups: int = 0  # participant lookups asked in this run
    receivers_unchecked: int = 0  # receivers whose lookup failed: their invoices went unchecked
    held_for_receiver: tuple[str, ...] = ()  # invoices held: their receiver does not take them
    validations: int = 0  # GoRoute validations asked in this run (send --validate)
    unvalidated: int = 0  # invoices whose validation failed: sent unvalidated
    held_for_validation: tuple[str, ...] = ()  # invoices held: GoRoute found them invalid
    held_for_damage: tuple[str, ...] = ()  # invoices held: their stored copy is damaged
    held_at_replay: tuple[str, ...] = ()  # held: not the key or body a request carried
    # Held for reconcile, in ``held`` too: planned, then found at GoRoute by another host's
    # history check after this worker claimed them (``evidence.FoundMeanwhile``).
    found_meanwhile: tuple[str, ...] = ()
    durable_commits: int = 0  # commits of attempts and answers (send/commits.py)
    durable_writes: int = 0  # the writes they held: writes / commits is the grouping
    # Live, for the progress bar (not in to_dict): invoices whose last try got no final
    # answer (5xx, timeout, 429) and that are waiting to be tried again.
    retrying: set[str] = field(default_factory=set)

    @property
    def failed(self) -> int:
        """Invoices this run settled other than accepted (rejected, key_reused, ...); those
        left without an answer are ``unanswered``, not failed."""
        settled = (InvoiceState.accepted, InvoiceState.unknown)
        return sum(1 for result in self.results if result.state not in settled)

    def counts(self) -> dict[str, int]:
        return dict(Counter(result.state for result in self.results))

    @property
    def exit_cause(self) -> str:
        """The words after ``exit N:`` on the run's last line."""
        return explain(self.exit_code, self.exit_causes)

    def ended(self, stopping: Any, limiter: Any, commits: Any, elapsed: float) -> None:
        """What the run's stopping, its limiter and its grouped commits came to."""
        self.elapsed = elapsed
        self.stopped_by = stopping.first
        self.stops = tuple(stopping.reasons)
        self.abandoned_by = stopping.abandoned_by
        self.abandoned = stopping.abandoned
        self.grace_ran_out = stopping.grace_ran_out
        self.waited_for_rate = limiter.waited_for_rate
        self.waited_for_retry_after = limiter.waited_for_retry_after
        self.durable_commits = commits.commits
        self.durable_writes = commits.writes

    def checked(self, receivers: Any, validations: Any, held: HeldApart) -> None:
        """What the run's receiver checks and validations came to (None: not made), and the
        invoices it held itself."""
        self.held_for_receiver, self.held_for_damage = tuple(held.receiver), tuple(held.damage)
        self.held_for_validation, self.held_at_replay = tuple(held.validation), tuple(held.replay)
        if receivers is not None:
            self.receiver_lookups = receivers.lookups
            self.receivers_unchecked = len(receivers.failed)
        if validations is not None:
            self.validations = validations.asked
            self.unvalidated = len(validations.failed)

    def observed(self, duration: float, rate_limited: bool) -> None:
        """A request's answer came (any answer): its latency, and whether it was a 429."""
        self.requests += 1
        self.request_latencies.append(duration)
        if rate_limited:
            self.rate_limited_answers += 1

    def accepted_after(self, ingested_at: str, now: datetime) -> None:
        """An invoice accepted ``now``: how long after its scan took it in (nothing, when
        the journal holds no time for that: changed by hand)."""
        with suppress(ValueError, TypeError):
            self.ingest_to_accept.append((now - moment(ingested_at)).total_seconds())

    def add_cause(self, cause: Cause) -> None:
        """One more reason for the exit code (none when it is OK and says nothing)."""
        if cause.code is not ExitCode.OK:
            self.exit_causes += (cause,)
            self.exit_code = worst(self.exit_code, cause.code)

    @property
    def signals(self) -> tuple[str, ...]:
        return tuple(stop for stop in self.stops if stop in SIGNAL_NAMES)

    @property
    def unanswered(self) -> int:
        """Invoices whose request went out with no final answer: the next run replays them."""
        return sum(1 for result in self.results if result.state is InvoiceState.unknown)

    @property
    def interrupted(self) -> bool:
        """Stopped before its work was done, for a reason the next run gets past."""
        return any(stop in _INTERRUPTIONS for stop in self.stops)

    def heard_late(self, signals: list[str]) -> None:
        """Signals that came after the loop ended, before the run's state was saved: the
        work is done, yet the run was interrupted, as its exit code says."""
        late = signals[len(self.signals) :]
        if late:
            self.stops += tuple(late)
            self.stopped_by = self.stopped_by or "signal"
            self.add_cause(Cause(ExitCode.INTERRUPTED, f"interrupted by {late[0]}; state saved"))

    @property
    def unsent(self) -> int:
        held = (
            len(self.held_for_receiver)
            + len(self.held_for_validation)
            + len(self.held_for_damage)
            + len(self.held_at_replay)
            + len(self.found_meanwhile)
        )
        return self.planned - len(self.results) - held

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "exit_code": int(self.exit_code),
            "planned": self.planned,
            "replayed": self.replays,
            "counts": self.counts(),
            "not_started": self.unsent,
            "held_for_reconcile": list(self.held),
            "receivers": {
                "lookups": self.receiver_lookups,
                "unchecked": self.receivers_unchecked,
                "held": list(self.held_for_receiver),
            },
            "validation": {
                "asked": self.validations,
                "unvalidated": self.unvalidated,
                "held": list(self.held_for_validation),
            },
            "held_as_damaged": list(self.held_for_damage),
            "held_at_replay": list(self.held_at_replay),
            "stopped_by": self.stopped_by,
            "stops": list(self.stops),
            "signal": self.signals[0] if self.signals else None,
            "unanswered": self.unanswered,
            "abandoned": {"requests": self.abandoned, "by": self.abandoned_by},
            "continue_with": self.continue_with if self.interrupted else None,
            "outage": self.outage_reason,
            "wrong_url": self.endpoint_message,
            "journal": self.journal_counts,
            "timing": {
                "elapsed_seconds": round(self.elapsed, 3),
                "requests": self.requests,
                "rate_limited_answers": self.rate_limited_answers,
                "request_latency": _spread(self.request_latencies),
                "ingest_to_accept": _spread(self.ingest_to_accept),
                "waited_for_rate_limit_seconds": round(self.waited_for_rate, 3),
                "waited_for_retry_after_seconds": round(self.waited_for_retry_after, 3),
                "durable_commits": self.durable_commits,
                "durable_writes": self.durable_writes,
            },
            "invoices": [vars(result) for result in self.results],
        }


def _spread(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "p95": None}
    import statistics  # here: a run that sent nothing has no spread to take

    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return {"median": round(statistics.median(ordered), 3), "p95": round(p95, 3)}


Progress = Callable[[InvoiceResult, SendSummary], None]


@dataclass(frozen=True)
class DryRun:
    would_send: tuple[str, ...]
    would_replay: tuple[str, ...]
    held: tuple[str, ...]  # unknown outside the key window: reconcile first
    skipped: dict[InvoiceState, int]  # state -> count of invoices nothing is done for
    estimated_seconds: float
    rate_per_minute: int
    exit_code: ExitCode
    order: str = "due"  # of the new sends in would_send
    late: tuple[tuple[str, str], ...] = ()  # (id, due date) that would go out after it
    on_hold: int = 0  # invoices an operator (or reconcile --apply) holds: not sent
    exit_causes: tuple[Cause, ...] = ()  # what chose exit_code, in words

    @property
    def exit_cause(self) -> str:
        return explain(self.exit_code, self.exit_causes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": True,
            "order": self.order,
            "would_miss_due_date": [{"invoice_id": i, "due_date": d} for i, d in self.late],
            "would_send": list(self.would_send),
            "would_replay": list(self.would_replay),
            "held_for_reconcile": list(self.held),
            "on_hold": self.on_hold,
            "skipped": self.skipped,
            "estimated_seconds": round(self.estimated_seconds, 1),
            "rate_per_minute": self.rate_per_minute,
            "exit_code": int(self.exit_code),
        }

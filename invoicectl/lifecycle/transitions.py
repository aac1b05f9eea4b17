"""Which transition may happen in which state, and the one function that writes one.

Every change to an invoice row goes through ``write``: it checks ``ALLOWED`` and saves the
new record on condition that the row still holds the state and key it was read with. The
named transitions (``claim_key``, ``record_answer``, ``amend``, ``adopt``, ...) live in the
modules beside this one, grouped by who drives them: a scan (``scanning``), a send
(``sending``), an operator or reconcile (``decisions``, ``holds``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from enum import StrEnum
from typing import Any

from invoicectl.errors import JournalError
from invoicectl.journal.interface import JournalBackend
from invoicectl.journal.records import Invoice, InvoiceState

S = InvoiceState


class Transition(StrEnum):
    # A scan found the invoice ID...
    admit = "admit"  # ...for the first time: pending, or invalid with the parser's reason
    revise = "revise"  # ...with new content (or a new verdict) while no key was ever used
    correct = "correct"  # ...with new content after a rejection: sent under the next key
    amend = "amend"  # ...with content other than what its key carried
    restore = "restore"  # ...back to what its key carries, or its duplicate gone
    hold_duplicate = "hold_duplicate"  # ...in several files with different content
    # A send...
    claim_key = "claim_key"  # chooses the key and the content it carries (nothing written)
    use_key = "use_key"  # the first request: commits the key, starts its 24-hour window
    record_answer = "record_answer"  # 202, 422 IDEMPOTENCY_KEY_REUSED, or a refusal
    mark_unknown = "mark_unknown"  # a request may have reached GoRoute; no final answer
    release_key = "release_key"  # no request under the key reached GoRoute: give it back
    # An operator or reconcile...
    new_version = "new_version"  # the current content under the next key
    adopt = "adopt"  # a transaction GoRoute holds is this invoice's send
    doubt = "doubt"  # the transaction an acceptance named is another document's: unknown
    record_delivery = "record_delivery"  # GoRoute's delivery status of an accepted invoice
    record_verdict = "record_verdict"  # the verdict reconcile reached
    hold = "hold"  # never sent or replayed until released; the state stays as it is
    # ...or sent under a next key: a send's history check found a send of it the journal
    # cannot account for (a restored backup lost a new version's send)
    hold_found = "hold_found"
    release = "release"  # the hold lifted: the rules of the state apply again
    abandon = "abandon"  # settled outside invoicectl: never sent again


# rejected: a refusal that may hide a delivery (``scanning.refusal_may_hide_delivery``).
_SENT_OR_HELD = frozenset(
    {S.pending, S.accepted, S.rejected, S.key_reused, S.unknown, S.amended, S.invalid}
)
_NOT_ACCEPTED = frozenset(InvoiceState) - {S.accepted}

# The states each transition may start from. ``admit`` starts from no row at all.
ALLOWED: Mapping[Transition, frozenset[InvoiceState]] = {
    Transition.admit: frozenset(),
    Transition.revise: frozenset({S.pending, S.invalid}),
    Transition.correct: frozenset({S.rejected}),
    Transition.amend: _SENT_OR_HELD,
    Transition.restore: _SENT_OR_HELD,
    Transition.hold_duplicate: frozenset(InvoiceState),
    Transition.claim_key: frozenset({S.pending, S.unknown}),
    Transition.use_key: frozenset({S.pending, S.unknown}),
    Transition.record_answer: frozenset({S.pending, S.unknown}),
    Transition.mark_unknown: frozenset({S.pending}),
    Transition.release_key: frozenset({S.pending, S.unknown}),
    Transition.new_version: frozenset({S.amended, S.key_reused, S.unknown, S.rejected, S.accepted}),
    # pending: never sent from this journal, but held with the transaction GoRoute holds.
    Transition.adopt: frozenset({S.key_reused, S.unknown, S.pending}),
    Transition.doubt: frozenset({S.accepted}),
    Transition.record_delivery: frozenset({S.accepted}),
    Transition.record_verdict: frozenset(InvoiceState),
    Transition.hold: _NOT_ACCEPTED,
    Transition.hold_found: frozenset(InvoiceState),
    # accepted: held while several files disagree on its number (``holds.hold_clash``).
    Transition.release: frozenset(InvoiceState),
    # accepted: only once its delivery failed (``holds.abandon``)
    Transition.abandon: frozenset(InvoiceState),
}


class TransitionRefused(JournalError):
    """A transition asked for in a state it may not start from, or over a row that changed
    meanwhile: within one run, a bug, never data; met by a person, another command beside it
    or a damaged journal (an index listing rows in other states than they hold: helper-83),
    which the message says with what to do."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"{what}: the journal changed beside this command (another one running?), or it "
            "is damaged (an index out of step with its rows: `invoicectl doctor` checks; "
            "REINDEX mends it, or restore the journal from a backup)"
        )


def allowed(transition: Transition, state: InvoiceState) -> bool:
    return state in ALLOWED[transition]


def check(transition: Transition, invoice: Invoice) -> None:
    if not allowed(transition, invoice.state):
        raise TransitionRefused(
            f"invoice {invoice.invoice_id} is {invoice.state}: {transition} may not start there"
        )


def write(
    journal: JournalBackend,
    transition: Transition,
    was: Invoice,
    *,
    touch: bool = True,
    **changes: Any,
) -> Invoice:
    """``was`` with ``changes``, saved; refused when the transition is not allowed from
    ``was``'s state, or when the row no longer holds ``was``'s state and key."""
    check(transition, was)
    invoice = replace(was, **changes)
    if not journal.save(invoice, was=was, touch=touch):
        raise TransitionRefused(
            f"invoice {was.invoice_id} changed while {transition} was being written"
        )
    return invoice


def current(journal: JournalBackend, invoice_id: str) -> Invoice:
    """The invoice as the journal holds it now; it must exist."""
    invoice = journal.invoice(invoice_id)
    if invoice is None:
        raise JournalError(f"the journal has no invoice {invoice_id!r}")
    return invoice

"""The invoice lifecycle: which invoice may be sent, under which key, and what happened to it.

The only place an invoice changes state. Its parts:

    transitions  the table of which transition may start in which state, and ``write``
    scanning     what a scan decides: admit, revise, correct, amend, restore, hold a duplicate
    sending      what a send decides: claim_key, begin_attempt, record_answer, mark_unknown
    decisions    what an operator or reconcile decides: new_version, adopt, record_delivery
    window       the 24-hour window of an idempotency key
    keys         the idempotency key of each invoice and version
    plan         the plan of a run, and the exit-code policy (``attention``)

``InvoiceState`` and ``Invoice`` are defined with the journal's records (storage depends on
nothing above it) and re-exported here.
"""

from invoicectl.journal.records import Invoice, InvoiceState
from invoicectl.lifecycle.decisions import adopt, check_new_version, new_version, record_delivery
from invoicectl.lifecycle.plan import Plan, attention, plan
from invoicectl.lifecycle.sending import (
    WorkItem,
    begin_attempt,
    claim_key,
    close_unanswered,
    key_window_open,
    mark_unknown,
    record_answer,
    settle,
)
from invoicectl.lifecycle.transitions import (
    ALLOWED,
    Transition,
    TransitionRefused,
    allowed,
    current,
)
from invoicectl.lifecycle.window import KEY_WINDOW, REPLAY_MARGIN, window_open

__all__ = [
    "ALLOWED",
    "KEY_WINDOW",
    "REPLAY_MARGIN",
    "Invoice",
    "InvoiceState",
    "Plan",
    "Transition",
    "TransitionRefused",
    "WorkItem",
    "adopt",
    "allowed",
    "attention",
    "begin_attempt",
    "check_new_version",
    "claim_key",
    "close_unanswered",
    "current",
    "key_window_open",
    "mark_unknown",
    "new_version",
    "plan",
    "record_answer",
    "record_delivery",
    "settle",
    "window_open",
]

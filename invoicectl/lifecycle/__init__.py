"""The invoice lifecycle: which invoice may be sent, under which key, and what happened to it.

The only place an invoice changes state. Its parts:

    transitions  the table of which transition may start in which state, and ``write``
    scanning     what a scan decides: admit, revise, correct, amend, restore, hold a duplicate
    sending      what a send decides: claim_key, begin_attempt, record_answer, mark_unknown
    decisions    what an operator or reconcile decides: new_version, adopt, record_delivery
    holds        the holds (hold, release, abandon; a damaged stored copy) and verdicts
    window       the 24-hour window of an idempotency key
    keys         the idempotency key of each invoice and version
    plan         the plan of a run, and the exit-code policy (``attention``)

``InvoiceState`` and ``Invoice`` are defined with the journal's records (storage depends on
nothing above it). Import from the modules themselves: this package imports nothing, so a
scan or ``status`` loads only the parts it uses.
"""

"""Putting an invoice straight into a given state, as a test's starting point.

Not a lifecycle transition: tests that stage "an invoice accepted under this key" or "an
unknown send from 25 hours ago" write the row as it would be, through the journal's own
``save``, and then exercise the real code from there.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from invoicectl.journal import Journal
from invoicectl.journal.records import InvoiceState


def force(journal: Journal, invoice_id: str, **changes: Any) -> None:
    was = journal.invoice(invoice_id)
    assert was is not None, invoice_id
    for name in ("state", "state_before_amend"):
        if changes.get(name) is not None:
            changes[name] = InvoiceState(changes[name])
    assert journal.save(replace(was, **changes), was=was)

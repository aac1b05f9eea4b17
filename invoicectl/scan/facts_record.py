"""An invoice's facts as the journal keeps them: the ``facts`` JSON of a revision
(``facts_record``). The invoices columns they fill are the journal's
(``journal.records.fact_columns``)."""

from __future__ import annotations

from typing import Any

from invoicectl import ubl


def facts_record(facts: ubl.InvoiceFacts) -> dict[str, Any]:
    """The facts as the journal keeps them (a revision's ``facts`` JSON)."""
    return {
        "document_type": facts.document_type,
        "invoice_id": facts.invoice_id,
        "issue_date": facts.issue_date,
        "currency": facts.currency,
        "payable_amount": facts.payable_amount,
        "supplier_endpoint": _endpoint_record(facts.supplier_endpoint),
        "customer_endpoint": _endpoint_record(facts.customer_endpoint),
        "problem": facts.problem,
    }


def _endpoint_record(endpoint: ubl.Endpoint | None) -> dict[str, str] | None:
    return None if endpoint is None else {"scheme": endpoint.scheme, "id": endpoint.id}

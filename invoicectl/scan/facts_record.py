"""An invoice's facts as the journal keeps them: the ``facts`` JSON of a revision
(``facts_record``) and the invoices columns it fills (``INVOICE_COLUMNS``)."""

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


# The invoices columns a revision's facts fill, in the order invoice_columns gives them.
INVOICE_COLUMNS = (
    "document_type",
    "receiver_scheme",
    "receiver_id",
    "sender_endpoint",
    "issue_date",
    "currency",
    "payable_amount",
    "problem",
)


def invoice_columns(record: dict[str, Any]) -> tuple[str | None, ...]:
    """A facts record (``facts_record``) as the values of ``INVOICE_COLUMNS``."""
    customer = record.get("customer_endpoint") or {}
    supplier = record.get("supplier_endpoint")
    return (
        record["document_type"],
        customer.get("scheme"),
        customer.get("id"),
        f"{supplier['scheme']}:{supplier['id']}" if supplier else None,
        record.get("issue_date"),
        record.get("currency"),
        record.get("payable_amount"),
        record.get("problem"),
    )

"""A validation's answer, as plain data: does GoRoute find this document valid, and if not, why?

``POST /api/v1/validate`` takes the raw XML and answers ``{"valid": bool, "errors": [...]}``
(goroute-api.md B); the item shape is not shown, so an error is read tolerantly from
``{rule, location, message}`` (or a plain string) into one line "rule at location: message".
Only a 2xx with a boolean ``valid`` is a verdict; anything else is a failed validation
(``Transient`` and friends), never "invalid".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from invoicectl.goroute.answers import Answer, unexpected_shape
from invoicectl.goroute.jsontext import first_text, text_of
from invoicectl.goroute.outcomes import Outcome, Transient, Validation
from invoicectl.text import folded_line

# An answer listing a few hundred rule failures is still small; past this it is not one.
MAX_VALIDATION_BYTES = 1024 * 1024
MAX_ERRORS = 50
_MAX_ERROR_LINE = 300
_VERDICT_REFUSALS = frozenset({400, 422})  # statuses that may carry an "invalid" verdict
# Error codes of a request refused, not of a document judged (BR-CO-15, or an XSD layer's
# SCHEMA_ERROR): an item carrying one, and no rule or location, says nothing of the document.
_REQUEST_ERRORS = frozenset(
    {"RATE_LIMITED", "TOO_MANY_REQUESTS", "QUOTA_EXCEEDED", "PAYLOAD_TOO_LARGE"}
    | {"REQUEST_TOO_LARGE", "UNSUPPORTED_MEDIA_TYPE", "INVALID_CONTENT_TYPE", "INVALID_API_KEY"}
    | {"UNAUTHORIZED", "FORBIDDEN", "INTERNAL_ERROR", "SERVICE_UNAVAILABLE"}
    | {"INVALID_IDEMPOTENCY_KEY", "IDEMPOTENCY_KEY_REUSED"}
)


def validation_outcome(answer: Answer | Transient, failure: Callable[[Answer], Outcome]) -> Outcome:
    """A 2xx answer read into a ``Validation``, and a 400 or 422 that says ``"valid": false``
    (the contract names no status for an invalid document: helper-96's server answered 422,
    and both invalid documents were sent); ``failure`` reads any other non-2xx answer."""
    if isinstance(answer, Transient):
        return answer
    data = answer.data
    if not answer.ok and not _invalid_in_a_refusal(answer.status, data):
        return failure(answer)
    if not isinstance(data, dict) or not isinstance(data.get("valid"), bool):
        return unexpected_shape(answer, 'a validation answer with a boolean "valid"')
    raw_errors = data.get("errors")
    items: list[Any] = raw_errors if isinstance(raw_errors, list) else []
    if raw_errors is not None and not isinstance(raw_errors, list):
        items = [raw_errors]
    errors = tuple(line for line in map(_error_line, items) if line)
    valid: bool = data["valid"]
    if not valid and not errors:
        errors = ("(no rule given): GoRoute found the document invalid",)
    return Validation(valid=valid, errors=errors[:MAX_ERRORS], **answer.common())


def _invalid_in_a_refusal(status: int, data: Any) -> bool:
    """Whether a refusal's body is a verdict on the document: ``"valid": false`` with the
    rules it broke, and no error of the request's own (a content type refused, a payload too
    large: helper-100), which says nothing of the document."""
    return (
        status in _VERDICT_REFUSALS
        and isinstance(data, dict)
        and data.get("valid") is False
        and isinstance(data.get("errors"), list)
        and bool(data["errors"])
        and not {"error", "error_code", "code"} & data.keys()
        and not any(map(_request_error, data["errors"]))
    )


def _request_error(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and item.get("code") in _REQUEST_ERRORS
        and not {"rule", "rule_id", "location", "path", "xpath"} & item.keys()
    )


def _error_line(item: Any) -> str:
    if isinstance(item, dict):
        rule = first_text(item, "rule", "id", "code", "rule_id") or "(no rule given)"
        location = first_text(item, "location", "path", "xpath", "field")
        message = first_text(item, "message", "text", "description") or ""
        where = f" at {location}" if location else ""
        line = f"{rule}{where}: {message}" if message else f"{rule}{where}"
    else:
        line = text_of(item) or ""
    line = folded_line(line)
    return line if len(line) <= _MAX_ERROR_LINE else line[:_MAX_ERROR_LINE] + "…"

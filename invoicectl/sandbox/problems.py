"""Error answers in the shapes GoRoute's docs show.

The brief's flat ``error_code`` and the docs' nested ``{"error": {"code", ...}}`` disagree;
``SandboxConfig.error_shape`` picks one, or "both" side by side (the default), so the
client is exercised against every shape goroute-api.md lists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.responses import JSONResponse

from invoicectl.sandbox.config import ErrorShape


@dataclass(frozen=True)
class Detail:
    """One finding, as the docs' ``{rule, location, message}``."""

    rule: str
    message: str
    location: str = ""

    def as_json(self) -> dict[str, str]:
        return {"rule": self.rule, "location": self.location, "message": self.message}


# Not frozen: the interpreter and contextlib set attributes such as __traceback__ on raise.
@dataclass(eq=False)
class Problem(Exception):
    """An answer other than success, raised anywhere in a handler and rendered once."""

    status: int
    code: str
    message: str
    details: tuple[Detail, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


def problem_body(problem: Problem, request_id: str, shape: ErrorShape) -> dict[str, Any]:
    details = [d.as_json() for d in problem.details]
    nested = {
        "code": problem.code,
        "message": problem.message,
        "details": details,
        "request_id": request_id,
        **problem.extra,
    }
    if shape == "nested":
        return {"error": nested}
    flat = {
        "error_code": problem.code,
        "message": problem.message,
        "details": details,
        "request_id": request_id,
        **problem.extra,
    }
    if shape == "flat":
        return flat
    return {**flat, "error": nested}


def problem_response(problem: Problem, request_id: str, shape: ErrorShape) -> JSONResponse:
    headers = {"X-Request-ID": request_id, **problem.headers}
    return JSONResponse(problem_body(problem, request_id, shape), problem.status, headers)

"""How the emulator's answers are written: error bodies in GoRoute's shapes, and cut answers.

The brief's flat ``error_code`` and the docs' nested ``{"error": {"code", ...}}`` disagree;
``SandboxConfig.error_shape`` picks one, or "both" side by side (the default), so the
client is exercised against every shape goroute-api.md lists.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from invoicectl.sandbox.config import ErrorShape
from invoicectl.sandbox.problems import Problem


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


class DroppedResponse(Response):
    """Starts the real answer, then abandons the connection before the body.

    Uvicorn closes the transport when an app returns without completing its response, so
    the client sees a protocol error, not a status; the in-process transport mimics that.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {"type": "http.response.start", "status": self.status_code}
        await send({**start, "headers": self.raw_headers})


def dropped(response: Response) -> DroppedResponse:
    """``response`` as it would look if the connection died after its headers."""
    cut = DroppedResponse(response.body, response.status_code)
    cut.raw_headers = response.raw_headers
    return cut

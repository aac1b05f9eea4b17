"""What one HTTP request to GoRoute came to, as plain data.

The client turns every answer (or the lack of one) into exactly one of these; the sender,
the retry policy and reconcile decide what to do by type, never by looking at HTTP again.

    Outcome
    ├── Accepted        2xx with a transaction id: the document is sent
    ├── RateLimited     429: wait ``retry_after`` seconds (None: no header), same key and bytes
    ├── Rejected        400/404/409/413/other 4xx: permanent for this document, never retried
    │                   (not those in ``_REPEATABLE``: they are ``Transient``)
    ├── KeyReused       422 IDEMPOTENCY_KEY_REUSED: ``existing_transaction_id`` is what was sent
    ├── AuthRefused     401/403: every request would fail alike; stop the run
    ├── WrongEndpoint   a 404/405 page that is not the API's: the base URL is wrong; stop
    └── Transient       5xx, timeout, connection error: the outcome is unknown, retry the same
                        bytes; a redirect (3xx) too, never retried: it stops the run
"""

from __future__ import annotations

from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, TypeGuard

# The 4xx answers that say the request was not taken and may be sent again (RFC 9110 and
# 8470): 408, the server (or a proxy in front of it) stopped waiting for the request; 421,
# it reached a server that does not answer for this host; 425, the server would not risk a
# replay of early data. Refused as permanent, a document never sent would wait for an operator;
# the same key and bytes again are safe whatever the server did.
_REPEATABLE = frozenset(
    (HTTPStatus.REQUEST_TIMEOUT, HTTPStatus.MISDIRECTED_REQUEST, HTTPStatus.TOO_EARLY)
)


def not_taken(status: int) -> bool:
    """Whether an error status says the request was not dealt with and may be asked again as
    it was: a 5xx, or a 4xx in ``_REPEATABLE``. (A 429 says so too, with a wait: apart.)"""
    return status >= 500 or status in _REPEATABLE


@dataclass(frozen=True)
class Outcome:
    http_status: int | None = None
    request_id: str | None = None
    raw_body: str | None = field(default=None, repr=False)
    duration: float = 0.0

    def common(self) -> dict[str, Any]:
        """The fields every outcome has: for another outcome of the same answer."""
        return {
            "http_status": self.http_status,
            "request_id": self.request_id,
            "raw_body": self.raw_body,
            "duration": self.duration,
        }


@dataclass(frozen=True)
class Accepted(Outcome):
    transaction_id: str = ""


@dataclass(frozen=True)
class Validation(Outcome):
    """GoRoute's validation of a document (``goroute.validation``), which changes nothing."""

    valid: bool = False
    # One line each, "rule at location: message", at most MAX_ERRORS of them.
    errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class RateLimited(Outcome):
    retry_after: float | None = None


@dataclass(frozen=True)
class Rejected(Outcome):
    code: str | None = None
    message: str = ""
    details: tuple[str, ...] = ()


@dataclass(frozen=True)
class KeyReused(Outcome):
    existing_transaction_id: str | None = None
    code: str | None = None
    message: str = ""


@dataclass(frozen=True)
class AuthRefused(Outcome):
    code: str | None = None
    message: str = ""


@dataclass(frozen=True)
class Transient(Outcome):
    reason: str = ""
    # False only when the request provably never left (no connection could be made): then
    # the key carried nothing, and nothing about the invoice is unknown.
    sent: bool = True


@dataclass(frozen=True)
class WrongEndpoint(Outcome):
    """The base URL does not lead to GoRoute's API (a web page answered for an API path):
    nothing reached the API, every request would fail alike; stop the run, change nothing."""

    message: str = ""


def proves_api(outcome: Outcome) -> bool:
    """Whether ``outcome`` came from the GoRoute API itself (what binds a journal to its URL).

    Not proof: no answer (refused, unreachable, timed out), a web page where the API should be
    (``WrongEndpoint``), a redirect or a 2xx that is not the API's, or a refused key (a
    sandbox key at the production URL must not tie the journal there)."""
    if isinstance(outcome, Accepted | KeyReused | Rejected | RateLimited):
        return True
    return isinstance(outcome, Transient) and (outcome.http_status or 0) >= 500


def redirected(outcome: Outcome | None) -> TypeGuard[Transient]:
    """Whether ``outcome`` is a redirect (3xx). GoRoute's API answers where it is asked; a
    redirect comes from what stands in front of it, at a base URL that is wrong or has moved
    (plain http to an https site, an old host name), and every request there meets the same
    one. It is not retried and stops the run (``refused_if_redirected``); a document POST that
    met one stays unknown, since nothing tells what became of it, and is replayed under its
    key once the base URL is right."""
    return isinstance(outcome, Transient) and 300 <= (outcome.http_status or 0) < 400


def refused_if_redirected(outcome: Outcome) -> Outcome:
    """``outcome`` as a request that changes nothing takes it (a lookup, a list, a
    validation): a redirect is a wrong base URL, and the run stops as for any other, having
    changed nothing."""
    if not redirected(outcome):
        return outcome
    return WrongEndpoint(message=f"{outcome.reason}; nothing was changed", **outcome.common())

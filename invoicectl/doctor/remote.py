"""The checks ``invoicectl doctor`` asks GoRoute for: the base URL, the key, the clock.

Two GETs at most, each within the client's caps (64 KB of answer, redirects never followed)
and a wall-clock limit of its own (``PROBE_SECONDS``, or the configured request timeout if
shorter): the health check (``GET /peppol/version``) says whether the base URL is GoRoute's
API, one page of one transaction (``GET /api/v1/transactions?limit=1``) whether the key is
accepted, and either answer's ``Date`` header how far this machine's clock is from GoRoute's.
Whatever a server says is redacted of the key by the client before it is read here; headers,
which are not, are only ever parsed (the ``Date``) or redacted (the content type) here.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from http import HTTPStatus
from typing import Any

from invoicectl.doctor.checks import Check, fail, ok, skipped, warn
from invoicectl.errors import ExitCode
from invoicectl.goroute.answers import Answer
from invoicectl.goroute.client import GoRouteClient
from invoicectl.goroute.endpoint import suspicious
from invoicectl.goroute.outcomes import Transient, not_taken
from invoicectl.text import folded_line

PROBE_SECONDS = 10.0  # one probe's whole time, answer included
CLOCK_WARN_SECONDS = 5.0
CLOCK_FAIL_SECONDS = 60.0  # more than a minute off: no time sync at all
_VERSION_PATH = "GET /peppol/version"
_KEYED_PATH = "GET /api/v1/transactions?limit=1"
_REFUSED = (HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN)


# What a version endpoint's ``status`` says when all is well (the docs list no values).
_HEALTHY = frozenset(("ok", "up", "healthy", "operational", "available", "running", "pass"))


class _Probe:
    """One probe's answer, and the wall-clock times it was sent and answered."""

    def __init__(self, answer: Answer | Transient, sent: datetime, answered: datetime) -> None:
        self.answer = answer
        self.sent = sent
        self.answered = answered


async def remote_checks(
    client: GoRouteClient,
    fingerprint: str | None,
    redact: Redact,
    now: Callable[[], datetime],
) -> list[Check]:
    """The base URL, credentials and clock checks, in that order. ``fingerprint`` None:
    there is no key, so the credentials are not asked about; ``redact`` scrubs the key
    from the headers shown."""
    version = await _probe(client, "version", now)
    base = _base_url_check(version.answer, client.base_url, redact)
    unreachable = isinstance(version.answer, Transient)
    if unreachable:
        credentials = skipped("credentials", "GoRoute did not answer at the base URL")
        keyed = None
    elif fingerprint is None:
        credentials = skipped("credentials", "no API key")
        keyed = None
    else:
        keyed = await _probe(client, "transactions", now)
        credentials = _credentials_check(keyed.answer, fingerprint, redact)
    clock = _clock_check([probe for probe in (version, keyed) if probe is not None])
    return [base, credentials, clock]


async def _probe(client: GoRouteClient, name: str, now: Callable[[], datetime]) -> _Probe:
    sent = now()
    answer = await client.probe(name)
    return _Probe(answer, sent, now())


def _base_url_check(answer: Answer | Transient, base_url: str, redact: Redact) -> Check:
    details: dict[str, Any] = {"url": base_url, "http_status": _status(answer)}
    if isinstance(answer, Transient):
        return fail(
            "base_url", f"no answer from {base_url}: {answer.reason}", code=_LATER, **details
        )
    details["duration_seconds"] = round(answer.duration, 3)
    seen = f"{_VERSION_PATH} answered {answer.status}"
    if answer.ok and isinstance(answer.data, dict):
        facts = {key: _shown(answer.data.get(key)) for key in ("version", "environment", "status")}
        details.update(facts)
        said = ", ".join(f"{key} {value}" for key, value in facts.items() if value is not None)
        message = (
            f"{base_url} is GoRoute's API ({said or 'no version given'}; {answer.duration:.2f} s)"
        )
        if facts["status"] is not None and facts["status"].casefold() not in _HEALTHY:
            return warn("base_url", f"{message}: it does not say ok", **details)
        return ok("base_url", message, **details)
    if _later(answer.status):
        why = f"{seen}: {_said(answer)}; GoRoute is not answering normally, try again later"
        return fail("base_url", why, code=_LATER, **details)
    if 300 <= answer.status < 400:
        why = f"{seen}, a redirect (never followed): {_WRONG_URL}"
        return fail("base_url", why, **details)
    if isinstance(answer.data, dict | list):  # the API, refusing the health check
        return warn(
            "base_url", f"{base_url} answers in JSON, but {seen}: {_said(answer)}", **details
        )
    why = f"{seen} ({_content_type(answer, redact)}), not GoRoute's JSON: {_WRONG_URL}"
    return fail("base_url", why, **details)


def _credentials_check(answer: Answer | Transient, fingerprint: str, redact: Redact) -> Check:
    details: dict[str, Any] = {"fingerprint": fingerprint, "http_status": _status(answer)}
    if isinstance(answer, Transient):
        return fail(
            "credentials", f"no answer to {_KEYED_PATH}: {answer.reason}", code=_LATER, **details
        )
    seen = f"{_KEYED_PATH} answered {answer.status}"
    if answer.status in _REFUSED:
        why = (
            f"GoRoute refused the key (fingerprint {fingerprint}): {seen}: {_said(answer)}; "
            "check GOROUTE_API_KEY or the key file"
        )
        return fail("credentials", why, code=ExitCode.AUTH_REFUSED, **details)
    if answer.ok and isinstance(answer.data, dict | list):
        return ok(
            "credentials", f"the key is accepted ({seen}, {answer.duration:.2f} s)", **details
        )
    if _later(answer.status):
        why = f"{seen}: {_said(answer)}; the key could not be checked now, try again later"
        return fail("credentials", why, code=_LATER, **details)
    if suspicious(answer) or answer.ok:
        why = f"{seen} ({_content_type(answer, redact)}), not GoRoute's JSON: {_WRONG_URL}"
        return fail("credentials", why, **details)
    return fail("credentials", f"{seen}: {_said(answer)}", **details)


def _clock_check(probes: list[_Probe]) -> Check:
    """This machine's clock against the first ``Date`` header GoRoute sent. A Date has whole
    seconds, so GoRoute's time was within the second after it; the answer came somewhere
    between sending and receiving: the offset is known to within half of both."""
    answered = [probe for probe in probes if not isinstance(probe.answer, Transient)]
    if not answered:
        return skipped("clock", "GoRoute did not answer")
    for probe in answered:
        assert isinstance(probe.answer, Answer)
        header = probe.answer.headers.get("Date")
        if header is None:
            continue
        theirs = _date(header)
        if theirs is None:  # never echoed: a header is not redacted
            return warn(
                "clock", "GoRoute's Date header could not be read; the clock was not checked"
            )
        ours = probe.sent + (probe.answered - probe.sent) / 2
        offset = (theirs + timedelta(seconds=0.5) - ours).total_seconds()
        margin = 0.5 + (probe.answered - probe.sent).total_seconds() / 2
        return _offset_check(offset, margin)
    return warn("clock", "GoRoute sent no Date header; the clock was not checked")


def _offset_check(offset: float, margin: float) -> Check:
    """``offset``: GoRoute's clock minus this machine's, in seconds (to within ``margin``)."""
    details: dict[str, Any] = {
        "offset_seconds": round(offset, 1),
        "margin_seconds": round(margin, 1),
    }
    off = max(0.0, abs(offset) - margin)
    side = "behind" if offset > 0 else "ahead of"
    said = f"this machine's clock is {_duration(abs(offset))} {side} GoRoute's (±{margin:.1f} s)"
    if off > CLOCK_FAIL_SECONDS:
        why = (
            f"{said}: fix its time sync (timedatectl, chrony); Retry-After dates and the "
            "journal's times depend on it"
        )
        return fail("clock", why, **details)
    if off > CLOCK_WARN_SECONDS:
        return warn("clock", f"{said}: check its time sync", **details)
    return ok(
        "clock", f"within {_duration(abs(offset) + margin)} of GoRoute's Date header", **details
    )


Redact = Callable[[str], str]
_LATER = ExitCode.INCOMPLETE
_WRONG_URL = (
    "the base URL is wrong (check GOROUTE_BASE_URL or base_url; it is usually "
    "https://app.goroute.ai/peppol-api)"
)


def _later(status: int) -> bool:
    """A 429, a 5xx, or a 4xx that says to ask again (a proxy's 408): not now, not wrong."""
    return status == HTTPStatus.TOO_MANY_REQUESTS or not_taken(status)


def _status(answer: Answer | Transient) -> int | None:
    return answer.http_status if isinstance(answer, Transient) else answer.status


def _said(answer: Answer) -> str:
    """What an answer said, in a line (already redacted of the key by the client)."""
    return folded_line(answer.error().message)[:120]


def _content_type(answer: Answer, redact: Redact) -> str:
    kind = answer.headers.get("Content-Type", "no content type")
    return folded_line(redact(kind)).split(";")[0][:60]


def _shown(value: object) -> str | None:
    """A value from the health check's JSON (redacted), in a few words."""
    return None if value is None else folded_line(str(value))[:40]


def _date(header: str) -> datetime | None:
    try:
        moment = parsedate_to_datetime(header)
    except (TypeError, ValueError, IndexError):
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"

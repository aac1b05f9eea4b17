"""Is the base URL GoRoute's API at all? (issue 11: a typo in the base URL's path.)

With ``/peppol-apii`` or a missing ``/peppol-api`` a web server answers every API path with
its own 404 page. Read as GoRoute's, that page would make every invoice ``rejected`` (and, in
reconcile, every transaction "not found"). GoRoute's API answers JSON; so a 404 or 405 without
a JSON body is suspicious, and is confirmed by asking two paths only the API serves (the health
check, then the transactions list) once per client: when neither answers in JSON, the answer
is a ``WrongEndpoint`` and the run stops with nothing changed. When the API does answer, the
404 is the API's own (an unknown receiver or transaction), read as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from http import HTTPStatus

from invoicectl.goroute.answers import Answer
from invoicectl.goroute.outcomes import Transient, WrongEndpoint
from invoicectl.text import folded_line

_PAGE_STATUSES = (HTTPStatus.NOT_FOUND, HTTPStatus.METHOD_NOT_ALLOWED)

Getter = Callable[[str, Mapping[str, str | int]], Awaitable[Answer | Transient]]
# A health check or a page of one transaction: small; a web server's page can be anything.
MAX_PROBE_BYTES = 64 * 1024


def suspicious(answer: Answer) -> bool:
    """A 404/405 whose body is not JSON: a web server's page, perhaps not the API's."""
    return answer.status in _PAGE_STATUSES and not isinstance(answer.data, dict | list)


class ApiCheck:
    """Whether GoRoute's API answers at the base URL, asked at most once at a time: the
    answers that meet a check while it runs wait for its verdict, and take it (helper-91:
    they read "no" before it was asked, and their requests were told the base URL is wrong,
    while the first was told the API answers)."""

    def __init__(self, get: Getter, paths: Sequence[tuple[str, Mapping[str, str | int]]]) -> None:
        self._get = get
        self._paths = paths
        self._known: bool | None = None
        self._asking: asyncio.Event | None = None  # set when the check under way ends
        self._verdict: bool | None = None  # that check's, for those who waited on it

    async def api_answers(self) -> bool:
        if self._known is not None:
            return self._known
        if self._asking is not None:
            await self._asking.wait()
            if self._verdict is not None:
                return self._verdict
            return await self.api_answers()  # the check ended with no verdict (cancelled)
        self._asking, self._verdict = asyncio.Event(), None
        try:
            self._known = await self._ask()
            self._verdict = bool(self._known)  # no answer: False this time, asked again next
        finally:
            self._asking.set()
            self._asking = None
        return self._verdict

    async def _ask(self) -> bool | None:
        """True when a path only the API serves answers JSON, False when none does, None
        when one gave no answer: that proves nothing, so the run stops this time (changing
        nothing), and the next asks again."""
        for path, params in self._paths:
            answer = await self._get(path, params)
            if isinstance(answer, Transient):
                return None
            if isinstance(answer.data, dict | list):
                return True
        return False


def wrong_endpoint(answer: Answer, url: str, redact: Callable[[str], str]) -> WrongEndpoint:
    # A header, unlike the body, is not redacted by ``Answer.read``: a proxy may echo the key.
    kind = redact(answer.headers.get("Content-Type", "no content type")).split(";")[0].strip()
    text = folded_line(answer.text)[:80]
    page = f" ({kind}: {text})" if text else f" ({kind})"
    return WrongEndpoint(
        message=f"{url} answered {answer.status}{page}, not GoRoute's API, and neither does its "
        "health check or transactions list: the base URL is wrong (check GOROUTE_BASE_URL or "
        "base_url; it is usually https://app.goroute.ai/peppol-api); nothing was changed",
        raw_body=answer.raw_body,
        **answer.common(),
    )

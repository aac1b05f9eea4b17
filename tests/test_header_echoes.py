"""The key echoed in the response headers the new messages quote: Content-Encoding (a body
invoicectl does not read) and Content-Type (the wrong-endpoint line). Both must be redacted
before they are cut short or shown (issue 11, item 4)."""

from __future__ import annotations

from typing import Any

import pytest
from hostile import HostileServer, answer, routes
from test_hostile_answers import (
    BODY,
    FORMS,
    IDEMPOTENCY_KEY,
    against,
    assert_no_key,
    assert_outcome_clean,
    post,
)

from invoicectl.goroute.apikey import ApiKey
from invoicectl.goroute.client import GoRouteClient
from invoicectl.goroute.outcomes import Transient, WrongEndpoint

# A real key is longer than the 40 characters a Content-Encoding is cut to: the echo
# straddles the cut, and a redaction after the cut finds no whole key to replace.
LONG_SECRET = "sk_live_" + "0123456789abcdef" * 3


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_a_key_echoed_as_the_content_encoding_reaches_no_outcome() -> None:
    behaviour = answer(202, b"{}", {"Content-Encoding": LONG_SECRET})
    with HostileServer(behaviour) as server:
        async with GoRouteClient(server.base_url, ApiKey(LONG_SECRET)) as goroute:
            outcome = await goroute.send_document(IDEMPOTENCY_KEY, BODY)
    assert isinstance(outcome, Transient)
    assert "which invoicectl does not read" in outcome.reason
    assert LONG_SECRET[:12] not in outcome.reason


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["plain", "url", "html"])
async def test_a_key_echoed_as_the_content_type_of_a_web_page_reaches_no_outcome(
    name: str,
) -> None:
    page: dict[str, Any] = {"Content-Type": FORMS[name]}
    behaviour = routes(
        {("GET", "/peppol/version"): answer(404, b"<html>no</html>", page)},
        otherwise=answer(404, b"<html>Not Found</html>", page),
    )
    outcome = await against(behaviour, post)
    assert isinstance(outcome, WrongEndpoint)
    assert_outcome_clean(outcome)
    assert_no_key(outcome.message)

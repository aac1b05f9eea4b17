"""The key echoed in the response headers the new messages quote: Content-Encoding (a body
invoicectl does not read) and Content-Type (the wrong-endpoint line). Both must be redacted
before they are cut short or shown (issue 11, item 4)."""

from __future__ import annotations

import json
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
from invoicectl.goroute.redaction import WITHHELD

# A real key is longer than the 40 characters a Content-Encoding is cut to: the echo
# straddles the cut, and a redaction after the cut finds no whole key to replace.
LONG_SECRET = "sk_live_" + "0123456789abcdef" * 3
# A key as a real account has one: its letters and digits are no word of anyone's text.
LIVE_SECRET = "sk_live_SECRETKEY_abcdef0123456789"
LIVE_BYTES = LIVE_SECRET.encode()


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


# The key cut into pieces shorter than the 12 characters a fragment needs, or its bytes in a
# hex dump with separators: no pattern form matches, and the text is withheld whole.
BROKEN_UP = {
    "pieces of 11 joined by dashes": "-".join(
        LIVE_SECRET[start : start + 11] for start in range(0, len(LIVE_SECRET), 11)
    ),
    "pieces of 4 joined by dots": ".".join(
        LIVE_SECRET[start : start + 4] for start in range(0, len(LIVE_SECRET), 4)
    ),
    "hex with spaces": " ".join(f"{byte:02x}" for byte in LIVE_BYTES),
    "hex with colons, upper case": ":".join(f"{byte:02X}" for byte in LIVE_BYTES),
    "hex as a C array": ", ".join(f"0x{byte:02x}" for byte in LIVE_BYTES),
    "hex as escapes with spaces": " ".join(f"\\x{byte:02x}" for byte in LIVE_BYTES),
    "hex over two lines": LIVE_BYTES[:16].hex(" ") + "\n" + LIVE_BYTES[16:].hex(" "),
}


@pytest.mark.parametrize("name", list(BROKEN_UP))
def test_a_key_broken_into_short_pieces_or_a_spaced_hex_dump_is_withheld(name: str) -> None:
    assert ApiKey(LIVE_SECRET).redact(f"bad key: {BROKEN_UP[name]} (check it)") == WITHHELD


@pytest.mark.parametrize(
    "text",
    [
        "invoice INV-2026-0001 refused at 2026-12-03T20:33:15.123456Z: BR-CO-15, BR-S-08",
        "request 550e8400-e29b-41d4-a716-446655440000 failed; retry after 120 s",
        f"{LIVE_SECRET[:11]} is a prefix, {LIVE_SECRET[11:22]} another piece",
        "-".join(LIVE_SECRET[start : start + 11] for start in range(0, 22, 11)),  # not all
        " ".join(f"{byte:02x}" for byte in LIVE_BYTES[:7]),  # seven bytes are no key
        "sk live secretkey abcdef 0123 and more",
    ],
)
def test_text_sharing_a_few_characters_with_the_key_is_kept(text: str) -> None:
    assert ApiKey(LIVE_SECRET).redact(text) == text


@pytest.mark.anyio
@pytest.mark.parametrize("name", list(BROKEN_UP))
async def test_a_key_broken_up_in_an_error_answer_reaches_no_outcome(name: str) -> None:
    body = json.dumps({"message": f"invalid key {BROKEN_UP[name]}"}).encode()
    behaviour = answer(400, body, {"Content-Type": "application/json"})
    with HostileServer(behaviour) as server:
        async with GoRouteClient(server.base_url, ApiKey(LIVE_SECRET)) as goroute:
            outcome = await goroute.send_document(IDEMPOTENCY_KEY, BODY)
    assert BROKEN_UP[name] not in repr(vars(outcome))
    assert WITHHELD in repr(vars(outcome))

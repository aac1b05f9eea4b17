"""The client against a hostile server on loopback: capped bodies, a total time per request,
unusable ids, and the key echoed back in every form (issue 11, items 1, 2, 4 and 5).

Each answer is scripted by ``tests/hostile.py``; bodies here are over the cap but finite, so a
client that reads them whole fails the test instead of eating the machine (the endless and
3 GB bodies are measured on the real CLI in ``test_hostile_cli.py``).
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import time
import zlib
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

import pytest
from hostile import HostileServer, answer, answer_json, hang, routes, trickle

from invoicectl.goroute.apikey import ApiKey
from invoicectl.goroute.client import GoRouteClient, TransactionPage
from invoicectl.goroute.outcomes import Accepted, KeyReused, Outcome, Rejected, Transient
from invoicectl.goroute.redaction import MARKER, WITHHELD
from invoicectl.lifecycle.sending import message_of

SECRET = "sk_test/Echo+Key=9~x"
KEY = ApiKey(SECRET)
BODY = b'{"document":"<Invoice/>"}'
IDEMPOTENCY_KEY = "invoice-H-1"
JSON = {"Content-Type": "application/json"}


def forms(secret: str) -> dict[str, str]:
    """The key as a server might write it back, each the way a real encoder would."""
    return {
        "plain": secret,
        "json slash": secret.replace("/", "\\/"),
        "json unicode lower": "".join(f"\\u{ord(c):04x}" for c in secret),
        "json unicode upper": "".join(f"\\u{ord(c):04X}" for c in secret),
        "json mixed": "".join(f"\\u{ord(c):04x}" if i % 2 else c for i, c in enumerate(secret)),
        "url": quote(secret, safe=""),
        "url lower hex": re.sub("%[0-9A-F]{2}", lambda m: m[0].lower(), quote(secret, safe="")),
        "url every char": "".join(f"%{ord(c):02X}" for c in secret),
        "url twice": quote(quote(secret, safe=""), safe=""),
        "form decoded": secret.replace("+", " "),
        "html": "".join(f"&#{ord(c)};" for c in secret),
        "hex": secret.encode().hex(),
        "hex upper": secret.encode().hex().upper(),
        "base64": base64.b64encode(secret.encode()).decode(),
        "base64url": base64.urlsafe_b64encode(secret.encode()).decode().rstrip("="),
        "base64 of the header line": base64.b64encode(f"X-API-Key: {secret}".encode()).decode(),
        "base64 after one byte": base64.b64encode(b"=" + secret.encode()).decode(),
    }


FORMS = forms(SECRET)


def assert_no_key(text: str | None) -> None:
    if text is None:
        return
    for name, form in FORMS.items():
        assert form not in text, f"the key, {name}, in {text[:300]!r}"


def assert_outcome_clean(outcome: Outcome) -> None:
    for value in vars(outcome).values():
        if isinstance(value, str):
            assert_no_key(value)
        elif isinstance(value, tuple):
            for item in value:
                assert_no_key(str(item))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def against(
    behaviour: Any,
    call: Callable[[GoRouteClient], Awaitable[Any]],
    key: ApiKey = KEY,
    **client: Any,
) -> Any:
    with HostileServer(behaviour) as server:
        async with GoRouteClient(server.base_url, key, **client) as goroute:
            return await call(goroute)


def post(goroute: GoRouteClient) -> Awaitable[Outcome]:
    return goroute.send_document(IDEMPOTENCY_KEY, BODY)


# 1. Every answer is read within a cap ------------------------------------------------------

CALLS: dict[str, Callable[[GoRouteClient], Awaitable[Any]]] = {
    "documents POST": post,
    "transaction GET": lambda goroute: goroute.get_transaction("txn_1"),
    "transactions list": lambda goroute: goroute.list_transactions(limit=100),
    "version": lambda goroute: goroute.version(),
}
# Over each endpoint's cap (512 KB, 256 KB, 2 MB, 64 KB) and valid JSON all the same, so a
# client that reads it whole takes it as an answer.
_PAGE = {"transactions": [{"transaction_id": f"tx_{n}", "padding": "p" * 300} for n in range(8000)]}
OVERSIZED = {
    "documents POST": (202, {"transaction_id": "tx_1", "padding": "p" * 600_000}),
    "transaction GET": (200, {"id": "txn_1", "status": "delivered", "padding": "p" * 300_000}),
    "transactions list": (200, _PAGE),
    "version": (200, {"version": "1", "padding": "p" * 70_000}),
}


@pytest.mark.anyio
@pytest.mark.parametrize("endpoint", list(CALLS))
async def test_a_body_over_the_cap_is_a_transient_failure(endpoint: str) -> None:
    status, data = OVERSIZED[endpoint]
    outcome = await against(answer_json(status, data), CALLS[endpoint])
    assert isinstance(outcome, Transient), outcome
    assert outcome.sent  # for the POST: it may have been accepted, so the invoice is unknown
    assert outcome.http_status == status
    assert "bytes; the answer was not read" in outcome.reason


@pytest.mark.anyio
async def test_a_202_that_echoes_a_large_document_is_read() -> None:
    """Extra fields are allowed: a 202 carrying the document back is as large as the request.
    Capped at 512 KB whatever was sent, a 610 KB invoice stayed unknown at every run."""
    document = "<Invoice>" + "x" * 600_000 + "</Invoice>"
    body = json.dumps({"document": document}).encode()
    echo = answer_json(202, {"transaction_id": "tx_1", "document": document})
    with HostileServer(echo) as server:
        async with GoRouteClient(server.base_url, KEY) as goroute:
            outcome = await goroute.send_document(IDEMPOTENCY_KEY, body)
    assert isinstance(outcome, Accepted) and outcome.transaction_id == "tx_1"


@pytest.mark.anyio
@pytest.mark.parametrize("status", [400, 422, 500])
async def test_an_oversized_error_to_a_send_is_unknown_not_rejected(status: int) -> None:
    data = {"error_code": "IDEMPOTENCY_KEY_REUSED", "message": "m" * 2_000_000}
    outcome = await against(answer_json(status, data), post)
    assert isinstance(outcome, Transient) and outcome.sent
    assert outcome.reason == (
        f"GoRoute answered {status} with more than 524288 bytes; the answer was not read"
    )


@pytest.mark.anyio
async def test_a_declared_length_over_the_cap_is_refused_before_reading() -> None:
    # Claims 3 GB, sends 1 KB and hangs: only the declared length can end this quickly.
    def behave(request: Any, wire: Any) -> None:
        wire.write(b"HTTP/1.1 202 Accepted\r\nContent-Length: 3221225472\r\n\r\n" + b"y" * 1024)
        wire.wait(30)

    started = time.monotonic()
    outcome = await against(behave, post)
    assert isinstance(outcome, Transient) and outcome.sent
    assert "with more than 524288 bytes" in outcome.reason
    assert time.monotonic() - started < 10


@pytest.mark.anyio
@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_a_compression_bomb_is_inflated_only_up_to_the_cap(encoding: str) -> None:
    inflated = b'{"transaction_id": "tx_1", "padding": "' + b"0" * 50_000_000 + b'"}'
    if encoding == "gzip":
        packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
        packed = packer.compress(inflated) + packer.flush()
    else:
        packed = zlib.compress(inflated, 9)
    behaviour = answer(202, packed, {**JSON, "Content-Encoding": encoding})
    outcome = await against(behaviour, post)
    assert isinstance(outcome, Transient) and outcome.sent
    assert "with more than 524288 bytes" in outcome.reason


@pytest.mark.anyio
async def test_a_small_compressed_answer_is_read() -> None:
    packed = zlib.compress(json.dumps({"transaction_id": "tx_9"}).encode())
    behaviour = answer(202, packed, {**JSON, "Content-Encoding": "deflate"})
    outcome = await against(behaviour, post)
    assert outcome == Accepted(transaction_id="tx_9", http_status=202, duration=outcome.duration)


@pytest.mark.anyio
async def test_a_gzip_answer_of_several_members_is_read_whole() -> None:
    """helper-82: RFC 1952 reads a body of several gzip members as their concatenation. Two
    answers in one ({"transaction_id": "tx_a"}{"transaction_id": "tx_b"}) were taken for the
    first alone, the invoice accepted as tx_a, tx_b thrown away; the same text uncompressed
    is no answer. Members that together make one answer are read as one."""
    two = gzip.compress(b'{"transaction_id": "tx_a"}') + gzip.compress(
        b'{"transaction_id": "tx_b"}'
    )
    outcome = await against(answer(202, two, {**JSON, "Content-Encoding": "gzip"}), post)
    assert isinstance(outcome, Transient) and outcome.sent, outcome

    halves = gzip.compress(b'{"transaction_id":') + gzip.compress(b' "tx_9"}')
    outcome = await against(answer(202, halves, {**JSON, "Content-Encoding": "gzip"}), post)
    assert outcome == Accepted(transaction_id="tx_9", http_status=202, duration=outcome.duration)


@pytest.mark.anyio
async def test_a_gzip_answer_padded_with_zero_bytes_is_read() -> None:
    """helper-84: zero bytes after the last member are padding to gzip(1) and Python's gzip
    module; taken for a next member, they made a 202 "corrupt" and the send unknown."""
    packed = gzip.compress(b'{"transaction_id": "tx_1"}') + bytes(8)
    outcome = await against(answer(202, packed, {**JSON, "Content-Encoding": "gzip"}), post)
    assert outcome == Accepted(transaction_id="tx_1", http_status=202, duration=outcome.duration)
    junk = gzip.compress(b'{"transaction_id": "tx_1"}') + bytes(8) + b"{junk}"
    outcome = await against(answer(202, junk, {**JSON, "Content-Encoding": "gzip"}), post)
    assert isinstance(outcome, Transient) and outcome.sent, outcome


@pytest.mark.anyio
@pytest.mark.parametrize("tail", ["cut short", "not gzip after it"])
async def test_a_compressed_answer_cut_short_or_followed_by_junk_is_not_read(tail: str) -> None:
    packed = gzip.compress(b'{"transaction_id": "tx_1"}')
    body = packed[:-6] if tail == "cut short" else packed + b"{junk}"
    outcome = await against(answer(202, body, {**JSON, "Content-Encoding": "gzip"}), post)
    assert isinstance(outcome, Transient) and outcome.sent, outcome
    assert "the answer was not read" in outcome.reason


@pytest.mark.anyio
@pytest.mark.parametrize("malformed", [["tx_a"], {"id": "tx_a"}, True])
async def test_a_malformed_transaction_id_is_not_passed_over_for_another_field(
    malformed: object,
) -> None:
    """helper-82: a 202 whose ``transaction_id`` was a list, beside ``"id": "tx_other"``, was
    accepted as tx_other. The field there decides: unusable, the send is unconfirmed (replayed
    under the same key, which GoRoute answers with the original id)."""
    body = {"transaction_id": malformed, "id": "tx_other"}
    outcome = await against(answer_json(202, body), post)
    assert isinstance(outcome, Transient) and outcome.sent, outcome
    assert "without a transaction id" in outcome.reason
    only_id = await against(answer_json(202, {"transaction_id": None, "id": "tx_9"}), post)
    assert only_id == Accepted(transaction_id="tx_9", http_status=202, duration=only_id.duration)


@pytest.mark.anyio
async def test_an_unknown_content_encoding_is_not_read() -> None:
    behaviour = answer(202, b"\x00\x01", {**JSON, "Content-Encoding": "br"})
    outcome = await against(behaviour, post)
    assert isinstance(outcome, Transient) and outcome.sent
    assert "Content-Encoding 'br', which invoicectl does not read" in outcome.reason


@pytest.mark.anyio
async def test_the_client_asks_for_an_uncompressed_answer() -> None:
    with HostileServer(answer_json(202, {"transaction_id": "tx_1"})) as server:
        async with GoRouteClient(server.base_url, KEY) as goroute:
            await post(goroute)
    assert server.requests[0].headers["accept-encoding"] == "identity"


# 2. A total time for each request ----------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("endpoint", list(CALLS))
@pytest.mark.parametrize("how", ["trickle", "hang"])
async def test_a_trickling_or_silent_answer_ends_at_the_request_limit(
    endpoint: str, how: str
) -> None:
    # One byte every 0.3 s restarts httpx's read timeout forever; the total limit does not.
    behaviour = trickle(200, b"{" + b" " * 1000 + b"}", every=0.3) if how == "trickle" else hang()
    started = time.monotonic()
    outcome = await against(behaviour, CALLS[endpoint], request_timeout=1.0, read_timeout=5.0)
    took = time.monotonic() - started
    assert isinstance(outcome, Transient), outcome
    assert outcome.sent  # it may have left: a POST's outcome is unknown, replayed
    assert outcome.reason == (
        "no complete answer within 1 s, the limit for this request; the outcome is unknown"
    )
    assert took < 10  # generous: "does not hang", not a timing target


@pytest.mark.anyio
async def test_the_limit_grows_with_what_the_request_carries() -> None:
    def late(request: Any, wire: Any) -> None:  # answers after 1.5 s
        if wire.wait(1.5):
            answer_json(202, {"transaction_id": "tx_big"})(request, wire)

    big = b'{"document": "' + b"x" * 512 * 1024 + b'"}'  # 2 s more than the 0.5 s limit
    with HostileServer(late) as server:
        async with GoRouteClient(server.base_url, KEY, request_timeout=0.5) as goroute:
            sent = await goroute.send_document(IDEMPOTENCY_KEY, big)
            small = await goroute.send_document(IDEMPOTENCY_KEY, BODY)
    assert isinstance(sent, Accepted)
    assert isinstance(small, Transient) and "within 0.5 s" in small.reason


def test_the_request_limit_must_be_positive() -> None:
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="request_timeout"):
            GoRouteClient("https://goroute.test", KEY, request_timeout=bad)


# 5. Identifiers from the server -------------------------------------------------------------

BAD_IDS = {
    "64 KB": "t" * 65_537,
    "dot": ".",
    "dot dot": "..",
    "slash": "tx/1",
    "newline": "tx\n1",
    "space": "tx 1",
    "control": "tx\x001",
    "key": SECRET,
    "key json-escaped": FORMS["json unicode lower"],
}


def _json_with(field: str, value: str, **extra: Any) -> bytes:
    # Raw text: a form that is already JSON-escaped goes in as written.
    raw = value if "\\u" in value else json.dumps(value)[1:-1]
    rest = "".join(f', "{name}": {json.dumps(item)}' for name, item in extra.items())
    return ('{"' + field + '": "' + raw + '"' + rest + "}").encode()


@pytest.mark.anyio
@pytest.mark.parametrize("name", list(BAD_IDS))
async def test_a_202_with_an_unusable_id_is_unconfirmed(name: str) -> None:
    behaviour = answer(202, _json_with("transaction_id", BAD_IDS[name]), JSON)
    outcome = await against(behaviour, post)
    assert isinstance(outcome, Transient) and outcome.sent, outcome
    assert "with an unusable transaction id" in outcome.reason
    assert "will be replayed under the same key" in outcome.reason
    assert outcome.reason.isprintable() and len(outcome.reason) < 400
    assert_outcome_clean(outcome)


@pytest.mark.anyio
@pytest.mark.parametrize("name", list(BAD_IDS))
async def test_a_422_with_an_unusable_existing_id_is_key_reused_without_it(name: str) -> None:
    body = _json_with(
        "existing_transaction_id",
        BAD_IDS[name],
        error_code="IDEMPOTENCY_KEY_REUSED",
        message="key reused",
    )
    outcome = await against(answer(422, body, JSON), post)
    assert isinstance(outcome, KeyReused), outcome
    assert outcome.existing_transaction_id is None
    assert outcome.message.startswith("key reused; the server's existing_transaction_id was ")
    assert "unusable" in outcome.message and outcome.message.isprintable()
    assert len(outcome.message) < 400
    assert_outcome_clean(outcome)


@pytest.mark.anyio
async def test_unusable_ids_in_a_page_are_not_kept_and_a_huge_cursor_is_not_followed() -> None:
    items = [{"transaction_id": bad, "invoice_number": name} for name, bad in BAD_IDS.items()]
    items.append({"transaction_id": "tx_good", "invoice_number": "fine"})
    data = {"transactions": items, "next_cursor": "c" * 5000, "has_more": True}
    page = await against(answer_json(200, data), CALLS["transactions list"])
    assert isinstance(page, TransactionPage)
    assert [t.transaction_id for t in page.transactions] == [None] * len(BAD_IDS) + ["tx_good"]
    assert page.next_cursor is None and page.has_more


@pytest.mark.anyio
async def test_an_unusable_request_id_is_not_kept() -> None:
    headers = {**JSON, "X-Request-Id": "r" * 300}
    outcome = await against(answer_json(500, {"request_id": "a/../b"}, headers), post)
    assert isinstance(outcome, Transient) and outcome.request_id is None
    headers = {**JSON, "X-Request-Id": "req_ok-1"}
    outcome = await against(answer_json(500, {"request_id": "bad id"}, headers), post)
    assert outcome.request_id == "req_ok-1"


@pytest.mark.anyio
async def test_a_stored_unusable_id_is_refused_without_a_request() -> None:
    with HostileServer(answer_json(200, {"id": "x"})) as server:
        async with GoRouteClient(server.base_url, KEY) as goroute:
            outcomes = [await goroute.get_transaction(bad) for bad in BAD_IDS.values()]
    assert server.requests == []
    assert all(isinstance(o, Rejected) and o.http_status is None for o in outcomes)


# 4. The key never comes back through an answer -----------------------------------------------


@pytest.mark.parametrize("name", list(FORMS))
def test_redact_finds_every_form(name: str) -> None:
    text = f"before {FORMS[name]} after"
    cleaned = KEY.redact(text)
    if name.startswith("base64"):  # a character or two holds bits of its neighbours too
        assert cleaned.startswith("before ") and MARKER in cleaned and cleaned.endswith(" after")
    else:
        assert cleaned in (f"before {MARKER} after", WITHHELD)
    assert_no_key(cleaned)


def test_redact_leaves_other_text_alone() -> None:
    text = "sk_test/Ech (eleven of the key's characters) and %2F and \\u0073 and &#115;"
    assert KEY.redact(text) == text


@pytest.mark.parametrize(
    "echo",
    [
        SECRET[:10] + "\n" + SECRET[10:],  # a line broken inside it
        SECRET[:10] + "\r\n" + SECRET[10:],
        SECRET[:10] + "<br>" + SECRET[10:],  # an HTML page
        SECRET[:4] + "\u200b" + SECRET[4:],  # a zero-width space
        SECRET[:4] + "\u00ad" + SECRET[4:],  # a soft hyphen
        SECRET.upper(),
        SECRET[:-4],  # cut short: most of it is still the key
        SECRET[3:],
    ],
)
def test_redact_finds_a_key_broken_up_cased_or_cut(echo: str) -> None:
    cleaned = KEY.redact(f"bad key {echo} here")
    assert_no_key(cleaned)
    assert SECRET[:12] not in cleaned and SECRET[-12:].casefold() not in cleaned.casefold()


def _key_in_base64(text: str) -> bool:
    """Whether the key's bytes come back from ``text`` read as base64 with its white space
    dropped, at any alignment (another character stands for each that is not base64's)."""
    joined = re.sub(r"[^A-Za-z0-9+/]", "A", re.sub(r"\s", "", text))
    for start in range(4):
        chunk = joined[start:]
        if SECRET.encode() in base64.b64decode(chunk[: len(chunk) // 4 * 4]):
            return True
    return False


@pytest.mark.parametrize("before", range(0, 80, 3))
def test_a_key_in_base64_broken_into_mime_lines_is_withheld(before: int) -> None:
    """A request dumped as MIME base64 (``encodebytes``: a line break every 76 characters)
    with the break inside the key's part: no form the pattern spells out, so the text is
    withheld whole."""
    dump = base64.encodebytes(b"x" * before + f"POST /\r\nX-API-Key: {SECRET}\r\n".encode())
    assert _key_in_base64(dump.decode())  # the yardstick finds it

    cleaned = KEY.redact(f"request was: {dump.decode()}")

    assert not _key_in_base64(cleaned)
    assert_no_key(cleaned)


def test_an_encoding_the_pattern_does_not_spell_out_withholds_the_whole_text() -> None:
    # A JSON escape inside a percent-encoding: no single form, but a decoding shows the key.
    nested = "".join(f"%5Cu{ord(c):04x}" for c in SECRET)
    assert KEY.redact(f"x {nested} y") == WITHHELD


@pytest.mark.anyio
async def test_a_key_quoted_in_a_protocol_error_is_redacted_before_it_is_cut_short() -> None:
    # h11 quotes the bad header line; the reason keeps 200 characters of it, and the key
    # straddles that cut: cutting first would leave its first characters in the journal.
    def behave(request: Any, wire: Any) -> None:
        line = b"x" * 160 + SECRET.encode()
        wire.write(b"HTTP/1.1 202 Accepted\r\n" + line + b"\r\nContent-Length: 2\r\n\r\n{}")

    outcome = await against(behave, post)
    assert isinstance(outcome, Transient) and outcome.sent
    assert "illegal header line" in outcome.reason
    assert SECRET[:6] not in outcome.reason


def echoing(status: int, form: str, *, reason: str | None = None) -> Any:
    """An answer with the key in the reason phrase, X-Request-Id and every body field."""
    raw = form if "\\u" in form else json.dumps(form)[1:-1]
    fields = ("transaction_id", "existing_transaction_id", "message", "request_id")
    body = (
        '{"error_code": "IDEMPOTENCY_KEY_REUSED", '
        + ", ".join(f'"{field}": "{raw}"' for field in fields)
        + f', "details": [{{"rule": "R", "message": "{raw}"}}], "error": {{"message": "{raw}"}}}}'
    ).encode()
    header_form = form if form.isascii() else quote(form)
    headers = {**JSON, "X-Request-Id": header_form, "Location": header_form}
    return answer(status, body, headers, reason=reason or header_form)


@pytest.mark.anyio
@pytest.mark.parametrize("status", [202, 301, 400, 401, 404, 409, 422, 429, 500])
@pytest.mark.parametrize("name", list(FORMS))
async def test_an_echoed_key_reaches_no_outcome(status: int, name: str) -> None:
    outcome = await against(echoing(status, FORMS[name]), post)
    assert_outcome_clean(outcome)


@pytest.mark.anyio
@pytest.mark.parametrize("where", ["details", "message and details"])
async def test_a_key_echoed_in_pieces_across_an_errors_texts_reaches_no_reason(where: str) -> None:
    """helper-60: each piece shorter than the fragment the redactor finds, one per detail:
    the reason joins them ("d1; d2; ..."), and the key could be read off it."""
    secret = "sk_test_h60_SECRETKEY_abcdefghijklmnop0123456789"
    pieces = [secret[start : start + 10] for start in range(0, len(secret), 10)]
    body = {"error_code": "VAL_001", "message": "document invalid", "details": pieces}
    if where == "message and details":
        body = {"error_code": "VAL_001", "message": pieces[0], "details": pieces[1:]}
    behaviour = answer(400, json.dumps(body).encode(), JSON)

    outcome = await against(behaviour, post, key=ApiKey(secret))

    assert isinstance(outcome, Rejected) and outcome.code == "VAL_001"
    reason = message_of(outcome) or ""
    assert "withheld" in reason
    assert secret not in re.sub(r"[^0-9A-Za-z_]", "", reason)


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["plain", "json unicode upper", "url", "html"])
async def test_an_echoed_key_in_an_html_page_reaches_no_outcome(name: str) -> None:
    page = f"<html><body><h1>Bad gateway</h1><p>X-API-Key: {FORMS[name]}</p></body></html>"
    behaviour = answer(502, page.encode(), {"Content-Type": "text/html"})
    outcome = await against(behaviour, post)
    assert isinstance(outcome, Transient)
    assert_outcome_clean(outcome)


@pytest.mark.anyio
@pytest.mark.parametrize("name", list(FORMS))
async def test_an_echoed_key_reaches_no_transaction(name: str) -> None:
    form = FORMS[name]
    raw = form if "\\u" in form else json.dumps(form)[1:-1]
    item = (
        '{"transaction_id": "' + raw + '", "id": "' + raw + '", "invoice_number": "' + raw
        + '", "status": "' + raw + '", "receiver": {"scheme": "' + raw + '", "identifier": "'
        + raw + '"}, "metadata": {"' + raw + '": "' + raw + '"}}'
    )  # fmt: skip
    behaviour = routes(
        {
            ("GET", "/api/v1/transactions/txn_1"): answer(200, item.encode(), JSON),
            ("GET", "/api/v1/transactions"): answer(
                200, ('{"transactions": [' + item + "]}").encode(), JSON
            ),
        }
    )

    async def both(goroute: GoRouteClient) -> tuple[Any, Any]:
        return await goroute.get_transaction("txn_1"), await goroute.list_transactions()

    found, page = await against(behaviour, both)
    for transaction in (found.transaction, page.transactions[0]):
        assert transaction.transaction_id is None
        assert_no_key(repr(vars(transaction)))


def test_the_request_limit_is_a_setting(tmp_path: Any) -> None:
    from invoicectl.errors import ConfigError
    from invoicectl.settings import resolve

    environ = {"GOROUTE_API_KEY": SECRET}
    assert resolve(environ=environ).request_timeout == 60.0
    timed = resolve(environ={**environ, "INVOICECTL_REQUEST_TIMEOUT": "2.5"})
    assert (timed.request_timeout, timed.sources["request_timeout"]) == (
        2.5,
        "$INVOICECTL_REQUEST_TIMEOUT",
    )
    config = tmp_path / "config.toml"
    config.write_text("request_timeout = 15\n")
    from_file = resolve(environ={**environ, "INVOICECTL_CONFIG": str(config)})
    assert from_file.request_timeout == 15.0
    for bad in ("0", "-1", "nan", "inf", "soon"):
        with pytest.raises(ConfigError, match=r"^request_timeout \(\$INVOICECTL_REQUEST_TIMEOUT\)"):
            resolve(environ={**environ, "INVOICECTL_REQUEST_TIMEOUT": bad})
    config.write_text("request_timeout = true\n")
    with pytest.raises(ConfigError, match=r"request_timeout \(config file .*\) must be a number"):
        resolve(environ={**environ, "INVOICECTL_CONFIG": str(config)})

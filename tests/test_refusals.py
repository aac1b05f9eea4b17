"""A refusal proves nothing was delivered only when every request under the key was answered.

goroute-api.md treats a 409 ("conflict (duplicate)") like a key reuse without an id, and a
retry refused after a request whose answer was lost says nothing of that first request. Such
an invoice used to be corrected under the next key as soon as its file changed, and GoRoute
then held two deliveries of it. A plain refusal still sends the correction at once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from journalkit import force
from sendkit import send, settings_for
from ublfactory import write_invoice

from invoicectl.errors import UsageError
from invoicectl.journal import open_journal
from invoicectl.lifecycle.decisions import check_new_version
from invoicectl.locations import Location
from invoicectl.scan.ingest import scan_directory


@pytest.fixture
def journal_path(journal_at: Location) -> Location:
    return journal_at


class Refusing:
    """A server that delivers the first request under each key; ``lose_first``: its answer
    is lost on the way (a read timeout). Every later request under a key delivered is
    answered ``repeat_status``; a key's first request when ``refuse_first`` is 400."""

    def __init__(self, *, lose_first: bool, repeat_status: int = 409, refuse_first: bool = False):
        self.lose_first, self.repeat_status, self.refuse_first = (
            lose_first,
            repeat_status,
            refuse_first,
        )
        self.delivered: list[tuple[str, str]] = []  # (key, invoice id)
        self.posts: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method != "POST" or not request.url.path.endswith("/api/v1/documents"):
            return httpx.Response(404, json={"error": "no such route"})
        key = request.headers["Idempotency-Key"]
        self.posts.append(key)
        if key in {delivered for delivered, _ in self.delivered}:
            return httpx.Response(
                self.repeat_status, json={"error_code": "CONFLICT", "message": "in progress"}
            )
        if self.refuse_first:
            return httpx.Response(400, json={"error_code": "BR-01", "message": "no buyer"})
        invoice_id = json.loads(request.content)["metadata"]["invoice_id"]
        self.delivered.append((key, invoice_id))
        if self.lose_first and len(self.posts) == 1:
            raise httpx.ReadTimeout("the answer was lost", request=request)
        return httpx.Response(202, json={"transaction_id": f"txn_{len(self.delivered)}"})


def test_a_409_after_a_lost_answer_then_an_edit_is_amended_not_sent_again(
    outbox: Path, journal_path: Location
):
    write_invoice(outbox, "INV-9", amount="100.00")
    server = Refusing(lose_first=True)
    settings = settings_for(journal_path)
    options = {"check_receivers": False, "trust_new_journal": True, "warn": lambda line: None}
    send(settings, outbox, httpx.MockTransport(server), **options)
    with open_journal(journal_path) as journal:
        assert journal.invoice("INV-9").state == "rejected"

    write_invoice(outbox, "INV-9", amount="101.00")  # a typo fixed
    send(settings, outbox, httpx.MockTransport(server), **options)

    assert server.delivered == [("invoice-INV-9", "INV-9")]
    assert server.posts == ["invoice-INV-9", "invoice-INV-9"]
    with open_journal(journal_path) as journal:
        row = journal.invoice("INV-9")
        assert (row.state, row.state_before_amend) == ("amended", "rejected")
        with pytest.raises(UsageError, match="may have been delivered under it all the same"):
            check_new_version(journal, "INV-9", journal.clock())


def _new_version_of_inv_9(
    settings: Any, outbox: Path, server: Refusing, clocks: Any, options: dict[str, Any]
) -> None:
    """``send --new-version INV-9`` to ``server``, at ``clocks``' time."""
    send(settings, outbox, httpx.MockTransport(server), new_versions=("INV-9",), clocks=clocks,
         **options)  # fmt: skip


def test_a_409_waits_for_the_operators_word_not_for_the_clock_alone(
    outbox: Path, journal_path: Location
):
    """helper-81: INV-9's first request was delivered and its answer lost; the retry got 409.
    25 hours on, with no reconcile (it cannot look a 409 up), `--new-version` went out under
    the next key on the clock alone and GoRoute delivered INV-9 twice. Now it waits for the
    operator's `release --force`, given after looking at GoRoute; then the new key goes."""
    from datetime import UTC, datetime, timedelta

    from sendkit import at

    from invoicectl.lifecycle.holds import release

    write_invoice(outbox, "INV-9")
    server = Refusing(lose_first=True)
    settings = settings_for(journal_path)
    options = {"check_receivers": False, "trust_new_journal": True, "warn": lambda line: None}
    send(settings, outbox, httpx.MockTransport(server), **options)
    later = at(datetime.now(UTC) + timedelta(hours=25))

    with pytest.raises(UsageError, match=r"release INV-9 --force`, then --new-version"):
        _new_version_of_inv_9(settings, outbox, server, later, options)
    assert server.delivered == [("invoice-INV-9", "INV-9")]

    with open_journal(journal_path) as journal:
        assert not release(journal, "INV-9", "clerk").done  # not held: no word without --force
        word = release(journal, "INV-9", "clerk", force=True)
        assert word.done and "may hold a delivery under it" in word.message, word
    _new_version_of_inv_9(settings, outbox, server, later, options)

    assert server.delivered == [("invoice-INV-9", "INV-9"), ("invoice-INV-9-v2", "INV-9")]


def test_a_plain_refusal_is_corrected_under_the_next_key(outbox: Path, journal_path: Location):
    write_invoice(outbox, "INV-8", amount="100.00")
    server = Refusing(lose_first=False, refuse_first=True)
    settings = settings_for(journal_path)
    options = {"check_receivers": False, "trust_new_journal": True, "warn": lambda line: None}
    send(settings, outbox, httpx.MockTransport(server), **options)
    server.refuse_first = False

    write_invoice(outbox, "INV-8", amount="101.00")
    send(settings, outbox, httpx.MockTransport(server), **options)

    assert server.posts == ["invoice-INV-8", "invoice-INV-8-v2"]
    assert server.delivered == [("invoice-INV-8-v2", "INV-8")]
    with open_journal(journal_path) as journal:
        assert journal.invoice("INV-8").state == "accepted"


@pytest.mark.parametrize("first_used", ["2099-01-01T00:00:00+00:00", "yesterday"])
def test_an_old_keys_verdict_frees_no_new_key_when_the_key_cannot_be_dated(
    tmp_path: Path, first_used: str
) -> None:
    """v1's reconcile verdict stays in the row; v2 went out and got a 422 naming no
    transaction, its first use written by a clock far ahead (or changed by hand). No record
    dates v2, so no verdict can be shown to be since it: --new-version was let through."""
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    write_invoice(outbox, "INV-1")
    with open_journal(tmp_path / "journal.db") as journal:
        scan_directory(journal, outbox)
        sha256 = journal.invoice("INV-1").current_sha256
        force(
            journal, "INV-1", state="key_reused", key_version=2,
            idempotency_key="invoice-INV-1-v2", key_sha256=sha256, key_first_used_at=first_used,
            verdict="unknown_not_found_window_closed", verdict_at="2026-01-01T00:00:00+00:00",
        )  # fmt: skip

        with pytest.raises(UsageError, match="could deliver it twice"):
            check_new_version(journal, "INV-1", journal.clock())


def test_a_word_given_before_the_409_frees_no_new_key(outbox: Path, journal_path: Location):
    """helper-84: INV-9's first request was delivered, its answer lost (unknown). Reconcile
    found evidence of something else; the operator dismissed *that* (`release --force`). The
    replay got 409, and 25 h on --new-version went out on that earlier word: GoRoute held
    INV-9 twice. Only a word given after the refusal counts."""
    from datetime import UTC, datetime, timedelta

    from sendkit import at

    from invoicectl.goroute.retry import RetryPolicy
    from invoicectl.lifecycle.holds import record_verdict, release

    write_invoice(outbox, "INV-9")
    server = Refusing(lose_first=True)
    settings = settings_for(journal_path)
    options = {"check_receivers": False, "trust_new_journal": True, "warn": lambda line: None}
    send(settings, outbox, httpx.MockTransport(server), policy=RetryPolicy(1), **options)
    with open_journal(journal_path) as journal:
        assert journal.invoice("INV-9").state == "unknown"
        record_verdict(journal, "INV-9", "unknown_ambiguous", journal.now())
        word = release(journal, "INV-9", "clerk", force=True)  # on the ambiguous finding
        assert word.done, word
    send(settings, outbox, httpx.MockTransport(server), **options)  # the replay: 409
    with open_journal(journal_path) as journal:
        assert journal.invoice("INV-9").state == "rejected"
    later = at(datetime.now(UTC) + timedelta(hours=25))

    with pytest.raises(UsageError, match=r"release INV-9 --force`, then --new-version"):
        _new_version_of_inv_9(settings, outbox, server, later, options)
    assert server.delivered == [("invoice-INV-9", "INV-9")]

    with open_journal(journal_path) as journal:
        assert release(journal, "INV-9", "clerk", force=True).done  # the word, on the 409
    _new_version_of_inv_9(settings, outbox, server, later, options)
    assert server.delivered[1:] == [("invoice-INV-9-v2", "INV-9")]


def test_abandon_after_a_refusal_no_reconcile_looks_up_asks_for_the_operators_word(
    outbox: Path, journal_path: Location
):
    """helper-84: INV-7's first request got no answer, its retry a 400: rejected, and the
    refusal may hide a delivery. `abandon` sent the operator to reconcile, which looks up only
    409s and never judged INV-7: a dead end. It now says to look at GoRoute, then --force."""
    from invoicectl.lifecycle.holds import abandon

    write_invoice(outbox, "INV-7")
    server = Refusing(lose_first=True, repeat_status=400)
    options = {"check_receivers": False, "trust_new_journal": True, "warn": lambda line: None}
    send(settings_for(journal_path), outbox, httpx.MockTransport(server), **options)

    with open_journal(journal_path) as journal:
        assert journal.invoice("INV-7").state == "rejected"
        refused = abandon(journal, "INV-7", "sent by post", "clerk")
        assert not refused.done and "reconcile` first" not in refused.message
        assert "Look for it at GoRoute, then `abandon --force`" in refused.message
        assert abandon(journal, "INV-7", "sent by post", "clerk", force=True).done

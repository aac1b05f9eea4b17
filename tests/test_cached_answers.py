"""An answer meant for another request: a front that answers a send from memory (a caching
proxy, a broken gateway) repeats another invoice's 202. Counted as accepted, that invoice
would never be sent and would read as delivered. Within one run the repeated transaction id
leaves it unknown, replayed under its key; across runs `reconcile` finds the transaction is
another document's and says so."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from hostile import (
    Behaviour,
    HostileServer,
    Request,
    Wire,
    answer_json,
    as_sent,
    handed_on,
    in_turn,
    routes,
)
from journalkit import force
from processkit import run_cli, run_send
from sendkit import assert_each_delivered_once, emulator, states
from ublfactory import write_invoice

from invoicectl.goroute.outcomes import Accepted, KeyReused, Transient
from invoicectl.journal import Journal, open_journal
from invoicectl.journal.records import AttemptAnswer
from invoicectl.locations import Location
from invoicectl.sandbox import BackgroundServer
from invoicectl.scan.ingest import scan_directory
from invoicectl.send.answer_check import SeenTransactions

pytestmark = pytest.mark.slow

QUICK = ("--trust-new-journal", "--no-receiver-check", "--concurrency", "1")


class AnswersFromMemory:
    """Hands the first POST on to the API at ``target``; answers every later POST with that
    first answer, byte for byte, without handing it on. GETs go through."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.remembered: bytes | None = None
        self.lock = threading.Lock()

    def __call__(self, request: Request, wire: Wire) -> None:
        with self.lock:
            if request.method == "POST" and self.remembered is not None:
                wire.write(self.remembered)
                return
            raw = as_sent(handed_on(self.target, request))
            if request.method == "POST":
                self.remembered = raw
            wire.write(raw)


def front(target: str) -> Behaviour:
    return AnswersFromMemory(target)


def test_a_repeated_transaction_id_in_one_run_is_unknown_and_replayed_once(
    outbox: Path, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.db"
    ids = ["M-1", "M-2", "M-3"]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    sandbox = emulator()
    with BackgroundServer(sandbox) as api:
        with HostileServer(front(api.base_url)) as cache:
            run_send(outbox, journal, cache.base_url, *QUICK, "--max-attempts", "2")
        after = states(journal)
        assert sorted(after.values()) == ["accepted", "unknown", "unknown"], after
        assert sandbox.stats()["sends_received"] == 1  # the others never reached it
        with Journal(journal) as opened:
            reasons = [row.reason or "" for row in opened.invoices() if row.state == "unknown"]
        assert all("an answer meant for another request" in reason for reason in reasons)

        args = ("--no-receiver-check", "--allow-environment-change")
        code, output = run_send(outbox, journal, api.base_url, *args)
        assert code == 0, output
        assert set(states(journal).values()) == {"accepted"}
        assert_each_delivered_once(sandbox.stats(), ids)


def test_a_transaction_the_journal_holds_for_another_invoice_is_no_acceptance(
    outbox: Path, tmp_path: Path
) -> None:
    """Across runs: the journal knows whose transaction it is (found by a review)."""
    journal = tmp_path / "journal.db"
    sandbox = emulator()
    with BackgroundServer(sandbox) as api:
        with HostileServer(front(api.base_url)) as cache:
            write_invoice(outbox, "X-1")
            assert run_send(outbox, journal, cache.base_url, *QUICK)[0] == 0
            write_invoice(outbox, "X-2")  # the next run: the cache answers with X-1's 202
            run_send(outbox, journal, cache.base_url, *QUICK, "--max-attempts", "1")
        assert states(journal) == {"X-1": "accepted", "X-2": "unknown"}
        with Journal(journal) as opened:
            assert "which is invoice X-1's" in (opened.invoice("X-2").reason or "")

        args = ("--no-receiver-check", "--allow-environment-change")
        code, output = run_send(outbox, journal, api.base_url, *args)
        assert code == 0, output
        assert_each_delivered_once(sandbox.stats(), ["X-1", "X-2"])


def test_reconcile_makes_an_acceptance_of_another_documents_transaction_unknown(
    tmp_path: Path,
) -> None:
    """Another journal's answer (two profiles, one account, one caching front): this journal
    cannot know the id is taken, and reconcile finds the transaction is another document."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    write_invoice(first, "X-1")
    write_invoice(second, "X-2")
    journal = tmp_path / "second.db"
    sandbox = emulator()
    with BackgroundServer(sandbox) as api:
        with HostileServer(front(api.base_url)) as cache:
            assert run_send(first, tmp_path / "first.db", cache.base_url, *QUICK)[0] == 0
            assert run_send(second, journal, cache.base_url, *QUICK)[0] == 0
        assert states(journal) == {"X-2": "accepted"}  # X-1's 202, X-2 never sent
        assert sandbox.stats()["sends_received"] == 1
        change = "--allow-environment-change"

        code, stdout, stderr = run_cli(
            journal, api.base_url, "reconcile", "--format", "json", change
        )
        assert code == 4, stdout + stderr
        (case,) = json.loads(stdout)["cases"]
        assert case["verdict"] == "different_document" and case["needs_person"] is True
        assert "invoice number: API X-1, journal X-2" in case["detail"]
        assert "whether this invoice reached GoRoute is unknown" in case["action"]
        with Journal(journal) as opened:
            assert opened.invoice("X-2").remote_status is None  # X-1's delivery is not X-2's

        code, stdout, stderr = run_cli(journal, api.base_url, "reconcile", "--apply", change)
        assert "now unknown under its key" in stdout, stdout + stderr
        with Journal(journal) as opened:
            doubted = opened.invoice("X-2")
        assert (doubted.state, doubted.transaction_id, doubted.verdict) == ("unknown", None, None)
        code, output = run_send(second, journal, api.base_url, "--no-receiver-check", change)
        assert code == 0, output  # replayed under its key, inside the window
        assert states(journal) == {"X-2": "accepted"}
        assert_each_delivered_once(sandbox.stats(), ["X-1", "X-2"])
    code, stdout, stderr = run_cli(journal, api.base_url, "verify")
    assert code == 0, stdout + stderr  # the chain holds the doubt and the replay


class PeppolReceiverFront:
    """Passes everything on (found by a review); GET /api/v1/transactions/{id} answers carry
    the receiver as a Peppol participant identifier (scheme iso6523-actorid-upis, value
    "0106:..."), the formal Peppol way of writing the very same participant."""

    def __init__(self, target: str) -> None:
        self.target = target

    def __call__(self, request: Request, wire: Wire) -> None:
        answer = handed_on(self.target, request)
        content = answer.content
        if request.method == "GET" and request.path.startswith("/api/v1/transactions/"):
            data = json.loads(content)
            rec = data.get("receiver")
            if isinstance(rec, dict) and rec.get("scheme"):
                data["receiver"] = {
                    "scheme": "iso6523-actorid-upis",
                    "identifier": f"{rec['scheme']}:{rec['identifier']}",
                    "name": rec.get("name"),
                }
            content = json.dumps(data).encode()
        wire.write(as_sent(answer, content))


def test_doubt_never_undoes_a_real_acceptance_for_a_receiver_written_the_peppol_way(
    outbox: Path, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.db"
    write_invoice(outbox, "P-1")
    sandbox = emulator()
    with BackgroundServer(sandbox) as api:
        assert run_send(outbox, journal, api.base_url, *QUICK)[0] == 0
        assert states(journal) == {"P-1": "accepted"}
        with Journal(journal) as opened:
            before = opened.invoice("P-1")
        with HostileServer(PeppolReceiverFront(api.base_url)) as front:
            code, stdout, stderr = run_cli(
                journal, front.base_url, "reconcile", "--apply", "--allow-environment-change"
            )
        with Journal(journal) as opened:
            after = opened.invoice("P-1")
        assert sandbox.stats()["sends_received"] == 1
        # GoRoute holds P-1 as before.transaction_id: nothing here is another document.
        assert (after.state, after.transaction_id) == ("accepted", before.transaction_id), (
            after.state,
            after.transaction_id,
            after.reason,
            before.receiver,
            before.document_type,
        )
    assert code == 0, stdout + stderr


_KEY_REUSED = {"error_code": "IDEMPOTENCY_KEY_REUSED", "existing_transaction_id": "txn_7"}


@pytest.mark.parametrize("runs", ["one run", "two runs"])
def test_a_202_naming_the_transaction_a_422_gave_another_invoice_is_no_acceptance(
    outbox: Path, tmp_path: Path, runs: str
) -> None:
    """K-1's 422 names txn_7 as what its key carried; K-2's 202 then names txn_7 too: an
    answer meant for another request, in the same run or the next (found by helper-55)."""
    journal = tmp_path / "journal.db"
    posts = in_turn(answer_json(422, _KEY_REUSED), answer_json(202, {"transaction_id": "txn_7"}))
    with HostileServer(routes({("POST", "/api/v1/documents"): posts})) as server:
        write_invoice(outbox, "K-1")
        if runs == "two runs":
            run_send(outbox, journal, server.base_url, *QUICK)
        write_invoice(outbox, "K-2")
        run_send(outbox, journal, server.base_url, *QUICK, "--max-attempts", "1")

    assert states(journal) == {"K-1": "key_reused", "K-2": "unknown"}
    with Journal(journal) as opened:
        assert "which is invoice K-1's" in (opened.invoice("K-2").reason or "")


def test_the_check_remembers_a_bounded_number_of_ids() -> None:
    seen = SeenTransactions(lambda txn, other_than, key: None, remembered=2)
    assert isinstance(seen.checked("A", "invoice-A", Accepted(transaction_id="t1")), Accepted)
    assert isinstance(
        seen.checked("A", "invoice-A", Accepted(transaction_id="t1")), Accepted
    )  # a replay
    repeated = seen.checked("B", "invoice-B", Accepted(transaction_id="t1", http_status=202))
    assert isinstance(repeated, Transient) and repeated.http_status == 202
    assert "which is invoice A's" in repeated.reason
    for number in range(2, 6):
        seen.checked(f"I{number}", f"invoice-I{number}", Accepted(transaction_id=f"t{number}"))
    assert isinstance(
        seen.checked("C", "invoice-C", Accepted(transaction_id="t1")), Accepted
    )  # forgotten


def test_a_refused_answer_leaves_the_journal_holder_named_for_the_next() -> None:
    """The second invoice answered with a transaction the journal holds for INV-1 was told
    it was the first refused one's (a review's hostile server): the wrong invoice named."""
    seen = SeenTransactions(lambda txn, other_than, key: "INV-1" if txn == "t1" else None)
    first = seen.checked("INV-2", "invoice-INV-2", Accepted(transaction_id="t1"))
    second = seen.checked("INV-3", "invoice-INV-3", Accepted(transaction_id="t1"))
    assert isinstance(first, Transient) and isinstance(second, Transient)
    assert (
        "which is invoice INV-1's" in first.reason and "which is invoice INV-1's" in second.reason
    )


def test_the_transaction_a_422_named_for_a_key_is_that_key_s_to_a_request_under_it() -> None:
    """helper-58: invoice "A" at version 2 and invoice "A-v2" share the key invoice-A-v2. A's
    422 named T, the send of that key, which is A-v2's own document: A-v2's replay answered
    with T was refused as "T is invoice A's", on every run, and reconcile could not adopt it.
    A request under another key answered with T is still refused."""
    seen = SeenTransactions(lambda txn, other_than, key: None)
    seen.checked("A", "invoice-A-v2", KeyReused(existing_transaction_id="T", http_status=422))

    replayed = seen.checked("A-v2", "invoice-A-v2", Accepted(transaction_id="T"))
    other = seen.checked("B", "invoice-B", Accepted(transaction_id="T"))

    assert isinstance(replayed, Accepted)
    assert isinstance(other, Transient) and "which is invoice A-v2's" in other.reason


def test_the_journal_names_a_422_s_transaction_another_invoice_s_but_under_its_key(
    journal_at: Location, outbox: Path
) -> None:
    """The journal's side of the same rule (the index of m016), as a send, reconcile's
    adoption and a later run ask it: excused only for the transaction a 422 named to a
    request under that key, as the invoice's attempts record it. helper-59: a transaction
    a history check found for an invoice before its first send is no send of the key it
    got later."""
    write_invoice(outbox, "A")
    write_invoice(outbox, "A-v2")
    with open_journal(journal_at) as journal:
        scan_directory(journal, outbox)
        sha256 = journal.invoice("A").current_sha256
        attempt = journal.begin_attempt(
            journal.begin_run("send", {}),
            "A",
            sha256,
            "invoice-A-v2",
            sha256,
            started_at=journal.now(),
        )
        journal.finish_attempt(
            attempt, AttemptAnswer("key_reused", 422, existing_transaction_id="T")
        )
        force(journal, "A", state="key_reused", idempotency_key="invoice-A-v2",
              existing_transaction_id="T")  # fmt: skip
        force(journal, "A-v2", existing_transaction_id="T-FOUND")  # by a history check

        assert journal.transaction_owner("T", "A-v2", "invoice-A-v2") is None
        assert journal.transaction_owner("T", "B", "invoice-B") == "A"
        assert journal.transaction_owner("T", "B") == "A"
        force(journal, "A-v2", idempotency_key="invoice-A-v2")  # its first send, later
        assert journal.transaction_owner("T-FOUND", "A", "invoice-A-v2") == "A-v2"


def test_a_422_never_takes_a_transaction_from_an_acceptance_not_yet_committed() -> None:
    """helper-59: Z's 202 naming T, not yet in the journal (its commit is grouped), then a
    422 naming T to A under invoice-A-v2: the 422 took T over, and A-v2's 202 naming T
    under the same key was counted as accepted, though GoRoute never had A-v2."""
    seen = SeenTransactions(lambda txn, other_than, key: None)
    assert isinstance(seen.checked("Z", "invoice-Z", Accepted(transaction_id="T")), Accepted)
    seen.checked("A", "invoice-A-v2", KeyReused(existing_transaction_id="T", http_status=422))

    answered = seen.checked("A-v2", "invoice-A-v2", Accepted(transaction_id="T"))

    assert isinstance(answered, Transient) and "which is invoice Z's" in answered.reason

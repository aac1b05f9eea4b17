"""Evidence that GoRoute may hold a delivery already stands, whoever holds the invoice and
whatever verdict comes next (``lifecycle.evidence``), and every operator action meets it.

Each test is a sequence a review found delivering an invoice twice; each counts what the
emulator received.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from backends import lose
from journalkit import force
from sendkit import FAST_RETRY, at, emulator, send, settings_for, states
from ublfactory import write_invoice

from invoicectl.errors import ExitCode, UsageError
from invoicectl.goroute.retry import RetryPolicy
from invoicectl.journal import open_journal
from invoicectl.lifecycle.decisions import check_new_version
from invoicectl.lifecycle.holds import hold, release
from invoicectl.locations import Location
from invoicectl.reconcile.runner import reconcile
from invoicectl.scan.ingest import scan_directory

ONE_TRY = RetryPolicy(max_attempts=1, backoff_initial=0.01, backoff_max=0.02)


@pytest.fixture
def journal_path(journal_at: Location) -> Location:
    return journal_at


def lost_answer(journal_path: Path, outbox: Path, invoice_id: str):
    """A send GoRoute kept whose answer was lost: the invoice is ``unknown``."""
    write_invoice(outbox, invoice_id)
    sandbox = emulator(drop_rate=1.0)
    send(settings_for(journal_path), outbox, sandbox.transport(), policy=ONE_TRY)
    assert states(journal_path) == {invoice_id: "unknown"}
    return sandbox


def sent_earlier_by_another(invoice_id: str):
    """GoRoute holds the invoice from a send three days ago, by something else."""
    sandbox = emulator()
    long_ago = datetime.now(UTC).timestamp() - 3 * 86_400
    sandbox.add_transaction(invoice_id, status="delivered", created_at=long_ago)
    return sandbox


def sent_then_lost_behind_a_capped_list(journal_path: Path, outbox: Path):
    """13 invoices sent, the journal lost a day later, and GoRoute's list answering 7 rows
    whatever the limit, saying nothing of paging."""
    ids = [f"C-{number:02d}" for number in range(13)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id)
    sandbox = emulator(list_paging=False, list_page_cap=7)
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), warn=lambda line: None, trust_new_journal=True)
    assert sandbox.stats()["sends_received"] == 13
    lose(journal_path)
    sandbox.advance_clock(25 * 3600)
    return ids, sandbox, settings


def test_a_verdict_of_sent_earlier_stops_the_replay_without_apply(journal_path: Path, outbox: Path):
    lost_answer(journal_path, outbox, "INV-1")
    sandbox = sent_earlier_by_another("INV-1")
    report = reconcile(settings_for(journal_path), transport=sandbox.transport())  # no --apply
    assert [str(case.verdict) for case in report.cases] == ["unknown_sent_earlier"]

    _, summary = send(settings_for(journal_path), outbox, sandbox.transport(), policy=FAST_RETRY)

    assert sandbox.stats()["sends_received"] == 0  # the window is open, but it is not replayed
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE
    assert states(journal_path) == {"INV-1": "unknown"}


def test_an_operators_hold_does_not_hide_reconciles_evidence(journal_path: Path, outbox: Path):
    lost_answer(journal_path, outbox, "INV-1")
    with open_journal(journal_path) as journal:
        assert hold(journal, "INV-1", "asking the customer", "clerk").done
    sandbox = sent_earlier_by_another("INV-1")
    reconcile(settings_for(journal_path), apply=True, transport=sandbox.transport())

    with open_journal(journal_path) as journal:
        refused = release(journal, "INV-1", "clerk")
        assert not refused.done and "--force" in refused.message
        assert "unknown_sent_earlier" in refused.message
    send(settings_for(journal_path), outbox, sandbox.transport(), policy=FAST_RETRY)
    assert sandbox.stats()["sends_received"] == 0


def test_a_later_verdict_does_not_lift_the_evidence(journal_path: Path, outbox: Path):
    """Held as sent earlier, then the file edited (amended) and reconciled again, then the
    file restored: a plain release is still refused, and the replay never goes out."""
    lost_answer(journal_path, outbox, "INV-1")
    sandbox = sent_earlier_by_another("INV-1")
    settings = settings_for(journal_path)
    reconcile(settings, apply=True, transport=sandbox.transport())
    original = (outbox / "INV-1.xml").read_bytes()
    write_invoice(outbox, "INV-1", amount="999.00")
    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
        assert journal.invoice("INV-1").state == "amended"
    report = reconcile(settings, apply=True, transport=sandbox.transport())
    # The send beneath the edit is judged again (it was unanswered): the same verdict.
    assert [str(case.verdict) for case in report.cases] == ["unknown_sent_earlier"]
    (outbox / "INV-1.xml").write_bytes(original)

    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
        refused = release(journal, "INV-1", "clerk")
    assert not refused.done and "--force" in refused.message
    send(settings, outbox, sandbox.transport(), policy=FAST_RETRY)
    assert sandbox.stats()["sends_received"] == 0


def test_a_force_release_clears_the_evidence_with_an_event(journal_path: Path, outbox: Path):
    lost_answer(journal_path, outbox, "INV-1")
    sandbox = sent_earlier_by_another("INV-1")
    reconcile(settings_for(journal_path), apply=True, transport=sandbox.transport())
    with open_journal(journal_path) as journal:
        assert release(journal, "INV-1", "clerk", force=True).done
        kinds = [event.kind for event in journal.events("INV-1")]
    assert "delivery_evidence" in kinds and kinds[-2:] == ["release", "evidence_dismissed"]
    send(settings_for(journal_path), outbox, sandbox.transport(), policy=FAST_RETRY)
    assert sandbox.stats()["sends_received"] == 1  # replayed under its key: the operator's word


def test_two_transactions_found_by_the_history_check_need_force(journal_path: Path, outbox: Path):
    write_invoice(outbox, "INV-7")
    sandbox = emulator()
    sandbox.add_transaction("INV-7", status="delivered")
    sandbox.add_transaction("INV-7", status="delivered")
    send(settings_for(journal_path), outbox, sandbox.transport(), warn=lambda line: None)

    with open_journal(journal_path) as journal:
        found = journal.invoice("INV-7")
        assert found.hold == "held" and found.existing_transaction_id is None
        assert "release INV-7 --force" in found.hold_reason
        refused = release(journal, "INV-7", "clerk")
    assert not refused.done and "--force" in refused.message
    send(settings_for(journal_path), outbox, sandbox.transport(), warn=lambda line: None)
    assert sandbox.stats()["sends_received"] == 0


@pytest.mark.parametrize("verdict", [None, "unknown_found", "in_progress", "already_sent"])
def test_no_new_version_of_an_unknown_send_until_reconcile_shows_no_delivery(
    journal_path: Path, outbox: Path, verdict: str | None
):
    lost_answer(journal_path, outbox, "INV-1")
    day_later = datetime.now(UTC) + timedelta(hours=25)
    with open_journal(journal_path) as journal:
        if verdict is not None:
            force(journal, "INV-1", verdict=verdict, verdict_at=day_later.isoformat())
        with pytest.raises(UsageError, match="has not shown"):
            check_new_version(journal, "INV-1", day_later)


def test_a_list_capped_below_its_limit_vouches_for_nothing(journal_path: Path, outbox: Path):
    """A lost journal, and a list that answers 7 rows whatever the limit, saying nothing of
    paging: what it did not show is held as not checked, never sent (a review found 6 of
    13 invoices delivered twice when a short page was taken for the list's end)."""
    ids, sandbox, settings = sent_then_lost_behind_a_capped_list(journal_path, outbox)

    warnings: list[str] = []
    later = at(datetime.now(UTC) + timedelta(hours=25))
    send(settings, outbox, sandbox.transport(), warn=warnings.append, clocks=later)

    assert sandbox.stats()["sends_received"] == 13, warnings
    assert "7 already there" in warnings[0] and "6 held as not checked" in warnings[0]


# ---- found by a review of the change above ----------------------------------------------


def test_a_verdict_recorded_before_evidence_was_an_event_still_stands(
    journal_path: Path, outbox: Path
):
    """A journal upgraded with reconcile's unknown_sent_earlier recorded (the verdict, no
    evidence event): the next send replayed it, and a clerk's hold was released plainly."""
    lost_answer(journal_path, outbox, "INV-1")
    sandbox = sent_earlier_by_another("INV-1")
    with open_journal(journal_path) as journal:
        force(journal, "INV-1", verdict="unknown_sent_earlier", verdict_at=journal.now())
    send(settings_for(journal_path), outbox, sandbox.transport(), policy=FAST_RETRY)
    assert sandbox.stats()["sends_received"] == 0
    with open_journal(journal_path) as journal:
        assert hold(journal, "INV-1", "asking", "clerk").done
        refused = release(journal, "INV-1", "clerk")
    assert not refused.done and "--force" in refused.message


def test_a_history_check_hold_from_before_the_events_still_needs_force(
    journal_path: Path, outbox: Path
):
    """An upgraded journal's hold for two transactions found (no id kept): released plainly."""
    write_invoice(outbox, "INV-7")
    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
        reason = "GoRoute already holds 2 transaction(s) with this invoice number, found ..."
        force(journal, "INV-7", hold="held", hold_reason=reason, held_by="history check")
        refused = release(journal, "INV-7", "clerk")
    assert not refused.done and "--force" in refused.message


def test_an_operators_word_lets_an_invoice_found_earlier_go_on(journal_path: Path, outbox: Path):
    """unknown_sent_earlier, then release --force: --new-version was refused for ever, and
    every later reconcile noted the evidence anew over the operator's word."""
    lost_answer(journal_path, outbox, "INV-1")
    sandbox = sent_earlier_by_another("INV-1")
    settings = settings_for(journal_path)
    reconcile(settings, transport=sandbox.transport())  # no --apply: nobody holds it
    day_later = datetime.now(UTC) + timedelta(hours=25)
    with open_journal(journal_path) as journal:
        with pytest.raises(UsageError, match="--force"):
            check_new_version(journal, "INV-1", day_later)
        assert release(journal, "INV-1", "clerk", force=True).done  # not held: the word alone
    reconcile(settings, transport=sandbox.transport())  # the same verdict again
    with open_journal(journal_path) as journal:
        assert journal.events("INV-1")[-1].kind == "evidence_dismissed"
        check_new_version(journal, "INV-1", day_later)  # the operator's decision, allowed


def test_an_invoice_held_by_hand_that_the_check_could_not_vouch_for_needs_force(
    journal_path: Path, outbox: Path
):
    """A lost journal, every invoice held by a clerk, a list capped at 7: the six the search
    did not reach were released plainly and sent again."""
    ids, sandbox, settings = sent_then_lost_behind_a_capped_list(journal_path, outbox)
    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
        for invoice_id in ids:
            assert hold(journal, invoice_id, "month end", "clerk").done
    later = at(datetime.now(UTC) + timedelta(hours=25))
    send(settings, outbox, sandbox.transport(), warn=lambda line: None, clocks=later)
    with open_journal(journal_path) as journal:
        released = [release(journal, invoice_id, "clerk").done for invoice_id in ids]
    assert released == [False] * 13
    send(settings, outbox, sandbox.transport(), warn=lambda line: None, clocks=later)
    assert sandbox.stats()["sends_received"] == 13


def _edited_after_a_lost_answer(journal_path: Location, outbox: Path, invoice_id: str):
    """A send GoRoute kept, its answer lost, then the file changed: ``amended`` over
    ``unknown``, the key first used two days ago (its window closed)."""
    sandbox = lost_answer(journal_path, outbox, invoice_id)
    write_invoice(outbox, invoice_id, amount="999.00")
    two_days_ago = (datetime.now(UTC) - timedelta(days=2)).isoformat()
    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
        force(journal, invoice_id, key_first_used_at=two_days_ago)
        invoice = journal.invoice(invoice_id)
        assert invoice is not None
        assert (invoice.state, invoice.state_before_amend) == ("amended", "unknown")
    return sandbox


def test_an_edit_is_no_way_round_the_verdict_on_the_send_beneath(
    journal_path: Location, outbox: Path
):
    """Reconcile looks up the send beneath an amended invoice; found, nothing is adopted and
    a new version stays refused: it would be the invoice's second delivery."""
    sandbox = _edited_after_a_lost_answer(journal_path, outbox, "E-1")
    later = datetime.now(UTC)
    with open_journal(journal_path) as journal, pytest.raises(UsageError, match="amended over"):
        check_new_version(journal, "E-1", later)

    report = reconcile(settings_for(journal_path), apply=True, transport=sandbox.transport())

    (case,) = report.cases
    assert case.verdict.value == "unknown_found" and report.applied == ()
    assert "would deliver E-1 twice" in case.action
    assert states(journal_path) == {"E-1": "amended"}
    with open_journal(journal_path) as journal, pytest.raises(UsageError, match="amended over"):
        check_new_version(journal, "E-1", later)
    assert sandbox.stats()["per_invoice"] == {"E-1": 1}


def test_a_new_version_follows_a_verdict_that_the_send_beneath_delivered_nothing(
    journal_path: Location, outbox: Path
):
    _edited_after_a_lost_answer(journal_path, outbox, "E-2")
    empty = emulator()  # GoRoute holds nothing of it

    report = reconcile(settings_for(journal_path), transport=empty.transport())

    (case,) = report.cases
    assert case.verdict.value == "unknown_not_found_window_closed"
    assert "--new-version E-2" in case.action
    with open_journal(journal_path) as journal:
        assert check_new_version(journal, "E-2", datetime.now(UTC)).state == "amended"


def test_a_number_corrected_in_its_file_is_sent_once(journal_path: Location, outbox: Path):
    """Scanned (or a dry run) under a mistyped number, corrected in the same file, then
    sent: the invoice goes out once, under the corrected number; the other waits for a
    person (exit 4)."""
    write_invoice(outbox, "TYPO-1O0", name="a.xml")
    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
    write_invoice(outbox, "TYPO-100", name="a.xml")
    sandbox = emulator()

    _, summary = send(settings_for(journal_path), outbox, sandbox.transport())

    assert sandbox.stats()["per_invoice"] == {"TYPO-100": 1}
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE
    assert states(journal_path) == {"TYPO-1O0": "pending", "TYPO-100": "accepted"}


def test_a_corrected_number_released_is_sent_not_held_again(journal_path: Location, outbox: Path):
    """`release` of the mistyped number's hold is the operator's word to send both: the next
    send's scan, which still finds the file renumbered, does not hold it again, and each
    number goes out once. Renumbered once more, the file is a new replacement: held again."""
    write_invoice(outbox, "TYPO-1O0", name="a.xml")
    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
    write_invoice(outbox, "TYPO-100", name="a.xml")
    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
        assert release(journal, "TYPO-1O0", by="clerk").done
        write_invoice(outbox, "TYPO-101", name="a.xml")
        scan_directory(journal, outbox)
        assert journal.invoice("TYPO-1O0").hold == "held"  # type: ignore[union-attr]
        assert release(journal, "TYPO-1O0", by="clerk").done
    sandbox = emulator()

    _, summary = send(settings_for(journal_path), outbox, sandbox.transport())

    assert sandbox.stats()["per_invoice"] == {"TYPO-101": 1, "TYPO-1O0": 1}
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE  # TYPO-100, replaced in turn: held
    with open_journal(journal_path) as journal:
        assert journal.invoice("TYPO-100").hold == "held"  # type: ignore[union-attr]


@pytest.mark.parametrize("damage", ["row deleted", "row edited to pending"])
def test_a_row_that_forgot_its_send_is_held_not_sent_again(
    journal_path: Location, outbox: Path, damage: str
):
    """The invoice's row lost (and its file scanned in again) or edited back to a fresh
    pending one, while its accepted attempt is still in the journal: held for reconcile,
    never sent again, and reconcile adopts the transaction the attempt names."""
    write_invoice(outbox, "R-1")
    sandbox = emulator()
    send(settings_for(journal_path), outbox, sandbox.transport())
    with open_journal(journal_path) as journal:
        if damage == "row deleted":
            journal.db.execute("DELETE FROM invoices WHERE invoice_id = 'R-1'")
        else:
            journal.db.execute(
                "UPDATE invoices SET state = 'pending', idempotency_key = NULL,"
                " key_sha256 = NULL, key_first_used_at = NULL, transaction_id = NULL"
                " WHERE invoice_id = 'R-1'"
            )
        journal.db.execute("SELECT 1")  # committed: each statement is its own transaction

    _, summary = send(settings_for(journal_path), outbox, sandbox.transport())

    assert sandbox.stats()["per_invoice"] == {"R-1": 1}
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE
    with open_journal(journal_path) as journal:
        held = journal.invoice("R-1")
        assert held is not None and (held.state, held.hold) == ("pending", "held")
    report = reconcile(settings_for(journal_path), apply=True, transport=sandbox.transport())
    (case,) = report.cases  # judged by the transaction the attempt names: this invoice's
    assert case.verdict.value in ("already_sent", "in_progress"), case
    assert sandbox.stats()["per_invoice"] == {"R-1": 1}


def test_a_second_account_on_the_same_outbox_never_sends_what_the_first_did(
    tmp_path: Path, outbox: Path
):
    """Two profiles without a sender on one outbox, one GoRoute: the second holds what the
    first journal sent from it, instead of delivering every invoice once more."""
    from dataclasses import replace as replaced

    for invoice_id in ("S-1", "S-2"):
        write_invoice(outbox, invoice_id)
    sandbox = emulator()
    first = replaced(settings_for(tmp_path / "a.db"), profile="a")
    send(first, outbox, sandbox.transport())
    write_invoice(outbox, "S-3")  # new since: the second account sends it
    second = replaced(settings_for(tmp_path / "b.db"), profile="b")

    _, summary = send(second, outbox, sandbox.transport(), trust_new_journal=True)

    assert sandbox.stats()["per_invoice"] == {"S-1": 1, "S-2": 1, "S-3": 1}
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE
    with open_journal(tmp_path / "b.db") as journal:
        held = {i.invoice_id for i in journal.invoices() if i.hold is not None}
        assert held == {"S-1", "S-2"}
        assert "another account" in (journal.invoice("S-1").hold_reason or "")  # type: ignore[union-attr]


def test_a_pending_invoice_whose_key_carried_a_request_counts_as_unanswered(
    journal_path: Location, outbox: Path
):
    """A run killed before its answer was recorded leaves the invoice pending under a used
    key: the next send replays it, so the count says so, not "waiting to be sent"."""
    from invoicectl.lifecycle.plan import attention_causes

    write_invoice(outbox, "K-1")
    write_invoice(outbox, "K-2")
    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
        now = datetime.now(UTC)
        force(journal, "K-1", idempotency_key="invoice-K-1", key_first_used_at=now.isoformat())
        texts = [cause.text for cause in attention_causes(journal, now)]
    assert texts == ["1 waiting to be sent", "1 unanswered, replayed by the next send"]


def test_the_operators_force_release_of_a_contradicted_row_stands(
    journal_path: Location, outbox: Path
):
    """A request never answered, then the row edited back to a fresh pending one: held,
    with `release --force` named as the way out (there is no transaction for reconcile to
    look up), and once the operator gives that word the next send does not hold it again."""
    sandbox = lost_answer(journal_path, outbox, "U-1")
    with open_journal(journal_path) as journal:
        force(journal, "U-1", state="pending", idempotency_key=None, key_sha256=None,
              key_first_used_at=None)  # fmt: skip

    _, summary = send(settings_for(journal_path), outbox, sandbox.transport(), policy=ONE_TRY)
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE
    with open_journal(journal_path) as journal:
        held = journal.invoice("U-1")
        assert held is not None and "`invoicectl release U-1 --force`" in (held.hold_reason or "")
        assert release(journal, "U-1", "clerk", force=True).done

    answering = emulator()  # the operator's word: GoRoute holds no delivery of it
    _, summary = send(settings_for(journal_path), outbox, answering.transport(), policy=ONE_TRY)

    assert summary.exit_code == ExitCode.OK, summary
    assert states(journal_path) == {"U-1": "accepted"}


def test_the_operators_force_release_of_another_accounts_invoice_stands(
    tmp_path: Path, outbox: Path
):
    """Held because another profile's journal sent it from this outbox: the operator's
    `release --force` (that send was no delivery of it) lets the next send take it."""
    from dataclasses import replace as replaced

    write_invoice(outbox, "S-1")
    sandbox = emulator()
    send(replaced(settings_for(tmp_path / "a.db"), profile="a"), outbox, sandbox.transport())
    second = replaced(settings_for(tmp_path / "b.db"), profile="b")
    send(second, outbox, sandbox.transport(), trust_new_journal=True)
    with open_journal(tmp_path / "b.db") as journal:
        assert release(journal, "S-1", "clerk", force=True).done

    _, summary = send(second, outbox, sandbox.transport())

    assert summary.exit_code == ExitCode.OK, summary
    assert states(tmp_path / "b.db") == {"S-1": "accepted"}


def test_an_edit_of_an_accepted_invoice_is_no_way_to_send_it_again(
    journal_path: Location, outbox: Path
):
    """Accepted and delivered, then its file edited: amended over accepted, and a new version
    stays refused until GoRoute says the delivery failed; the edit is no way round it."""
    write_invoice(outbox, "H-1")
    sandbox = emulator()
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport())
    write_invoice(outbox, "H-1", note="corrected by hand")

    send(settings, outbox, sandbox.transport())
    assert states(journal_path) == {"H-1": "amended"}
    with pytest.raises(UsageError, match="accepted"):
        send(settings, outbox, sandbox.transport(), new_versions=("H-1",))
    (case,) = reconcile(settings, transport=sandbox.transport()).cases
    assert "credit note" in case.action and "only once its delivery failed" in case.action
    with open_journal(journal_path) as journal:
        force(journal, "H-1", remote_status="in_transit")
        with pytest.raises(UsageError, match="in_transit, not failed"):
            check_new_version(journal, "H-1", datetime.now(UTC))
        force(journal, "H-1", remote_status="failed")
        assert check_new_version(journal, "H-1", datetime.now(UTC)).state == "amended"
    assert sandbox.stats()["per_invoice"] == {"H-1": 1}


def test_another_version_at_goroute_is_a_delivery_whichever_journal_asks(tmp_path: Path):
    """Sent and accepted from one journal, its file edited, then a new journal: its history
    check holds the invoice, and reconcile finds GoRoute's transaction is this invoice in
    other content. That is a delivery of it: the evidence stands, a plain release and a new
    version are refused, and nothing is sent twice."""
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    write_invoice(outbox, "E-1")
    sandbox = emulator()
    send(settings_for(tmp_path / "first.db"), outbox, sandbox.transport())
    write_invoice(outbox, "E-1", note="edited after it was sent")
    second = settings_for(tmp_path / "second.db")
    send(second, outbox, sandbox.transport(), warn=lambda line: None)

    report = reconcile(second, apply=True, transport=sandbox.transport())

    (case,) = report.cases
    assert case.verdict.value == "other_version" and case.needs_person
    assert "would deliver E-1 twice" in case.action
    with open_journal(tmp_path / "second.db") as journal:
        refused = release(journal, "E-1", by="test")
        assert not refused.done and "`release --force` only once" in refused.message
        with pytest.raises(UsageError, match="is held"):
            check_new_version(journal, "E-1", datetime.now(UTC) + timedelta(days=2))
        invoice = journal.invoice("E-1")
        assert invoice is not None and invoice.hold == "held"
    send(second, outbox, sandbox.transport(), warn=lambda line: None)
    assert sandbox.stats()["per_invoice"] == {"E-1": 1}


def test_another_version_found_in_the_list_is_looked_at_in_full_before_anything_is_adopted(
    journal_path: Location, outbox: Path
):
    """An unanswered send that never reached GoRoute, which holds another version of the
    invoice: the list's row carries no content hash, so it was adopted as this send; the next
    reconcile found the content differ, made it unknown again, and send replayed it, a second
    delivery. Its own GET is read first now: another version, held, never sent."""
    write_invoice(outbox, "U-1")
    settings = settings_for(journal_path)
    send(settings, outbox, emulator(drop_rate=1.0).transport(), policy=ONE_TRY)
    assert states(journal_path) == {"U-1": "unknown"}
    goroute = emulator()
    goroute.add_transaction("U-1", metadata={"sha256": "c" * 64})

    for _ in range(2):
        report = reconcile(settings, apply=True, transport=goroute.transport())
        (case,) = report.cases
        assert case.verdict.value == "other_version" and report.applied == ()
    send(settings, outbox, goroute.transport())

    assert states(journal_path) == {"U-1": "unknown"}
    assert goroute.stats()["per_invoice"] == {"U-1": 1}


class DetailsFail(httpx.AsyncBaseTransport):
    """The emulator, except that every transaction's own GET answers ``status``."""

    def __init__(self, inner: httpx.AsyncBaseTransport, status: int) -> None:
        self.inner, self.status = inner, status

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path.startswith("/api/v1/transactions/"):
            return httpx.Response(self.status, json={"error": {"message": "not now"}})
        return await self.inner.handle_async_request(request)


@pytest.mark.parametrize("status", [503, 404])
def test_a_match_in_the_list_whose_own_get_fails_is_not_adopted(
    journal_path: Location, outbox: Path, status: int
):
    """The list row of a match carries no content hash; when its own GET gives no answer
    (a 5xx, or a 404 against the list), what it holds is unknown: the lookup failed, and
    `--apply` adopts nothing. It once fell back to the list row and adopted another version."""
    write_invoice(outbox, "U-1")
    settings = settings_for(journal_path)
    send(settings, outbox, emulator(drop_rate=1.0).transport(), policy=ONE_TRY)
    goroute = emulator()
    goroute.add_transaction("U-1", metadata={"sha256": "c" * 64})

    once = settings_for(journal_path, max_attempts=1)
    report = reconcile(once, apply=True, transport=DetailsFail(goroute.transport(), status))

    (case,) = report.cases
    assert (case.verdict.value, report.applied) == ("lookup_failed", ())
    assert states(journal_path) == {"U-1": "unknown"}


def test_an_accepted_invoice_whose_transaction_is_another_version_is_never_replayed(
    journal_path: Location, outbox: Path
):
    """Accepted as a transaction that holds another version of it (an answer meant for an
    earlier send): that is a delivery of the invoice. `--apply` makes it unknown, so that its
    row claims nothing, and holds it, its evidence standing: no send replays it."""
    write_invoice(outbox, "V-1")
    goroute = emulator()
    other = goroute.add_transaction("V-1", metadata={"sha256": "d" * 64}, status="delivered").id
    settings = settings_for(journal_path)
    send(settings, outbox, emulator().transport(), trust_new_journal=True)
    with open_journal(journal_path) as journal:
        force(journal, "V-1", transaction_id=other)

    report = reconcile(settings, apply=True, transport=goroute.transport())

    (case,) = report.cases
    assert case.verdict.value == "other_version" and "credit note" in case.action
    with open_journal(journal_path) as journal:
        row = journal.invoice("V-1")
        assert row is not None and (row.state, row.hold) == ("unknown", "held")
        assert not release(journal, "V-1", by="test").done
    send(settings, outbox, goroute.transport())
    assert goroute.stats()["per_invoice"] == {"V-1": 1}

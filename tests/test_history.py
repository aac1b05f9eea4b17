"""A journal that lost its history never resends the outbox blind (issue 11, item 9).

Each loss is reproduced as an operator would cause it (the journal truncated to 0 bytes, its
directory removed, an older backup restored; the -wal deleted after a kill -9 is in
``test_history_processes.py``), then the next send runs 25 hours later, when GoRoute's key
window has closed and a resend would deliver a second copy.
"""

from __future__ import annotations

import shutil
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from backends import cli_journal, lose, restore, snapshot
from hostile import HostileServer, answer, answer_json, routes
from sendkit import assert_each_delivered_once, at, emulator, send, settings_for, states
from ublfactory import write_invoice

from invoicectl.errors import CredentialsRefused, ExitCode
from invoicectl.journal import open_journal
from invoicectl.journal.records import Hold, InvoiceState
from invoicectl.lifecycle.holds import abandon, hold, release
from invoicectl.lifecycle.plan import attention
from invoicectl.locations import Location
from invoicectl.reconcile.runner import reconcile
from invoicectl.scan.ingest import scan_directory
from invoicectl.send.history import HELD_BY, HistoryUnchecked
from invoicectl.send.history_loss import note_loss, still_as_read
from invoicectl.send.marker import MARKER_NAME, journal_marker


@pytest.fixture
def journal_path(journal_at: Location) -> Location:
    return journal_at


def outbox_of(outbox: Path, prefix: str, count: int, **kwargs: object) -> list[str]:
    ids = [f"{prefix}-{number:03d}" for number in range(count)]
    for invoice_id in ids:
        write_invoice(outbox, invoice_id, **kwargs)
    return ids


class Counting(httpx.AsyncBaseTransport):
    """The emulator's transport, noting each request's method and path on the way."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.requests: list[tuple[str, str]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append((request.method, request.url.path))
        return await self.inner.handle_async_request(request)

    def lists(self) -> int:
        return self.requests.count(("GET", "/api/v1/transactions"))


def day_later():
    return at(datetime.now(UTC) + timedelta(hours=25))


def assert_held_as_found(journal_path: Path, ids: list[str], sandbox) -> None:
    with open_journal(journal_path) as journal:
        for invoice_id in ids:
            invoice = journal.invoice(invoice_id)
            assert invoice is not None
            assert (invoice.state, invoice.hold, invoice.held_by) == (
                InvoiceState.pending,
                Hold.held,
                HELD_BY,
            )
            assert "GoRoute already holds transaction" in (invoice.hold_reason or "")
            found = sandbox.transaction(invoice.existing_transaction_id)
            assert found is not None and found.document_id == invoice_id


def test_a_journal_truncated_to_0_bytes_holds_what_goroute_holds_and_sends_the_rest(
    outbox: Path, journal_path: Path
):
    sent = outbox_of(outbox, "T", 30)
    sandbox = emulator()
    settings = settings_for(journal_path)
    warnings: list[str] = []
    send(settings, outbox, sandbox.transport(), warn=warnings.append)
    assert len(warnings) == 1 and "has never sent to" in warnings[0]
    assert "0 already there" in warnings[0] and "30 to send" in warnings[0]
    new = outbox_of(outbox, "N", 5)

    lose(journal_path, truncate=True)  # truncated: SQLite opens it as a new, empty database
    sandbox.advance_clock(25 * 3600)
    warnings.clear()
    later = day_later()
    _, summary = send(settings, outbox, sandbox.transport(), warn=warnings.append, clocks=later)

    assert_each_delivered_once(sandbox.stats(), sent + new)
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE  # the held ones ask for reconcile
    assert_held_as_found(journal_path, sent, sandbox)
    assert {states(journal_path)[i] for i in new} == {"accepted"}
    (line,) = warnings
    assert line.startswith("invoicectl: WARNING: the journal ")
    assert f"is not the one {outbox} was last sent from" in line
    assert "30 already there, held for `invoicectl reconcile`; 5 to send" in line
    # And the run's document names them (`send --json`: held_for_reconcile was empty).
    assert sorted(summary.to_dict()["held_for_reconcile"]) == sorted(sent)

    # reconcile judges each against the transaction found, and --apply adopts it.
    fast = settings_for(journal_path, rate=60_000)
    report = reconcile(fast, apply=True, transport=sandbox.transport(), clocks=later)
    assert set(report.applied) == set(sent)
    assert set(states(journal_path).values()) == {"accepted"}
    assert_each_delivered_once(sandbox.stats(), sent + new)


def test_a_removed_journal_directory_is_detected_and_checked(outbox: Path, tmp_path: Path):
    journal_path = tmp_path / "var" / "invoicectl" / "journal.db"
    sent = outbox_of(outbox, "D", 12)
    sandbox = emulator()
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), warn=lambda line: None)

    shutil.rmtree(journal_path.parent)
    sandbox.advance_clock(25 * 3600)
    warnings: list[str] = []
    send(
        settings,
        outbox,
        sandbox.transport(),
        warn=warnings.append,
        clocks=day_later(),
    )

    assert_each_delivered_once(sandbox.stats(), sent)
    assert_held_as_found(journal_path, sent, sandbox)
    assert "is not the one" in warnings[0] and "12 already there" in warnings[0]


def test_a_restored_older_backup_checks_the_runs_it_lost(outbox: Path, journal_path: Path):
    """The same journal, rolled back: its id matches the marker, the marker's run is gone."""
    first = outbox_of(outbox, "B", 5)
    sandbox = emulator()
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), warn=lambda line: None)
    copy = snapshot(journal_path, "backup")
    second = outbox_of(outbox, "C", 7)
    send(settings, outbox, sandbox.transport(), warn=lambda line: None)

    restore(journal_path, copy)  # restored: the second run is not in it
    sandbox.advance_clock(25 * 3600)
    warnings: list[str] = []
    send(
        settings,
        outbox,
        sandbox.transport(),
        warn=warnings.append,
        clocks=day_later(),
    )

    assert_each_delivered_once(sandbox.stats(), first + second)
    assert_held_as_found(journal_path, second, sandbox)
    (line,) = warnings
    assert "has lost history" in line and "which it no longer holds" in line
    assert "7 already there" in line


def test_a_restored_backup_checks_what_a_send_of_another_outbox_sent_since(
    tmp_path: Path, journal_at: Location
):
    """helper-92: a send of outbox B sends every pending invoice of the journal, A's held
    one released since the backup among them; its marker went to B alone. The older backup
    restored, A's marker agreed with it, sends of A kept the journal from a long silence, and
    one after the key's window delivered that invoice a second time. The journal's own marker
    tells: beside a SQLite journal, and in this host's state directory for a PostgreSQL
    database (restored from an older dump, it had no marker at all)."""
    journal_path = journal_at
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    ids = outbox_of(first, "XOA", 3)
    sandbox = emulator()
    settings = settings_for(journal_path)
    with open_journal(journal_path) as journal:
        scan_directory(journal, first)
        assert hold(journal, ids[2], "customer asked to wait", by="clerk").done
    send(settings, first, sandbox.transport(), warn=lambda line: None)
    copy = snapshot(journal_path, "backup")
    with open_journal(journal_path) as journal:
        assert release(journal, ids[2], by="clerk").done
    outbox_of(second, "XOB", 1)
    send(settings, second, sandbox.transport(), warn=lambda line: None)  # XOA-002 goes too

    restore(journal_path, copy)
    warnings: list[str] = []
    for hours in (1, 13, 25):  # no silence of a day: each send reads a marker that agrees
        sandbox.advance_clock(3600 * (hours - sandbox_hours(hours)))
        later = datetime.now(UTC) + timedelta(hours=hours)
        write_invoice(first, f"XON-{hours}")
        if hours == 25:  # the hold the backup restored, released: refused once found
            with open_journal(journal_path, clock=lambda at=later: at) as journal:
                released = release(journal, ids[2], by="clerk")
        send(settings, first, sandbox.transport(), warn=warnings.append, clocks=at(later))

    assert_each_delivered_once(sandbox.stats(), [*ids, "XOB-000", "XON-1", "XON-13", "XON-25"])
    assert not released.done and "GoRoute already holds transaction" in released.message
    assert f"its marker {journal_marker(journal_path)[0]} says it sent in run" in warnings[0]


@pytest.mark.parametrize(
    "issued", [None, 10, 3, "basic"], ids=["dated", "pre-dated 10 days", "pre-dated 3", "basic"]
)
def test_an_invoice_the_restored_journal_never_knew_is_checked_when_first_met(
    tmp_path: Path, issued: int | str | None
):
    """helper-94: the loss was found by the first send after the restore, of outbox B, whose
    check covered what the restored journal held; XOA-NEW, scanned from A after the backup
    and sent by a run of B, was unknown to it, and a send of A a day later delivered it a
    second time. For a while after a loss, an invoice issued by then (or pre-dated, or dated
    in a form not read: helper-95) is checked when first met."""
    today = datetime.now(UTC).date()
    date: dict[str, str] = {}
    if issued == "basic":
        date = {"issue_date": today.strftime("%Y%m%d")}
    elif isinstance(issued, int):
        date = {"issue_date": (today + timedelta(days=issued)).isoformat()}
    journal_path = tmp_path / "journal.db"
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    sandbox = emulator()
    settings = settings_for(journal_path)
    outbox_of(first, "XOA", 2)
    send(settings, first, sandbox.transport(), warn=lambda line: None)
    copy = snapshot(journal_path, "backup")
    write_invoice(first, "XOA-NEW", **date)
    with open_journal(journal_path) as journal:
        scan_directory(journal, first)  # `invoicectl scan a`, or a dry run
    outbox_of(second, "XOB", 1)
    send(settings, second, sandbox.transport(), warn=lambda line: None)  # XOA-NEW goes too

    restore(journal_path, copy)
    warnings: list[str] = []
    found_on: list[date] = []
    for hours, outbox in ((1, second), (13, second), (25, first)):
        sandbox.advance_clock(3600 * (hours - sandbox_hours(hours)))
        later = datetime.now(UTC) + timedelta(hours=hours)
        found_on.append(later.date())  # the first send's finds the loss
        write_invoice(outbox, f"XON-{hours}", issue_date=later.date().isoformat())
        send(settings, outbox, sandbox.transport(), warn=warnings.append, clocks=at(later))

    ids = ["XOA-000", "XOA-001", "XOA-NEW", "XOB-000", "XON-1", "XON-13", "XON-25"]
    assert_each_delivered_once(sandbox.stats(), ids)
    assert_held_as_found(journal_path, ["XOA-NEW"], sandbox)
    late = [line for line in warnings if "were first met since" in line]
    assert any("XOA-NEW" in line and "a lost run may have sent them" in line for line in late)
    assert f"lost history (found on {found_on[0].isoformat()})" in late[0]


def test_an_invoice_released_with_force_after_the_late_check_is_not_checked_again(
    tmp_path: Path,
):
    """helper-95: the operator's `release --force` of an invoice the late check held was
    overruled by every later send for 90 days: a list search, held again, "first met since"."""
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    journal_path = tmp_path / "journal.db"
    sandbox = emulator()
    settings = settings_for(journal_path)
    outbox_of(outbox, "R", 1)
    send(settings, outbox, sandbox.transport(), warn=lambda line: None)
    with open_journal(journal_path) as journal:  # a loss found and checked today
        note_loss(journal, settings.base_url, 1)
    write_invoice(outbox, "R-LATE")  # issued before: first met after the loss
    sandbox.add_transaction("R-LATE", status="delivered")
    send(settings, outbox, sandbox.transport(), warn=lambda line: None)
    assert_held_as_found(journal_path, ["R-LATE"], sandbox)
    with open_journal(journal_path) as journal:
        assert release(journal, "R-LATE", by="clerk", force=True).done
    counting = Counting(sandbox.transport())
    warnings: list[str] = []

    send(settings, outbox, counting, warn=warnings.append)

    assert counting.lists() == 0 and not [line for line in warnings if "first met" in line]
    assert states(journal_path)["R-LATE"] == "accepted"  # the operator's word: sent


def sandbox_hours(hours: int) -> int:
    """The emulator's clock before the send at ``hours``: that of the send before it."""
    return {1: 0, 13: 1, 25: 13}[hours]


class BackupMidRun(httpx.AsyncBaseTransport):
    """The emulator's transport; a backup of the journal is taken as the ``after``-th send
    is answered, while the run goes on (as a cron backup beside a running send)."""

    def __init__(self, inner: httpx.AsyncBaseTransport, journal: Path, after: int) -> None:
        self.inner, self.journal, self.after = inner, journal, after
        self.sends = 0
        self.copy: Path | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.method == "POST" and request.url.path == "/api/v1/documents":
            self.sends += 1
            if self.sends == self.after:
                self.copy = snapshot(self.journal, "backup")
        return response


def test_a_backup_taken_during_a_send_and_restored_checks_what_that_run_sent_after_it(
    outbox: Path, journal_path: Location
):
    """The restored journal holds the marker's run, begun at the same moment: only the
    marker's count of that run's durable attempts tells that the journal lost its end."""
    if not isinstance(journal_path, Path):
        pytest.skip("`invoicectl backup` copies a SQLite journal")
    ids = outbox_of(outbox, "M", 8)
    sandbox = emulator()
    settings = settings_for(journal_path)
    backing_up = BackupMidRun(sandbox.transport(), journal_path, after=3)
    send(settings, outbox, backing_up, concurrency=1, warn=lambda line: None, order="scan")
    assert backing_up.copy is not None and set(states(journal_path).values()) == {"accepted"}

    restore(journal_path, backing_up.copy)
    sandbox.advance_clock(25 * 3600)
    warnings: list[str] = []
    send(settings, outbox, sandbox.transport(), warn=warnings.append, clocks=day_later())

    assert_each_delivered_once(sandbox.stats(), ids)
    restored = states(journal_path)
    lost = [invoice_id for invoice_id in ids if restored[invoice_id] == "pending"]
    assert len(lost) >= 4  # sent after the backup: pending in it, now held as found
    assert_held_as_found(journal_path, lost, sandbox)
    (line,) = warnings
    assert "has lost history" in line and "whose requests it holds only up to attempt" in line


class EmptyFirstPage(httpx.AsyncBaseTransport):
    """The emulator's transport, whose transactions list starts with an empty page that says
    more follows (a server filtering a page down to nothing), then pages as the emulator does."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if request.method == "GET" and url.path == "/api/v1/transactions":
            if "cursor" not in url.params:
                page = {"transactions": [], "has_more": True, "next_cursor": "after-empty"}
                return httpx.Response(200, json=page)
            if url.params["cursor"] == "after-empty":
                request.url = url.copy_remove_param("cursor")
        return await self.inner.handle_async_request(request)


def test_an_empty_page_that_says_more_follows_is_not_the_end_of_the_list(
    outbox: Path, journal_path: Path
):
    ids = outbox_of(outbox, "E", 3)
    sandbox = emulator()
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), warn=lambda line: None)
    lose(journal_path)
    sandbox.advance_clock(25 * 3600)
    warnings: list[str] = []

    send(
        settings,
        outbox,
        EmptyFirstPage(sandbox.transport()),
        warn=warnings.append,
        clocks=day_later(),
    )

    assert_each_delivered_once(sandbox.stats(), ids)
    assert_held_as_found(journal_path, ids, sandbox)
    assert "3 already there" in warnings[0]


def test_the_check_is_made_once_and_never_on_a_journal_with_history(
    outbox: Path, journal_path: Path
):
    outbox_of(outbox, "H", 3)
    transport = Counting(emulator().transport())
    settings = settings_for(journal_path)
    warnings: list[str] = []
    send(settings, outbox, transport, warn=warnings.append)
    assert transport.lists() == 1 and len(warnings) == 1

    for run in range(3):
        outbox_of(outbox, f"M{run}", 2)
        send(settings, outbox, transport, warn=warnings.append)

    assert transport.lists() == 1
    assert len(warnings) == 1
    assert set(states(journal_path).values()) == {"accepted"}


def test_a_checked_journal_that_held_everything_is_not_checked_again(
    outbox: Path, journal_path: Path
):
    """No request recorded (everything was found and held), yet the check was made."""
    ids = outbox_of(outbox, "A", 2)
    sandbox = emulator()
    for invoice_id in ids:
        sandbox.add_transaction(invoice_id)
    transport = Counting(sandbox.transport())
    settings = settings_for(journal_path)
    send(settings, outbox, transport, warn=lambda line: None)
    send(settings, outbox, transport, warn=lambda line: None)

    assert transport.lists() == 1
    assert ("POST", "/api/v1/documents") not in transport.requests


@pytest.mark.parametrize(
    ("status", "code"), [(503, ExitCode.INCOMPLETE), (400, ExitCode.COULD_NOT_RUN)]
)
def test_when_goroute_cannot_be_asked_nothing_is_sent_unless_trusted(
    outbox: Path, journal_path: Path, status: int, code: ExitCode
):
    (invoice_id,) = outbox_of(outbox, "U", 1)
    error = {"error": {"code": "DOWN", "message": "no list today"}}
    server = routes(
        {
            ("GET", "/api/v1/transactions"): answer_json(status, error),
            ("POST", "/api/v1/documents"): answer_json(202, {"transaction_id": "tx-1"}),
        }
    )
    with HostileServer(server) as hostile:
        settings = settings_for(journal_path, base_url=hostile.base_url)
        from sendkit import FAST_RETRY

        quick = type(FAST_RETRY)(max_attempts=2, backoff_initial=0.01, backoff_max=0.02)
        with pytest.raises(HistoryUnchecked) as refused:
            send(settings, outbox, None, policy=quick, check_receivers=False)
        assert refused.value.exit_code == code
        message = str(refused.value)
        assert "has never sent to" in message and "Nothing was sent" in message
        assert "--trust-new-journal" in message and "\n" not in message
        assert not any(r.method == "POST" for r in hostile.requests)
        with open_journal(journal_path) as journal:
            invoice = journal.invoice(invoice_id)
            assert invoice is not None and invoice.hold is None
            assert invoice.state is InvoiceState.pending
            assert not journal.history_checked(settings.base_url)

        warnings: list[str] = []
        _, summary = send(
            settings,
            outbox,
            None,
            policy=quick,
            check_receivers=False,
            trust_new_journal=True,
            warn=warnings.append,
        )

    assert summary.exit_code == ExitCode.OK
    assert states(journal_path) == {invoice_id: "accepted"}
    assert "--trust-new-journal: sending 1 invoices without checking" in warnings[0]


def api_without_a_list(accepted: list[str]) -> HostileServer:
    """An API (an emulator, a gateway) with documents and a health check but no list."""
    missing = {"error": {"code": "NOT_FOUND", "message": "no such route"}}

    def accept(request, wire):  # type: ignore[no-untyped-def]
        accepted.append(request.headers["idempotency-key"])
        answer_json(202, {"transaction_id": f"tx-{len(accepted)}"})(request, wire)

    return HostileServer(
        routes(
            {
                ("GET", "/peppol/version"): answer_json(200, {"status": "ok"}),
                ("GET", "/api/v1/transactions"): answer_json(404, missing),
                ("POST", "/api/v1/documents"): accept,
            }
        )
    )


def test_a_new_journal_where_the_api_has_no_list_sends_and_says_so(
    outbox: Path, journal_path: Path
):
    """No marker says the outbox was sent from another journal, and nothing can be asked:
    the first use of invoicectl against such an API is not blocked forever."""
    outbox_of(outbox, "N", 2)
    accepted: list[str] = []
    warnings: list[str] = []
    with api_without_a_list(accepted) as api:
        settings = settings_for(journal_path, base_url=api.base_url)
        _, summary = send(settings, outbox, None, check_receivers=False, warn=warnings.append)
    assert summary.exit_code == ExitCode.OK
    assert len(accepted) == 2
    assert "has no transactions list (HTTP 404)" in warnings[0]


def test_a_lost_journal_where_the_api_has_no_list_sends_nothing(outbox: Path, journal_path: Path):
    """The marker says this outbox was sent from a journal that is gone: without a list to
    ask, nothing is sent."""
    outbox_of(outbox, "L", 2)
    accepted: list[str] = []
    with api_without_a_list(accepted) as api:
        settings = settings_for(journal_path, base_url=api.base_url)
        send(settings, outbox, None, check_receivers=False, warn=lambda line: None)
        assert len(accepted) == 2
        lose(journal_path)
        with pytest.raises(HistoryUnchecked) as refused:
            send(settings, outbox, None, check_receivers=False, warn=lambda line: None)
    assert refused.value.exit_code == ExitCode.COULD_NOT_RUN
    assert "is not the one" in str(refused.value)
    assert len(accepted) == 2


def test_a_refused_key_at_the_check_changes_nothing(outbox: Path, journal_path: Path):
    outbox_of(outbox, "K", 2)
    sandbox = emulator()
    settings = settings_for(journal_path, environ={"GOROUTE_API_KEY": "sk_test_wrong"})

    with pytest.raises(CredentialsRefused, match="the API refused the credentials"):
        send(settings, outbox, sandbox.transport())

    assert sandbox.stats()["sends_received"] == 0
    assert set(states(journal_path).values()) == {"pending"}


def test_what_a_short_search_could_not_vouch_for_is_held_as_not_checked(
    outbox: Path, journal_path: Path
):
    """A list that does not page: one full page says nothing of older transactions."""
    sandbox = emulator(list_paging=False)
    for number in range(120):
        sandbox.add_transaction(f"OTHER-{number}")
    sandbox.add_transaction("S-000")  # the newest: on the one page
    ids = outbox_of(outbox, "S", 3, issue_date="2020-01-06")
    settings = settings_for(journal_path)
    warnings: list[str] = []

    _, summary = send(settings, outbox, sandbox.transport(), warn=warnings.append)

    assert sandbox.stats()["sends_received"] == 0
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE
    with open_journal(journal_path) as journal:
        found = journal.invoice(ids[0])
        assert found is not None and found.existing_transaction_id is not None
        for invoice_id in ids[1:]:
            held = journal.invoice(invoice_id)
            assert held is not None and held.hold is Hold.held
            assert (held.hold_reason or "").startswith("not checked: ")
            assert "says nothing of paging" in (held.hold_reason or "")
            assert f"`invoicectl release {invoice_id} --force`" in (held.hold_reason or "")
    assert "1 already there" in warnings[0] and "2 held as not checked" in warnings[0]


def test_a_search_newest_first_vouches_for_what_was_issued_after_where_it_reached(
    outbox: Path, journal_path: Path
):
    """Stopped by its page bound, the search still covers invoices issued after the oldest
    transaction it saw (less a week): those are sent, the older ones held."""
    sandbox = emulator(list_paging=False)
    day = 86400.0
    now = sandbox.now()
    for number in range(100):  # one full page, created over the last 100 days
        sandbox.add_transaction(f"OTHER-{number}", created_at=now - number * day)
    recent = datetime.fromtimestamp(now, UTC).date().isoformat()
    (fresh,) = outbox_of(outbox, "R", 1, issue_date=recent)
    (old,) = outbox_of(outbox, "O", 1, issue_date="2020-01-06")

    send(settings_for(journal_path), outbox, sandbox.transport())

    assert states(journal_path) == {fresh: "accepted", old: "pending"}
    assert_each_delivered_once(sandbox.stats(), [fresh])


def test_the_marker_names_this_journal_and_run(outbox: Path, journal_path: Path):
    outbox_of(outbox, "W", 1)
    send(settings_for(journal_path), outbox, emulator().transport())

    import json

    settings = settings_for(journal_path)
    marker = json.loads((outbox / MARKER_NAME).read_text())["sends"][settings.base_url]
    with open_journal(journal_path) as journal:
        assert marker["journal_id"] == journal.identity().journal_id
        assert journal.run_started_at(marker["run_id"]) == marker["run_started_at"]
    assert marker["journal"] == cli_journal(journal_path)


def test_each_base_url_keeps_its_own_marker_entry(outbox: Path, tmp_path: Path):
    """A try of another environment from the same outbox does not hide a later loss."""
    outbox_of(outbox, "E", 2)
    sandbox = emulator()
    production = settings_for(tmp_path / "prod.db", base_url="http://prod.test")
    trial = settings_for(tmp_path / "trial.db", base_url="http://trial.test")
    send(production, outbox, sandbox.transport(), warn=lambda line: None)
    send(trial, outbox, sandbox.transport(), warn=lambda line: None)

    (tmp_path / "prod.db").write_bytes(b"")
    warnings: list[str] = []
    send(production, outbox, sandbox.transport(), warn=warnings.append)

    assert "is not the one" in warnings[0] and "2 already there" in warnings[0]


def test_a_marker_that_is_not_ours_is_ignored_with_a_line_and_the_check_still_made(
    outbox: Path, journal_path: Path
):
    outbox_of(outbox, "G", 1)
    (outbox / MARKER_NAME).write_text("{not json")
    warnings: list[str] = []

    send(settings_for(journal_path), outbox, emulator().transport(), warn=warnings.append)

    assert warnings[0] == (
        f"invoicectl: warning: the marker {outbox / MARKER_NAME} is not one invoicectl "
        "wrote; it is ignored"
    )
    assert "has never sent to" in warnings[1]
    assert '"sends"' in (outbox / MARKER_NAME).read_text()  # replaced by a good one


def test_reconcile_judges_what_the_check_found_and_names_the_release_as_the_next_step(
    outbox: Path, journal_path: Path
):
    from invoicectl.lifecycle.holds import release

    write_invoice(outbox, "X-1")
    write_invoice(outbox, "X-2")
    sandbox = emulator()
    other = {"invoice_id": "X-1", "sha256": "0" * 64}
    sandbox.add_transaction("X-1", metadata=other, status="delivered")
    sandbox.add_transaction("X-2", status="failed")
    settings = settings_for(journal_path, rate=60_000)
    send(settings, outbox, sandbox.transport(), warn=lambda line: None)

    report = reconcile(settings, apply=True, transport=sandbox.transport())

    cases = {case.invoice_id: case for case in report.cases}
    assert str(cases["X-1"].verdict) == "other_version"  # another version: a delivery of X-1
    assert "this journal would send sha256" in cases["X-1"].detail
    assert "`invoicectl abandon X-1` records it as settled" in cases["X-1"].action
    assert "would deliver X-1 twice" in cases["X-1"].action
    assert str(cases["X-2"].verdict) == "sent_then_failed"
    assert (
        cases["X-2"].action
        == "delivery failed: `invoicectl release X-2` sends it from this journal"
    )
    assert report.applied == ()
    with open_journal(journal_path) as journal:
        release(journal, "X-2", by="test")
    send(settings, outbox, sandbox.transport(), warn=lambda line: None)
    assert states(journal_path) == {"X-1": "pending", "X-2": "accepted"}


def test_a_web_page_404_on_the_list_switches_no_check_off(outbox: Path, journal_path: Path):
    """Only the API's own JSON says it has no list; a proxy's passing 404 page does not."""
    outbox_of(outbox, "P", 1)
    page = "<html><body>404 Not Found</body></html>"
    with HostileServer(
        routes(
            {
                ("GET", "/peppol/version"): answer_json(200, {"status": "ok"}),
                ("GET", "/api/v1/transactions"): answer(
                    404, page.encode(), {"Content-Type": "text/html"}
                ),
                ("POST", "/api/v1/documents"): answer_json(202, {"transaction_id": "tx-1"}),
            }
        )
    ) as api:
        settings = settings_for(journal_path, base_url=api.base_url)
        with pytest.raises(HistoryUnchecked) as refused:
            send(settings, outbox, None, check_receivers=False, warn=lambda line: None)
        assert not any(request.method == "POST" for request in api.requests)
    assert refused.value.exit_code == ExitCode.COULD_NOT_RUN
    with open_journal(journal_path) as journal:
        assert not journal.history_checked(settings.base_url)


@pytest.mark.parametrize("kept_back", ["held", "invalid"])
def test_an_invoice_kept_back_at_the_check_is_checked_all_the_same(
    outbox: Path, journal_path: Path, kept_back: str
):
    """The journal lost, then the invoice held by hand (or invalid: a stray second copy)
    before the next send: the check covers it too, so neither a release nor the copy's
    removal later sends it unchecked (a review found both delivered it twice)."""
    (invoice_id,) = outbox_of(outbox, "M", 1)
    sandbox = emulator()
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), warn=lambda line: None)
    lose(journal_path)
    sandbox.advance_clock(25 * 3600)  # the key's window closed: a resend is a second copy
    stray = outbox / "stray-copy.xml"
    if kept_back == "invalid":
        original = next(path for path in outbox.glob("*.xml"))
        stray.write_bytes(original.read_bytes().replace(b"</cbc:ID>", b"</cbc:ID><!-- x -->", 1))
    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
        if kept_back == "held":
            hold(journal, invoice_id, "checking with the customer", "clerk")
        assert journal.invoice(invoice_id).state is not InvoiceState.pending or kept_back == "held"
    warnings: list[str] = []
    send(settings, outbox, sandbox.transport(), warn=warnings.append, clocks=day_later())
    assert any("1 already there" in line for line in warnings), warnings
    stray.unlink(missing_ok=True)
    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
        refused = release(journal, invoice_id, "clerk")
    assert not refused.done and "--force" in refused.message
    send(settings, outbox, sandbox.transport(), warn=lambda line: None, clocks=day_later())
    assert sandbox.stats()["per_invoice"][invoice_id] == 1


def test_a_read_only_outbox_costs_the_marker_only_with_a_line_that_says_so(
    outbox: Path, monkeypatch: pytest.MonkeyPatch
):
    """On a read-only mount even the unlink of a temporary file never made fails (EROFS):
    that failure used to escape as "cannot use .../.invoicectl-journal.N.tmp ... use --journal
    on a writable one", about the journal."""
    import errno
    import os

    from invoicectl.send.marker import Marker, write_marker

    def read_only(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(os, "open", read_only)
    monkeypatch.setattr(Path, "unlink", read_only)
    problem = write_marker(outbox / MARKER_NAME, Marker("id", "/j.db", "https://x.test", 1, "then"))
    assert problem is not None
    assert problem.startswith(f"cannot write the marker {outbox / MARKER_NAME} (Read-only")


def test_two_profiles_at_one_base_url_keep_their_own_marker_entries(outbox: Path, tmp_path: Path):
    """`send --all-profiles`: two accounts' journals send from one outbox to the same base
    URL. Each took the other's entry for a lost history, a check (and a loud line) every run;
    now each profile keeps its own entry, and a loss of one's journal is still told."""
    from dataclasses import replace

    outbox_of(outbox, "P", 2)
    sandbox = emulator()
    acme = replace(settings_for(tmp_path / "acme.db"), profile="acme")
    beta = replace(settings_for(tmp_path / "beta.db"), profile="beta")
    send(acme, outbox, sandbox.transport(), warn=lambda line: None)
    send(beta, outbox, sandbox.transport(), warn=lambda line: None, trust_new_journal=True)

    warnings: list[str] = []
    send(acme, outbox, sandbox.transport(), warn=warnings.append)
    assert warnings == []

    (tmp_path / "acme.db").write_bytes(b"")
    send(acme, outbox, sandbox.transport(), warn=warnings.append)
    assert "is not the one" in warnings[0]


def test_a_list_most_recently_updated_first_is_not_taken_for_newest_created_first(
    outbox: Path, journal_path: Path
):
    """The order is not documented. Sorted by update, the first page holds transactions
    created long ago (their creation times do not rise, as if newest created first) but
    updated today; the invoice sent 16 days ago is on the page after. Stopping at the first
    page's creation times would send it again, its key long expired."""
    sandbox = emulator(list_order="updated_first", list_page_cap=10)
    day = 86400.0
    now = sandbox.now()
    for number in range(10):
        sandbox.add_transaction(
            f"OLD-{number}",
            status="delivered",
            created_at=now - 400 * day,
            updated_at=now - 3600 + number,
        )
    recent = datetime.fromtimestamp(now - 20 * day, UTC).date().isoformat()
    (sent,) = outbox_of(outbox, "U", 1, issue_date=recent)
    sandbox.add_transaction(
        sent, status="delivered", created_at=now - 16 * day, metadata={"invoice_id": sent}
    )

    _, summary = send(
        settings_for(journal_path), outbox, sandbox.transport(), warn=lambda line: None
    )

    assert sandbox.stats()["sends_received"] == 0
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE
    assert_held_as_found(journal_path, [sent], sandbox)


def a_failed_delivery(outbox: Path, journal_path: Path, **emulated: object):
    """F-000 sent and accepted, its delivery failed, and reconcile has said so: what lets a
    --new-version go. (The emulator and the settings.)"""
    write_invoice(outbox, "F-000", receiver="9915:reject-all")
    sandbox = emulator(**emulated)
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), warn=lambda line: None)
    sandbox.advance_clock(600)  # its delivery has failed by now
    (case,) = reconcile(settings, transport=sandbox.transport()).cases
    assert case.verdict.value == "delivery_failed"
    return sandbox, settings


def new_version_a_day_later(settings, outbox: Path, sandbox, warn=lambda line: None):
    """``send --new-version F-000`` 25 hours on, its key's window closed: the run's summary."""
    sandbox.advance_clock(25 * 3600)
    _, summary = send(
        settings,
        outbox,
        sandbox.transport(),
        warn=warn,
        clocks=day_later(),
        new_versions=("F-000",),
    )
    return summary


def test_a_restored_backup_sends_no_new_version_its_lost_run_sent(outbox: Path, journal_path: Path):
    """The new version went out after the backup: restored, the journal knows only the first
    key, and `--new-version` again would send the invoice under the same next key, its 24
    hours over, a second delivery. The check covers the invoices given to --new-version, and
    the transactions of keys the journal holds are no finding."""
    sandbox, settings = a_failed_delivery(outbox, journal_path)
    copy = snapshot(journal_path, "backup")
    send(settings, outbox, sandbox.transport(), warn=lambda line: None, new_versions=("F-000",))
    assert sandbox.stats()["per_invoice"] == {"F-000": 2}

    restore(journal_path, copy)
    warnings: list[str] = []
    summary = new_version_a_day_later(settings, outbox, sandbox, warnings.append)

    assert sandbox.stats()["per_invoice"] == {"F-000": 2}
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE
    with open_journal(journal_path) as journal:
        invoice = journal.invoice("F-000")
        assert invoice is not None and (invoice.hold, invoice.held_by) == (Hold.held, HELD_BY)
        reason = invoice.hold_reason or ""
        assert reason.startswith("not sent as a new version: GoRoute holds txn_"), reason
        assert "`invoicectl abandon F-000` records it as settled" in reason
        assert invoice.idempotency_key == "invoice-F-000"  # not moved on to the next key
        # No evidence event: inert while accepted, it stood again once the new version made
        # the invoice pending, and blocked the safe replay of its lost answer (helper-53).
        assert "delivery_evidence" not in {event.kind for event in journal.events("F-000")}
        # The operator's way out, as the reason says: settled (the new version delivered).
        assert abandon(journal, "F-000", "its new version was delivered", "clerk").done
        assert attention(journal, journal.clock()) is ExitCode.OK
    (line,) = warnings
    assert "has lost history" in line and "1 already there" in line


class FiftyAtMost(httpx.AsyncBaseTransport):
    """The emulator behind a list that refuses a page over 50 (a 400, as a server may)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.limits: list[int] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/api/v1/transactions"):
            limit = int(request.url.params.get("limit", "50"))
            self.limits.append(limit)
            if limit > 50:
                error = {"code": "VALIDATION_ERROR", "message": "limit must be 1 to 50"}
                return httpx.Response(400, json={"error": error})
        return await self.inner.handle_async_request(request)


def test_a_list_that_refuses_a_page_of_100_is_asked_for_smaller_pages(
    outbox: Path, journal_path: Path
):
    """A new journal's check asked for pages of 100 only: every send exited 1 on a server
    whose largest page is 50, and the message's "fix the cause" named nothing to fix."""
    sandbox = emulator()
    for number in range(60):
        sandbox.add_transaction(f"OTHER-{number}")
    (already,) = outbox_of(outbox, "A", 1)
    sandbox.add_transaction(already, metadata={"invoice_id": already})
    ids = outbox_of(outbox, "S", 3)
    transport = FiftyAtMost(sandbox.transport())

    _, summary = send(settings_for(journal_path), outbox, transport, warn=lambda line: None)

    assert transport.limits[:2] == [100, 50]
    assert set(transport.limits[2:]) == {50}
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE  # the one GoRoute holds
    assert_held_as_found(journal_path, [already], sandbox)
    assert {states(journal_path)[i] for i in ids} == {"accepted"}


def test_a_held_new_version_of_an_edited_invoice_names_no_reconcile_that_cannot_judge_it(
    outbox: Path, journal_path: Path
):
    """helper-53: its release was refused with "`invoicectl reconcile --apply` adopts that
    transaction if it is this invoice's", and reconcile can judge no key the journal has no
    answer for: the way out is the hold's own (abandon, or release --force)."""
    sandbox, settings = a_failed_delivery(outbox, journal_path)
    write_invoice(outbox, "F-000", receiver="9915:phase4-test-receiver")  # corrected
    copy = snapshot(journal_path, "backup")
    send(settings, outbox, sandbox.transport(), warn=lambda line: None, new_versions=("F-000",))
    restore(journal_path, copy)
    new_version_a_day_later(settings, outbox, sandbox)

    with open_journal(journal_path) as journal:
        invoice = journal.invoice("F-000")
        assert invoice is not None and invoice.state.value == "amended"
        assert (invoice.hold, invoice.held_by) == (Hold.held, HELD_BY)
        refused = release(journal, "F-000", by="clerk")
    assert not refused.done
    assert "reconcile --apply" not in refused.message
    assert "`release --force` only once you know it is not" in refused.message
    assert sandbox.stats()["per_invoice"] == {"F-000": 2}


def test_a_number_long_or_with_an_invisible_character_is_found_at_goroute(
    outbox: Path, journal_path: Path
):
    """helper-60: GoRoute's transactions were read keeping an invoice number only when it was
    at most 256 characters and printable, yet the scan takes both as invoice IDs: GoRoute
    echoing such a number as sent, the history check never matched it, and the invoice went
    out a second time."""
    ids = ["INV-2026\u200b-0003", "INV-" + "7" * 300]
    for number, invoice_id in enumerate(ids):
        write_invoice(outbox, invoice_id, name=f"{number}.xml")
    sandbox = emulator()
    for invoice_id in ids:
        sandbox.add_transaction(invoice_id)

    send(settings_for(journal_path), outbox, sandbox.transport(), warn=lambda line: None)

    assert sandbox.stats()["sends_received"] == 0
    with open_journal(journal_path) as journal:
        held = [journal.invoice(invoice_id) for invoice_id in ids]
    assert all(invoice is not None and invoice.hold == "held" for invoice in held), held


def test_an_invoice_a_scan_made_sendable_during_the_search_is_still_judged(
    outbox: Path, journal_path: Path
):
    """helper-66: the check skipped every invoice that changed while it searched, meaning
    another host's send; an invalid invoice a scan on another host made pending meanwhile
    was skipped too, though GoRoute held it, and was sent a second time. Only a send skips."""
    write_invoice(outbox, "X-1", receiver=":no-scheme")  # invalid: no schemeID
    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
        read_before = journal.invoice("X-1")
        assert read_before is not None and read_before.state == "invalid"
        write_invoice(outbox, "X-1")  # fixed, and scanned by another host meanwhile
        scan_directory(journal, outbox)

        judged = still_as_read(journal, read_before)

    assert judged is not None and judged.state == "pending"

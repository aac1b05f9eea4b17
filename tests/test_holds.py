"""Holds, releases and abandonments, on a real journal with the emulator.

The trap job queues fell into (Sidekiq's "Retry Now" from its Dead set ran around the
uniqueness guard): a release here must never turn a send whose outcome is unknown into a
new one. Every test counts what the emulator received.
"""

from __future__ import annotations

import getpass
import os
import pty
import select
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from backends import cli_journal
from logkit import unstamped
from sendkit import FAST_RETRY, at, emulator, send, settings_for, states
from ublfactory import write_invoice

from invoicectl.errors import ExitCode, UsageError
from invoicectl.goroute.retry import RetryPolicy
from invoicectl.journal import open_journal
from invoicectl.lifecycle.decisions import check_new_version
from invoicectl.lifecycle.holds import abandon, hold, release
from invoicectl.lifecycle.plan import attention
from invoicectl.lifecycle.transitions import Transition, TransitionRefused, write
from invoicectl.locations import Location
from invoicectl.scan.ingest import scan_directory

ONE_TRY = RetryPolicy(max_attempts=1, backoff_initial=0.01, backoff_max=0.02)


@pytest.fixture
def journal_path(journal_at: Location) -> Location:
    return journal_at


def decide(journal_path: Path, action: str, invoice_id: str, **kwargs: str) -> str:
    with open_journal(journal_path) as journal:
        if action == "hold":
            decision = hold(journal, invoice_id, kwargs.get("reason", "test"), "tester")
        elif action == "abandon":
            decision = abandon(journal, invoice_id, kwargs.get("reason", "test"), "tester")
        else:
            decision = release(journal, invoice_id, "tester")
    assert decision.done, decision.message
    return decision.message


def lost_answer(journal_path: Path, outbox: Path, invoice_id: str) -> None:
    """A send whose request reached GoRoute (which kept it) and whose answer was lost."""
    write_invoice(outbox, invoice_id)
    sandbox = emulator(drop_rate=1.0)
    send(settings_for(journal_path), outbox, sandbox.transport(), policy=ONE_TRY)
    assert states(journal_path) == {invoice_id: "unknown"}
    assert sandbox.stats()["per_invoice"] == {invoice_id: 1}


def test_a_held_invoice_is_never_sent_and_a_release_sends_it(journal_path: Path, outbox: Path):
    write_invoice(outbox, "INV-1")
    write_invoice(outbox, "INV-2")
    sandbox = emulator()
    with open_journal(journal_path) as journal:
        from invoicectl.scan.ingest import scan_directory

        scan_directory(journal, outbox)
    decide(journal_path, "hold", "INV-1", reason="customer asked to wait")

    _, summary = send(settings_for(journal_path), outbox, sandbox.transport())

    assert sandbox.stats()["per_invoice"] == {"INV-2": 1}
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE  # a hold waits for a person
    assert states(journal_path) == {"INV-1": "pending", "INV-2": "accepted"}

    released = decide(journal_path, "release", "INV-1")
    assert (
        released
        == "released (held by tester: customer asked to wait): pending; the next send sends it"
    )
    _, summary = send(settings_for(journal_path), outbox, sandbox.transport())
    assert sandbox.stats()["per_invoice"] == {"INV-1": 1, "INV-2": 1}
    assert summary.exit_code == ExitCode.OK


def test_a_release_after_the_window_closed_sends_nothing(journal_path: Path, outbox: Path):
    """The Sidekiq trap: a held unknown send, released 25 hours on, is not a new send."""
    lost_answer(journal_path, outbox, "INV-1")
    decide(journal_path, "hold", "INV-1")
    later = at(datetime.now(UTC) + timedelta(hours=25))
    sandbox = emulator()

    with open_journal(journal_path, clock=later.wall) as journal:
        message = release(journal, "INV-1", "tester").message
    _, summary = send(settings_for(journal_path), outbox, sandbox.transport(), clocks=later)

    assert "window closed: `invoicectl reconcile` first" in message
    assert sandbox.stats()["sends_received"] == 0
    assert summary.held == ("INV-1",) and summary.exit_code == ExitCode.NEEDS_RECONCILE
    assert states(journal_path) == {"INV-1": "unknown"}


def test_a_held_unknown_send_is_not_replayed_until_released_then_under_its_key(
    journal_path: Path, outbox: Path
):
    lost_answer(journal_path, outbox, "INV-1")
    decide(journal_path, "hold", "INV-1")
    sandbox = emulator()

    send(settings_for(journal_path), outbox, sandbox.transport())
    assert sandbox.stats()["sends_received"] == 0

    decide(journal_path, "release", "INV-1")
    _, summary = send(settings_for(journal_path), outbox, sandbox.transport())
    assert summary.replays == 1 and states(journal_path) == {"INV-1": "accepted"}
    with open_journal(journal_path) as journal:
        keys = {attempt.idempotency_key for attempt in journal.attempts("INV-1")}
    assert keys == {"invoice-INV-1"}


def test_an_abandoned_invoice_is_never_sent_and_asks_nothing_more(journal_path: Path, outbox: Path):
    write_invoice(outbox, "INV-1")
    sandbox = emulator()
    with open_journal(journal_path) as journal:
        from invoicectl.scan.ingest import scan_directory

        scan_directory(journal, outbox)
    decide(journal_path, "abandon", "INV-1", reason="sent by post on 3 May")

    _, summary = send(settings_for(journal_path), outbox, sandbox.transport())

    assert sandbox.stats()["sends_received"] == 0
    assert summary.exit_code == ExitCode.OK  # settled outside invoicectl
    with open_journal(journal_path) as journal:
        assert release(journal, "INV-1", "tester").message == "abandoned, which is final"
        assert not hold(journal, "INV-1", "again", "tester").done
        invoice = journal.invoice("INV-1")
        assert invoice is not None
        assert (invoice.state, invoice.hold, invoice.held_by) == ("pending", "abandoned", "tester")
        kinds = [(event.kind, event.detail) for event in journal.events("INV-1")]
    assert kinds == [("abandon", "by tester: sent by post on 3 May")]


def test_an_unknown_send_is_abandoned_only_once_reconcile_has_looked_it_up(
    journal_path: Path, outbox: Path
):
    """helper-81: U-1's answer was lost and GoRoute delivered it. At 2 a.m. the clerk
    abandoned it ("will send by post"): taken without a word, never looked up again, and the
    customer got it twice. Now the abandon waits for reconcile (or --force); reconcile finds
    the delivery, and the clerk learns it was sent."""
    from invoicectl.reconcile.runner import reconcile

    write_invoice(outbox, "U-1")
    sandbox = emulator(drop_rate=1.0)
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport(), policy=ONE_TRY)
    sandbox.set_faults(drop_rate=0.0)
    assert states(journal_path) == {"U-1": "unknown"}

    with open_journal(journal_path) as journal:
        refused = abandon(journal, "U-1", "will send by post", "clerk")
        assert not refused.done
        assert "no `invoicectl reconcile` has looked it up since" in refused.message
        assert abandon(journal, "U-1", "x", "clerk", dry_run=True, force=True).done
    reconcile(settings, apply=True, transport=sandbox.transport())

    assert states(journal_path) == {"U-1": "accepted"}
    with open_journal(journal_path) as journal:
        sent = abandon(journal, "U-1", "will send by post", "clerk")
    assert not sent.done and "it was sent" in sent.message


def test_no_new_version_for_a_held_invoice(journal_path: Path, outbox: Path):
    lost_answer(journal_path, outbox, "INV-1")
    decide(journal_path, "hold", "INV-1", reason="reconcile first")
    later = datetime.now(UTC) + timedelta(hours=25)
    with (
        open_journal(journal_path) as journal,
        pytest.raises(UsageError, match="release` it first"),
    ):
        check_new_version(journal, "INV-1", later)


def test_an_accepted_invoice_cannot_be_held(journal_path: Path, outbox: Path):
    write_invoice(outbox, "INV-1")
    send(settings_for(journal_path), outbox, emulator().transport())
    with open_journal(journal_path) as journal:
        decision = hold(journal, "INV-1", "too late", "tester")
        assert not decision.done and "accepted" in decision.message
        assert attention(journal, journal.clock()) == ExitCode.OK


def test_reconcile_apply_holds_an_earlier_send_and_send_leaves_it(journal_path: Path, outbox: Path):
    """reconcile finds only an earlier transaction for an unknown send: --apply holds it, and
    the send that would have replayed it inside the window does not."""
    lost_answer(journal_path, outbox, "INV-1")
    sandbox = emulator()
    long_ago = datetime.now(UTC).timestamp() - 3 * 86_400
    sandbox.add_transaction("INV-1", status="delivered", created_at=long_ago)
    from invoicectl.reconcile.runner import reconcile

    report = reconcile(settings_for(journal_path), apply=True, transport=sandbox.transport())
    assert [str(case.verdict) for case in report.cases] == ["unknown_sent_earlier"]
    assert report.held == ("INV-1",)

    _, summary = send(settings_for(journal_path), outbox, sandbox.transport(), policy=FAST_RETRY)
    assert sandbox.stats()["sends_received"] == 0
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE

    # A release by state (a bulk "release --state unknown") passes the same guard.
    with open_journal(journal_path) as journal:
        refused = release(journal, "INV-1", "tester")
        assert not refused.done and journal.invoice("INV-1").hold == "held"
        assert "reconcile found it at GoRoute already (unknown_sent_earlier)" in refused.message
        assert "`release --force` only once you know it is not" in refused.message
        assert release(journal, "INV-1", "tester", force=True).done


def test_a_release_of_what_the_history_check_found_at_goroute_needs_force(
    journal_path: Path, outbox: Path
):
    """A new journal's first send found a transaction GoRoute holds for the invoice: a bulk
    release of pending holds must not send it a second time."""
    write_invoice(outbox, "INV-7")
    sandbox = emulator()
    sandbox.add_transaction("INV-7", status="delivered")
    send(settings_for(journal_path), outbox, sandbox.transport(), warn=lambda line: None)
    with open_journal(journal_path) as journal:
        found = journal.invoice("INV-7")
        assert found.hold == "held" and found.existing_transaction_id is not None

    bulk = invoicectl(journal_path, "release", "--state", "pending", "--yes")
    forced = invoicectl(journal_path, "release", "INV-7", "--force")

    assert bulk.returncode == 2
    assert f"GoRoute already holds transaction {found.existing_transaction_id}" in bulk.stdout
    assert (forced.returncode, forced.stdout.split(":")[0]) == (0, "INV-7"), forced.stderr
    assert "released" in forced.stdout


# ---- the commands -------------------------------------------------------------------------


def invoicectl(journal_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI; its output with every line's timestamp checked and taken off."""
    done = subprocess.run(
        [sys.executable, "-m", "invoicectl", *args, "--journal", cli_journal(journal_path)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, unstamped(done.stdout), unstamped(done.stderr)
    )


def test_the_commands_say_what_they_did_and_refuse_in_one_line(journal_path: Path, outbox: Path):
    write_invoice(outbox, "INV-1")
    write_invoice(outbox, "INV-2")
    assert invoicectl(journal_path, "scan", str(outbox)).returncode == 0

    done = invoicectl(journal_path, "hold", "INV-1", "--reason", "wait")
    assert (done.returncode, done.stdout) == (0, "INV-1: held (pending): wait\n"), done.stderr
    again = invoicectl(journal_path, "hold", "INV-1", "--reason", "wait")
    assert (again.returncode, again.stdout) == (2, "INV-1: already held (wait)\n")
    unknown = invoicectl(journal_path, "release", "NOPE")
    assert unknown.returncode == 2
    assert unknown.stderr.strip().splitlines() == [
        f"invoicectl: error: no invoice 'NOPE' in the journal {journal_path}; nothing changed"
    ]
    # Every ID is checked before any changes: half a command is worse than none.
    mixed = invoicectl(journal_path, "hold", "INV-2", "NOPE", "--reason", "x")
    assert mixed.returncode == 2 and mixed.stdout == ""
    bad = invoicectl(journal_path, "hold", "--verdict", "no_such_verdict", "--reason", "x")
    assert bad.returncode == 2 and "unknown verdict 'no_such_verdict'" in bad.stderr
    status = invoicectl(journal_path, "status")
    assert status.returncode == 4
    assert status.stdout.splitlines()[0].endswith("; held 1, abandoned 0")

    bulk = invoicectl(journal_path, "hold", "--state", "pending", "--reason", "freeze")
    assert bulk.returncode == 2 and "1 invoices match; add --yes" in bulk.stderr
    dry = invoicectl(journal_path, "release", "--state", "pending", "--dry-run")
    assert dry.stdout == (
        f"INV-1: would be released (held by {getpass.getuser()}: wait): pending; "
        "the next send sends it\n"
    )
    with open_journal(journal_path) as journal:
        assert journal.invoice("INV-1").hold == "held"  # type: ignore[union-attr]
    bulk = invoicectl(journal_path, "hold", "--state", "pending", "--reason", "freeze", "--yes")
    assert (bulk.returncode, bulk.stdout) == (0, "INV-2: held (pending): freeze\n")
    dry_send = invoicectl(journal_path, "send", str(outbox), "--dry-run")
    assert "2 on hold" in dry_send.stdout and dry_send.returncode == 4


def test_no_new_version_while_an_amended_invoices_send_is_unknown_in_its_window(
    journal_path: Path, outbox: Path
):
    """The answer was lost, then the file changed: a new key now could deliver both."""
    lost_answer(journal_path, outbox, "M-1")
    write_invoice(outbox, "M-1", amount="999.00")
    with open_journal(journal_path) as journal:
        from invoicectl.scan.ingest import scan_directory

        scan_directory(journal, outbox)
        assert journal.invoice("M-1").state == "amended"  # type: ignore[union-attr]
        with pytest.raises(
            UsageError, match="is amended and its send under the old content got no answer"
        ):
            check_new_version(journal, "M-1", journal.clock())
        later = journal.clock() + timedelta(hours=25)
        # Past the window, still refused: reconcile has not looked up the send beneath the
        # edit (tests/test_evidence.py follows it through reconcile).
        with pytest.raises(UsageError, match="is amended over unknown and `invoicectl reconcile`"):
            check_new_version(journal, "M-1", later)


def test_a_verdict_to_hold_and_its_hold_commit_together(
    journal_path: Path, outbox: Path, monkeypatch: pytest.MonkeyPatch
):
    """A crash between recording unknown_sent_earlier and holding it must not leave a
    verdict that says 'do not send' on an invoice the next send would replay."""
    lost_answer(journal_path, outbox, "INV-1")
    sandbox = emulator()
    long_ago = datetime.now(UTC).timestamp() - 3 * 86_400
    sandbox.add_transaction("INV-1", status="delivered", created_at=long_ago)
    from invoicectl import reconcile as package
    from invoicectl.reconcile.runner import reconcile

    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("killed between the verdict and the hold")

    monkeypatch.setattr(package, "hold", crash)
    with pytest.raises(RuntimeError):
        reconcile(settings_for(journal_path), apply=True, transport=sandbox.transport())
    with open_journal(journal_path) as journal:
        invoice = journal.invoice("INV-1")
        assert invoice is not None and (invoice.verdict, invoice.hold) == (None, None)


def test_an_accepted_invoice_whose_delivery_failed_can_be_abandoned(
    outbox: Path, journal_path: Location
):
    """Sent on paper after GoRoute's delivery failed: nothing let the clerk settle it, and
    every cron run exited 4 ("1 delivery failed") until a new version went out."""
    from invoicectl.reconcile.runner import reconcile

    write_invoice(outbox, "F-1", receiver="9915:reject-all")
    write_invoice(outbox, "D-1")
    sandbox = emulator()
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport())
    sandbox.advance_clock(600)
    verdicts = {case.invoice_id: case.verdict.value for case in reconcile(
        settings, transport=sandbox.transport()).cases}  # fmt: skip
    assert verdicts == {"F-1": "delivery_failed", "D-1": "delivered"}

    with open_journal(journal_path) as journal:
        assert attention(journal, journal.clock()) is ExitCode.NEEDS_RECONCILE
        refused = abandon(journal, "D-1", "x", "clerk")  # delivered: nothing to settle
        assert not refused.done and "it was sent; nothing to abandon" in refused.message
        assert abandon(journal, "F-1", "sent on paper", "clerk").done
        assert attention(journal, journal.clock()) is ExitCode.OK
        assert journal.delivery_failure_count() == 0  # status and the metric: settled
        with pytest.raises(UsageError, match="abandoned"):
            check_new_version(journal, "F-1", journal.clock())


def test_a_bulk_abandon_of_failed_deliveries_abandons_them(outbox: Path, journal_path: Location):
    """helper-81: `abandon F-1` settled a failed delivery, but `abandon --verdict
    delivery_failed --yes` said "nothing to abandon" (exit 0), and every cron run went on
    exiting 4. A delivered invoice is still never chosen, nor is one by a bulk hold."""
    from invoicectl.reconcile.runner import reconcile

    for invoice_id, receiver in (("F-1", "9915:reject-all"), ("F-2", "9915:reject-all")):
        write_invoice(outbox, invoice_id, receiver=receiver)
    write_invoice(outbox, "D-1")
    sandbox = emulator()
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport())
    sandbox.advance_clock(600)
    reconcile(settings, transport=sandbox.transport())
    held = invoicectl(journal_path, "hold", "--state", "accepted", "--reason", "x", "--yes")
    assert "nothing to hold" in held.stdout + held.stderr, held

    done = invoicectl(
        journal_path, "abandon", "--verdict", "delivery_failed", "--reason", "on paper", "--yes"
    )

    assert done.returncode == 0, done
    with open_journal(journal_path) as journal:
        holds = {invoice.invoice_id: invoice.hold for invoice in journal.invoices()}
    assert holds == {"F-1": "abandoned", "F-2": "abandoned", "D-1": None}, done
    again = invoicectl(journal_path, "abandon", "--state", "accepted", "--reason", "x", "--yes")
    assert "nothing to abandon" in again.stdout + again.stderr, again


def test_status_says_an_abandoned_failed_delivery_asks_nothing(
    outbox: Path, journal_path: Location
):
    """helper-53: abandoned after its delivery failed, it was still "a person must decide"
    in status's counts, and its line said to run reconcile."""
    from invoicectl.reconcile.runner import reconcile

    write_invoice(outbox, "F-1", receiver="9915:reject-all")
    sandbox = emulator()
    settings = settings_for(journal_path)
    send(settings, outbox, sandbox.transport())
    sandbox.advance_clock(600)
    reconcile(settings, transport=sandbox.transport())
    with open_journal(journal_path) as journal:
        assert abandon(journal, "F-1", "sent on paper", "clerk").done

    done = subprocess.run(
        [sys.executable, "-m", "invoicectl", "status", "--journal", cli_journal(journal_path)],
        capture_output=True,
        text=True,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "a person must decide" not in done.stdout
    assert "delivery failed; abandoned: sent on paper" in done.stdout


def test_status_lines_say_an_invoice_is_held_or_abandoned_and_why(
    outbox: Path, journal_path: Location
):
    """helper-57: an unknown invoice abandoned (settled by phone) was listed with its stale
    "no answer" reason and nothing to say it was settled; a held one with no mark at all."""
    write_invoice(outbox, "U-1")
    sandbox = emulator(drop_rate=1.0)  # U-1's request is recorded, its answer lost
    send(settings_for(journal_path), outbox, sandbox.transport(), policy=RetryPolicy(1))
    write_invoice(outbox, "P-1")
    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
        # Settled by phone: the clerk knows what GoRoute holds (no reconcile has looked).
        assert abandon(journal, "U-1", "settled by phone", "clerk", force=True).done
        assert hold(journal, "P-1", "checking the VAT", "clerk").done

    done = subprocess.run(
        [sys.executable, "-m", "invoicectl", "status", "--journal", cli_journal(journal_path)],
        capture_output=True,
        text=True,
    )

    lines = {line.split("\t")[0]: line.split("\t") for line in unstamped(done.stdout).splitlines()}
    assert lines["U-1"][1] == "unknown"
    assert lines["U-1"][-1].startswith("abandoned: settled by phone; ")
    assert lines["P-1"][1:2] == ["pending"] and lines["P-1"][-1] == "held: checking the VAT"


def test_a_decision_on_a_hold_that_changed_since_it_was_read_is_refused(
    journal_path: Path, outbox: Path
):
    """helper-62: two operators at once on a PostgreSQL journal (whose operator commands do
    not exclude each other). A release read the invoice held, an abandon landed, and the
    release wrote over it: the invoice was pending again, and the next send delivered it."""
    write_invoice(outbox, "INV-1")
    with open_journal(journal_path) as journal:
        scan_directory(journal, outbox)
    decide(journal_path, "hold", "INV-1", reason="customer asked to wait")
    with open_journal(journal_path) as journal:
        read_by_the_release = journal.invoice("INV-1")
    assert read_by_the_release is not None
    decide(journal_path, "abandon", "INV-1", reason="sent by post on 3 May")

    with open_journal(journal_path) as journal:
        with pytest.raises(TransitionRefused):
            write(
                journal,
                Transition.release,
                read_by_the_release,
                hold=None,
                hold_reason=None,
                held_at=None,
                held_by=None,
            )
        invoice = journal.invoice("INV-1")
    assert invoice is not None and invoice.hold == "abandoned"
    sandbox = emulator()
    send(settings_for(journal_path), outbox, sandbox.transport())
    assert sandbox.stats()["sends_received"] == 0


def asking_at_a_terminal(journal_path: Path, *args: str) -> tuple[int, int]:
    """The CLI at a terminal (a pseudo-terminal: stdin, stdout and stderr), once it asks."""
    pid, terminal = pty.fork()
    if pid == 0:  # the child: the CLI itself
        journal = cli_journal(journal_path)
        os.execv(sys.executable, [sys.executable, "-m", "invoicectl", *args, "--journal", journal])
    shown = b""
    deadline = time.monotonic() + 60
    while b"[y/N]" not in shown:
        assert time.monotonic() < deadline, shown
        if select.select([terminal], [], [], 1)[0]:
            shown += os.read(terminal, 1024)
    return pid, terminal


def answered(pid: int, terminal: int, answer: bytes) -> tuple[int, str]:
    """The exit code and what the CLI wrote after ``answer``."""
    os.write(terminal, answer + b"\n")
    shown = b""
    while True:
        try:
            chunk = os.read(terminal, 1024)
        except OSError:  # the terminal closed with the CLI
            break
        if not chunk:
            break
        shown += chunk
    _, status = os.waitpid(pid, 0)
    os.close(terminal)
    return os.waitstatus_to_exitcode(status), shown.decode(errors="replace")


def test_a_bulk_decision_asks_its_question_with_the_journal_free(journal_path: Path, outbox: Path):
    """helper-62: `hold --state pending` waiting for its y/N held the journal's run lock: every
    cron send in the meantime exited 6, for as long as nobody answered."""
    write_invoice(outbox, "INV-1")
    assert invoicectl(journal_path, "scan", str(outbox)).returncode == 0
    pid, terminal = asking_at_a_terminal(journal_path, "hold", "--state", "pending", "--reason=x")

    meanwhile = invoicectl(journal_path, "scan", str(outbox))  # takes the run lock

    code, shown = answered(pid, terminal, b"y")
    assert meanwhile.returncode == 0, meanwhile.stderr
    assert code == 0 and "INV-1: held (pending): x" in shown
    with open_journal(journal_path) as journal:
        invoice = journal.invoice("INV-1")
    assert invoice is not None and invoice.hold == "held"


def test_a_bulk_decision_whose_invoices_changed_while_it_asked_changes_nothing(
    journal_path: Path, outbox: Path
):
    write_invoice(outbox, "INV-1")
    assert invoicectl(journal_path, "scan", str(outbox)).returncode == 0
    pid, terminal = asking_at_a_terminal(journal_path, "hold", "--state", "pending", "--reason=x")
    write_invoice(outbox, "INV-2")
    assert invoicectl(journal_path, "scan", str(outbox)).returncode == 0

    code, shown = answered(pid, terminal, b"y")

    assert code == 2
    assert "the invoices to hold changed while you answered (1 then, 2 now)" in shown
    with open_journal(journal_path) as journal:
        held = [journal.invoice(name) for name in ("INV-1", "INV-2")]
    assert [invoice.hold if invoice else "gone" for invoice in held] == [None, None]


def test_a_number_corrected_after_a_send_whose_answer_was_lost_is_held(
    journal_path: Path, outbox: Path
):
    """helper-62: a.xml's number corrected after its send's answer was lost: the old number
    was replayed (GoRoute had it already), the new one sent as a new invoice, exit 0: one
    invoice delivered twice under two numbers. The new number is held for a person."""
    write_invoice(outbox, "INV-2026-O001", name="a.xml")
    write_invoice(outbox, "OTHER-1", name="b.xml")
    sandbox = emulator(drop_rate=1.0)
    send(settings_for(journal_path), outbox, sandbox.transport(), policy=ONE_TRY)
    sandbox.set_faults(drop_rate=0.0)
    write_invoice(outbox, "INV-2026-0001", name="a.xml")  # the clerk corrects the number
    write_invoice(outbox, "NEW-1", name="c.xml")

    _, summary = send(settings_for(journal_path), outbox, sandbox.transport())

    assert sandbox.stats()["per_invoice"] == {"INV-2026-O001": 1, "OTHER-1": 1, "NEW-1": 1}
    assert summary.exit_code == ExitCode.NEEDS_RECONCILE
    with open_journal(journal_path) as journal:
        renumbered = journal.invoice("INV-2026-0001")
        assert renumbered is not None and renumbered.hold == "held"
        reason = str(renumbered.hold_reason)
        assert "its file a.xml held invoice INV-2026-O001, sent (unknown)" in reason
        # helper-66: the advice followed leaves nothing held for ever
        assert "if not `invoicectl abandon INV-2026-O001` and `invoicectl release" in reason
    assert invoicectl(journal_path, "release", "INV-2026-0001").returncode == 0
    send(settings_for(journal_path), outbox, sandbox.transport())  # the person's word stands
    assert sandbox.stats()["per_invoice"]["INV-2026-0001"] == 1

"""helper-77: what a send whose history check is certain leaves when it stops before the
check begins (``send.history``'s ``{"begun": true}`` row was written only in ``_check``).

Outbox A was sent from a journal since lost; a run of A scans A's invoices into the shared
journal, then stops before its check begins: a refused --new-version (exit 2), a changed
environment refused (exit 1), a stop signal in the scan. A send of outbox B, whose marker
says nothing was lost, plans every pending invoice of the journal, A's too.

Real SQLite and PostgreSQL, the real CLI in subprocesses, the emulator over real HTTP.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from processkit import run_cli, run_send, send_process, wait_for
from sendkit import assert_each_delivered_once, emulator
from test_pg_check_turn import lost_beside_shared
from ublfactory import write_invoice

from invoicectl import DEFAULT_BASE_URL
from invoicectl.journal import open_journal
from invoicectl.locations import JournalURL, Location
from invoicectl.sandbox import BackgroundServer
from invoicectl.send.marker import MARKER_NAME, read_marker


def _send_of_b_after(
    tmp_path: Path, journal: Location, run_a: Callable[[str, Path], None]
) -> tuple[dict[str, Any], str, list[str]]:
    """Outbox A, holding DELIVERED-1, sent from a journal since lost, beside outbox B, sent
    from ``journal`` (``lost_beside_shared``); ``run_a(base URL, A)``; then a send of B with
    a new invoice. The emulator's stats, that send's output, and B's invoices."""
    sandbox = emulator()
    with BackgroundServer(sandbox) as server:
        outbox_a, outbox_b, ids_b = lost_beside_shared(
            tmp_path, sandbox, server.base_url, journal, 1
        )
        run_a(server.base_url, outbox_a)
        write_invoice(outbox_b, "B-NEW")
        _code, output = run_send(outbox_b, journal, server.base_url)
        return sandbox.stats(), output, [*ids_b, "B-NEW"]


def _cli_of_a(journal: Location, *args: str, code: int = 0, base_url: str | None = None):
    """``run_a`` for ``_send_of_b_after``: ``invoicectl ARGS... A``, exiting ``code``."""

    def run_a(served: str, outbox_a: Path) -> None:
        found, out, err = run_cli(journal, base_url or served, *args[:1], str(outbox_a), *args[1:])
        assert found == code, out + err

    return run_a


def test_a_run_stopped_before_its_check_began_leaves_no_invoice_to_another_outbox(
    tmp_path: Path, journal_at: Location
):
    def stopped(base_url: str, outbox_a: Path) -> None:
        # A's run: its marker names the lost journal, so its check is certain; it scans A,
        # then an operator's typo stops it before the check (exit 2, "nothing was sent").
        code, output = run_send(outbox_a, journal_at, base_url, "--new-version", "NOSUCH")
        assert code == 2, output
        with open_journal(journal_at) as opened:
            assert opened.invoice("DELIVERED-1") is not None  # scanned, never checked

    stats, output, ids_b = _send_of_b_after(tmp_path, journal_at, stopped)
    assert stats["per_invoice"].get("DELIVERED-1") == 1, output  # before the loss only
    assert_each_delivered_once(stats, ids_b)


@pytest.mark.parametrize("scanning", [("scan",), ("send", "--dry-run"), ("validate",)])
def test_a_scan_of_an_outbox_whose_journal_was_lost_leaves_no_invoice_to_another_outbox(
    tmp_path: Path, journal_at: Location, scanning: tuple[str, ...]
):
    """Outbox A was sent from a journal since lost; A is only scanned into the shared journal
    (``invoicectl scan``, or a dry run): a send of outbox B must not send A's invoices
    unchecked."""
    stats, output, ids_b = _send_of_b_after(tmp_path, journal_at, _cli_of_a(journal_at, *scanning))
    assert stats["per_invoice"].get("DELIVERED-1") == 1, output
    assert_each_delivered_once(stats, ids_b)


def test_a_scan_of_an_outbox_this_journal_sent_leaves_no_check(tmp_path: Path):
    """The everyday scan: the outbox's marker names this journal and its last run, so a
    send of any outbox afterwards makes no history check (no GET of the transactions)."""
    sandbox = emulator()
    journal = tmp_path / "journal.db"
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    write_invoice(outbox, "INV-1")
    with BackgroundServer(sandbox) as server:
        code, output = run_send(outbox, journal, server.base_url, "--trust-new-journal")
        assert code == 0, output
        write_invoice(outbox, "INV-2")
        for scanning in (("scan",), ("send", "--dry-run"), ("validate",)):
            code, out, err = run_cli(
                journal, server.base_url, scanning[0], str(outbox), *scanning[1:]
            )
            assert code == 0, out + err
        with open_journal(journal) as opened:
            assert opened.unfinished_history_check() is None
        code, output = run_send(outbox, journal, server.base_url)
        stats = sandbox.stats()
    assert code == 0, output
    assert_each_delivered_once(stats, ["INV-1", "INV-2"])


def test_a_scan_leaves_no_check_for_another_base_urls_entry(tmp_path: Path):
    """The marker's entry for another base URL (a try against a test environment) names a
    journal since lost: a scan into the journal that sends this outbox to its own base URL
    leaves no check (the other base URL's next send from this journal is its first, checked
    anyway), so a cron's scan-then-send makes no check every run."""
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    write_invoice(outbox, "INV-1")
    journal = tmp_path / "journal.db"
    with BackgroundServer(emulator()) as ours, BackgroundServer(emulator()) as other:
        code, output = run_send(outbox, journal, ours.base_url, "--trust-new-journal")
        assert code == 0, output
        code, output = run_send(outbox, tmp_path / "tried.db", other.base_url)
        assert code == 0, output
        (tmp_path / "tried.db").unlink()
        write_invoice(outbox, "INV-2")
        for base_url in (ours.base_url, other.base_url):
            code, out, err = run_cli(journal, base_url, "scan", str(outbox))
            assert code == 0, out + err
    with open_journal(journal) as opened:
        assert opened.unfinished_history_check() is None


@pytest.mark.parametrize("scanning", [("scan",), ("send", "--dry-run")])
def test_a_scan_under_another_base_url_than_the_journal_sends_to_leaves_the_check(
    tmp_path: Path, scanning: tuple[str, ...]
):
    """helper-78: the cron that sends has $GOROUTE_BASE_URL; the operator's scan by hand
    does not (a scan never needed one), so it reads the default base URL's entry of A's
    marker, finds the journal "fresh" there and leaves nothing: the next send of B, to the
    base URL the journal is bound to, sent A's DELIVERED-1 again. The journal's binding
    names the entry its sends read."""
    journal = tmp_path / "shared.db"
    run_a = _cli_of_a(journal, *scanning, base_url=DEFAULT_BASE_URL)
    stats, output, ids_b = _send_of_b_after(tmp_path, journal, run_a)
    assert stats["per_invoice"].get("DELIVERED-1") == 1, output
    assert_each_delivered_once(stats, ids_b)


def _beside_another_hosts_slow_check(
    tmp_path: Path, pg_url: str, run_a: Callable[[str, Path], None]
) -> tuple[dict[str, Any], str]:
    """Outbox A beside a shared PostgreSQL journal (``lost_beside_shared``), and host 2's
    send of outbox C, sent from another journal since lost, in its check's search (slow; its
    first sends wait at most its --deadline of 40 s); ``run_a(base URL, A)`` meanwhile; then,
    host 2 done, a send of B. The emulator's stats, and host 2's and B's output."""
    sandbox = emulator()
    url = JournalURL(pg_url)
    with BackgroundServer(sandbox) as server:
        base_url = server.base_url
        outbox_a, outbox_b, _ = lost_beside_shared(tmp_path, sandbox, base_url, url, 1)
        outbox_c = tmp_path / "c"
        outbox_c.mkdir()
        write_invoice(outbox_c, "C-1")
        code, out, err = run_cli(tmp_path / "lost-c.db", base_url, "send", str(outbox_c))
        assert code == 0, out + err
        write_invoice(outbox_c, "C-NEW")
        sandbox.set_faults(latency_ms=4000)  # host 2's search takes a while
        host_2 = send_process(outbox_c, url, base_url, "--no-receiver-check", "--deadline", "40")
        wait_for(lambda: sandbox.state.limiter.in_flight() > 0)  # its search has begun
        run_a(base_url, outbox_a)
        _, err_2 = host_2.communicate(timeout=120)
        sandbox.set_faults(latency_ms=0)
        _code, output = run_send(outbox_b, url, base_url)
        return sandbox.stats(), err_2 + output


def test_a_dry_run_beside_another_hosts_check_leaves_the_check_to_the_next_send(
    pg_url: str, tmp_path: Path
):
    """helper-78: a PostgreSQL journal, where a dry run runs beside send workers. Host 2's
    send of outbox C (sent from another lost journal) checks, slowly; meanwhile host 1's
    `send A --dry-run` found a check unfinished (host 2's), so recorded none, and scanned A.
    Host 2's check had read the journal's never-sent invoices before A's were there; it
    ended, and host 2 then sent A's DELIVERED-1 a second time. Now the dry run waits for
    that check's end, and leaves one of its own to the next send."""

    def dry_run(base_url: str, outbox_a: Path) -> None:
        code, out, err = run_cli(JournalURL(pg_url), base_url, "send", str(outbox_a), "--dry-run")
        assert code in (0, 4), out + err  # 4: after host 2's check, which held C-1

    stats, output = _beside_another_hosts_slow_check(tmp_path, pg_url, dry_run)
    assert stats["per_invoice"].get("DELIVERED-1") == 1, output
    assert_each_delivered_once(stats, ["C-NEW"])


def test_a_send_that_waited_for_another_hosts_check_then_stopped_leaves_its_check(
    pg_url: str, tmp_path: Path
):
    """helper-78: host 1's send of outbox A (its marker: a journal since lost) met host 2's
    check running, so read "unfinished", not "lost", before it waited for the turn, and
    recorded no check begun; once host 2's check had ended it scanned A and stopped before its
    own (a refused --new-version, exit 2), and A's DELIVERED-1 went out again unchecked."""

    def stopped(base_url: str, outbox_a: Path) -> None:
        code, output = run_send(outbox_a, JournalURL(pg_url), base_url, "--new-version", "NOSUCH")
        assert code == 2, output

    stats, output = _beside_another_hosts_slow_check(tmp_path, pg_url, stopped)
    assert stats["per_invoice"].get("DELIVERED-1") == 1, output
    assert_each_delivered_once(stats, ["C-NEW"])


@pytest.mark.parametrize("first", [("scan", "--recursive"), ("send", "--recursive")])
def test_a_recursive_run_reads_the_marker_of_a_subdirectory_sent_on_its_own(
    tmp_path: Path, first: tuple[str, ...]
):
    """Still open: outbox A, sent on its own from a journal since lost, is now a subdirectory
    of the outbox a recursive scan or send reads into a journal with history: only the top
    directory's marker is read (and written), so A's DELIVERED-1 goes out again (by the
    recursive send itself, or by the next send of outbox B after the scan). Pre-existing in
    `send --recursive`; a fix must also decide which markers a recursive send writes, or
    every later run would check again."""
    journal = tmp_path / "shared.db"

    def within_parent(base_url: str, outbox_a: Path) -> None:
        parent = tmp_path / "parent"
        parent.mkdir()
        outbox_a.rename(parent / "a")
        run_cli(journal, base_url, first[0], str(parent), *first[1:])

    stats, output, _ = _send_of_b_after(tmp_path, journal, within_parent)
    assert stats["per_invoice"].get("DELIVERED-1") == 1, output


def test_a_recursive_send_marks_the_subdirectories_it_checked_as_its_own(tmp_path: Path):
    """After a recursive send has checked what a subdirectory's marker said was lost, the
    subdirectory's marker names this journal too: the next recursive send, and a send of the
    subdirectory on its own, check nothing again (else every later run would make a full
    check), and a send of the subdirectory from another journal finds the shared one's."""
    journal = tmp_path / "shared.db"
    sandbox = emulator()
    with BackgroundServer(sandbox) as server:
        outbox_a, _outbox_b, _ids_b = lost_beside_shared(
            tmp_path, sandbox, server.base_url, journal, 1
        )
        parent = tmp_path / "parent"
        parent.mkdir()
        sub = outbox_a.rename(parent / "a")
        code, output = run_send(parent, journal, server.base_url, "--recursive")
        assert code == 4 and "is not the one" in output, output  # DELIVERED-1 held
        with open_journal(journal) as opened:
            own_id = opened.identity().journal_id
        for outbox in (parent, sub):
            marker = read_marker(outbox / MARKER_NAME, server.base_url)[0]
            assert marker is not None and marker.journal_id == own_id
        for number, outbox, args in ((1, parent, ("--recursive",)), (2, sub, ())):
            write_invoice(sub, f"A-NEW-{number}")
            code, output = run_send(outbox, journal, server.base_url, *args)
            assert "is not the one" not in output, output
            # Issued before the loss was found, each new one is checked on its own (helper-94).
            assert "were checked for the 1 invoices" in output, output
            assert (
                f"1 invoice(s) issued by then, or undated, were first met since (A-NEW-{number})"
                in output
            )
            assert code == 4, output  # DELIVERED-1 still held for reconcile
        write_invoice(sub, "A-NEW-3")
        code, output = run_send(sub, tmp_path / "other.db", server.base_url)
        assert "is not the one" in output, output
        stats = sandbox.stats()
    assert stats["per_invoice"].get("DELIVERED-1") == 1, output
    assert_each_delivered_once(stats, ["A-NEW-1", "A-NEW-2", "A-NEW-3"])


def test_a_send_refused_for_another_base_url_leaves_the_check_of_what_it_scanned(
    tmp_path: Path,
):
    """helper-78: `send A` run without the cron's $GOROUTE_BASE_URL (the default base URL):
    the journal is fresh there, so no check is begun before its scan; the journal's binding
    then refuses the base URL (exit 1), after the scan. A's DELIVERED-1 sat unchecked, and
    the next send of outbox B, to the journal's own base URL, sent it a second time."""
    journal = tmp_path / "shared.db"

    def refused(_base_url: str, outbox_a: Path) -> None:
        code, output = run_send(outbox_a, journal, DEFAULT_BASE_URL)
        assert code == 1 and "is bound to" in output, output

    stats, output, ids_b = _send_of_b_after(tmp_path, journal, refused)
    assert stats["per_invoice"].get("DELIVERED-1") == 1, output
    assert_each_delivered_once(stats, ids_b)


def test_a_scan_of_a_profiles_journal_without_its_profile_leaves_no_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """helper-78: `scan OUTBOX --journal <profile p's journal>` without `--profile p` read
    the marker's no-profile entry, which names the journal of the sends made without a
    profile: "lost", and a check begun on every such scan (and a full check on every next
    send). The journal's binding names the entry its sends read: p's, whole."""
    config = tmp_path / "config.toml"
    config.write_text("[profiles.p]\n", encoding="utf-8")
    monkeypatch.setenv("INVOICECTL_CONFIG", str(config))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    write_invoice(outbox, "INV-1")
    journal_p = tmp_path / "p.db"
    with BackgroundServer(emulator()) as server:
        code, output = run_send(outbox, journal_p, server.base_url, "--profile", "p")
        assert code == 0, output
        code, output = run_send(outbox, tmp_path / "plain.db", server.base_url)
        assert code in (0, 4), output  # 4: INV-1, sent through profile p, is held
        write_invoice(outbox, "INV-2")
        code, out, err = run_cli(journal_p, server.base_url, "scan", str(outbox))
    assert code == 0, out + err
    with open_journal(journal_p) as opened:
        assert opened.unfinished_history_check() is None

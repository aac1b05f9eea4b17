"""``invoicectl doctor`` against the emulator and a hostile server (issue 12, item 4).

Real HTTP on loopback (``BackgroundServer`` and ``tests/hostile.py``), real journal files.
Each test runs the command line itself (typer's runner, in this process) with the settings
in the environment, as an operator's shell would give them.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest
from hostile import HostileServer, answer, answer_json, endless, hang, per_request, routes
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.cli import app
from invoicectl.doctor.checks import DETAIL_KEYS, NAMES
from invoicectl.errors import JournalLocked
from invoicectl.journal import Journal
from invoicectl.journal.runlock import (
    LockState,
    RunLock,
    _held_per_kernel,
    _held_per_probe,
    lock_path_for,
    lock_state,
)
from invoicectl.sandbox import DEFAULT_API_KEY, BackgroundServer, Sandbox
from invoicectl.scan.ingest import scan_directory

runner = CliRunner()
SECRET = "sk_live_doctor_secret_4f9a1c"


@pytest.fixture(autouse=True)
def journal_made(isolated_environment: Path) -> Path:
    """The journal the settings name, made as a first scan makes it: doctor fails a journal
    that is not there (``test_missing_journal.py``)."""
    Journal(isolated_environment).close()
    return isolated_environment


@pytest.fixture
def emulator() -> Iterator[str]:
    with BackgroundServer(Sandbox()) as server:
        yield server.base_url


def doctor(
    monkeypatch: pytest.MonkeyPatch, base_url: str, *args: str, key: str | None = DEFAULT_API_KEY
) -> Any:
    monkeypatch.setenv("GOROUTE_BASE_URL", base_url)
    if key is not None:
        monkeypatch.setenv("GOROUTE_API_KEY", key)
    return runner.invoke(app, ["doctor", *args])


def assert_stable(document: dict[str, Any]) -> None:
    """Every check is there, in order, with every one of its keys, whatever its status."""
    assert list(document) == ["ok", "exit_code", "checks"]
    assert [check["name"] for check in document["checks"]] == list(NAMES)
    for check in document["checks"]:
        assert list(check) == ["name", "status", "message", "details"]
        assert list(check["details"]) == list(DETAIL_KEYS[check["name"]]), check["name"]


def by_name(result: Any) -> dict[str, str]:
    """Each check's line, by its name (the lines are in NAMES order), without the status."""
    lines = result.stdout.splitlines()
    assert len(lines) == len(NAMES) + 1, result.stdout
    return {name: line for name, line in zip(NAMES, lines, strict=False)}


def statuses(result: Any) -> dict[str, str]:
    return {name: line.split()[0] for name, line in by_name(result).items()}


def test_every_check_passes_against_the_emulator(
    monkeypatch: pytest.MonkeyPatch, emulator: str, tmp_path: Path
) -> None:
    result = doctor(monkeypatch, emulator)

    assert result.exit_code == 0, result.output
    assert set(statuses(result).values()) == {"ok"}, result.stdout
    lines = by_name(result)
    assert "journal from $INVOICECTL_JOURNAL, base_url from $GOROUTE_BASE_URL" in lines["config"]
    assert "from $GOROUTE_API_KEY, fingerprint " in lines["api_key"]
    assert "version sandbox-1.0, environment sandbox, status ok" in lines["base_url"]
    assert "the key is accepted" in lines["credentials"]
    assert lines["journal"].startswith("ok ") and "quick_check ok" in lines["journal"]
    assert result.stdout.splitlines()[-1] == "all 8 checks passed"


def test_the_json_has_stable_keys_and_every_check(
    monkeypatch: pytest.MonkeyPatch, emulator: str
) -> None:
    result = doctor(monkeypatch, emulator, "--json")

    document = json.loads(result.stdout)
    assert result.exit_code == 0 and document["exit_code"] == 0 and document["ok"] is True
    assert list(document) == ["ok", "exit_code", "checks"]
    assert [check["name"] for check in document["checks"]] == list(NAMES)
    assert_stable(document)
    journal = document["checks"][NAMES.index("journal")]["details"]
    assert journal["exists"] is True and journal["schema"] == "current"


def test_an_existing_journal_is_examined_and_left_as_it_was(
    monkeypatch: pytest.MonkeyPatch, emulator: str, tmp_path: Path, outbox: Path
) -> None:
    journal = tmp_path / "journal.db"
    write_invoice(outbox, "INV-1")
    with Journal(journal) as opened:
        scan_directory(opened, outbox)
        opened.bind_base_url(emulator)
    before = journal.read_bytes()

    result = doctor(monkeypatch, emulator, "--journal", str(journal))

    assert result.exit_code == 0, result.output
    line = by_name(result)["journal"]
    assert f"{journal}: " in line and f"quick_check ok, writable, bound to {emulator}" in line
    assert journal.read_bytes() == before


def test_a_journal_bound_elsewhere_fails(
    monkeypatch: pytest.MonkeyPatch, emulator: str, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.db"
    with Journal(journal) as opened:
        opened.bind_base_url("https://app.goroute.ai/peppol-api")

    result = doctor(monkeypatch, emulator, "--journal", str(journal))

    assert result.exit_code == 1, result.output
    assert (
        "is bound to https://app.goroute.ai/peppol-api, but the settings send to"
        in (by_name(result)["journal"])
    )


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("pages", "is damaged: quick_check found"),
        ("garbage", "cannot be read as a journal: file is not a database"),
    ],
)
def test_a_damaged_journal_fails_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
    emulator: str,
    tmp_path: Path,
    outbox: Path,
    damage: str,
    expected: str,
) -> None:
    journal = tmp_path / "journal.db"
    if damage == "garbage":
        journal.write_bytes(b"this is not SQLite " * 500)
    else:
        for number in range(40):
            write_invoice(outbox, f"INV-{number}", padding=2000)
        with Journal(journal) as opened:
            scan_directory(opened, outbox)
            opened.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        data = bytearray(journal.read_bytes())
        page = 16384
        for offset in range(3 * page, len(data) - page, 4 * page):  # every fourth page
            data[offset + 100 : offset + 2000] = b"\xa5" * 1900
        journal.write_bytes(bytes(data))

    result = doctor(monkeypatch, emulator, "--journal", str(journal))

    assert result.exit_code == 1, result.output
    line = by_name(result)["journal"]
    assert line.startswith("fail    journal") and expected in line, line
    assert "Traceback" not in result.output


def test_a_journal_whose_chain_migration_was_unrecorded_fails_as_every_run_refuses_it(
    monkeypatch: pytest.MonkeyPatch, emulator: str, tmp_path: Path
) -> None:
    """helper-56: doctor said "its schema is upgraded at the next run" of a journal whose
    record of m009 (the hash chain's start) was deleted, which every run refuses."""
    import sqlite3

    journal = tmp_path / "journal.db"
    Journal(journal).close()
    with sqlite3.connect(journal) as conn:
        conn.execute("DELETE FROM _sqlite_migrations WHERE name = 'm009_audit_chain'")
    conn.close()

    result = doctor(monkeypatch, emulator, "--journal", str(journal))
    status = runner.invoke(app, ["status", "--journal", str(journal)])

    assert result.exit_code == status.exit_code == 1, result.output
    line = by_name(result)["journal"]
    assert line.startswith("fail    journal"), line
    assert "lacks migration m009_audit_chain but records later ones" in line
    assert "lacks migration m009_audit_chain" in status.output


def test_a_held_lock_names_its_holder_and_passes(
    monkeypatch: pytest.MonkeyPatch, emulator: str, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.db"
    Journal(journal).close()
    with RunLock(journal, "send") as lock:
        result = doctor(monkeypatch, emulator, "--journal", str(journal), "--json")
        holder = lock.holder
        # Looking did not take it: the run that holds it still does, and another may not.
        with pytest.raises(JournalLocked, match="another invoicectl send holds the journal"):
            RunLock(journal, "scan").acquire()
    assert holder is not None
    document = json.loads(result.stdout)
    check = document["checks"][NAMES.index("lock")]
    assert result.exit_code == 0 and check["status"] == "warn", check
    assert check["details"]["pid"] == holder.pid and check["details"]["command"] == "send"
    assert "held by invoicectl send, pid " in check["message"]
    assert lock_state(journal) == LockState(held=False)


def test_a_lock_path_that_is_a_directory_fails_the_lock_check(
    monkeypatch: pytest.MonkeyPatch, emulator: str, tmp_path: Path
) -> None:
    """Every run exits 1 there (it cannot open the lock to write its name): doctor said
    "free"."""
    journal = tmp_path / "journal.db"
    lock_path_for(journal).mkdir()
    result = doctor(monkeypatch, emulator, "--journal", str(journal), "--json")
    check = json.loads(result.stdout)["checks"][NAMES.index("lock")]
    assert check["status"] == "fail" and "is not a regular file" in check["message"], check
    assert result.exit_code == 1


def test_the_lock_is_seen_held_by_the_kernel_s_list_and_by_a_probe(tmp_path: Path) -> None:
    journal = tmp_path / "journal.db"
    assert lock_state(journal) == LockState(held=False)
    assert not lock_path_for(journal).exists()  # looking made no lock file
    with RunLock(journal, "send"), open(lock_path_for(journal)) as seen:
        info = os.fstat(seen.fileno())
        assert _held_per_kernel(info) in (True, None)  # None: no /proc/locks here
        assert _held_per_probe(seen.fileno()) is True
    with open(lock_path_for(journal)) as seen:
        assert _held_per_kernel(os.fstat(seen.fileno())) in (False, None)
        assert _held_per_probe(seen.fileno()) is False


def test_a_wrong_base_url_fails_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    page = answer(404, b"<html><h1>Not Found</h1></html>", {"Content-Type": "text/html"})
    with HostileServer(page) as server:
        result = doctor(monkeypatch, server.base_url + "/peppol-apii")

    assert result.exit_code == 1, result.output
    lines = by_name(result)
    assert "GET /peppol/version answered 404 (text/html), not GoRoute's JSON" in lines["base_url"]
    assert "the base URL is wrong" in lines["credentials"]


def test_a_proxy_that_stopped_waiting_is_try_again_later_not_a_wrong_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """helper-85: a proxy's 408 page (HTML) was "not GoRoute's JSON: the base URL is wrong",
    exit 1; it says to ask again, as a 503 does: exit 75."""
    page = answer(408, b"<html><h1>408 Request Time-out</h1></html>", {"Content-Type": "text/html"})
    with HostileServer(page) as server:
        result = doctor(monkeypatch, server.base_url)

    assert result.exit_code == 75, result.output
    lines = by_name(result)
    assert "answered 408" in lines["base_url"] and "try again later" in lines["base_url"]
    assert "try again later" in lines["credentials"]
    assert "base URL is wrong" not in result.output


@pytest.mark.parametrize(
    ("key", "status"), [("sk_test_not_a_key_at_all", 401), ("sk_test_forbidden_1", 403)]
)
def test_a_refused_key_exits_5_and_never_shows_the_key(
    monkeypatch: pytest.MonkeyPatch, emulator: str, key: str, status: int
) -> None:
    result = doctor(monkeypatch, emulator, key=key)

    assert result.exit_code == 5, result.output
    line = by_name(result)["credentials"]
    assert line.startswith("fail") and f"answered {status}" in line, line
    assert "GoRoute refused the key (fingerprint " in line
    assert key not in result.output


def test_no_key_is_a_failure_and_the_credentials_are_not_asked(
    monkeypatch: pytest.MonkeyPatch, emulator: str
) -> None:
    result = doctor(monkeypatch, emulator, key=None)

    assert result.exit_code == 1
    assert statuses(result)["api_key"] == "fail" and statuses(result)["credentials"] == "skipped"
    assert statuses(result)["base_url"] == "ok"


def _goroute_at(clock_offset: timedelta) -> Any:
    """GoRoute's two probed answers, with a Date ``clock_offset`` from this machine's."""

    def dated(status: int, data: Any) -> Any:
        def behave(request: Any, wire: Any) -> None:
            stamp = format_datetime(datetime.now(UTC) + clock_offset, usegmt=True)
            answer_json(status, data, {"Date": stamp})(request, wire)

        return behave

    return routes(
        {
            ("GET", "/peppol/version"): dated(200, {"version": "2.1", "status": "ok"}),
            ("GET", "/api/v1/transactions"): dated(200, {"transactions": []}),
        }
    )


@pytest.mark.parametrize(
    ("offset", "status", "code", "said"),
    [
        (timedelta(0), "ok", 0, "within "),
        (timedelta(seconds=-30), "warn", 0, "ahead of GoRoute's"),
        (timedelta(minutes=10), "fail", 1, "10 min 0 s behind GoRoute's"),
    ],
)
def test_the_clock_against_goroute_s_date(
    monkeypatch: pytest.MonkeyPatch, offset: timedelta, status: str, code: int, said: str
) -> None:
    with HostileServer(_goroute_at(offset)) as server:
        result = doctor(monkeypatch, server.base_url)

    assert result.exit_code == code, result.output
    line = by_name(result)["clock"]
    assert line.split()[0] == status and said in line, line


@pytest.mark.parametrize("behaviour", [hang(), endless(200)], ids=["hang", "endless"])
def test_a_server_that_never_answers_whole_is_bounded(
    monkeypatch: pytest.MonkeyPatch, behaviour: Any
) -> None:
    monkeypatch.setenv("INVOICECTL_REQUEST_TIMEOUT", "1")
    started = time.monotonic()
    with HostileServer(behaviour) as server:
        result = doctor(monkeypatch, server.base_url)
    took = time.monotonic() - started

    assert took < 20, took  # a generous "does not hang" bound, not a timing target
    assert result.exit_code == 75, result.output
    assert statuses(result)["base_url"] == "fail"
    assert statuses(result)["credentials"] == "skipped"


@pytest.mark.parametrize("page", [False, True], ids=["json", "web-page"])
def test_a_server_echoing_the_key_everywhere_never_gets_it_shown(
    monkeypatch: pytest.MonkeyPatch, page: bool
) -> None:
    def echo(request: Any) -> Any:
        key = request.headers.get("x-api-key", "")
        headers = {"Date": key, "Content-Type": f"text/{key}", "X-Request-Id": key}
        if page:  # a web server's page for every path, the key in its type and its words
            return answer(404, f"<p>no {key} here</p>".encode(), headers, reason=key)
        if request.path.startswith("/peppol/version"):
            return answer_json(200, {"version": key, "environment": f"env {key}", "status": key})
        message = {"error": {"code": "INVALID_API_KEY", "message": f"bad key {key}"}}
        body = json.dumps(message).encode()
        return answer(401, body, {**headers, "Content-Type": "application/json"}, reason=key)

    with HostileServer(per_request(echo)) as server:
        plain = doctor(monkeypatch, server.base_url, key=SECRET)
        as_json = doctor(monkeypatch, server.base_url, "--json", key=SECRET)

    assert (plain.exit_code, as_json.exit_code) == ((1, 1) if page else (5, 5)), plain.output
    for output in (plain.output, as_json.output):
        assert SECRET not in output
        assert SECRET[8:] not in output
    assert "[redacted]" in by_name(plain)["base_url" if page else "credentials"]
    assert_stable(json.loads(as_json.stdout))


@pytest.mark.parametrize(
    "setting",
    ['rate = "fast"', "retention_years = 0"],  # export's alone: doctor said all was well
)
def test_a_bad_setting_fails_the_config_check_and_skips_the_rest(
    monkeypatch: pytest.MonkeyPatch, emulator: str, tmp_path: Path, setting: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(setting + "\n")
    monkeypatch.setenv("INVOICECTL_CONFIG", str(config))

    result = doctor(monkeypatch, emulator)

    assert result.exit_code == 1, result.output
    lines = by_name(result)
    name = setting.split()[0]
    assert lines["config"].startswith("fail") and f"{name} (config file" in lines["config"]
    assert {statuses(result)[name] for name in NAMES[1:]} == {"skipped"}
    assert_stable(json.loads(doctor(monkeypatch, emulator, "--json").stdout))


def test_the_sandbox_is_checked_in_this_process(tmp_path: Path) -> None:
    Journal(tmp_path / "s.db").close()
    result = runner.invoke(app, ["doctor", "--sandbox", "--journal", str(tmp_path / "s.db")])

    assert result.exit_code == 0, result.output
    assert not (tmp_path / "s-emulator.json").exists()


def test_a_journal_that_could_never_be_made_fails(
    monkeypatch: pytest.MonkeyPatch, emulator: str, tmp_path: Path
) -> None:
    # /proc takes no new directory, whatever os.access says to root.
    monkeypatch.setenv("INVOICECTL_JOURNAL", "/proc/invoicectl-doctor/journal.db")
    result = doctor(monkeypatch, emulator)

    assert statuses(result)["journal"] == "fail", result.stdout
    assert result.exit_code != 0
    assert not list(Path("/proc").glob(".invoicectl-doctor-*"))
    assert not list(tmp_path.glob(".invoicectl-doctor-*"))


@pytest.mark.parametrize(
    ("word", "status"), [("operational", "ok"), ("UP", "ok"), ("degraded", "warn")]
)
def test_a_healthy_status_word_other_than_ok_passes(
    monkeypatch: pytest.MonkeyPatch, word: str, status: str
) -> None:
    """The docs list no values for the version endpoint's status: 'operational' warned."""
    behaviour = routes(
        {
            ("GET", "/peppol/version"): answer_json(200, {"version": "2.1", "status": word}),
            ("GET", "/api/v1/transactions"): answer_json(200, {"transactions": []}),
        }
    )
    with HostileServer(behaviour) as server:
        result = doctor(monkeypatch, server.base_url)

    assert by_name(result)["base_url"].split()[0] == status, result.output


def test_an_index_that_lacks_rows_of_its_table_fails_the_journal_check(
    monkeypatch: pytest.MonkeyPatch, emulator: str, journal_made: Path, tmp_path: Path
) -> None:
    """helper-47: invoices_state_id missing three rows passed quick_check; doctor said ok,
    status counted 0 pending and a send skipped them, exit 0."""
    import sqlite3

    outbox = tmp_path / "outbox"
    outbox.mkdir()
    for number in range(3):
        write_invoice(outbox, f"OLD-{number}")
    with Journal(journal_made) as journal:
        scan_directory(journal, outbox)
    with sqlite3.connect(journal_made, isolation_level=None) as conn:  # the index detached...
        row = conn.execute(
            "SELECT type, name, tbl_name, rootpage, sql FROM sqlite_master"
            " WHERE name = 'invoices_state_id'"
        ).fetchone()
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute("DELETE FROM sqlite_master WHERE name = 'invoices_state_id'")
    for number in range(3):
        write_invoice(outbox, f"NEW-{number}")
    with Journal(journal_made) as journal:  # ...while three more rows are written...
        scan_directory(journal, outbox)
    with sqlite3.connect(journal_made, isolation_level=None) as conn:  # ...and put back
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute("INSERT INTO sqlite_master VALUES (?, ?, ?, ?, ?)", row)
    with sqlite3.connect(journal_made) as conn:
        assert conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]

    result = doctor(monkeypatch, emulator)

    assert result.exit_code == 1, result.output
    line = by_name(result)["journal"]
    assert line.startswith("FAIL") or "fail" in line.split()[0].lower(), line
    assert (
        "index invoices_state_id lists 3 rows, table invoices 6: REINDEX invoices_state_id" in line
    )

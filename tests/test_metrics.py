"""The metrics file (issue 12, item 1): Prometheus text, read back with prometheus_client's own
parser, its values checked against the journal after real sends to the emulator."""

from __future__ import annotations

import json
import os
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from journalkit import force
from prometheus_client.parser import text_string_to_metric_families
from sendkit import emulator, send, settings_for
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.cli import app
from invoicectl.cli.monitoring import write_run_metrics
from invoicectl.journal import Journal
from invoicectl.journal.records import InvoiceState
from invoicectl.lifecycle.holds import abandon
from invoicectl.metrics import LABELS

FAST = ["--rate", "60000"]


def samples(path: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, its labels but ``writer`` and ``profile``) -> value, from the file as
    Prometheus reads it."""
    found = {}
    for family in text_string_to_metric_families(path.read_text(encoding="utf-8")):
        for sample in family.samples:
            labels = tuple(sorted((k, v) for k, v in sample.labels.items() if k not in LABELS))
            found[(sample.name, labels)] = sample.value
    return found


def test_a_send_writes_the_journal_s_counts_and_its_own_requests(outbox: Path, tmp_path: Path):
    for number in range(4):
        write_invoice(outbox, f"INV-{number}")
    (outbox / "broken.xml").write_bytes(b"<not-ubl/>")
    prom = tmp_path / "send.prom"

    result = CliRunner().invoke(
        app, ["send", str(outbox), "--sandbox", *FAST, "--metrics-file", str(prom)]
    )

    assert result.exit_code == 3, result.output  # the broken file
    found = samples(prom)
    journal_path = tmp_path / "state" / "sandbox.db"
    with Journal(journal_path) as journal:
        counts = journal.state_counts()
        (run_id, started, finished) = journal.db.execute(
            "SELECT id, started_at, finished_at FROM runs WHERE command = 'send'"
        ).fetchone()
        outcomes = journal.run_outcomes(run_id)
    for state in InvoiceState:
        assert found[("invoicectl_invoices", (("state", state),))] == counts[state]
    assert counts[InvoiceState.accepted] == 4 and counts[InvoiceState.invalid] == 1
    assert outcomes == {"accepted": 4}
    assert found[("invoicectl_run_requests", (("outcome", "accepted"),))] == 4
    assert found[("invoicectl_run_exit_code", ())] == 3
    assert found[("invoicectl_run_request_latency_seconds_count", ())] == 4
    assert found[("invoicectl_run_ingest_to_accept_seconds_count", ())] == 4
    assert found[("invoicectl_run_rate_limited_answers", ())] == 0
    assert ("invoicectl_run_waited_rate_limit_seconds", ()) in found
    assert ("invoicectl_run_waited_retry_after_seconds", ()) in found
    last = found[("invoicectl_last_run_timestamp_seconds", (("command", "send"),))]
    assert last == datetime.fromisoformat(started).timestamp()
    # Exit 3 is no success: no send has succeeded yet.
    assert ("invoicectl_last_success_timestamp_seconds", (("command", "send"),)) not in found
    assert finished is not None
    assert found[("invoicectl_oldest_waiting_age_seconds", ())] == 0
    assert not list(tmp_path.glob("send.prom.*")), "the temporary file is left behind"


def test_ages_closing_windows_and_delivery_failures_are_the_journal_s(tmp_path: Path):
    """Sent for real to the emulator, then staged: one invoice waiting 3 hours, one unknown
    whose key was first used 23 hours ago, one accepted whose delivery failed."""
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    for invoice_id in ("INV-A", "INV-B", "INV-C", "INV-D"):
        write_invoice(outbox, invoice_id)
    journal_path = tmp_path / "journal.db"
    settings = settings_for(journal_path)
    _, summary = send(settings, outbox, emulator().transport())
    assert summary.counts() == {InvoiceState.accepted: 4}
    now = datetime.now(UTC)
    with Journal(journal_path) as journal:
        force(journal, "INV-A", state="pending", ingested_at=(now - timedelta(hours=3)).isoformat())
        force(
            journal,
            "INV-B",
            state="unknown",
            ingested_at=(now - timedelta(hours=23, minutes=30)).isoformat(),
            key_first_used_at=(now - timedelta(hours=23)).isoformat(),
        )
        force(journal, "INV-C", remote_status="failed")
        force(journal, "INV-D", remote_status="delivered")
    prom = tmp_path / "metrics.prom"

    assert write_run_metrics(prom, journal_path, "status") is None

    found = samples(prom)
    waiting = found[("invoicectl_oldest_waiting_age_seconds", ())]
    unresolved = found[("invoicectl_oldest_unresolved_age_seconds", ())]
    # Ages from the staged times; generous bounds: this is the journal's clock, not a timer.
    assert 3 * 3600 <= waiting < 3 * 3600 + 120
    assert 23.5 * 3600 <= unresolved < 23.5 * 3600 + 120
    assert found[("invoicectl_keys_window_closing", ())] == 1
    assert found[("invoicectl_delivery_failures", ())] == 1
    assert found[("invoicectl_invoices", (("state", "unknown"),))] == 1
    assert found[("invoicectl_invoices", (("state", "accepted"),))] == 2
    success = found[("invoicectl_last_success_timestamp_seconds", (("command", "send"),))]
    assert abs(success - now.timestamp()) < 120
    assert ("invoicectl_run_requests", (("outcome", "accepted"),)) not in found  # a status


def test_abandoned_invoices_age_in_no_alert(tmp_path: Path):
    """Abandoned (settled outside invoicectl, asking nothing more), a pending invoice of last
    week and an unknown one of yesterday kept the waiting and unresolved ages growing, and
    the README's InvoicectlOldWorkWaiting alert fired for good."""
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    for invoice_id in ("INV-A", "INV-B"):
        write_invoice(outbox, invoice_id)
    journal_path = tmp_path / "journal.db"
    send(settings_for(journal_path), outbox, emulator().transport())
    now = datetime.now(UTC)
    with Journal(journal_path) as journal:
        force(journal, "INV-A", state="pending", ingested_at=(now - timedelta(days=7)).isoformat())
        force(
            journal,
            "INV-B",
            state="unknown",
            ingested_at=(now - timedelta(days=1)).isoformat(),
            key_first_used_at=(now - timedelta(hours=23)).isoformat(),
        )
        for invoice_id in ("INV-A", "INV-B"):
            assert abandon(journal, invoice_id, "paid by hand", by="ops", force=True).done
    prom = tmp_path / "metrics.prom"

    assert write_run_metrics(prom, journal_path, "status") is None

    found = samples(prom)
    assert found[("invoicectl_oldest_waiting_age_seconds", ())] == 0
    assert found[("invoicectl_oldest_unresolved_age_seconds", ())] == 0
    assert found[("invoicectl_keys_window_closing", ())] == 0


def test_a_metrics_file_that_cannot_be_written_is_one_line_and_no_new_exit_code(
    outbox: Path, tmp_path: Path
):
    write_invoice(outbox, "INV-1")
    nowhere = tmp_path / "no such directory" / "send.prom"
    runner = CliRunner()

    sent = runner.invoke(
        app, ["send", str(outbox), "--sandbox", *FAST, "--metrics-file", str(nowhere)]
    )
    status = runner.invoke(app, ["status", "--sandbox", "--metrics-file", str(nowhere)])
    plain = runner.invoke(app, ["status", "--sandbox"])

    assert sent.exit_code == 0, sent.output
    assert status.exit_code == plain.exit_code == 0
    for result in (sent, status):
        said = [line for line in result.stderr.splitlines() if "the metrics file" in line]
        assert said == [
            f"invoicectl: cannot write the metrics file {nowhere}: No such file or directory"
        ]
        assert "Traceback" not in result.output
        # The exit line stays the run's last (it came before the metrics file's line).
        assert result.stderr.splitlines()[-1].startswith("exit 0: "), result.stderr


@pytest.mark.parametrize(("where", "exit_code"), [("option", 2), ("config", 1)])
@pytest.mark.parametrize("path", ["", "nowhere\n2026-01-01T00:00:00Z exit 0: 1 accepted.prom"])
def test_an_empty_metrics_path_or_one_with_a_line_break_is_refused_in_one_line(
    outbox: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    where: str,
    exit_code: int,
):
    """helper-51: the path's line break started a line of its own in the log, one that could
    pass for another run's `exit 0: ...`; helper-57: it was taken at all (the setting must
    be text without control characters), and an empty `--metrics-file ''` was the current
    directory. Either is refused before anything runs: exit 2 from the command line, 1 from
    the config file, and the line names the setting."""
    write_invoice(outbox, "INV-1")
    args = ["send", str(outbox), "--sandbox", *FAST]
    if where == "option":
        args += ["--metrics-file", path]
    else:
        config = tmp_path / "config.toml"
        config.write_text(f"metrics_file = {json.dumps(path)}\n", encoding="utf-8")
        monkeypatch.setenv("INVOICECTL_CONFIG", str(config))

    sent = CliRunner().invoke(app, args)

    assert sent.exit_code == exit_code, sent.output
    (said,) = [line for line in sent.stderr.splitlines() if "error:" in line]
    assert "metrics_file" in said and "without control characters" in said
    assert not any(line.startswith("2026-01-01") for line in sent.stderr.splitlines())


def test_the_api_key_in_a_metrics_path_is_withheld_from_its_warning(outbox: Path, tmp_path: Path):
    """helper-57: a path that holds the key (a directory named after it, say) was said in
    full when the file could not be written."""
    from invoicectl.sandbox import DEFAULT_API_KEY

    write_invoice(outbox, "INV-1")
    nowhere = tmp_path / f"keys-{DEFAULT_API_KEY}" / "send.prom"

    sent = CliRunner().invoke(
        app, ["send", str(outbox), "--sandbox", *FAST, "--metrics-file", str(nowhere)]
    )

    assert sent.exit_code == 0, sent.output
    (said,) = [line for line in sent.stderr.splitlines() if "the metrics file" in line]
    assert "cannot write the metrics file" in said and "keys-" in said
    assert DEFAULT_API_KEY not in sent.output


def test_a_metrics_path_that_is_no_file_is_left_as_it_is_and_a_link_is_followed(
    outbox: Path, tmp_path: Path
):
    """``--metrics-file /dev/null`` to turn metrics off replaced the system's /dev/null with
    a regular file when run as root (the rename takes whatever stands at the path), and a
    link was replaced by a file instead of its target being written."""
    fifo = tmp_path / "metrics.fifo"
    os.mkfifo(fifo)
    target = tmp_path / "real.prom"
    link = tmp_path / "link.prom"
    link.symlink_to(target)
    write_invoice(outbox, "INV-1")
    runner = CliRunner()
    assert runner.invoke(app, ["send", str(outbox), "--sandbox", *FAST]).exit_code == 0

    to_fifo = runner.invoke(app, ["status", "--sandbox", "--metrics-file", str(fifo)])
    to_link = runner.invoke(app, ["status", "--sandbox", "--metrics-file", str(link)])

    assert to_fifo.exit_code == to_link.exit_code == 0, to_fifo.output + to_link.output
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert "is a FIFO (named pipe), not a file; nothing written" in to_fifo.stderr
    assert link.is_symlink() and "invoicectl_invoices" in target.read_text()
    loop = tmp_path / "loop.prom"
    loop.symlink_to(tmp_path / "back.prom")
    (tmp_path / "back.prom").symlink_to(loop)
    looped = runner.invoke(app, ["status", "--sandbox", "--metrics-file", str(loop)])
    assert looped.exit_code == 0 and "its links loop" in looped.stderr, looped.output


def test_the_config_key_metrics_file_is_used_by_status(
    tmp_path: Path, monkeypatch, isolated_environment: Path
) -> None:
    prom = tmp_path / "status.prom"
    config = tmp_path / "config.toml"
    config.write_text(f'metrics_file = "{prom}"\n', encoding="utf-8")
    monkeypatch.setenv("INVOICECTL_CONFIG", str(config))
    Journal(isolated_environment).close()  # status reads a journal; it makes none

    result = CliRunner().invoke(app, ["status"])

    assert result.exit_code == 0, result.output
    assert samples(prom)[("invoicectl_invoices", (("state", "pending"),))] == 0


def test_every_monitoring_query_reads_an_index(tmp_path: Path):
    """At a million invoices each question must cost its own few rows, not a table scan."""
    with Journal(tmp_path / "j.db") as journal:
        statements = journal_statements(journal)
        for sql, params in statements:
            plan = " ".join(
                row[3] for row in journal.db.execute(f"EXPLAIN QUERY PLAN {sql}", params)
            )
            assert "USING" in plan and "SCAN" not in plan, (sql, plan)


def journal_statements(journal: Journal) -> list[tuple[str, tuple[object, ...]]]:
    """The SQL each monitoring method runs, caught as it runs."""
    seen: list[tuple[str, tuple[object, ...]]] = []
    journal.db.conn.set_trace_callback(None)
    real = journal.db.execute

    def caught(sql: str, params: tuple[object, ...] = ()):  # type: ignore[no-untyped-def]
        seen.append((sql, tuple(params)))
        return real(sql, params)

    journal.db.execute = caught  # type: ignore[method-assign]
    try:
        journal.oldest_unfinished()
        journal.keys_first_used_between("a", "b")
        journal.delivery_failure_count()
        journal.db.execute(
            "INSERT INTO runs (command, options, pid, host, started_at)"
            " VALUES ('send', '{}', 1, 'h', 'x')"
        )
        journal.last_runs(("send",))
        journal.run_outcomes(1)
    finally:
        journal.db.execute = real  # type: ignore[method-assign]
    return [(sql, params) for sql, params in seen if sql.startswith("SELECT")]


@pytest.mark.parametrize("umask", [0o077, 0o027, 0o002, 0o000])
def test_the_metrics_file_is_readable_by_node_exporter_under_a_strict_umask(
    tmp_path: Path, umask: int
):
    """contrib's service runs with UMask=0077, and node_exporter as another user: a file only
    its owner may read would be a scrape error, every time. Metrics hold no secret. 0644
    whatever the umask: under 000 (or 002) the file was writable by all (or the group)."""
    import os

    prom = tmp_path / "send.prom"
    Journal(tmp_path / "j.db").close()  # status reads a journal; it makes none
    before = os.umask(umask)
    try:
        result = CliRunner().invoke(
            app, ["status", "--journal", str(tmp_path / "j.db"), "--metrics-file", str(prom)]
        )
    finally:
        os.umask(before)
    assert result.exit_code == 0, result.output
    assert prom.stat().st_mode & 0o777 == 0o644


def test_a_run_that_could_not_run_leaves_its_exit_code_not_the_last_good_one(
    outbox: Path, tmp_path: Path
):
    """A good run, then one whose journal is not SQLite (exit 1): the file said exit 0, the
    last good run's, and kept the stale figures (found by a review of unattended runs)."""
    write_invoice(outbox, "INV-1")
    prom = tmp_path / "send.prom"
    journal = tmp_path / "journal.db"
    args = ["send", str(outbox), "--sandbox", *FAST, "--metrics-file", str(prom)]

    good = CliRunner().invoke(app, [*args, "--journal", str(journal)])
    assert good.exit_code == 0, good.output
    assert samples(prom)[("invoicectl_run_exit_code", ())] == 0
    (tmp_path / "not-a-journal.db").write_bytes(b"plain text, no SQLite header" * 100)
    bad = CliRunner().invoke(app, [*args, "--journal", str(tmp_path / "not-a-journal.db")])

    assert bad.exit_code == 1, bad.output
    found = samples(prom)
    assert found[("invoicectl_run_exit_code", ())] == 1
    assert not any(name == "invoicectl_invoices" for name, _ in found)  # nothing stale
    assert "without the journal's figures" in bad.stderr


def test_a_send_whose_outbox_is_gone_writes_its_exit_code(outbox: Path, tmp_path: Path):
    """helper-51: an outbox moved away (an unmounted share) ended the run before the metrics
    were set to be written: the file kept the last good run's exit code 0."""
    write_invoice(outbox, "INV-1")
    prom = tmp_path / "send.prom"
    journal = tmp_path / "journal.db"
    args = [*FAST, "--metrics-file", str(prom), "--journal", str(journal)]
    good = CliRunner().invoke(app, ["send", str(outbox), "--sandbox", *args])
    assert good.exit_code == 0, good.output
    gone = tmp_path / "unmounted"

    bad = CliRunner().invoke(app, ["send", str(gone), "--sandbox", *args])

    assert bad.exit_code != 0, bad.output
    assert samples(prom)[("invoicectl_run_exit_code", ())] == bad.exit_code


def test_a_run_that_found_the_journal_locked_writes_exit_6(outbox: Path, tmp_path: Path):
    from invoicectl.journal.runlock import RunLock

    write_invoice(outbox, "INV-1")
    prom = tmp_path / "send.prom"
    journal = tmp_path / "journal.db"
    args = ["send", str(outbox), "--sandbox", *FAST, "--metrics-file", str(prom)]
    with RunLock(journal, command="send"):
        result = CliRunner().invoke(app, [*args, "--journal", str(journal)])

    assert result.exit_code == 6, result.output
    assert samples(prom)[("invoicectl_run_exit_code", ())] == 6

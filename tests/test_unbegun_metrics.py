"""helper-68: a command that ended before its settings were resolved (a key file others may
read, a bad config value, no API key, a bad ``$INVOICECTL_REQUEST_TIMEOUT``, a usage error)
left the metrics file as the last good run wrote it: ``invoicectl_run_exit_code 0`` while the
cron job exited 1 or 2 every five minutes. It is now written with the exit code alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.cli import app
from invoicectl.sandbox import DEFAULT_API_KEY

FAST = ["--rate", "60000"]


def samples(path: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, its labels) -> value, as Prometheus reads the file."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(path.read_text(encoding="utf-8"))
        for sample in family.samples
    }


def exit_code_in(path: Path, writer: str = "send", profile: str = "") -> float:
    found = samples(path)
    return found[("invoicectl_run_exit_code", (("profile", profile), ("writer", writer)))]


def good_send(outbox: Path, prom: Path) -> None:
    write_invoice(outbox, "INV-1")
    good = CliRunner().invoke(
        app, ["send", str(outbox), "--sandbox", *FAST, "--metrics-file", str(prom)]
    )
    assert good.exit_code == 0, good.output
    assert exit_code_in(prom, profile="sandbox") == 0
    assert any(name == "invoicectl_invoices" for name, _ in samples(prom))


def key_file(tmp_path: Path, mode: int) -> Path:
    key = tmp_path / "api-key"
    key.write_text(DEFAULT_API_KEY, encoding="utf-8")
    key.chmod(mode)
    return key


@pytest.mark.parametrize("failure", ["key file 0644", "max_attempts = 0", "no key", "timeout"])
def test_a_setting_refused_writes_exit_1_not_the_last_good_run_s_0(
    outbox: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str
):
    prom = tmp_path / "send.prom"
    good_send(outbox, prom)
    args = ["send", str(outbox), "--metrics-file", str(prom)]
    if failure == "key file 0644":
        args += ["--api-key-file", str(key_file(tmp_path, 0o644))]
    elif failure == "max_attempts = 0":
        args += ["--api-key-file", str(key_file(tmp_path, 0o600))]
        config = tmp_path / "config.toml"
        config.write_text("max_attempts = 0\n", encoding="utf-8")
        monkeypatch.setenv("INVOICECTL_CONFIG", str(config))
    elif failure == "timeout":
        args += ["--api-key-file", str(key_file(tmp_path, 0o600))]
        monkeypatch.setenv("INVOICECTL_REQUEST_TIMEOUT", "soon")

    bad = CliRunner().invoke(app, args)

    assert bad.exit_code == 1, bad.output
    assert exit_code_in(prom) == 1
    # No figures of a journal it never opened: only the exit code.
    assert [name for name, _ in samples(prom)] == ["invoicectl_run_exit_code"]
    assert "metrics" not in bad.stderr  # the error line is the one line said
    assert bad.stderr.splitlines()[-1].startswith("exit 1: "), bad.stderr


@pytest.mark.parametrize("command", ["send", "reconcile", "status"])
def test_a_usage_error_writes_exit_2(outbox: Path, tmp_path: Path, command: str):
    prom = tmp_path / f"{command}.prom"
    prom.write_text(f'invoicectl_run_exit_code{{writer="{command}"}} 0.0\n', encoding="utf-8")
    args = {"send": ["send", str(outbox), "--rate", "fast"], "reconcile": ["reconcile", "--rate",
            "fast"], "status": ["status", "--limit", "many"]}[command]  # fmt: skip

    bad = CliRunner().invoke(app, ["--log-format", "json", *args, "--metrics-file", str(prom)])

    assert bad.exit_code == 2, bad.output
    assert exit_code_in(prom, command) == 2


def test_the_config_file_s_metrics_file_is_written_the_profile_s_first(
    outbox: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    top, acme = tmp_path / "top.prom", tmp_path / "acme.prom"
    config = tmp_path / "config.toml"
    config.write_text(
        f"metrics_file = {json.dumps(str(top))}\nmax_wait = -1\n"
        f"[profiles.acme]\nmetrics_file = {json.dumps(str(acme))}\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("INVOICECTL_CONFIG", str(config))

    status = CliRunner().invoke(app, ["status"])
    send = CliRunner().invoke(app, ["send", str(outbox), "--profile", "acme"])

    assert status.exit_code == send.exit_code == 1, (status.output, send.output)
    assert exit_code_in(top, "status") == 1
    assert exit_code_in(acme, "send", profile="acme") == 1
    assert [labels for name, labels in samples(top)] == [(("profile", ""), ("writer", "status"))]


@pytest.mark.parametrize("where", ["option", "config"])
def test_a_metrics_path_that_is_the_bad_setting_is_refused_and_not_written(
    outbox: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
):
    bad_path = str(tmp_path / "send\n2026-01-01T00:00:00Z exit 0: 1 accepted.prom")
    args = ["send", str(outbox), "--sandbox"]
    if where == "option":
        args += ["--metrics-file", bad_path]
    else:
        config = tmp_path / "config.toml"
        config.write_text(f"metrics_file = {json.dumps(bad_path)}\n", encoding="utf-8")
        monkeypatch.setenv("INVOICECTL_CONFIG", str(config))
    before = set(tmp_path.iterdir())

    bad = CliRunner().invoke(app, args)

    assert bad.exit_code == (2 if where == "option" else 1), bad.output
    assert set(tmp_path.iterdir()) - before <= {tmp_path / "state"}  # no metrics file
    said = [line for line in bad.stderr.splitlines() if line.startswith("invoicectl:")]
    assert len(said) == 1 and "metrics_file" in said[0], bad.stderr


def test_a_dry_run_or_help_leaves_the_metrics_file_as_it_is(
    outbox: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    prom = tmp_path / "send.prom"
    good_send(outbox, prom)
    written = prom.read_text(encoding="utf-8")
    monkeypatch.setenv("INVOICECTL_REQUEST_TIMEOUT", "soon")
    runner = CliRunner()

    dry = runner.invoke(app, ["send", str(outbox), "--dry-run", "--metrics-file", str(prom)])
    helped = runner.invoke(app, ["send", "-h", "--metrics-file", str(prom)])

    assert dry.exit_code == 1 and helped.exit_code == 0, (dry.output, helped.output)
    assert prom.read_text(encoding="utf-8") == written


def test_a_signal_after_the_run_s_exit_code_is_recorded_changes_nothing(
    outbox: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """helper-68: a SIGTERM landing just after send recorded its run as exit 0 (here, as the
    outbox marker is written last) made the process exit 130 while the runs row, and with it
    the metrics' last success, said 0."""
    import os
    import signal
    import sqlite3

    from invoicectl.send import marker

    write_invoice(outbox, "INV-1")
    prom, journal = tmp_path / "send.prom", tmp_path / "journal.db"
    real_write = marker.MarkerKeeper.write

    def write_after_a_signal(keeper: marker.MarkerKeeper) -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # held by the run's handler: recorded, not raised
        real_write(keeper)

    monkeypatch.setattr(marker.MarkerKeeper, "write", write_after_a_signal)
    args = ["--journal", str(journal), "--metrics-file", str(prom)]

    sent = CliRunner().invoke(app, ["send", str(outbox), "--sandbox", *FAST, *args])

    (recorded,) = sqlite3.connect(journal).execute("SELECT exit_code FROM runs").fetchone()
    assert sent.exit_code == recorded == 0, sent.output
    assert exit_code_in(prom, profile="sandbox") == 0


def test_a_profile_asked_for_and_refused_is_never_a_label_nor_another_jobs_file(
    outbox: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """helper-71: `--profile $GOROUTE_API_KEY` (refused: unknown, the key hidden) wrote the
    key into the metrics file as its profile label, a file of mode 0644 node_exporter hands
    on; a typo `--profile acm` wrote over the top-level job's file."""
    top, mine = tmp_path / "top.prom", tmp_path / "mine.prom"
    config = tmp_path / "config.toml"
    config.write_text(f"metrics_file = {json.dumps(str(top))}\n", encoding="utf-8")
    monkeypatch.setenv("INVOICECTL_CONFIG", str(config))
    key = "sk_live_main_5d4c0e2a9f1b7c3d"
    monkeypatch.setenv("GOROUTE_API_KEY", key)

    typo = CliRunner().invoke(app, ["--profile", "acm", "status"])
    pasted = CliRunner().invoke(app, ["--profile", key, "status", "--metrics-file", str(mine)])

    assert typo.exit_code != 0 and pasted.exit_code != 0
    assert not top.exists()  # the top-level job's file is not the typo's
    assert key not in mine.read_text(encoding="utf-8")
    assert exit_code_in(mine, "status") == pasted.exit_code

"""The sample systemd units in ``contrib/`` (issue 12, item 10): they parse, say what the
issue asks of them, and run a command line invoicectl accepts.

``systemd-analyze verify`` checks them where systemd is installed (an unknown key is only a
warning there, so any output fails the test); a configparser reading checks the keys that
matter everywhere.
"""

from __future__ import annotations

import configparser
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from invoicectl.cli import app
from invoicectl.errors import ExitCode

CONTRIB = Path(__file__).resolve().parents[1] / "contrib"
UNITS = ("invoicectl.service", "invoicectl.timer", "invoicectl-failure@.service")


def unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys keep their case
    parser.read_string((CONTRIB / name).read_text(encoding="utf-8"))
    return parser


def test_the_timer_runs_the_service_persistently_at_a_random_offset() -> None:
    timer = unit("invoicectl.timer")["Timer"]
    assert timer["Persistent"] == "true"
    assert timer["RandomizedDelaySec"] and timer["OnCalendar"]
    assert timer["Unit"] == "invoicectl.service"
    assert unit("invoicectl.timer")["Install"]["WantedBy"] == "timers.target"


def test_the_service_is_low_priority_alerts_on_failure_and_counts_75_as_success() -> None:
    service = unit("invoicectl.service")
    assert service["Unit"]["OnFailure"] == "invoicectl-failure@%n.service"
    assert (CONTRIB / "invoicectl-failure@.service").is_file()
    run = service["Service"]
    assert int(run["Nice"]) > 0 and int(run["CPUWeight"]) < 100
    assert run["IOSchedulingClass"] in ("idle", "best-effort")
    if run["IOSchedulingClass"] == "best-effort":
        assert run["IOSchedulingPriority"] == "7"  # the lowest
    assert run["SuccessExitStatus"] == str(int(ExitCode.INCOMPLETE))
    assert run["Type"] == "oneshot"


def test_the_service_runs_a_send_invoicectl_accepts(tmp_path: Path) -> None:
    words = shlex.split(unit("invoicectl.service")["Service"]["ExecStart"])
    assert words[1:3] == ["send", "/srv/invoices/outbox"] and "--deadline" in words
    deadline = float(words[words.index("--deadline") + 1])
    timeout = float(unit("invoicectl.service")["Service"]["TimeoutStartSec"])
    assert deadline + 3 < timeout <= 300  # ends before the next run is due
    key = tmp_path / "key"
    key.write_text("sk_test_invoicectl_sandbox\n")
    key.chmod(0o400)  # as systemd hands a credential over
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    args = [str(outbox) if word == "/srv/invoices/outbox" else word for word in words[1:]]
    args = [str(key) if word == "%d/goroute-api-key" else word for word in args]
    args = [str(tmp_path / "m.prom") if word.endswith(".prom") else word for word in args]
    result = CliRunner().invoke(app, [*args, "--dry-run", "--journal", str(tmp_path / "j.db")])
    assert result.exit_code == 66, result.output  # the options parse; the outbox is empty


def test_the_service_writes_metrics_where_it_may_and_pings_from_its_environment_file() -> None:
    """Issue 12 item 10: the service is wired for monitoring, not left for later."""
    text = (CONTRIB / "invoicectl.service").read_text(encoding="utf-8")
    run = unit("invoicectl.service")["Service"]
    words = shlex.split(run["ExecStart"])
    assert "--metrics-file" in words
    metrics = Path(words[words.index("--metrics-file") + 1])
    assert metrics.suffix == ".prom"
    writable = [path.lstrip("-") for path in run["ReadWritePaths"].split()]
    assert str(metrics.parent) in writable  # ProtectSystem=strict: else every write fails
    assert "--ping-url" not in words  # a secret: from the EnvironmentFile=, never this line
    assert "INVOICECTL_PING_URL" in text and "Once send has" not in text


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd here")
def test_systemd_analyze_verify_finds_nothing(tmp_path: Path) -> None:
    for name in UNITS:
        text = (CONTRIB / name).read_text(encoding="utf-8")
        # verify wants the binary to exist: this environment's invoicectl stands in.
        here = str(Path(sys.executable).with_name("invoicectl"))
        (tmp_path / name).write_text(text.replace("/usr/local/bin/invoicectl", here))
    done = subprocess.run(
        ["systemd-analyze", "verify", *(str(tmp_path / name) for name in UNITS)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stdout + done.stderr == "", done.stderr

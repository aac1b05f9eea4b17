"""A proxy variable httpx cannot use is one line naming the variable, never its value, exit 1
(helper-67, r08: a traceback, "could not run (... bug)"). The real process, real httpx."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLES = Path(__file__).resolve().parents[1] / "sample_invoices"
PASSWORD = "pr0xyS3cret"
BAD = {
    "a port with a space": f"http://clerk:{PASSWORD}@proxy.internal:31 28",
    "an unclosed IPv6 host": f"http://clerk:{PASSWORD}@[::1",
    "socks5 without socksio": f"socks5://clerk:{PASSWORD}@127.0.0.1:1080",
    "another scheme": f"ftp://clerk:{PASSWORD}@proxy:21",
}


def run(tmp_path: Path, *args: str, **environ: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "invoicectl", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "GOROUTE_API_KEY": "sk_live_proxy_test_0123456789", **environ},
        cwd=tmp_path,
    )


def assert_one_line(result: subprocess.CompletedProcess[str], variable: str) -> None:
    said = result.stdout + result.stderr
    assert "Traceback" not in said and "bug" not in said, said
    assert PASSWORD not in said and "proxy.internal" not in said, said
    assert f"the proxy of ${variable} cannot be used" in said, said


@pytest.mark.parametrize("name", list(BAD))
def test_send_refuses_a_proxy_it_cannot_use_in_one_line(tmp_path: Path, name: str) -> None:
    if name == "socks5 without socksio" and importlib.util.find_spec("socksio"):
        pytest.skip("socksio is installed here: a socks5:// proxy is usable")
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    shutil.copy(SAMPLES / "INV-2026-0001.xml", outbox)

    result = run(tmp_path, "send", str(outbox), HTTPS_PROXY=BAD[name])

    assert result.returncode == 1, result.stderr
    assert_one_line(result, "HTTPS_PROXY")
    errors = [line for line in result.stderr.splitlines() if "cannot be used" in line]
    assert len(errors) == 2, result.stderr  # the error, and the last line repeating it


@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "all_proxy"])
def test_doctor_fails_its_base_url_check_naming_the_variable(tmp_path: Path, variable: str) -> None:
    result = run(tmp_path, "doctor", "--json", **{variable: BAD["an unclosed IPv6 host"]})

    assert result.returncode == 1, result.stderr
    assert_one_line(result, variable)
    checks = {check["name"]: check for check in json.loads(result.stdout)["checks"]}
    assert checks["base_url"]["status"] == "fail"
    assert checks["credentials"]["status"] == "skipped"

"""The real command line in a subprocess, for tests where a process boundary matters."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from invoicectl.sandbox import DEFAULT_API_KEY


def send_process(
    outbox: Path, journal: Path, base_url: str, *args: str, api_key: str = DEFAULT_API_KEY
) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "GOROUTE_BASE_URL": base_url,
        "GOROUTE_API_KEY": api_key,
        "INVOICECTL_JOURNAL": str(journal),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "invoicectl", "send", str(outbox), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_send(outbox: Path, journal: Path, base_url: str, *args: str, **kwargs) -> tuple[int, str]:
    process = send_process(outbox, journal, base_url, *args, **kwargs)
    stdout, stderr = process.communicate(timeout=240)
    return process.returncode, stdout + stderr

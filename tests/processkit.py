"""The real CLI in a subprocess: where a process boundary matters (signals, kills, pipes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from backends import cli_journal

from invoicectl.journal import open_journal
from invoicectl.locations import Location
from invoicectl.sandbox import DEFAULT_API_KEY


def cli_env(journal: Location, base_url: str, api_key: str = DEFAULT_API_KEY) -> dict[str, str]:
    return {
        **os.environ,
        "GOROUTE_BASE_URL": base_url,
        "GOROUTE_API_KEY": api_key,
        "INVOICECTL_JOURNAL": cli_journal(journal),
    }


def cli_process(
    journal: Location, base_url: str, *args: str, api_key: str = DEFAULT_API_KEY, **popen: Any
) -> subprocess.Popen[str]:
    """``invoicectl ARGS`` with the journal and the server given; stdout and stderr piped.
    SIGINT as a terminal's foreground job has it: a suite started in the background by a
    shell inherits SIGINT ignored, and so would every CLI it starts."""
    popen.setdefault("preexec_fn", _sigint_as_in_a_terminal)
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen(
        [sys.executable, "-m", "invoicectl", *args],
        env=cli_env(journal, base_url, api_key),
        text=True,
        **popen,
    )


def _sigint_as_in_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def send_process(
    outbox: Path, journal: Location, base_url: str, *args: str, api_key: str = DEFAULT_API_KEY
) -> subprocess.Popen[str]:
    return cli_process(journal, base_url, "send", str(outbox), *args, api_key=api_key)


def run_send(
    outbox: Path, journal: Location, base_url: str, *args: str, **kwargs: Any
) -> tuple[int, str]:
    """``invoicectl send OUTBOX ARGS``: its exit code and its stdout and stderr together."""
    process = send_process(outbox, journal, base_url, *args, **kwargs)
    stdout, stderr = process.communicate(timeout=240)
    return process.returncode, stdout + stderr


def run_cli(
    journal: Location, base_url: str, *args: str, timeout: float = 120
) -> tuple[int, str, str]:
    process = cli_process(journal, base_url, *args)
    stdout, stderr = process.communicate(timeout=timeout)
    return process.returncode, stdout, stderr


def wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        time.sleep(0.01)


def journal_states(journal: Location) -> dict[str, str]:
    """Each invoice's state, or {} while the journal does not exist yet (a PostgreSQL
    journal's database exists from the start: empty until the run migrates it)."""
    if isinstance(journal, Path) and not journal.exists():
        return {}
    with open_journal(journal) as opened:
        return {row.invoice_id: str(row.state) for row in opened.invoices()}


def open_attempts(journal: Location) -> int:
    """Attempt rows left without an outcome."""
    with open_journal(journal) as opened:
        (count,) = opened.db.execute(
            "SELECT count(*) FROM attempts WHERE outcome IS NULL"
        ).fetchone()
    return int(count)

"""What a command's start loads (issue 13, start-up): only what the command uses.

Each check imports the CLI and one command's path in a fresh interpreter and looks at
``sys.modules``; timings live in ``benchmarks/startup.py``, never here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def _loaded_after(code: str, names: tuple[str, ...]) -> list[str]:
    """Which of ``names`` are loaded (in ``sys.modules``, not None) after ``code`` runs in a
    fresh interpreter."""
    probe = (
        f"{code}\n"
        "import sys\n"
        f"loaded = [name for name in {names!r} if sys.modules.get(name) is not None]\n"
        "print(sorted(loaded), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return eval(done.stderr.strip().splitlines()[-1])  # a list of str, printed just above


def test_the_cli_keeps_httpx_s_own_command_line_tool_out() -> None:
    """httpx imports its command-line tool, and with it click and pygments, when they are
    installed; the commands that talk to GoRoute load httpx without it."""
    code = "import invoicectl.cli\nimport invoicectl.send.runner\nimport httpx"
    heavy = ("httpx", "httpx._main", "click", "pygments")
    assert _loaded_after(code, heavy) == ["httpx"]


def test_status_in_a_pipe_draws_no_table(tmp_path: Path) -> None:
    """``status`` piped (counts and plain lines) loads neither rich nor the scanner: only a
    terminal's page and ``show`` draw tables, and a pipe's lines need no console."""
    code = (
        "import sys\n"
        "from invoicectl.cli import main\n"
        f"sys.argv = ['invoicectl', 'status', '--journal', {str(tmp_path / 'j.db')!r}]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
    )
    heavy = ("rich", "rich.table", "invoicectl.scan.reader", "httpx", "prometheus_client")
    assert _loaded_after(code, heavy) == []


def test_help_is_drawn_without_rich() -> None:
    """``--help`` is click's plain layout (issue 12: rich's panels squeezed the descriptions
    to 18 columns): no rich at all, neither its console nor its Markdown (markdown-it) nor
    its Traceback (pygments)."""
    code = (
        "import sys\n"
        "from invoicectl.cli import main\n"
        "sys.argv = ['invoicectl', 'send', '--help']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
    )
    heavy = ("rich", "typer.rich_utils", "markdown_it", "pygments", "rich.markdown")
    assert _loaded_after(code, heavy) == []


def _send_of_an_empty_outbox(tmp_path: Path, *flags: str) -> str:
    (tmp_path / "outbox").mkdir()
    argv = ["invoicectl", "send", str(tmp_path / "outbox"), *flags]
    return (
        "import os, sys\n"
        "os.environ['GOROUTE_API_KEY'] = 'sk_test_never_sent_with_000'\n"
        "from invoicectl.cli import main\n"
        f"sys.argv = {argv!r}\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as stopped:\n"
        "    assert stopped.code == 66, stopped.code  # EX_NOINPUT: no *.xml in the outbox\n"
    )


# What a send needs only once something is sent or replayed (or its history checked).
_SENDING = (
    "asyncio",
    "httpx",
    "invoicectl.goroute.client",
    "invoicectl.reconcile",
    "invoicectl.sandbox.session",
    "invoicectl.send.sender",
    "lxml.etree",
    "rich.progress",
    "rich.table",
    "tenacity",
)


def test_a_send_with_nothing_to_send_loads_no_client_loop_or_parser(tmp_path: Path) -> None:
    """A cron run over an outbox with nothing new: no HTTP client (httpx, asyncio), no
    sender, no retry library, no XML parser, no progress bar or table, no reconcile."""
    assert _loaded_after(_send_of_an_empty_outbox(tmp_path), _SENDING) == []


def test_a_sandbox_send_with_nothing_to_send_starts_no_emulator(tmp_path: Path) -> None:
    code = _send_of_an_empty_outbox(tmp_path, "--sandbox")
    assert _loaded_after(code, (*_SENDING, "invoicectl.sandbox.sandbox")) == []

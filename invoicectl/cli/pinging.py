"""The health-check pings of a run command (``pings``): started by the command once its
settings are resolved, finished by the CLI group with the command's exit code, whatever
ended it (``app.InvoicectlGroup.invoke``), so that an error's own line is in the tail sent."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from invoicectl.cli.consoles import say, tee_output

if TYPE_CHECKING:
    from invoicectl.pings import OutputTail
    from invoicectl.settings import Settings

# The pings of the command running in this process: (URL, the output's tail, what puts the
# streams back). One command a process; None when it pings nobody.
_running: tuple[str, OutputTail, Callable[[], None]] | None = None


def start_pings(settings: Settings) -> None:
    """``URL/start``, and the run's output copied from here on, when a ping URL is set."""
    start_pings_to(settings.ping_url)


def start_pings_to(url: str | None) -> None:
    """``start_pings`` for a URL known without a profile's settings (``send --all-profiles``
    pings once for all of its profiles)."""
    global _running
    if url is None or _running is not None:
        return
    from invoicectl.pings import OutputTail, ping

    tail = OutputTail()
    _running = (url, tail, tee_output(tail))
    refused = ping(url, "start")
    if refused is not None:
        say(refused)


def finish_pings(exit_code: int) -> None:
    """``URL/<exit code>`` with the output's tail; nothing when no ping was started."""
    global _running
    if _running is None:
        return
    from invoicectl.pings import ping

    url, tail, restore = _running
    _running = None
    restore()
    refused = ping(url, str(exit_code), tail.text())
    if refused is not None:
        say(refused)


def leave_end_to_holder() -> None:
    """No end ping from a run that never had the journal: another run holds it and pings its
    own end. A ``/6`` now would mark the check down while that run works (healthchecks.io
    alerts on a non-zero code at once); the ``/start`` sent stays, so a holder that never ends
    is still caught by the monitor's grace period."""
    global _running
    if _running is None:
        return
    restore = _running[2]
    _running = None
    restore()
    say("invoicectl: no end ping from this run: the run holding the journal pings its own")

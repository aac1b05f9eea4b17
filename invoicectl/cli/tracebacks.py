"""Every text the command line writes about an error, with the API key hidden.

A key pasted into the wrong setting comes back in the error refusing it: ``unkeyed`` hides it
in the one line a person reads. ``INVOICECTL_DEBUG=1`` re-raises that error instead, and a
bug raises one of its own; Python then prints the traceback with each message (its causes'
too), where the key would show. ``hide_keys_in_tracebacks`` has the process print every
traceback, its threads' too, through the same ``known_keys.hide_keys``: the frames stay, so
debugging still works, and each key is ``[redacted]`` in every form ``ApiKey.redact`` knows.
"""

from __future__ import annotations

import sys
import threading
from functools import partial
from typing import TYPE_CHECKING

from invoicectl.arguments import split_option

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ["hide_keys_in_tracebacks", "unkeyed"]


def unkeyed(message: str, args: list[str]) -> str:
    """``message`` with every API key this process can find hidden (``known_keys``), the key
    of ``--api-key-file`` in ``args`` too."""
    from invoicectl.known_keys import hide_keys

    key_file, _ = split_option(args, "--api-key-file")  # before ``--``: an option
    return hide_keys(message, api_key_file=key_file)


def hide_keys_in_tracebacks(args: list[str]) -> None:
    """Print every traceback of this process with its keys hidden (``unkeyed``). Typer puts
    its own ``sys.excepthook`` in place whenever the app is called: install this after."""
    sys.excepthook = partial(_print_hidden, args)
    threading.excepthook = partial(_print_thread_hidden, args)


def _print_hidden(
    args: list[str],
    kind: type[BaseException],
    error: BaseException,
    frames: TracebackType | None,
    heading: str = "",
) -> None:
    import traceback

    from invoicectl.cli.consoles import say
    from invoicectl.goroute.redaction import WITHHELD
    from invoicectl.known_keys import UNCHECKED

    text = unkeyed(heading + "".join(traceback.format_exception(kind, error, frames)), args)
    if text in (WITHHELD, UNCHECKED):
        # A key that hides in some message (encoded past what can be replaced) withholds the
        # whole text: the frames alone still say where it happened.
        where = "".join(traceback.format_tb(frames))
        text = unkeyed(
            f"{heading}Traceback (most recent call last):\n{where}{kind.__name__}: "
            "[withheld: its message, or a cause's, may hold the API key]\n",
            args,
        )
    say(text.rstrip("\n"))


def _print_thread_hidden(args: list[str], raised: threading.ExceptHookArgs) -> None:
    if raised.exc_type is SystemExit:  # as Python's own hook: a thread's exit is silent
        return
    name = raised.thread.name if raised.thread is not None else threading.get_ident()
    error = raised.exc_value if raised.exc_value is not None else raised.exc_type()
    _print_hidden(
        args, raised.exc_type, error, raised.exc_traceback, f"Exception in thread {name}:\n"
    )

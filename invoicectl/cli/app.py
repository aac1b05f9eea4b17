"""The Typer app: its command group, the one point where errors become a message and an exit
code, ``--version``, and ``main()`` with its signal handling.

Library errors (``errors.InvoicectlError``), SQLite errors and system errors reach the user
at one point, ``_Commands.invoke``: one line on stderr and the error's exit code; with
``--json`` or ``--format json``, one JSON document on stdout instead. ``INVOICECTL_DEBUG=1``
re-raises them with a traceback, its API keys hidden (``tracebacks``). A stop signal outside
a send's loop (``interrupts``) is said there too: ``interrupted by SIGTERM; state saved``,
exit 130. The commands themselves live in ``journal_commands``, ``send_commands`` and
``sandbox_command``, and register on ``app`` when imported.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

# httpx's package imports its own command-line tool (``httpx._main``), and with it click,
# pygments and rich's syntax highlighting, whenever those are installed: 20 ms of every
# command that talks to GoRoute, for a tool invoicectl never runs. A None entry makes that
# one import fail, and httpx falls back to a stub ``main``; set only if httpx is not loaded.
if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

import typer  # noqa: E402
import typer.core  # noqa: E402
from typer._click.exceptions import UsageError as ClickUsageError  # noqa: E402

from invoicectl import __version__  # noqa: E402
from invoicectl.cli.consoles import guard_streams, install_log_streams, say, say_error  # noqa: E402
from invoicectl.cli.helptext import exit_codes_table, fit  # noqa: E402
from invoicectl.cli.logsetup import (  # noqa: E402
    command_of,
    data_on_stdout,
    last_line,
    log_format,
    options_of,
    quiet_log_format,
    split_log_format,
    wraps,
)
from invoicectl.cli.pinging import leave_end_to_holder  # noqa: E402
from invoicectl.cli.tracebacks import hide_keys_in_tracebacks, unkeyed  # noqa: E402
from invoicectl.errors import ExitCode, InvoicectlError, JournalError, JournalLocked  # noqa: E402
from invoicectl.interrupts import (  # noqa: E402
    ignore_stop_signals,
    raise_on_signals,
    signal_name,
    stop_signals_ignored,
)
from invoicectl.loglines import explain_exit  # noqa: E402
from invoicectl.profiles import give_option, split_profile  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Callable

    from invoicectl.locations import Location

ROOT_HELP = f"""Send UBL e-invoices to the GoRoute Peppol API; never lose one, never send one twice.

\b
Examples:
  invoicectl doctor              # can a run work on this machine?
  invoicectl send ./outbox       # scan the outbox, then send what is pending
  invoicectl status              # counts, and what needs a person first
  invoicectl reconcile           # after an outage: what really happened

Each command's purpose, options and examples: invoicectl COMMAND -h. Shell completion:
invoicectl --install-completion (or --show-completion to see it first).

Profiles: --profile NAME (before or after any command; or $INVOICECTL_PROFILE) takes a
[profiles.NAME] table of the config file: one GoRoute account, its key, limits, journal
and sender. invoicectl profiles lists them; --profile sandbox is --sandbox.

Logs: where a stream is not a terminal, each line starts with its UTC time
(2026-12-01T17:20:03Z); --log-format json (before or after any command; or
$INVOICECTL_LOG_FORMAT, or log_format in the config file) writes one JSON object a line
instead. Every run ends with a line naming its exit code's cause: exit 3: 2 rejected.

{exit_codes_table()}
"""


class _Commands(typer.core.TyperGroup):
    """Turns library errors into a message on stderr and their exit code, in one place. With
    ``--json`` or ``--format json``, every error, a usage error included, is instead one JSON
    document on stdout (``{"error": ..., "exit_code": ...}``) and nothing else: what a cron
    job parses."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for command in self.commands.values():  # every command, as typer made it
            fit(command)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # Noted before the command's own options are parsed: a usage error in them must
        # still answer in JSON.
        ctx.meta["json"] = answers_in_json(args)
        ctx.meta["args"] = list(args)
        _, args = split_log_format(args)  # every command's, read by ``logsetup``
        profile, args = split_profile(args)  # every command's, read by ``settings.resolve``
        give_option(profile)
        try:
            return super().parse_args(ctx, args)
        except ClickUsageError as error:  # shown by click itself: the group's own options
            error.message = unkeyed(error.message, ctx.meta["args"])
            raise

    def invoke(self, ctx: Any) -> Any:  # typer's own (vendored) click Context
        from invoicectl.cli.endings import at_end_unless_begun, run_endings
        from invoicectl.cli.pinging import finish_pings
        from invoicectl.config_file import warn_with
        from invoicectl.defaults import ROUTED_ENV

        if os.environ.get(ROUTED_ENV) != "1":  # a profile's send: its parent says them
            warn_with(say)  # a config file others may write, as a log line
        exit_code = int(ExitCode.OK)
        at_end_unless_begun(_unbegun_metrics(ctx.meta.get("args", [])))
        try:
            result = None
            try:
                result = self._invoke(ctx)
            except typer.Exit as done:
                exit_code = done.exit_code
            exit_code = _unless_output_lost(ctx.meta.get("args", []), exit_code)
            if exit_code != ExitCode.OK:
                raise typer.Exit(exit_code)
            return result
        except typer.Exit as done:
            exit_code = done.exit_code
            raise
        except BaseException:
            exit_code = 1
            raise
        finally:
            # The exit code is chosen: a stop signal now (during the end ping, say) would
            # replace it with 130 and say nothing, so it is ignored until the process exits.
            with stop_signals_ignored():
                try:
                    run_endings(exit_code)  # the metrics file, with the exit code
                finally:
                    try:
                        line = last_line(ctx.meta.get("args", []), exit_code)
                        if line is not None:
                            say(line)  # the run's last line: the exit code's cause
                    finally:
                        finish_pings(exit_code)  # a run that started pings ends them, however
                        give_option(None)  # this command's --profile, not the next one's

    def _invoke(self, ctx: Any) -> Any:
        args = ctx.meta.get("args", [])
        try:
            if not {"--help", "-h"} & set(options_of(args)):  # help needs no log format
                log_format(args)  # a bad --log-format is a usage error
            return super().invoke(ctx)
        except ClickUsageError as error:
            error.message = unkeyed(error.message, args)
            explain_exit(ExitCode.USAGE, f"usage error: {error.format_message()}")
            if not _json_error(ctx, error.format_message(), ExitCode.USAGE):
                error.show()  # the usage and the message on stderr, as typer would
            raise typer.Exit(int(ExitCode.USAGE)) from None
        except KeyboardInterrupt as interrupted:  # a stop signal outside a send's loop
            message = f"interrupted by {signal_name(interrupted)}; state saved"
            explain_exit(ExitCode.INTERRUPTED, message)
            if not _json_error(ctx, message, ExitCode.INTERRUPTED):
                say(f"invoicectl: {message}")
            raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
        except _reported_errors() as error:
            # A closed stdout never gets here (``guard_streams``); where it is not guarded (a
            # test's runner), it is typer's to handle.
            if isinstance(error, BrokenPipeError) or os.environ.get("INVOICECTL_DEBUG") == "1":
                raise
            failure = _as_invoicectl_error(error, args)
            message = unkeyed(str(failure), args)
            explain_exit(failure.exit_code, message)
            if not _json_error(ctx, message, failure.exit_code):
                say_error(message)
            if isinstance(failure, JournalLocked) and failure.holder_pings:
                leave_end_to_holder()
            raise typer.Exit(int(failure.exit_code)) from None


def _unless_output_lost(args: list[str], exit_code: int) -> int:
    """``exit_code``, or 1 where a document for a script did not reach stdout whole (a full
    disk: a script would take a cut document, or none, for a success). A send's or a
    reconcile's code stands, as its journal records it; its line says where to read it."""
    sys.stdout.flush()  # what is buffered meets the disk now, not at exit
    lost = getattr(sys.stdout, "lost_output", None)
    if lost is None or not data_on_stdout(args):
        return exit_code
    message = f"the output could not be written whole to stdout ({lost}): it is cut short"
    if command_of(args) in ("send", "reconcile"):
        say_error(f"{message}; this run's outcome is in the journal (invoicectl status)")
        return exit_code
    explain_exit(ExitCode.COULD_NOT_RUN, message)
    say_error(message)
    return int(ExitCode.COULD_NOT_RUN)


def _unbegun_metrics(args: list[str]) -> Callable[[int], None]:
    """The metrics file of a command that ends before its run begins (a usage error, a setting
    refused): ``unbegun_metrics``, imported only then."""

    def write(exit_code: int) -> None:
        _, rest = split_log_format(options_of(args))
        _, rest = split_profile(rest)
        command = next((arg for arg in rest if not arg.startswith("-")), None)
        if command is not None and exit_code != 0:
            from invoicectl.cli.unbegun_metrics import write_unbegun

            write_unbegun(command, options_of(args), exit_code)

    return write


def answers_in_json(args: list[str]) -> bool:
    """Whether the command line asks for JSON output: ``--json``, ``--format json`` or
    ``--format=json`` (``jsonl`` too: its reader parses JSON). Past ``--`` these are
    arguments, not options."""
    options = options_of(args)
    return "--json" in options or any(value in ("json", "jsonl") for value in _formats(options))


def _formats(options: list[str]) -> list[str]:
    """The values given to ``--format`` (``--format X`` or ``--format=X``)."""
    given = [value for option, value in pairwise(options) if option == "--format"]
    return given + [
        option.partition("=")[2] for option in options if option.startswith("--format=")
    ]


def _as_invoicectl_error(error: Exception, args: list[str]) -> InvoicectlError:
    """An error from below the library, as one line a person can act on: the file it is
    about (the journal, when the error names none) and advice that fits its cause."""
    if isinstance(error, InvoicectlError):
        return error
    if isinstance(error, UnicodeEncodeError):
        return _not_text(error, args)
    from invoicectl.journal.failures import explain_os, explain_sqlite

    if isinstance(error, sqlite3.DatabaseError):
        # Mid-run: SQLite commits whole or not at all, so what was committed stays.
        return JournalError(explain_sqlite(error, _file_of(args)))
    if isinstance(error, _database_errors()):
        from invoicectl.journal.pg_database import pg_failure

        return pg_failure(error, _journal_of(args))
    assert isinstance(error, OSError)
    return InvoicectlError(explain_os(error, None if error.filename else _file_of(args)))


def _not_text(error: UnicodeEncodeError, args: list[str]) -> InvoicectlError:
    """An argument that is not UTF-8 (an operator's Latin-1 terminal: ``caf\xe9``) cannot be
    stored or looked up: a usage error naming it. Any other such error is a bug: raised."""
    from invoicectl.errors import UsageError
    from invoicectl.text import one_line

    odd = next((arg for arg in args if any("\udc80" <= char <= "\udcff" for char in arg)), None)
    if odd is None:
        raise error
    return UsageError(
        f"the argument '{one_line(odd, 60)}' holds bytes that are not UTF-8 text: invoice IDs, "
        "reasons and filters are read as UTF-8 (set the terminal's encoding to UTF-8)"
    )


def _file_of(args: list[str]) -> Path | None:
    """``_journal_of``, when it is a SQLite file."""
    journal = _journal_of(args)
    return journal if isinstance(journal, Path) else None


def _reported_errors() -> tuple[type[Exception], ...]:
    """What a command's failure may be that the user gets as one line, not a traceback."""
    return (
        InvoicectlError,
        sqlite3.DatabaseError,
        OSError,
        UnicodeEncodeError,
        *_database_errors(),
    )


def _database_errors() -> tuple[type[Exception], ...]:
    """PostgreSQL's errors, once a PostgreSQL journal has loaded psycopg (never before)."""
    psycopg = sys.modules.get("psycopg")
    return () if psycopg is None else (psycopg.Error,)


def _journal_of(args: list[str]) -> Location | None:
    """The journal the command line names (``--journal``, ``--sandbox``, else the settings'),
    for an error that names no file; None when that cannot be told."""
    options = options_of(args)
    named: str | None = None
    for index, arg in enumerate(options):
        if arg == "--journal" and index + 1 < len(options):
            named = options[index + 1]
        elif arg.startswith("--journal="):
            named = arg.partition("=")[2]
    try:
        from invoicectl.settings import resolve

        return resolve(journal=named, sandbox="--sandbox" in options, need_key=False).journal
    except Exception:  # a bad setting has its own message; this one only names a file
        return None


def _json_error(ctx: Any, message: str, exit_code: ExitCode) -> bool:
    """Print the error as the command's JSON document, if JSON was asked for: with JSON
    Lines, one line more after the records written before it (a listing stopped)."""
    if not ctx.meta.get("json"):
        return False
    from invoicectl.render.formats import to_json

    lines = "jsonl" in _formats(options_of(ctx.meta["args"]))
    print(to_json({"error": message, "exit_code": int(exit_code)}, indent=None if lines else 2))
    return True


app = typer.Typer(
    name="invoicectl",
    cls=_Commands,
    help=ROOT_HELP,
    no_args_is_help=True,
    # click's plain help: no panels squeezing the descriptions, and no rich to import.
    rich_markup_mode=None,
    add_completion=True,  # --install-completion, --show-completion: 0.5 ms of start-up
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version_callback(value: bool) -> None:
    if value:
        print(f"invoicectl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_version_callback,
            is_eager=True,
            help="Show the version and exit.",
        ),
    ] = False,
) -> None:
    """Send UBL e-invoices to the GoRoute Peppol API."""


def _show_completion_named(args: list[str]) -> None:
    """``--show-completion SHELL`` prints SHELL's script. Typer's flag takes no value: it
    guesses the parent shell and ignores the word, so ``--show-completion bash`` run by sh
    (dash), cron or sudo printed another shell's script, or "Shell dash not supported"."""
    if len(args) != 2 or args[0] != "--show-completion":
        return
    from typer._completion_shared import Shells, get_completion_script

    if args[1] not in {shell.value for shell in Shells}:
        return  # typer says what is wrong
    print(get_completion_script(prog_name="invoicectl", complete_var="_INVOICECTL_COMPLETE",
                                shell=args[1]))  # fmt: skip
    sys.exit(0)


def main() -> None:
    guard_streams()  # a closed stdout or stderr stops the output, never the work
    _show_completion_named(sys.argv[1:])
    # SIGTERM and SIGHUP outside a send's loop (which holds them itself) end like Ctrl-C:
    # every journal write is its own transaction, so stopping between them loses nothing.
    raise_on_signals()
    args = sys.argv[1:]
    restore_streams = install_log_streams(  # a timestamp on every line, or JSON lines
        quiet_log_format(args), wrap=wraps(args), stdout_too=not data_on_stdout(args)
    )
    hide_keys_in_tracebacks(args)  # a thread's, while the command runs
    try:
        app(prog_name="invoicectl")
    except KeyboardInterrupt as interrupted:  # between a command's end and the exit
        say(f"invoicectl: interrupted by {signal_name(interrupted)}; state saved")
        sys.exit(int(ExitCode.INTERRUPTED))
    except Exception:  # INVOICECTL_DEBUG=1's, or a bug's: a traceback, with no key in it
        hide_keys_in_tracebacks(args)  # after typer's, which app() put in place
        raise
    finally:
        # State is saved and the exit code chosen: a signal now changes nothing, and must not
        # kill the process while Python shuts down (which puts back the default handlers).
        ignore_stop_signals()
        restore_streams()  # a line left unfinished is written whole

"""Which log a command writes (``loglines``), decided once per process from its command line.

``--log-format text|json`` (anywhere before ``--``, before or after the command), else
``$INVOICECTL_LOG_FORMAT``, else the config file's ``log_format``, else ``text``. ``main``
puts a ``LineStream`` under each stream that is not a terminal (any stream with ``json``;
``consoles.install_log_streams``), except:

- stdout when it carries data a script parses (``--json``, ``--format json|jsonl|csv``):
  that document stays alone on stdout, the log lines go to stderr;
- help, ``--version``, shell completion and ``sandbox`` (a server's own log): left as they are.

Every run command ends with ``exit N: <cause>`` on stderr (``last_line``), except with
``--quiet``, and with ``--json`` or ``--format json|jsonl`` in the text format (one document and
nothing else); with ``--log-format json`` it is the ``run.exit`` object on stderr.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from itertools import pairwise

from invoicectl.arguments import split_option
from invoicectl.loglines import LogFormat

OPTION = "--log-format"
ENV = "INVOICECTL_LOG_FORMAT"
# The commands a cron job or a timer runs: each ends with the line naming its exit's cause.
RUN_COMMANDS = frozenset(
    {"send", "reconcile", "scan", "status", "validate", "doctor", "verify", "export", "backup"}
)
_UNWRAPPED = frozenset({"sandbox"})
_NOT_A_RUN = frozenset({"-h", "--help", "--version", "--install-completion", "--show-completion"})
_DATA_FORMATS = frozenset({"json", "jsonl", "csv"})


def options_of(args: list[str]) -> list[str]:
    """The command line's options: what comes before ``--`` (after it, arguments)."""
    return args[: args.index("--")] if "--" in args else args


def split_log_format(args: list[str]) -> tuple[str | None, list[str]]:
    """The ``--log-format`` value given (the last one), and the arguments without it."""
    return split_option(args, OPTION)


def log_format(args: list[str], environ: Mapping[str, str] | None = None) -> LogFormat:
    """The format asked for, checked: a bad value is one line naming where it came from."""
    from invoicectl.errors import ConfigError, UsageError

    environ = os.environ if environ is None else environ
    value, _ = split_log_format(args)
    where = "the command line"
    if value is None and environ.get(ENV):
        value, where = environ[ENV], f"${ENV}"
    if value is None:
        from invoicectl.config_file import config_label
        from invoicectl.settings import load_config

        try:
            value = load_config(environ).get("log_format")
        except ConfigError:  # the command's own settings say what is wrong with the file
            value = None
        where = f"config file {config_label(environ)}"
    if value is None:
        return LogFormat.text
    if not isinstance(value, str) or value not in set(LogFormat):  # TOML gives lists, tables
        error = UsageError if where == "the command line" else ConfigError
        raise error(f"log_format ({where}) must be text or json, not {value!r}")
    return LogFormat(value)


def quiet_log_format(args: list[str]) -> LogFormat:
    """``log_format``, or ``text`` where it cannot be told: the command says why itself."""
    try:
        return log_format(args)
    except Exception:
        return LogFormat.text


def command_of(args: list[str]) -> str | None:
    """The command named (the first word that is not an option or the value of a global
    one: ``--log-format``, ``--profile``; the root's own options take no value)."""
    from invoicectl.profiles import split_profile

    _, args = split_log_format(args)
    _, args = split_profile(args)
    return next((arg for arg in options_of(args) if not arg.startswith("-")), None)


def data_on_stdout(args: list[str]) -> bool:
    """Whether stdout carries a document a script parses, never log lines."""
    options = options_of(args)
    formats = {value for flag, value in pairwise(options) if flag == "--format"}
    formats |= {arg.partition("=")[2] for arg in options if arg.startswith("--format=")}
    return "--json" in options or bool(formats & _DATA_FORMATS)


def _answers_in_json(options: list[str]) -> bool:
    """``--json``, ``--format json`` or ``jsonl`` (as ``app.answers_in_json``): one document."""
    given = [value for option, value in pairwise(options) if option == "--format"]
    given += [option.partition("=")[2] for option in options if option.startswith("--format=")]
    return "--json" in options or any(value in ("json", "jsonl") for value in given)


def wraps(args: list[str], environ: Mapping[str, str] | None = None) -> bool:
    """Whether this command line writes log lines at all (not help, completion, sandbox)."""
    environ = os.environ if environ is None else environ
    if any(name.startswith("_") and name.endswith("_COMPLETE") for name in environ):
        return False  # shell completion asking: its answer is read by the shell
    command = command_of(args)  # none: the root's help
    return (
        command is not None and command not in _UNWRAPPED and not _NOT_A_RUN & set(options_of(args))
    )


def last_line(args: list[str], exit_code: int) -> str | None:
    """The run's last line, ``exit 3: 1 invalid, 2 rejected``, for stderr (tagged
    ``run.exit`` for the JSON log); None where the command writes none."""
    options = options_of(args)
    if command_of(args) not in RUN_COMMANDS or _NOT_A_RUN & set(options):
        return None
    if "--quiet" in options or "-q" in options:
        return None
    if quiet_log_format(args) is LogFormat.text and _answers_in_json(options):
        return None  # one JSON document and nothing else
    from invoicectl import loglines
    from invoicectl.errors import MEANINGS, ExitCode

    def meaning(code: int) -> str:
        try:
            return MEANINGS[ExitCode(code)]
        except ValueError:
            return "an unexpected exit code"

    line, fields = loglines.exit_line(exit_code, meaning)
    loglines.tag("run.exit", stream="stderr", **fields)
    return line

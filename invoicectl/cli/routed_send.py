"""``send --all-profiles DIR`` (or ``--profiles a,b``): each invoice through its supplier's
profile, one send process per profile at the same time (``send.children``), their summaries
shown per profile and their exit codes combined, the worst winning.

What goes where is ``send.routing``'s: a file whose supplier has no profile is reported by
every run while it is in the outbox, and never sent. Settings that would come before every
profile's own (``$GOROUTE_API_KEY``, ``$GOROUTE_BASE_URL``, ``$INVOICECTL_JOURNAL``, and the
options naming a journal, key or limits) would send every profile's invoices through one
account or journal: they are refused, not applied.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from invoicectl import profiles
from invoicectl.cli.consoles import say, say_error
from invoicectl.cli.logsetup import ENV as LOG_ENV
from invoicectl.cli.logsetup import log_format
from invoicectl.cli.pinging import start_pings_to
from invoicectl.errors import MEANINGS, Cause, ConfigError, ExitCode, UsageError, explain, worst
from invoicectl.loglines import explain_exit

if TYPE_CHECKING:
    from invoicectl.send.routing import Routing

# Each would come before every profile's own value (option > environment > profile).
_SHARED_ENV = ("GOROUTE_API_KEY", "GOROUTE_BASE_URL", "INVOICECTL_JOURNAL")
# Not passed to each profile's send: this run's own profile choice, and its one ping URL.
_NOT_PASSED = (profiles.ENV, "INVOICECTL_PING_URL")


# Options naming one account, journal or limits: each profile has its own.
_REFUSED = (
    "journal", "sandbox", "api_key_file", "tier", "rate", "concurrency", "new_version",
    "supplier", "metrics_file", "ping_url", "allow_environment_change", "skip_invoice",
)  # fmt: skip
# Options of this command that are not a profile's send's.
_OWN = ("directory", "all_profiles", "profile_set", "as_json", "quiet")


def send_routed(directory: Path, only: str | None, *, as_json: bool, quiet: bool) -> NoReturn:
    """Route, run every profile's send, report, exit with the worst code. The options given
    to this ``send`` are each profile's send's (``--deadline``, ``--order``, ...)."""
    from typer._click.core import ParameterSource
    from typer._click.globals import get_current_context

    from invoicectl.defaults import ROUTED_ENV
    from invoicectl.render.formats import to_json
    from invoicectl.send.children import run_children
    from invoicectl.send.routing import route
    from invoicectl.settings import load_config

    ctx = get_current_context()
    given = {
        name: value
        for name, value in ctx.params.items()
        if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE and name not in _OWN
    }
    _refuse_shared({_flag(name): name in given for name in _REFUSED})
    passed = [word for name, value in given.items() for word in _words(name, value)]
    recursive = bool(given.get("recursive"))
    chosen, senders = _chosen_profiles(only)
    routing = route(directory, senders, chosen, recursive=recursive)
    skips = _sent_elsewhere(senders, routing.ids)
    env = {key: value for key, value in os.environ.items() if key not in _NOT_PASSED}
    env[LOG_ENV] = log_format(ctx.meta.get("args", [])).value  # as this run's, --log-format too
    env[ROUTED_ENV] = "1"  # each profile's own metrics file and ping URL only
    if not given.get("dry_run"):  # one ping for the whole run, its worst exit code
        start_pings_to(_shared_ping_url())
    if load_config(os.environ).get("metrics_file") is not None:
        say("invoicectl: note: send --all-profiles writes no top-level metrics_file; give each "
            "profile a metrics_file of its own")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="invoicectl-routed-") as lists:
        commands = {
            name: [sys.executable, "-m", "invoicectl", "--profile", name, "send", str(directory),
                   *passed, *_skipping(name, skips.get(name, {})),
                   "--routed-names", _names_file(Path(lists), name, routing), "--json"]
            for name in chosen
        }  # fmt: skip
        finished, signals = run_children(commands, env, _tagged_lines())
    codes: dict[str, ExitCode] = {}
    causes: list[Cause] = []
    for name in chosen:
        code, cause = _outcome(finished[name])
        codes[name] = code
        causes.append(Cause(code, f"profile {name}: {cause}"))
    causes += _unrouted_causes(routing.unrouted)
    if signals:
        causes.append(Cause(ExitCode.INTERRUPTED, f"interrupted by {signals[0]}"))
    exit_code = worst(*(cause.code for cause in causes))
    if as_json:
        print(to_json(_document(chosen, senders, finished, codes, routing, exit_code)))
    elif not quiet:
        for name in chosen:
            files = routing.files.get(name, 0)
            print(f"profile {name} ({_sender_of(name, senders)}): {files} file{_s(files)}; "
                  f"exit {int(codes[name])}: {_line_of(finished[name])}")  # fmt: skip
        for name, files in sorted(routing.elsewhere.items()):
            print(f"profile {name}: {files} file{_s(files)} left for it (not in --profiles)")
        for unrouted in routing.unrouted:
            invoice = (
                f"{unrouted.invoice_id} ({unrouted.file})"
                if unrouted.invoice_id
                else (unrouted.file)
            )
            print(f"not sent  {invoice}: {unrouted.reason}")
    for name in chosen:
        if finished[name].died is not None:  # said on stderr even with --json or --quiet
            say_error(
                f"profile {name}: its send process died ({finished[name].died}); what it did "
                f"is in its journal: invoicectl --profile {name} status"
            )
    explain_exit(exit_code, explain(exit_code, causes))
    raise typer.Exit(int(exit_code))


def _shared_ping_url() -> str | None:
    """``$INVOICECTL_PING_URL``, else the config file's top-level ``ping_url``: pinged once by
    this run, with its worst code; each profile's send pings only a ping URL of its own."""
    from invoicectl import config_values
    from invoicectl.config_file import config_label
    from invoicectl.settings import load_config

    if url := os.environ.get("INVOICECTL_PING_URL"):
        return config_values.ping_url(url, "$INVOICECTL_PING_URL")
    configured = load_config(os.environ).get("ping_url")
    if configured is None:
        return None
    return config_values.ping_url(configured, f"config file {config_label(os.environ)}")


def _refuse_shared(refused: Mapping[str, bool]) -> None:
    given = [option for option, value in refused.items() if value]
    if profiles.given_option() is not None:
        given.insert(0, "--profile")
    if given:
        raise UsageError(
            f"{', '.join(given)} cannot go with --all-profiles or --profiles: each profile "
            "names its own account, journal and limits"
        )
    for name in _SHARED_ENV:
        if os.environ.get(name):
            raise UsageError(
                f"${name} is set: it would come before every profile's own value and send "
                "each profile's invoices through one account or journal; unset it for "
                "--all-profiles"
            )


def _chosen_profiles(only: str | None) -> tuple[list[str], dict[str, str]]:
    """The profiles this run sends through, and every profile's sender -> name."""
    from invoicectl.config_file import config_label
    from invoicectl.settings import load_config, resolve

    where = f"config file {config_label(os.environ)}"
    known = profiles.read_profiles(load_config(os.environ), where)
    senders = {p.sender: name for name, p in known.items() if p.sender is not None}
    if only is None:
        chosen = sorted(senders.values())
        if not chosen:
            raise ConfigError(f"no profile has a sender ({where}): nothing can be routed")
    else:
        chosen = list(dict.fromkeys(name.strip() for name in only.split(",") if name.strip()))
        if not chosen:  # an unset variable in a cron line: nothing would be sent, exit 0
            raise UsageError(f"--profiles names no profile ({only!r}); name one or more")
        for name in chosen:
            if name not in known:
                raise profiles.unknown(name, "option", list(known))
            if known[name].sender is None:
                raise UsageError(f"profile {name} has no sender ({where}): it takes no invoices")
    journals: dict[object, str] = {}
    for name in chosen:
        location = resolve(profile=name, need_key=False).journal
        journal = location.absolute() if isinstance(location, Path) else location
        if journal in journals:
            raise ConfigError(
                f"profiles {journals[journal]!r} and {name!r} use one journal {journal}: "
                "each account keeps its own"
            )
        journals[journal] = name
    return chosen, senders


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _words(name: str, value: Any) -> list[str]:
    """An option as the command line of a profile's send gives it again."""
    if isinstance(value, bool):
        return [_flag(name)] if value else []
    return [_flag(name), str(getattr(value, "value", value))]


def _sent_elsewhere(
    senders: Mapping[str, str], routed: Mapping[str, set[str]]
) -> dict[str, dict[str, str]]:
    """For each profile, the invoices routed to it now that another profile's journal holds
    as sent, or perhaps sent, through that account (a journal used before it had a sender):
    invoice ID -> that profile. Its own send never takes them (``--skip-invoice``): sent
    again through this account, the receiver could have it twice. Each routed ID is looked
    up by its key in the other journals: the cost follows the outbox, not the journals'
    years of history."""
    from pathlib import Path

    from invoicectl.journal import opened_journal
    from invoicectl.journal.records import InvoiceState
    from invoicectl.settings import resolve

    sender_of = {name: sender for sender, name in senders.items()}
    own = {name: _comparable(resolve(profile=name, need_key=False).journal) for name in routed}
    found: dict[str, dict[str, str]] = {}
    for name, location in _every_journal().items():
        others = {
            profile: ids
            for profile, ids in routed.items()
            if own[profile] != _comparable(location) and ids
        }
        if not others or (isinstance(location, Path) and not location.exists()):
            continue
        with opened_journal(location) as journal:
            for profile, ids in others.items():
                for invoice_id in ids:
                    invoice = journal.invoice(invoice_id)
                    if invoice is None or invoice.sender_endpoint != sender_of[profile]:
                        continue
                    if invoice.state is InvoiceState.pending and not invoice.key_first_used_at:
                        continue  # never sent from there: held there by its supplier check
                    found.setdefault(profile, {})[invoice_id] = name
    return found


def _every_journal() -> dict[str, Any]:
    """Every journal an invoice may have been sent from, by who sent from it: each profile's,
    with a sender or not (an account used before senders were set), and the top-level one
    (``no profile``: a send before profiles). The sandbox's is the emulator's."""
    from invoicectl.config_file import config_label, default_journal
    from invoicectl.locations import journal_location
    from invoicectl.settings import load_config, resolve

    config = load_config(os.environ)
    known = profiles.read_profiles(config, f"config file {config_label(os.environ)}")
    journals = {name: resolve(profile=name, need_key=False).journal for name in sorted(known)}
    top = config.get("journal")
    top_level = journal_location(top) if isinstance(top, str) and top.strip() else None
    top_level = top_level or default_journal(os.environ)
    if _comparable(top_level) not in {_comparable(each) for each in journals.values()}:
        journals["no profile"] = top_level
    return journals


def _comparable(location: Any) -> object:
    return location.absolute() if isinstance(location, Path) else location


def _names_file(directory: Path, name: str, routing: Routing) -> str:
    """The file of the outbox's names routed to profile ``name`` (NUL-separated, as found):
    its send reads those alone, never another supplier's files."""
    path = directory / f"{name}.names"
    path.write_text("\0".join(routing.names.get(name, [])), "utf-8", "surrogateescape")
    return str(path)


def _skipping(name: str, skipped: Mapping[str, str]) -> list[str]:
    """The ``--skip-invoice`` words of one profile's send, said once on stderr."""
    if skipped:
        shown = ", ".join(
            f"{invoice_id} ({other})" for invoice_id, other in list(skipped.items())[:5]
        )
        say(f"invoicectl: profile {name}: {len(skipped)} invoice(s) of its supplier are in "
            f"another profile's journal as sent through that account: {shown}"
            f"{', ...' if len(skipped) > 5 else ''}; never sent again through {name}")  # fmt: skip
    return [word for invoice_id in skipped for word in ("--skip-invoice", invoice_id)]


def _tagged_lines() -> Any:
    lock = threading.Lock()

    def line(name: str, text: str) -> None:
        with lock:
            say(f"[{name}] {text}")

    return line


def _outcome(finished: Any) -> tuple[ExitCode, str]:
    """A child's exit code and what it says, from its document, else how it ended."""
    if finished.started_error is not None:
        return ExitCode.COULD_NOT_RUN, finished.started_error
    if finished.died is not None:
        return ExitCode.COULD_NOT_RUN, f"its send process died ({finished.died})"
    document = finished.document or {}
    code = document.get("exit_code", finished.returncode)
    try:
        exit_code = ExitCode(code)
    except ValueError:
        return ExitCode.COULD_NOT_RUN, f"its send process ended with exit {code}"
    return exit_code, f"exit {int(exit_code)}"


def _line_of(finished: Any) -> str:
    """What one profile's send came to, in a few words."""
    document = finished.document
    if document is None:
        return _outcome(finished)[1]
    if "error" in document:
        return str(document["error"])
    counts = document.get("counts") or {}
    done = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()) if n)
    code = _outcome(finished)[0]
    return done or MEANINGS[code]


def _unrouted_causes(unrouted: Sequence[Any]) -> list[Cause]:
    no_profile = sum(1 for one in unrouted if one.code is ExitCode.NEEDS_RECONCILE)
    untold = len(unrouted) - no_profile
    causes = []
    if no_profile:
        what = f"{no_profile} file{_s(no_profile)} with no profile for the supplier"
        causes.append(Cause(ExitCode.NEEDS_RECONCILE, what))
    if untold:
        causes.append(Cause(ExitCode.NEEDS_FIX, f"{untold} file{_s(untold)} without a supplier"))
    return causes


def _document(
    chosen: Sequence[str],
    senders: Mapping[str, str],
    finished: Mapping[str, Any],
    codes: Mapping[str, ExitCode],
    routing: Any,
    exit_code: ExitCode,
) -> dict[str, Any]:
    return {
        "profiles": [
            {
                "name": name,
                "sender": _sender_of(name, senders),
                "files": routing.files.get(name, 0),
                "exit_code": int(codes[name]),
                "died": finished[name].died,
                "send": finished[name].document,
            }
            for name in chosen
        ],
        "elsewhere": dict(sorted(routing.elsewhere.items())),
        "unrouted": [one.to_dict() for one in routing.unrouted],
        "exit_code": int(exit_code),
    }


def _sender_of(name: str, senders: Mapping[str, str]) -> str:
    return next(sender for sender, profile in senders.items() if profile == name)


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def say_supplier_filter(report: Any, supplier: str | None, quiet: bool) -> None:
    """After a send of one supplier's invoices: what it left, and what it held, on stderr."""
    if supplier is None or quiet:
        return
    if report.left_for_others:
        say(f"invoicectl: supplier {supplier}: {report.left_for_others} file(s) of other "
            "suppliers (or none that can be told) left untouched")  # fmt: skip
    if report.held_for_others:
        say(f"invoicectl: supplier {supplier}: held {len(report.held_for_others)} invoice(s) "
            f"of other suppliers already in this journal ({', '.join(report.held_for_others[:5])}"
            f"{', ...' if len(report.held_for_others) > 5 else ''}): never sent through this "
            "account; see invoicectl status")  # fmt: skip

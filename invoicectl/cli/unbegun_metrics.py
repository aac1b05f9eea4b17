"""The metrics file of a command that ended before its run began: a usage error (exit 2), a
setting refused or missing (a key file others may read, ``max_attempts = 0``, no API key:
exit 1). Its settings were never resolved, so the file is the one ``--metrics-file`` names,
else the config file's ``metrics_file`` (the profile's, then the top level's, as
``settings.resolve`` picks it), written with the exit code alone: the file never keeps the
last good run's code. A path that is itself the bad setting is not written (the error that
ended the command names it), and neither a dry run's nor ``send --all-profiles``'s, which
write no metrics file of their own."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from invoicectl.arguments import split_option
from invoicectl.cli.consoles import say

# The commands that write a metrics file, each as its own writer.
WRITERS = frozenset({"send", "reconcile", "status"})
_NO_METRICS = ("--dry-run", "--all-profiles", "--profiles")  # send's runs that write none


def write_unbegun(command: str, options: list[str], exit_code: int) -> None:
    """The metrics file of ``command`` (``WRITERS``), ended with ``exit_code`` before its run
    began (``options``: the command line before ``--``); nothing for an exit 0 (``-h``), a
    run that writes none, or no usable path."""
    if command not in WRITERS or exit_code == 0:
        return
    if any(option.partition("=")[0] in _NO_METRICS for option in options):
        return
    profile = _profile(os.environ, sandbox="--sandbox" in options)
    if profile is not None and not _known(profile, os.environ):
        # Asked for and refused (unknown, or a key typed in its place): never a label, and
        # never the file of another job (the top level's, for a typo); --metrics-file only.
        if split_option(options, "--metrics-file")[0] is None:
            return
        profile = None
    path = _metrics_path(options, os.environ, profile)
    if path is None:
        return
    from invoicectl import metrics
    from invoicectl.known_keys import hide_keys

    registry = metrics.registry_of(command, None, None, exit_code, profile)
    refused = metrics.write(path, registry)
    if refused is not None:  # the path is the operator's: it may hold anything
        key_file, _ = split_option(options, "--api-key-file")
        say(hide_keys(refused, api_key_file=key_file))


def _profile(environ: Mapping[str, str], *, sandbox: bool) -> str | None:
    """The profile asked for (``--profile``, ``$INVOICECTL_PROFILE``, ``--sandbox``)."""
    from invoicectl import profiles

    name, _ = profiles.chosen(profiles.given_option(), environ)
    return profiles.SANDBOX if sandbox else name


def _known(profile: str, environ: Mapping[str, str]) -> bool:
    """Whether ``profile`` is the emulator's or one of the config file's, and no key."""
    from invoicectl import profiles
    from invoicectl.known_keys import hide_keys
    from invoicectl.settings import load_config

    if hide_keys(profile) != profile:
        return False
    if profile == profiles.SANDBOX:
        return True
    try:
        every = load_config(environ).get("profiles")
    except Exception:  # a config file that cannot be read: its own error says why
        return False
    return isinstance(every, Mapping) and profile in every


def _metrics_path(
    options: list[str], environ: Mapping[str, str], profile: str | None
) -> Path | None:
    """``--metrics-file``, else the config file's ``metrics_file``, checked as
    ``settings.resolve`` checks it; None when there is none, or none that can be used."""
    from invoicectl import config_values
    from invoicectl.locations import expand_user

    given, _ = split_option(options, "--metrics-file")
    try:
        if given is not None:
            chosen = config_values.text("metrics_file", given, "option")
        else:
            configured = _configured(environ, profile)
            if configured is None:
                return None
            chosen = config_values.text("metrics_file", configured, "config file")
        return expand_user(chosen, "the metrics file")
    except Exception:  # a config file that cannot be read, a bad path: its error is said
        return None


def _configured(environ: Mapping[str, str], profile: str | None) -> object:
    """The config file's ``metrics_file``: ``profile``'s, else the top level's (never the top
    level's in a profile's send run by ``send --all-profiles``)."""
    from invoicectl import profiles
    from invoicectl.defaults import ROUTED_ENV
    from invoicectl.settings import load_config

    config = load_config(environ)
    table: object = {}
    if profile is not None and profile != profiles.SANDBOX:
        every = config.get("profiles")
        table = every.get(profile, {}) if isinstance(every, Mapping) else {}
    if isinstance(table, Mapping) and "metrics_file" in table:
        return table["metrics_file"]
    return None if environ.get(ROUTED_ENV) == "1" else config.get("metrics_file")

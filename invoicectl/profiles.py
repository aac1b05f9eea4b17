"""Profiles: one GoRoute account each, as ``[profiles.NAME]`` tables of the config file.

A bureau sending for several organisations has one account (one key, one rate limit) per
organisation. A profile names one: its ``base_url``, its key (``api_key_file``, or
``api_key_env``: the *name* of an environment variable holding it), its limits (``tier``,
``rate``, ``concurrency``), its own ``journal`` and the organisation's Peppol id
(``sender = "0088:..."``), which routes an invoice by its supplier EndpointID. Where a profile
says nothing, the top-level keys are its defaults (``settings.resolve``), except the journal:
each profile keeps its own (``journal-NAME.db`` beside the default journal), since one journal
shared by two accounts would mix them and let one run lock stall the other.

``sandbox`` is built in: the emulator, in this process, with its own journal (``--sandbox``).

This module only reads and checks the tables: every problem is one line naming the profile
and key, all of them at once, so a broken config file is fixed in one pass.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from invoicectl.arguments import split_option
from invoicectl.defaults import TIERS, WHOLE_SETTINGS
from invoicectl.errors import ConfigError, UsageError
from invoicectl.locations import is_database_url, redacted

SANDBOX = "sandbox"
ENV = "INVOICECTL_PROFILE"
OPTION = "--profile"
# What a profile table may hold; anything else is a typo caught before a run.
PROFILE_KEYS = frozenset(
    {"base_url", "api_key_file", "api_key_env", "tier", "rate", "concurrency", "journal", "sender"}
    | {"metrics_file", "ping_url"}  # its own: what a send --all-profiles child writes and pings
)
# A Peppol participant as the UBL reader extracts a supplier EndpointID: schemeID:id.
_PEPPOL_ID = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]*:[^\s:][^\s]*")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Each key's check: the type a TOML value must have, and a number's or a tier's range.
_TEXT_KEYS: tuple[str, ...] = ("base_url", "api_key_file", "api_key_env", "tier", "journal")
_TEXT_KEYS += ("sender", "metrics_file", "ping_url")
_WHOLE_KEYS = ("rate", "concurrency")


@dataclass(frozen=True)
class Profile:
    """One ``[profiles.NAME]`` table, its types checked; what it does not say is absent."""

    name: str
    values: Mapping[str, Any]  # the keys it sets, as written

    @property
    def sender(self) -> str | None:
        sender = self.values.get("sender")
        return sender if isinstance(sender, str) else None


def read_profiles(config: Mapping[str, Any], where: str) -> dict[str, Profile]:
    """The config file's profiles by name, checked; ConfigError listing every problem."""
    tables = config.get("profiles", {})
    if not isinstance(tables, Mapping):
        raise ConfigError(f"profiles ({where}) must be tables [profiles.NAME], not {tables!r}")
    problems: list[str] = []
    profiles: dict[str, Profile] = {}
    for name, table in tables.items():
        found = _problems(name, table)
        problems += [f"profile {name!r} ({where}): {problem}" for problem in found]
        if not found:
            profiles[name] = Profile(name, dict(table))
    problems += [f"{problem} ({where})" for problem in _clashes(profiles)]
    if problems:
        raise ConfigError("\n".join(problems))
    return profiles


def _problems(name: str, table: Any) -> list[str]:
    if name == SANDBOX:
        return ["sandbox is built in (the emulator, --sandbox); name this profile otherwise"]
    if not _NAME.fullmatch(name):
        return [
            "a profile's name is letters, digits, - and _, starting with a letter or digit "
            "(it names its journal file)"
        ]
    if not isinstance(table, Mapping):
        return [f"must be a table of settings, not {table!r}"]
    problems = [
        f"unknown key {key!r} (a profile takes {', '.join(sorted(PROFILE_KEYS))})"
        for key in sorted(set(table) - PROFILE_KEYS)
    ]
    for key in _TEXT_KEYS:
        if key in table and (not isinstance(table[key], str) or not table[key].strip()):
            problems.append(f"{key} must be a non-empty text, not {table[key]!r}")
    for key in _WHOLE_KEYS:  # each in its range, all said at once (helper-93)
        low, high, unit = WHOLE_SETTINGS[key]
        value = table.get(key, low)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            must = f"a whole number from {low} to {high} ({unit})"
            problems.append(f"{key} must be {must}, not {value!r}")
    tier = table.get("tier")
    if isinstance(tier, str) and tier.strip() and tier not in TIERS:
        problems.append(f"tier must be {' or '.join(map(repr, TIERS))}, not {tier!r}")
    if "api_key_file" in table and "api_key_env" in table:
        problems.append("api_key_file and api_key_env both given: say where the key is once")
    env_name = table.get("api_key_env")
    if isinstance(env_name, str) and env_name.strip() and not _ENV_NAME.fullmatch(env_name):
        problems.append(
            "api_key_env is the NAME of an environment variable holding the key "
            "(letters, digits, _), never the key itself"
        )  # the value is not quoted: someone may have pasted the key there
    sender = table.get("sender")
    if isinstance(sender, str) and sender.strip() and not _PEPPOL_ID.fullmatch(sender):
        problems.append(
            f"sender must be a Peppol id scheme:id, such as 0088:5790000435951, not {sender!r}"
        )
    return problems


def _clashes(profiles: Mapping[str, Profile]) -> list[str]:
    """Two profiles sharing what must be one account's own: an organisation (an invoice could
    be routed to either account), a journal, a metrics file (each run replaces the file, and
    with it the other profile's figures) or a ping URL (the monitor would take one's start
    and exit code for the other's). Paths are compared as the runs would open them: ``~``
    expanded, relative to here, through symbolic links."""
    return [
        *(
            f"profiles {names} have the same sender {sender}: an invoice of that supplier "
            "must go through one account"
            for sender, names in _sharing(profiles, "sender", str)
        ),
        *(
            f"profiles {names} have the same journal {journal}: each account keeps its own "
            "(its run lock, its 24-hour windows)"
            for journal, names in _sharing(profiles, "journal", _journal_spelling)
        ),
        *(
            f"profiles {names} have the same metrics_file {path}: each run replaces the "
            "file, and with it the other profile's figures; give each profile its own"
            for path, names in _sharing(profiles, "metrics_file", _file_spelling)
        ),
        *(
            f"profiles {names} have the same ping_url (not shown: it is a secret): the "
            "monitor would take one's start and exit code for the other's; give each its own"
            for _, names in _sharing(profiles, "ping_url", lambda url: url.strip().rstrip("/"))
        ),
    ]


def _sharing(
    profiles: Mapping[str, Profile], key: str, spelling: Callable[[str], str]
) -> list[tuple[str, str]]:
    """Each value of ``key``, as ``spelling`` writes it, that two profiles or more give, and
    their names, quoted."""
    by_value: dict[str, list[str]] = {}
    for profile in profiles.values():
        if isinstance(value := profile.values.get(key), str):
            by_value.setdefault(spelling(value), []).append(profile.name)
    return [
        (value, ", ".join(map(repr, names))) for value, names in by_value.items() if len(names) > 1
    ]


def _journal_spelling(journal: str) -> str:
    # A PostgreSQL URL as its password-free form: it is quoted to the operator.
    return redacted(journal) if is_database_url(journal) else _file_spelling(journal)


def _file_spelling(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))


def chosen(option: str | None, environ: Mapping[str, str]) -> tuple[str | None, str]:
    """The profile asked for and where: ``--profile``, else ``$INVOICECTL_PROFILE``."""
    if option is not None:
        return option, "option"
    if environ.get(ENV):
        return environ[ENV], f"${ENV}"
    return None, "default"


def unknown(name: str, source: str, known: list[str]) -> Exception:
    """The one line for a profile that is not there; from the command line a usage error."""
    where = "--profile" if source == "option" else source
    error = UsageError if source == "option" else ConfigError
    names = ", ".join(sorted({*known, SANDBOX}))
    return error(f"unknown profile {name!r} ({where}); the known profiles: {names}")


def supplier_of_send(option: str | None, sender: str | None, profile: str | None) -> str | None:
    """The supplier a send takes invoices of: ``--supplier``, else the profile's sender (a
    profile with a sender never sends another's invoices); both, and different, is an error."""
    if option is not None and not _PEPPOL_ID.fullmatch(option):
        raise UsageError(
            f"--supplier must be a Peppol id scheme:id, such as 0088:123, not {option!r}"
        )
    if option is not None and sender is not None and option != sender:
        raise UsageError(
            f"--supplier {option} is not the sender of profile {profile} ({sender}): an "
            "invoice goes through its supplier's profile only"
        )
    return option or sender


def settle(
    option: str | None,
    sandbox: bool,
    config: Mapping[str, Any],
    in_config: str,
    environ: Mapping[str, str],
    sources: dict[str, str],
) -> tuple[str | None, Mapping[str, Any], bool]:
    """The profile chosen (its name, its table, whether it is the sandbox), checked."""
    known = read_profiles(config, in_config)
    name, source = chosen(option or given_option(), environ)
    if sandbox and name not in (None, SANDBOX) and source == "option":
        raise UsageError(f"--sandbox and --profile {name} name two accounts; give one of them")
    if sandbox:  # --sandbox is the sandbox profile, whatever $INVOICECTL_PROFILE says
        name, source = SANDBOX, "--sandbox"
    sources["profile"] = source
    if name is None:
        return None, {}, False
    if name == SANDBOX:
        return name, {}, True
    if name not in known:
        raise unknown(name, source, list(known))
    if known[name].sender is not None:
        sources["sender"] = f"profile {name}"
    return name, known[name].values, False


# ---- the command line's --profile, read once at the group (as --log-format is) -------------

_given: dict[str, str | None] = {"option": None}


def split_profile(args: list[str]) -> tuple[str | None, list[str]]:
    """The ``--profile`` value given (the last one), and the arguments without it."""
    return split_option(args, OPTION)


def give_option(name: str | None) -> None:
    """Record this process's ``--profile`` (``None``: not given) for ``settings.resolve``."""
    _given["option"] = name


def given_option() -> str | None:
    return _given["option"]

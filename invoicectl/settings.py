"""Settings, resolved once: command-line option, then environment, then config file, then default.

The config file is TOML: ``$INVOICECTL_CONFIG``, else ``$XDG_CONFIG_HOME/invoicectl/config.toml``
(``~/.config/invoicectl/config.toml``). Keys: ``journal``, ``base_url``, ``api_key_file``,
``tier``, ``rate``, ``concurrency``, ``batch_size``, ``max_attempts``, ``max_wait``,
``request_timeout`` (also ``$INVOICECTL_REQUEST_TIMEOUT``), ``metrics_file`` (a Prometheus
textfile, ``metrics``), ``ping_url`` (a health-check URL, also ``$INVOICECTL_PING_URL``; a
secret, never shown: ``pings``), ``log_format`` (``text`` or ``json``, also
``$INVOICECTL_LOG_FORMAT``: ``cli/logsetup``), ``[profiles.NAME]`` tables (one GoRoute
account each: ``profiles``; chosen by ``--profile`` or ``$INVOICECTL_PROFILE``, and their
values come between the environment's and the top-level keys'). The API key
itself is never read from the config file or an argument: ``GOROUTE_API_KEY`` or a 0600
``api_key_file`` (a profile's own ``api_key_file``, or ``api_key_env``: the name of the
variable holding its key).

This module owns where the journal lives by default and the run objects built from resolved
settings (``Settings.retry_policy()``, ``Settings.send_options()``); the defaults themselves
are in ``defaults``. It imports neither the journal nor anything heavy at import time.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from invoicectl import DEFAULT_BASE_URL, config_values, pasted_keys, profiles
from invoicectl.config_file import (
    config_label,
    config_path,
    config_text,
    default_journal_path,
    home_directory,
)
from invoicectl.defaults import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_WAIT,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_RETENTION_YEARS,
    DEFAULT_TIER,
    ROUTED_ENV,
    TIERS,
)
from invoicectl.errors import ConfigError
from invoicectl.locations import JournalURL, Location, expand_user, journal_location, setting_named

if TYPE_CHECKING:
    from invoicectl.goroute.apikey import ApiKey
    from invoicectl.goroute.retry import RetryPolicy
    from invoicectl.send.options import SendOptions


SANDBOX_BASE_URL = "http://sandbox.invoicectl.invalid"
_CONFIG_KEYS = {
    "journal", "base_url", "api_key_file", "tier", "rate", "concurrency", "batch_size",
    "max_attempts", "max_wait", "request_timeout", "signing_key", "retention_years",
    "metrics_file", "ping_url", "log_format", "profiles",
}  # fmt: skip


@dataclass(frozen=True)
class Settings:
    journal: Location
    base_url: str
    api_key: ApiKey | None  # None only for commands that need no API
    sandbox: bool
    rate_per_minute: int
    concurrency: int
    batch_size: int
    max_attempts: int
    max_wait: float
    sources: Mapping[str, str]  # setting -> where its value came from
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT  # seconds for one whole request
    metrics_file: Path | None = None  # where the run's metrics go (invoicectl/metrics.py)
    ping_url: str | None = None  # a secret: never printed, logged or journalled (pings.py)
    profile: str | None = None  # the profile chosen (``profiles``), None for none
    sender: str | None = None  # the profile's Peppol id: only its invoices go through it
    tier: str | None = None  # the tier named, if any (rate and concurrency are what count)

    def __repr__(self) -> str:
        # The key's own repr shows only its fingerprint; say so explicitly anyway.
        return (
            f"Settings(journal={str(self.journal)!r}, base_url={self.base_url!r}, "
            f"api_key={self.api_key!r}, sandbox={self.sandbox}, rate={self.rate_per_minute})"
        )

    def retry_policy(self) -> RetryPolicy:
        """How often and how long one request is retried (``--max-attempts``, ``--max-wait``)."""
        from invoicectl.goroute.retry import RetryPolicy

        return RetryPolicy(max_attempts=self.max_attempts, max_wait=self.max_wait)

    def send_options(
        self,
        *,
        deadline: float | None = None,
        new_versions: Sequence[str] = (),
        order: str = "due",
        check_receivers: bool = True,
        refresh_receivers: bool = False,
        validate: bool = False,
        history: Mapping[str, Any] | None = None,
        supplier: str | None = None,
        skip_invoices: Sequence[str] = (),
    ) -> SendOptions:
        """What one send run is asked to do: its pacing, its retries, its deadline, the
        invoices to send under their next key, the order of new sends, and whether receivers
        are looked up first and documents validated by GoRoute. ``history``: the history
        check's options (``outbox``, ``recursive``, ``trust_new_journal``, ``warn``;
        ``send/history.py``)."""
        from invoicectl.journal.records import SendOrder
        from invoicectl.send.options import SendOptions

        if deadline is not None:
            deadline = config_values.seconds("deadline", deadline, "option")
        return SendOptions(
            rate_per_minute=self.rate_per_minute,
            concurrency=self.concurrency,
            policy=self.retry_policy(),
            deadline=deadline,
            # Each once: a second --new-version of one ID would be refused after the first
            # had moved the invoice on, a usage error that had already changed the journal.
            new_versions=tuple(dict.fromkeys(new_versions)),
            order=SendOrder(order),
            check_receivers=check_receivers,
            refresh_receivers=refresh_receivers,
            validate=validate,
            supplier=supplier,
            skip_invoices=tuple(skip_invoices),
            **(history or {}),
        )

    def send_run_options(
        self, directory: Path, *, deadline: float | None = None, new_versions: Sequence[str] = ()
    ) -> dict[str, Any]:
        """The options a send run records in the journal's runs table."""
        return {
            "directory": str(directory),
            "rate": self.rate_per_minute,
            "concurrency": self.concurrency,
            "sandbox": self.sandbox,
            "new_version": list(new_versions),
            "deadline": deadline,
        }


def retention_years(environ: Mapping[str, str]) -> int:
    """``retention_years`` from the config file, checked (``export`` needs it; ``doctor``
    checks it); else the default."""
    config = load_config(environ)
    if "retention_years" not in config:
        return DEFAULT_RETENTION_YEARS
    source = f"config file {config_label(environ)}"
    return config_values.whole("retention_years", config["retention_years"], source)


def load_config(environ: Mapping[str, str]) -> dict[str, Any]:
    path = config_path(environ)
    if path is None:
        return {}
    if not path.exists():
        if environ.get("INVOICECTL_CONFIG"):
            raise ConfigError(f"INVOICECTL_CONFIG names {path}, which does not exist")
        return {}
    import tomllib  # here: without a config file, no command loads the parser

    try:
        data = tomllib.loads(config_text(path))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"cannot read the config file {path}: {error}") from None
    except RecursionError:  # tomllib recurses once a level: 500 levels are 1 KB
        raise ConfigError(f"cannot read the config file {path}: nested too deeply") from None
    if unknown := set(data) - _CONFIG_KEYS:
        raise ConfigError(f"unknown setting(s) in {path}: {', '.join(sorted(unknown))}")
    return data


def resolve(
    *,
    journal: Location | str | None = None,
    sandbox: bool = False,
    api_key_file: Path | None = None,
    tier: str | None = None,
    rate: int | None = None,
    concurrency: int | None = None,
    batch_size: int | None = None,
    max_attempts: int | None = None,
    max_wait: float | None = None,
    need_key: bool = True,
    metrics_file: Path | str | None = None,
    ping_url: str | None = None,
    environ: Mapping[str, str] | None = None,
    profile: str | None = None,
) -> Settings:
    """The settings of one command, each value checked (``config_values``) before use.

    ``profile``: the profile's name (else ``--profile`` as the group read it, else
    ``$INVOICECTL_PROFILE``); its values come after the option's and the environment's,
    before the config file's top-level keys."""
    environ = os.environ if environ is None else environ
    config = load_config(environ)
    in_config = f"config file {config_label(environ)}"
    sources: dict[str, str] = {}
    profile_name, table, sandbox = profiles.settle(
        profile, sandbox, config, in_config, environ, sources
    )
    in_profile = f"profile {profile_name} ({in_config})"

    def pick(
        name: str, option: Any, env_name: str | None, default: Any, top: Mapping[str, Any] = config
    ) -> tuple[Any, str]:
        """The value and where it came from: ``option``, ``$VAR``, the profile, the config
        file, default."""
        if option is not None:
            sources[name] = "option"
        elif env_name and environ.get(env_name):
            sources[name] = f"${env_name}"
            option = environ[env_name]
        elif name in table:
            sources[name] = f"profile {profile_name}"
            return table[name], in_profile
        elif name in top:
            sources[name] = "config file"
            return top[name], in_config
        else:
            sources[name] = "default"
            option = default
        return option, sources[name]

    def whole(name: str, option: Any, default: int) -> int:
        return config_values.whole(name, *pick(name, option, None, default))

    if sandbox:
        from invoicectl.defaults import SANDBOX_API_KEY
        from invoicectl.goroute.apikey import ApiKey

        sandboxed = "--sandbox" if sources["profile"] == "--sandbox" else "profile sandbox"
        base_url = SANDBOX_BASE_URL
        sources["base_url"] = sandboxed
        key: ApiKey | None = ApiKey(SANDBOX_API_KEY)
        sources["api_key"] = sandboxed
        journal_path = journal_location(
            journal or default_journal_path(environ).with_name("sandbox.db")
        )
        sources["journal"] = "option" if journal else sandboxed
    else:
        base_url = config_values.base_url(
            *pick("base_url", None, "GOROUTE_BASE_URL", DEFAULT_BASE_URL)
        )
        # A profile never inherits the top-level journal: each account keeps its own.
        chosen, source = pick(
            "journal", journal, "INVOICECTL_JOURNAL", None, config if profile_name is None else {}
        )
        if chosen is not None and not isinstance(chosen, (Path, JournalURL)):
            chosen = config_values.text("journal", chosen, source)
        if chosen is None and profile_name is not None:
            chosen = profile_journal(profile_name, environ)
            sources["journal"] = f"profile {profile_name} (its default)"
        journal_path = journal_location(chosen or default_journal_path(environ), source)
        keys = _KeyPlaces(api_key_file, table, in_profile, config, in_config)
        key = _api_key(keys, environ, sources) if need_key else None

    # A profile's send run by ``send --all-profiles`` (``ROUTED_ENV``): the parent pings once
    # for all; a metrics file or ping URL is the profile's own, never the shared one.
    shared = {} if environ.get(ROUTED_ENV) == "1" else config
    chosen_metrics, metrics_source = pick("metrics_file", metrics_file, None, None, shared)
    if chosen_metrics is not None and not isinstance(chosen_metrics, Path):
        chosen_metrics = Path(config_values.text("metrics_file", chosen_metrics, metrics_source))
    ping_env = "INVOICECTL_PING_URL" if shared is config else None
    chosen_ping, source = pick("ping_url", ping_url, ping_env, None, shared)
    if chosen_ping is not None:
        chosen_ping = config_values.ping_url(chosen_ping, source)
    tier_name, source = pick("tier", tier, None, None)
    if tier_name is not None and (not isinstance(tier_name, str) or tier_name not in TIERS):
        raise config_values.refusal("tier", source, " or ".join(map(repr, TIERS)), tier_name)
    tier_rate, tier_concurrency = TIERS[tier_name or DEFAULT_TIER]

    def of_tier(name: str, option: Any, tier_value: int) -> int:
        """The rate or concurrency, the tier's where the tier was named more specifically
        (``--tier`` over the config file's ``rate``, a profile's tier over the top level's)."""
        value = whole(name, option, tier_value)  # checked even where the tier's wins
        tier_source = sources["tier"]
        if config_values.specificity(tier_source) <= config_values.specificity(sources[name]):
            return value
        sources[name] = tier_source
        return tier_value

    settings = Settings(
        journal=journal_path,
        base_url=base_url,
        api_key=key,
        sandbox=sandbox,
        rate_per_minute=of_tier("rate", rate, tier_rate),
        concurrency=of_tier("concurrency", concurrency, tier_concurrency),
        batch_size=whole("batch_size", batch_size, DEFAULT_BATCH_SIZE),
        max_attempts=whole("max_attempts", max_attempts, DEFAULT_MAX_ATTEMPTS),
        max_wait=config_values.seconds(
            "max_wait", *pick("max_wait", max_wait, None, DEFAULT_MAX_WAIT)
        ),
        sources=sources,
        request_timeout=config_values.seconds(
            "request_timeout",
            *pick("request_timeout", None, "INVOICECTL_REQUEST_TIMEOUT", DEFAULT_REQUEST_TIMEOUT),
        ),
        metrics_file=None
        if chosen_metrics is None
        else expand_user(chosen_metrics, *setting_named("metrics_file", metrics_source)),
        ping_url=chosen_ping,
        profile=profile_name,
        sender=table.get("sender"),
        tier=tier_name,
    )
    pasted_keys.refuse_pasted(settings, api_key_file, environ, config, in_config)
    return settings


def profile_journal(name: str, environ: Mapping[str, str]) -> Path:
    """A profile's journal when it names none: ``journal-NAME.db`` beside the default one."""
    state_home = environ.get("XDG_STATE_HOME") or str(home_directory() / ".local" / "state")
    return Path(state_home) / "invoicectl" / f"journal-{name}.db"


@dataclass(frozen=True)
class _KeyPlaces:
    """Where a key may be named: ``--api-key-file``, the profile's table, the config file."""

    option: Path | None
    table: Mapping[str, Any]
    in_profile: str
    config: Mapping[str, Any]
    in_config: str


def _unshown_env(environ: Mapping[str, str], name: str) -> str:
    """Why the variable ``name`` gives no key, in words that never repeat ``name``."""
    what = "is set but not a usable key" if environ.get(name, "").strip() else "is not set"
    return (
        f"the environment variable api_key_env names {what} (its name, not written in "
        "capitals as variables are, is not repeated here, in case it is the key itself): "
        "api_key_env is the NAME of a variable holding the key"
    )


def _api_key(places: _KeyPlaces, environ: Mapping[str, str], sources: dict[str, str]) -> ApiKey:
    from invoicectl.goroute.apikey import ApiKey  # here: hashlib and hmac only when needed

    table, in_profile, in_config = places.table, places.in_profile, places.in_config
    if places.option is not None:
        sources["api_key"] = "--api-key-file"
        return ApiKey.from_file(places.option, named_by="--api-key-file")
    if environ.get("GOROUTE_API_KEY"):
        sources["api_key"] = "$GOROUTE_API_KEY"
        return ApiKey.from_env(environ)
    if "api_key_env" in table:
        name = table["api_key_env"]
        # A key pasted where its variable's name goes may look like a name (sk_live_...):
        # only a name written as variables are (BETA_KEY) is repeated, in any message.
        shown = name if name == name.upper() else "(the variable api_key_env names)"
        sources["api_key"] = f"${shown} ({in_profile.partition(' (')[0]})"
        try:
            return ApiKey.from_env(environ, name)
        except ConfigError as error:
            said = str(error) if shown == name else _unshown_env(environ, name)
            raise ConfigError(f"{said} (api_key_env of {in_profile})") from None
    if "api_key_file" in table:
        sources["api_key"] = in_profile.partition(" (")[0]
        path = config_values.text("api_key_file", table["api_key_file"], in_profile)
        named = f"api_key_file ({in_profile})"
        return ApiKey.from_file(expand_user(path, named, ConfigError, shown=False), named_by=named)
    if "api_key_file" in places.config:
        sources["api_key"] = "config file"
        path = config_values.text("api_key_file", places.config["api_key_file"], in_config)
        named = f"api_key_file ({in_config})"
        return ApiKey.from_file(expand_user(path, named, ConfigError, shown=False), named_by=named)
    raise ConfigError(
        "no API key: set GOROUTE_API_KEY or pass --api-key-file PATH (a file only you can "
        "read, chmod 600); to try invoicectl without an account, add --sandbox"
        + (f" (or give {in_profile} an api_key_file or api_key_env)" if table else "")
    )

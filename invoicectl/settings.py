"""Settings, resolved once: command-line option, then environment, then config file, then default.

The config file is TOML: ``$INVOICECTL_CONFIG``, else ``$XDG_CONFIG_HOME/invoicectl/config.toml``
(``~/.config/invoicectl/config.toml``). Keys: ``journal``, ``base_url``, ``api_key_file``,
``tier``, ``rate``, ``concurrency``, ``batch_size``, ``max_attempts``, ``max_wait``,
``request_timeout`` (also ``$INVOICECTL_REQUEST_TIMEOUT``). The API key
itself is never read from the config file or an argument: ``GOROUTE_API_KEY`` or a 0600
``api_key_file``.

This module owns where the journal lives by default and the run objects built from resolved
settings (``Settings.retry_policy()``, ``Settings.send_options()``); the defaults themselves
are in ``defaults``. It imports neither the journal nor anything heavy at import time.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from invoicectl import DEFAULT_BASE_URL
from invoicectl.defaults import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_WAIT,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_TIER,
    TIERS,
)
from invoicectl.errors import ConfigError, UsageError

if TYPE_CHECKING:
    from invoicectl.goroute.apikey import ApiKey
    from invoicectl.goroute.retry import RetryPolicy
    from invoicectl.send.options import SendOptions


SANDBOX_BASE_URL = "http://sandbox.invoicectl.invalid"
_CONFIG_KEYS = {
    "journal", "base_url", "api_key_file", "tier", "rate", "concurrency", "batch_size",
    "max_attempts", "max_wait", "request_timeout",
}  # fmt: skip


def default_journal_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$INVOICECTL_JOURNAL``, else the user's state directory (XDG on Linux)."""
    environ = os.environ if environ is None else environ
    if explicit := environ.get("INVOICECTL_JOURNAL"):
        return Path(explicit).expanduser()
    state_home = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "invoicectl" / "journal.db"


@dataclass(frozen=True)
class Settings:
    journal: Path
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
    ) -> SendOptions:
        """What one send run is asked to do: its pacing, its retries, its deadline, the
        invoices to send under their next key, the order of new sends, and whether receivers
        are looked up first and documents validated by GoRoute."""
        from invoicectl.journal.records import SendOrder
        from invoicectl.send.options import SendOptions

        return SendOptions(
            rate_per_minute=self.rate_per_minute,
            concurrency=self.concurrency,
            policy=self.retry_policy(),
            deadline=deadline,
            new_versions=tuple(new_versions),
            order=SendOrder(order),
            check_receivers=check_receivers,
            refresh_receivers=refresh_receivers,
            validate=validate,
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


def load_config(environ: Mapping[str, str]) -> dict[str, Any]:
    path = config_path(environ)
    if not path.exists():
        return {}
    import tomllib  # here: without a config file, no command loads the parser

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"cannot read the config file {path}: {error}") from None
    if unknown := set(data) - _CONFIG_KEYS:
        raise ConfigError(f"unknown setting(s) in {path}: {', '.join(sorted(unknown))}")
    return data


def config_path(environ: Mapping[str, str]) -> Path:
    if explicit := environ.get("INVOICECTL_CONFIG"):
        return Path(explicit).expanduser()
    home = environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(home) / "invoicectl" / "config.toml"


def resolve(
    *,
    journal: Path | None = None,
    sandbox: bool = False,
    api_key_file: Path | None = None,
    tier: str | None = None,
    rate: int | None = None,
    concurrency: int | None = None,
    batch_size: int | None = None,
    max_attempts: int | None = None,
    max_wait: float | None = None,
    need_key: bool = True,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    environ = os.environ if environ is None else environ
    config = load_config(environ)
    sources: dict[str, str] = {}

    def pick(name: str, option: Any, env_name: str | None, default: Any) -> Any:
        if option is not None:
            sources[name] = "option"
            return option
        if env_name and environ.get(env_name):
            sources[name] = f"${env_name}"
            return environ[env_name]
        if name in config:
            sources[name] = "config file"
            return config[name]
        sources[name] = "default"
        return default

    if sandbox:
        from invoicectl.goroute.apikey import ApiKey
        from invoicectl.sandbox.config import DEFAULT_API_KEY

        base_url = SANDBOX_BASE_URL
        sources["base_url"] = "--sandbox"
        key: ApiKey | None = ApiKey(DEFAULT_API_KEY)
        sources["api_key"] = "--sandbox"
        journal_path = journal or default_journal_path(environ).with_name("sandbox.db")
        sources["journal"] = "option" if journal else "--sandbox"
    else:
        base_url = str(pick("base_url", None, "GOROUTE_BASE_URL", DEFAULT_BASE_URL))
        chosen = pick("journal", journal, "INVOICECTL_JOURNAL", None)
        journal_path = Path(chosen or default_journal_path(environ)).expanduser()
        key = _api_key(api_key_file, config, environ, sources) if need_key else None

    tier_name = pick("tier", tier, None, None)
    if tier_name is not None and tier_name not in TIERS:
        raise UsageError(f"unknown tier {tier_name!r}; choose {' or '.join(TIERS)}")
    tier_rate, tier_concurrency = TIERS[tier_name or DEFAULT_TIER]
    rate_value = int(pick("rate", rate, None, tier_rate))
    concurrency_value = int(pick("concurrency", concurrency, None, tier_concurrency))
    if rate_value < 1 or concurrency_value < 1:
        raise UsageError("--rate and --concurrency must be at least 1")
    return Settings(
        journal=journal_path,
        base_url=base_url,
        api_key=key,
        sandbox=sandbox,
        rate_per_minute=rate_value,
        concurrency=concurrency_value,
        batch_size=int(pick("batch_size", batch_size, None, DEFAULT_BATCH_SIZE)),
        max_attempts=int(pick("max_attempts", max_attempts, None, DEFAULT_MAX_ATTEMPTS)),
        max_wait=float(pick("max_wait", max_wait, None, DEFAULT_MAX_WAIT)),
        sources=sources,
        request_timeout=_request_timeout(pick, sources),
    )


def _request_timeout(pick: Callable[..., Any], sources: Mapping[str, str]) -> float:
    value = pick("request_timeout", None, "INVOICECTL_REQUEST_TIMEOUT", DEFAULT_REQUEST_TIMEOUT)
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = float("nan")
    if isinstance(value, bool) or not 0 < seconds < float("inf"):
        raise ConfigError(
            f"request_timeout ({sources['request_timeout']}) must be a number of seconds "
            f"above 0, not {str(value)[:40]!r}"
        )
    return seconds


def _api_key(
    option: Path | None,
    config: Mapping[str, Any],
    environ: Mapping[str, str],
    sources: dict[str, str],
) -> ApiKey:
    from invoicectl.goroute.apikey import ApiKey  # here: hashlib and hmac only when needed

    if option is not None:
        sources["api_key"] = "--api-key-file"
        return ApiKey.from_file(option)
    if environ.get("GOROUTE_API_KEY"):
        sources["api_key"] = "$GOROUTE_API_KEY"
        return ApiKey.from_env(environ)
    if "api_key_file" in config:
        sources["api_key"] = "config file"
        return ApiKey.from_file(Path(config["api_key_file"]).expanduser())
    raise ConfigError(
        "no API key: set GOROUTE_API_KEY or pass --api-key-file PATH (a file only you can "
        "read, chmod 600); to try invoicectl without an account, add --sandbox"
    )

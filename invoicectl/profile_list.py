"""What ``invoicectl profiles`` lists: every profile's settings, where each came from, and
whether its key is found: never the key, nor any part or fingerprint of it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from invoicectl import profiles
from invoicectl.config_file import config_label
from invoicectl.errors import ConfigError
from invoicectl.settings import load_config, resolve

# The settings a profile listing shows, in its columns' order.
SHOWN = ("base_url", "tier", "rate", "concurrency", "journal", "sender", "api_key")


@dataclass(frozen=True)
class Listed:
    """One profile as listed: plain values, the sources of each, whether its key is found."""

    name: str
    base_url: str
    tier: str | None
    rate: int
    concurrency: int
    journal: str
    sender: str | None
    key_found: bool
    key_problem: str | None  # why not, in words that never hold the key
    sources: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "base_url": self.base_url,
            "tier": self.tier,
            "rate": self.rate,
            "concurrency": self.concurrency,
            "journal": self.journal,
            "sender": self.sender,
            "key_found": self.key_found,
            "key_problem": self.key_problem,
            "sources": dict(self.sources),
        }


def list_profiles(environ: Mapping[str, str] | None = None) -> list[Listed]:
    """Every profile of the config file, then the built-in ``sandbox``, as each would run
    here now (this environment's variables included: they come before a profile)."""
    environ = os.environ if environ is None else environ
    config = load_config(environ)
    names = sorted(profiles.read_profiles(config, f"config file {config_label(environ)}"))
    return [_listed(name, environ) for name in [*names, profiles.SANDBOX]]


def _listed(name: str, environ: Mapping[str, str]) -> Listed:
    settings = resolve(profile=name, need_key=False, environ=environ)
    problem: str | None = None
    try:
        keyed = resolve(profile=name, environ=environ)
        sources = dict(keyed.sources)
    except ConfigError as error:  # its messages never quote a key (goroute/apikey)
        problem, sources = str(error), {**settings.sources, "api_key": "not found"}
    return Listed(
        name=name,
        base_url=settings.base_url,
        tier=settings.tier,
        rate=settings.rate_per_minute,
        concurrency=settings.concurrency,
        journal=str(settings.journal),
        sender=settings.sender,
        key_found=problem is None,
        key_problem=problem,
        sources={key: sources.get(key, "default") for key in SHOWN},
    )

"""The account tiers of the brief's rate-limit table (goroute-api.md, tier A).

The one statement of it: settings, the CLI's help text and the sandbox's tiers all read this
table. Enterprise limits are custom: set ``--rate`` and ``--concurrency``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple


class TierLimits(NamedTuple):
    rate_per_minute: int
    concurrency: int


TIERS: Mapping[str, TierLimits] = {
    "standard": TierLimits(rate_per_minute=100, concurrency=10),
    "professional": TierLimits(rate_per_minute=500, concurrency=50),
}
DEFAULT_TIER = "standard"

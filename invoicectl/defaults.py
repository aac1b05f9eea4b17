"""Every default, stated once: the account tiers of the brief's rate-limit table
(goroute-api.md, tier A) and the send defaults.

Settings, the CLI's help text and the sandbox's tiers all read these. Enterprise limits are
custom: set ``--rate`` and ``--concurrency``. A plain module, cheap to import: every
``--help`` reads it.
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
DEFAULT_BATCH_SIZE = 50  # invoices per progress line
DEFAULT_MAX_ATTEMPTS = 5  # transient answers per request per run
DEFAULT_MAX_WAIT = 300.0  # seconds of Retry-After waiting per request
# Seconds a request in flight gets to answer once the deadline passes or a first signal
# comes; then it is abandoned (unknown, replayed by the next run). ``send.stopping``.
STOP_GRACE = 3.0
# Wall-clock seconds for one whole request, answer included: a 15 MB document goes out in
# well under this on any working link, and a trickling answer cannot hold a run past it.
DEFAULT_REQUEST_TIMEOUT = 60.0

# How long an invoice's stored bytes are kept (config ``retention_years``): Belgium, France
# and Italy ask 10 years, Germany 8, the Netherlands 7. No command deletes the bytes of an
# invoice younger than this (none deletes stored bytes at all yet); exports record it.
DEFAULT_RETENTION_YEARS = 10

# Invoices in a row that get no answer even after their retries before a run stops.
OUTAGE_AFTER = 3

# Set in the environment of each profile's send that ``send --all-profiles`` runs: it uses
# its profile's own metrics file and ping URL only, and leaves warnings to the parent.
ROUTED_ENV = "INVOICECTL_ROUTED"

# The emulator's own API key (``invoicectl sandbox``, ``--sandbox``): published, no secret.
SANDBOX_API_KEY = "sk_test_invoicectl_sandbox"


class Whole(NamedTuple):
    low: int
    high: int
    unit: str


# Each whole-number setting's range (``config_values.whole``): far beyond any GoRoute account;
# they keep a typo (10^30) from reaching the limiter and pool.
WHOLE_SETTINGS = {
    "rate": Whole(1, 100_000, "requests per minute"),
    "concurrency": Whole(1, 1_000, "requests in flight"),
    "batch_size": Whole(1, 1_000_000, "invoices per progress line"),
    "max_attempts": Whole(1, 100, "tries per request"),
    "retention_years": Whole(1, 100, "years the stored bytes are kept"),
}

"""How a sandbox behaves: keys, rate limits, faults and timings, fixed when it starts.

Faults can change while the emulator runs (``POST /_sandbox/faults``); they live in their own
small dataclass so that changing them is a replace, never a mutation.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

# goroute-api.md, tier A: the brief's rate-limit table, stated once (the client's defaults).
from invoicectl.defaults import SANDBOX_API_KEY, TIERS

DEFAULT_API_KEY = SANDBOX_API_KEY  # the emulator's own key, stated in defaults
FORBIDDEN_KEY_PREFIX = "sk_test_forbidden"

ErrorShape = Literal["both", "flat", "nested"]
# goroute-api.md B documents neither the list's order nor its paging, and two shapes for a
# transaction: the emulator can serve each, so the client is tested against all of them.
# "updated_first": most recently updated first, each row with its updated_at (an order the
# docs leave open, as they leave every order).
ListOrder = Literal["newest_first", "oldest_first", "updated_first"]
DetailShape = Literal["nested", "flat"]
# goroute-api.md B documents two participant lookups: the emulator serves both by default,
# or only one, so a client's fallback from one to the other can be tried over the wire.
LookupRoutes = Literal["both", "peppol_id", "identifier"]


@dataclass(frozen=True)
class Faults:
    """Injected misbehaviour; ``seed`` makes the dice reproducible."""

    latency_ms: float = 0.0
    error_rate: float = 0.0
    drop_rate: float = 0.0

    def __post_init__(self) -> None:
        if self.latency_ms < 0:
            raise ValueError("latency_ms must be >= 0")
        for name in ("error_rate", "drop_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1")

    def changed(self, **changes: Any) -> Faults:
        return replace(self, **changes)


@dataclass(frozen=True)
class SandboxConfig:
    api_keys: frozenset[str] = frozenset({DEFAULT_API_KEY})
    # Any key starting with FORBIDDEN_KEY_PREFIX is forbidden too, so 403 needs no setup.
    forbidden_keys: frozenset[str] = frozenset()
    rate_per_minute: int = TIERS["standard"][0]
    max_concurrent: int = TIERS["standard"][1]
    latency_ms: float = 0.0
    error_rate: float = 0.0
    drop_rate: float = 0.0
    seed: int | None = None
    idempotency_ttl: float = 86_400.0
    max_key_length: int = 64
    lifecycle_step: float = 2.0
    # goroute-api.md B: "9915:timeout-test (delivery delays 30 s and more)".
    timeout_test_delay: float = 45.0
    max_document_bytes: int = 15 * 1024 * 1024
    # The public docs show two error-body shapes; "both" serves them side by side.
    error_shape: ErrorShape = "both"
    # False: the list answers ``{"transactions": [...]}`` only (no has_more, no next_cursor)
    # and ignores ``cursor``, the way the public docs describe it.
    list_paging: bool = True
    # A page size of the list's own, below the ``limit`` asked (a server may cap it).
    list_page_cap: int | None = None
    list_order: ListOrder = "newest_first"
    # "flat": GET /api/v1/transactions/{id} answers in the list's shape (plus metadata).
    detail_shape: DetailShape = "nested"
    lookup_routes: LookupRoutes = "both"
    # The docs do not say how "not registered" is answered: 404 (default) or 200, same body.
    lookup_not_found_status: int = 404
    transaction_prefix: str = "txn_"
    version: str = "sandbox-1.0"
    tier: str = field(default="standard")

    def __post_init__(self) -> None:
        if self.rate_per_minute < 1 or self.max_concurrent < 1:
            raise ValueError("rate_per_minute and max_concurrent must be >= 1")
        if self.lookup_not_found_status not in (200, 404):
            raise ValueError("lookup_not_found_status must be 200 or 404")
        if self.lookup_routes not in ("both", "peppol_id", "identifier"):
            raise ValueError("lookup_routes must be both, peppol_id or identifier")
        self.faults()  # validates the rates

    @classmethod
    def for_tier(cls, tier: str, **overrides: Any) -> SandboxConfig:
        """A config with the brief's limits for ``tier``; ``enterprise`` needs explicit numbers."""
        if tier in TIERS:
            rate, concurrent = TIERS[tier]
            limits: dict[str, Any] = {"rate_per_minute": rate, "max_concurrent": concurrent}
        elif tier == "enterprise":
            if "rate_per_minute" not in overrides or "max_concurrent" not in overrides:
                raise ValueError("tier 'enterprise' needs rate_per_minute and max_concurrent")
            limits = {}
        else:
            raise ValueError(f"unknown tier {tier!r}; choose standard, professional, enterprise")
        return cls(**{"tier": tier, **limits, **overrides})

    def faults(self) -> Faults:
        return Faults(self.latency_ms, self.error_rate, self.drop_rate)

    def is_forbidden(self, api_key: str) -> bool:
        return api_key in self.forbidden_keys or api_key.startswith(FORBIDDEN_KEY_PREFIX)


def config_from_options(
    tier: str = "standard",
    *,
    rate: int | None = None,
    concurrency: int | None = None,
    latency_ms: float | None = None,
    error_rate: float | None = None,
    drop_rate: float | None = None,
    seed: int | None = None,
) -> SandboxConfig:
    """A config from command-line style options, where None means "the tier's default"."""
    given = {
        "rate_per_minute": rate,
        "max_concurrent": concurrency,
        "latency_ms": latency_ms,
        "error_rate": error_rate,
        "drop_rate": drop_rate,
        "seed": seed,
    }
    return SandboxConfig.for_tier(tier, **{k: v for k, v in given.items() if v is not None})

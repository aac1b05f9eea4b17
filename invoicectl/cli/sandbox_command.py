"""``invoicectl sandbox``: the local GoRoute emulator served over HTTP, for tests and trials."""

from __future__ import annotations

import math
from typing import Annotated

import typer

from invoicectl.cli.app import app
from invoicectl.cli.numbers import number, whole
from invoicectl.cli.options import JsonOption
from invoicectl.defaults import DEFAULT_TIER, TIERS
from invoicectl.errors import UsageError

# The sandbox knows one tier more than an account can name: "enterprise", with its numbers
# given by --rate and --concurrency.
_TIERS = (*TIERS, "enterprise")
_TIER_HELP = f"{', '.join(TIERS)} or enterprise."


def _a_number(value: float | None) -> float | None:
    """nan passes a range check (no comparison with it is true), and inf past a minimum: a
    sandbox served with either never answered."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a number")
    return value


def _fraction(help_text: str) -> object:
    return typer.Option(click_type=number(min=0.0, max=1.0), callback=_a_number, help=help_text)


@app.command()
def sandbox(
    host: Annotated[str, typer.Option(help="Address to bind (loopback unless told).")] = (
        "127.0.0.1"
    ),
    port: Annotated[
        int, typer.Option(click_type=whole(min=0, max=65535), help="Port; 0 picks a free one.")
    ] = 8080,
    tier: Annotated[str, typer.Option(help=_TIER_HELP)] = DEFAULT_TIER,
    rate: Annotated[
        int | None,
        typer.Option(click_type=whole(min=1), help="Requests per minute (overrides tier)."),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(click_type=whole(min=1), help="Concurrent requests (overrides tier)."),
    ] = None,
    latency_ms: Annotated[
        float | None,
        typer.Option(
            click_type=number(min=0.0), callback=_a_number, help="Delay every API answer."
        ),
    ] = None,
    error_rate: Annotated[float | None, _fraction("Fraction of sends answered 5xx.")] = None,
    drop_rate: Annotated[
        float | None,
        _fraction("Fraction of sends recorded, then answered with a dropped connection."),
    ] = None,
    seed: Annotated[
        int | None, typer.Option(click_type=whole(), help="Seed for reproducible faults.")
    ] = None,
    as_json: JsonOption = False,  # the ready line as one JSON line; errors in JSON
) -> None:
    """Serve a local GoRoute emulator over HTTP; state in memory.

    For tests and trials: point invoicectl at the base URL and key it prints.

    \b
    Examples:
      invoicectl sandbox --port 8080
      invoicectl sandbox --port 0 --latency-ms 300 --error-rate 0.05 --seed 1
      invoicectl sandbox --port 0 --json    # {"base_url": ..., "api_key": ...}
    """
    from invoicectl.sandbox import Sandbox, serve
    from invoicectl.sandbox.config import config_from_options

    if tier not in _TIERS:
        raise UsageError(f"unknown --tier {tier!r}; choose {', '.join(TIERS)} or enterprise")
    if tier == "enterprise" and (rate is None or concurrency is None):
        raise UsageError("--tier enterprise needs --rate and --concurrency")
    config = config_from_options(
        tier,
        rate=rate,
        concurrency=concurrency,
        latency_ms=latency_ms,
        error_rate=error_rate,
        drop_rate=drop_rate,
        seed=seed,
    )
    emulator = Sandbox(config)

    def ready(base_url: str) -> None:
        if as_json:  # one line, not indented: a script reads it while the server runs on
            import json

            from invoicectl.render.documents import sandbox_document

            print(json.dumps(sandbox_document(base_url, emulator.api_key)), flush=True)
            return
        print(f"GoRoute sandbox on {base_url}", flush=True)
        print(f"GOROUTE_BASE_URL={base_url}", flush=True)
        print(f"GOROUTE_API_KEY={emulator.api_key}", flush=True)

    serve(emulator, host, port, on_ready=ready)

"""``python -m invoicectl.sandbox``: run the emulator without the main CLI (tests use it).

Prints one line, ``invoicectl sandbox listening on <base URL> (API key: <key>)``, once the
port is listening, so a parent process can read the URL even with ``--port 0``.
"""

from __future__ import annotations

import argparse
import sys

from invoicectl.defaults import TIERS
from invoicectl.sandbox.config import config_from_options
from invoicectl.sandbox.sandbox import Sandbox
from invoicectl.sandbox.server import serve


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m invoicectl.sandbox", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (loopback)")
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    parser.add_argument("--tier", default="standard", choices=[*TIERS, "enterprise"])
    parser.add_argument("--rate", type=int, help="requests per minute per API key")
    parser.add_argument("--concurrency", type=int, help="concurrent requests per API key")
    parser.add_argument("--latency-ms", type=float, help="delay added to every API request")
    parser.add_argument("--error-rate", type=float, help="fraction of sends answered 5xx")
    parser.add_argument("--drop-rate", type=float, help="fraction of sends recorded, then cut")
    parser.add_argument("--seed", type=int, help="seed for the fault dice and ids")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    try:
        config = config_from_options(
            args.tier,
            rate=args.rate,
            concurrency=args.concurrency,
            latency_ms=args.latency_ms,
            error_rate=args.error_rate,
            drop_rate=args.drop_rate,
            seed=args.seed,
        )
    except ValueError as exc:
        _parser().error(str(exc))
    sandbox = Sandbox(config)

    def announce(url: str) -> None:
        print(f"invoicectl sandbox listening on {url} (API key: {sandbox.api_key})", flush=True)

    try:
        serve(sandbox, args.host, args.port, on_ready=announce)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()

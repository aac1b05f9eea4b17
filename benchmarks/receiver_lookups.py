"""What the receiver pre-flight costs: requests spent on participant lookups, and time.

20,000 invoices (by default) to 300 receivers, sent by `invoicectl send` to the emulator on
loopback (its own process, no latency, no limit), twice on fresh journals, side by side in one
run: with the receiver check (the default) and with `--no-receiver-check`. Prints the lookups
the emulator answered (at most one per receiver), the requests sent, both elapsed times and
their ratio, and what the lookups add at the standard tier, where every request, a lookup
included, takes one start of the pace: (60 s + 1 s) / 100.

    python benchmarks/receiver_lookups.py [--invoices 20000] [--receivers 300] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from outbox import write_outbox  # noqa: E402
from send_throughput import emulator, run_invoicectl, stats  # noqa: E402

STANDARD_PACE = 61.0 / 100  # seconds per request at the standard tier


def outbox_to_receivers(directory: Path, invoices: int, receivers: int) -> None:
    """``invoices`` invoices, the n-th to receiver 9915:bench-receiver-<n mod receivers>."""
    for number, path in enumerate(write_outbox(directory, invoices)):
        receiver = f"bench-receiver-{number % receivers:04d}"
        data = path.read_bytes().replace(b">phase4-test-receiver<", f">{receiver}<".encode())
        path.write_bytes(data)


def one_send(outbox: Path, work: Path, name: str, *args: str) -> dict[str, float]:
    with emulator("--tier", "enterprise", "--rate", "10000000", "--concurrency", "1000") as (
        base_url,
        key,
    ):
        started = time.perf_counter()
        summary, cpu, _ = run_invoicectl(
            outbox, work / f"{name}.db", base_url, key, "--rate", "100000",
            "--concurrency", "50", *args,
        )  # fmt: skip
        elapsed = time.perf_counter() - started
        if "counts" not in summary:  # refused before it ran: say why, not a KeyError
            raise SystemExit(f"invoicectl send {name}: {summary.get('error', summary)}")
        served = stats(base_url, key)
    return {
        "elapsed_s": elapsed,
        "cpu_s": cpu,
        "lookups": served["participant_lookups"],
        "sends": served["sends_received"],
        "accepted": summary["counts"].get("accepted", 0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--invoices", type=int, default=20_000)
    parser.add_argument("--receivers", type=int, default=300)
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        outbox_to_receivers(work / "outbox", args.invoices, args.receivers)
        checked = one_send(work / "outbox", work, "checked")
        unchecked = one_send(work / "outbox", work, "unchecked", "--no-receiver-check")
    figures = {
        "invoices": args.invoices,
        "receivers": args.receivers,
        "lookups": checked["lookups"],
        "lookups_per_invoice": checked["lookups"] / args.invoices,
        "sends_checked": checked["sends"],
        "sends_unchecked": unchecked["sends"],
        "elapsed_checked_s": round(checked["elapsed_s"], 2),
        "elapsed_unchecked_s": round(unchecked["elapsed_s"], 2),
        "elapsed_ratio": round(checked["elapsed_s"] / unchecked["elapsed_s"], 3),
        "cpu_ratio": round(checked["cpu_s"] / unchecked["cpu_s"], 3),
        "standard_tier_added_s": round(checked["lookups"] * STANDARD_PACE, 1),
        "standard_tier_added_share": round(checked["lookups"] / args.invoices, 4),
    }
    print(
        f"{args.invoices} invoices to {args.receivers} receivers: {figures['lookups']} lookups "
        f"({figures['lookups_per_invoice']:.3f} per invoice); sends {figures['sends_checked']} "
        f"with the check, {figures['sends_unchecked']} without"
    )
    print(
        f"elapsed {figures['elapsed_checked_s']} s with, {figures['elapsed_unchecked_s']} s "
        f"without: ratio {figures['elapsed_ratio']} (CPU {figures['cpu_ratio']}); at the "
        f"standard tier the lookups add {figures['standard_tier_added_s']} s to a send of "
        f"{args.invoices * STANDARD_PACE / 3600:.1f} h ({figures['standard_tier_added_share']:.1%})"
    )
    if args.json:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()

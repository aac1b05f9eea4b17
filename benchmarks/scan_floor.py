"""How far a first scan can go on this machine: its parts, each ÷ `sha256sum`, side by side.

Issue 13 asks for a first scan of 20,000 invoices of 10 KB in at most 2.0 times what
`sha256sum` takes over the same files. This measures, in one run and in rounds that alternate
their order, what each layer of a scan costs on its own, every one in a fresh process with
start-up included:

  sha256sum   `find | xargs -0 sha256sum`, one thread: the yardstick
  read        the scan's own worker pool (``scan.forkpool``) reading and hashing every file,
              nothing parsed, nothing stored
  workers     the same pool doing a scan's whole work on each file (``scan.worker``: read,
              sha256, the parse, the facts, LZ4), nothing stored: the floor of a scan that
              stores nothing
  scan        `python -m invoicectl scan` into a fresh journal: the whole first scan

The gap between ``workers`` and ``scan`` is what storing costs (the journal's inserts, the
hash chain, settling); the gap between ``read`` and ``workers`` is the parse. Each layer's
floor is its CPU time (its worker processes included) ÷ (cores × ``sha256sum``): what it would
take with every core busy from its first instant to its last, which no schedule beats.

    python benchmarks/scan_floor.py [--count 20000] [--rounds 5] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from outbox import write_outbox  # noqa: E402
from scan_throughput import compile_invoicectl, fresh, load  # noqa: E402

# A worker pool as a scan starts it (``scan.reader``: two workers, chunks of 64, eight in
# flight each), answering and dropping every chunk. ``hash-only`` reads and hashes alone.
_POOL = """
import os, sys, hashlib
from pathlib import Path
from invoicectl.scan.forkpool import ForkPool
from invoicectl.scan.worker import init_worker, scan_chunk

root = Path(sys.argv[1])
names = sorted(name for name in os.listdir(root) if name.endswith(".xml"))

def hash_only(chunk):
    return [hashlib.sha256(open(name, "rb").read()).hexdigest() for name, _key in chunk]

work = hash_only if sys.argv[2] == "hash-only" else scan_chunk
pool = ForkPool(2, work, setup=lambda: init_worker(root, set()), queue_depth=8)
for start in range(0, len(names), 64):
    for _answers in pool.submit([(name, None) for name in names[start : start + 64]]):
        pass
for _answers in pool.drain():
    pass
pool.close()
"""


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str] | str) -> tuple[float, float]:
    """Wall seconds and CPU seconds of one command (its own worker processes included)."""
    cpu = children_cpu()
    start = time.perf_counter()
    subprocess.run(
        command,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        shell=isinstance(command, str),
    )
    return time.perf_counter() - start, children_cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="generate into DIR and keep it")
    args = parser.parse_args()

    work = args.keep or Path(tempfile.mkdtemp(prefix="invoicectl-floor-"))
    outbox = work / "outbox-floor"
    try:
        if not outbox.exists():
            write_outbox(outbox, args.count, 0)
        compile_invoicectl()
        journal = work / "floor.db"
        commands: dict[str, list[str] | str] = {
            "sha256sum": f"find {outbox} -name '*.xml' -print0 | xargs -0 sha256sum",
            "read": [sys.executable, "-c", _POOL, str(outbox), "hash-only"],
            "workers": [sys.executable, "-c", _POOL, str(outbox), "scan"],
            "scan": [sys.executable, "-m", "invoicectl", "scan", str(outbox), "--journal"],
        }
        timed(commands["sha256sum"])  # warms the page cache
        cores = os.cpu_count() or 1
        print(f"{args.count} files of about 10 KB; {cores} cores; {load()}")
        ratios: dict[str, list[float]] = {name: [] for name in commands if name != "sha256sum"}
        bounds: dict[str, list[float]] = {name: [] for name in ratios}
        for round_ in range(args.rounds):
            order = list(commands)
            if round_ % 2:
                order.reverse()
            seconds: dict[str, tuple[float, float]] = {}
            for name in order:
                command = commands[name]
                if name == "scan":
                    command = [*command, str(fresh(journal))]
                seconds[name] = timed(command)
            yardstick = seconds["sha256sum"][0]
            for name in ratios:
                wall, cpu = seconds[name]
                ratios[name].append(wall / yardstick)
                bounds[name].append(cpu / cores / yardstick)
            print(
                f"round {round_ + 1}: "
                + ", ".join(
                    f"{name} {wall:.2f} s ({cpu:.2f} s CPU)"
                    for name, (wall, cpu) in seconds.items()
                )
                + f"; {load()}"
            )
        print("÷ sha256sum, median [range] of the rounds; then the layer's CPU ÷ (cores ×")
        print("sha256sum): what it would take with every core busy from start to end, its floor:")
        for name, values in ratios.items():
            floor = bounds[name]
            print(
                f"  {name:8s} {statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]"
                f"   floor {statistics.median(floor):.2f} [{min(floor):.2f}-{max(floor):.2f}]"
            )
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

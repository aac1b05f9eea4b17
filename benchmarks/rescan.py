"""Re-scan of a large outbox whose files are all unchanged: the cost per file beyond start-up.

An outbox that keeps its old files makes every cron run ``lstat`` and compare each of them.
This benchmark scans N invoices once (default 100,000: a first scan, untimed), then each
round runs, in a fresh process each and in an order that rotates from round to round:
  python -m invoicectl scan OUTBOX      (the re-scan: every file unchanged)
  python -m invoicectl scan EMPTY       (the same journal, an empty directory: start-up,
                                         the journal opened and the scan's settling)
  python -c pass                        (the interpreter's own start-up)
and takes (re-scan - empty) / N within the round, wall and CPU: the medians are the figures
to quote (target: at most 8 µs a file). The files' stats are recorded by the first scan more
than 2 s after the files were written, as cron finds an outbox's old files (a stat recorded
within 2 s of a file's change proves nothing, and the file is read again).

    python benchmarks/rescan.py [--count 100000] [--keep DIR] [--rounds 5] [--json]

With --keep DIR the outbox (DIR/outbox-N) and the journal its first scan made (one per
interpreter, so per checkout in compare.py) are kept for the next run, which then times its
rounds at once. Modules are compiled to bytecode first (scan_throughput.py says why).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from outbox import write_outbox  # noqa: E402
from scan_throughput import children_cpu, compile_invoicectl, fresh, load  # noqa: E402


def timed(command: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one command in a child process; a failure stops the run (exit
    66 is none: ``scan`` says so of the empty directory)."""
    cpu = children_cpu()
    start = time.perf_counter()
    result = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if result.returncode not in (0, 66):
        raise SystemExit(f"{' '.join(command)} exited {result.returncode}: {result.stderr!r}")
    return elapsed, children_cpu() - cpu


def scan(directory: Path, journal: Path) -> list[str]:
    return [sys.executable, "-m", "invoicectl", "scan", str(directory), "--journal", str(journal)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, help="generate the outbox into DIR and keep it")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()

    work = args.keep or Path(tempfile.mkdtemp(prefix="invoicectl-rescan-"))
    scratch = Path(tempfile.mkdtemp(prefix="invoicectl-rescan-journal-"))
    try:
        outbox = work / f"outbox-{args.count}"
        if not outbox.exists():
            write_outbox(outbox, args.count)
            time.sleep(2.5)  # so that the first scan's stats are proof
        empty = scratch / "empty"
        empty.mkdir()
        side = hashlib.sha256(sys.prefix.encode()).hexdigest()[:8]
        journal = work / f"journal-{args.count}-{side}.db" if args.keep else scratch / "j.db"
        compile_invoicectl()
        if not journal.exists():
            first, _ = timed(scan(outbox, fresh(journal)))
            print(f"first scan of {args.count} files: {first:.1f} s")
        print(f"{args.count} files, journal {journal}; cores {os.cpu_count()}, {load()}")
        commands = {
            "rescan": scan(outbox, journal),
            "empty": scan(empty, journal),
            "pass": [sys.executable, "-c", "pass"],
        }
        for command in commands.values():  # warms the page cache
            timed(command)
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        per_file, per_file_cpu = [], []
        names = list(commands)
        for round_ in range(args.rounds):
            shift = round_ % len(names)
            for name in names[shift:] + names[:shift]:
                wall, cpu = timed(commands[name])
                walls[name].append(wall)
                cpus[name].append(cpu)
            per_file.append((walls["rescan"][-1] - walls["empty"][-1]) / args.count)
            per_file_cpu.append((cpus["rescan"][-1] - cpus["empty"][-1]) / args.count)
            print(
                f"round {round_ + 1}: re-scan {walls['rescan'][-1]:.2f} s, empty "
                f"{walls['empty'][-1]:.3f} s, pass {walls['pass'][-1]:.3f} s: "
                f"{per_file[-1] * 1e6:.2f} µs a file (CPU {per_file_cpu[-1] * 1e6:.2f}); {load()}"
            )
        median = {name: statistics.median(values) for name, values in walls.items()}
        print(
            f"re-scan of {args.count} unchanged files: median {median['rescan']:.2f} s, empty "
            f"{median['empty'] * 1000:.0f} ms: {statistics.median(per_file) * 1e6:.2f} µs a "
            f"file beyond start-up (rounds {min(per_file) * 1e6:.2f}-{max(per_file) * 1e6:.2f};"
            f" CPU {statistics.median(per_file_cpu) * 1e6:.2f}); target <= 8"
        )
        print(f"done; {load()}")
        if args.json:
            figures = {
                "rescan_s": median["rescan"],
                "empty_s": median["empty"],
                "pass_s": median["pass"],
                "per_file_us": statistics.median(per_file) * 1e6,
                "per_file_cpu_us": statistics.median(per_file_cpu) * 1e6,
            }
            print(json.dumps(figures))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Scan speed and memory, measured side by side in one run.

Generates N invoices of about 10 KB (default 20,000) plus a few of 2-3 MB with attachments,
then reports, all in this run:
  first scan time / sha256sum time over the same files   (target: at most 2.5)
  re-scan of the unchanged directory / first scan         (target: at most 0.25)
  peak RSS of a scan of N files, and of N/4 files         (target: under 150 MB, within 20 %)

Each scan runs as `python -m invoicectl scan` in a fresh process with a fresh journal, the
way cron runs it, so start-up and journal writes are counted. invoicectl's modules are
compiled to bytecode first, as `pip install` leaves them: an editable install under
PYTHONDONTWRITEBYTECODE (set on this project's machines) would otherwise compile them from
source in every run, about 35 ms of start-up no installed copy pays. Timings are repeated (--repeat)
and each round's ratios are taken within that round, since the machine may be shared: the
load average is printed before and after, and the medians are the figures to quote.

    python benchmarks/scan_throughput.py [--count 20000] [--large 4] [--keep DIR] [--repeat 5]
                                         [--json]

--json ends the output with one line of JSON (the medians and the peak RSS) for compare.py.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
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

failures: list[str] = []
cpu_seconds: list[float] = []  # of each timed command, its workers included


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str]) -> float:
    """Wall seconds of one command in a child process (a failed one is counted, for --json)."""
    cpu = children_cpu()
    start = time.perf_counter()
    result = subprocess.run(command, check=False, stdout=subprocess.DEVNULL)
    elapsed = time.perf_counter() - start
    cpu_seconds.append(children_cpu() - cpu)
    if result.returncode != 0:
        failures.append(f"{' '.join(command)} exited {result.returncode}")
        print(f"warning: {failures[-1]}")
    return elapsed


def scan(directory: Path, journal: Path) -> list[str]:
    return [sys.executable, "-m", "invoicectl", "scan", str(directory), "--journal", str(journal)]


def fresh(journal: Path) -> Path:
    """``journal`` with no file or WAL left from an earlier run: every first scan is one."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{journal}{suffix}").unlink(missing_ok=True)
    return journal


def sha256sum(directory: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        f"find {directory} -name '*.xml' -print0 | xargs -0 sha256sum > /dev/null",
        shell=True,
        check=True,
    )
    return time.perf_counter() - start


def peak_rss_of_scan(directory: Path, journal: Path) -> float:
    """Peak RSS of the largest process of one scan (main or worker), in MB, measured by a
    fresh wrapper process."""
    probe = (
        "import resource, subprocess, sys;"
        "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL);"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, *scan(directory, fresh(journal))],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout.strip()) / 1024


def compile_invoicectl() -> None:
    """Bytecode for every invoicectl module, where ``pip install`` would have written it."""
    spec = importlib.util.find_spec("invoicectl")
    assert spec is not None and spec.submodule_search_locations is not None
    for directory in spec.submodule_search_locations:
        compileall.compile_dir(directory, quiet=1)


def load() -> str:
    return "load average " + " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--large", type=int, default=4)
    parser.add_argument("--keep", type=Path, help="generate into DIR and keep it")
    parser.add_argument("--repeat", type=int, default=5, help="rounds of timings")
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()

    work = args.keep or Path(tempfile.mkdtemp(prefix="invoicectl-bench-"))
    try:
        big = work / "outbox"
        small = work / "outbox-quarter"
        if not big.exists():
            write_outbox(big, args.count, args.large)
            write_outbox(small, args.count // 4, args.large)
        total = sum(p.stat().st_size for p in big.iterdir())
        print(
            f"files: {args.count} + {args.large} large, {total / 1e6:.0f} MB, "
            f"cores: {os.cpu_count()}, {load()}"
        )

        compile_invoicectl()
        sha256sum(big)  # warms the page cache
        journal = work / "journal.db"
        shas, firsts, rescans, rescan_ratios, first_ratios = [], [], [], [], []
        first_cpus, rescan_cpus = [], []
        for round_ in range(1, args.repeat + 1):
            sha = sha256sum(big)
            first = timed(scan(big, fresh(journal)))
            first_cpus.append(cpu_seconds[-1])
            rescan = timed(scan(big, journal))
            rescan_cpus.append(cpu_seconds[-1])
            shas.append(sha)
            firsts.append(first)
            rescans.append(rescan)
            first_ratios.append(first / sha)
            rescan_ratios.append(rescan / first)
            print(
                f"round {round_}: sha256sum {sha:5.2f} s, first scan {first:5.2f} s "
                f"(ratio {first / sha:4.2f}), re-scan {rescan:5.2f} s "
                f"(ratio {rescan / first:4.2f}); {load()}"
            )
        print(
            f"first scan:  median {statistics.median(firsts):5.2f} s, ratio to sha256sum "
            f"{statistics.median(first_ratios):4.2f}  (target <= 2.5)"
        )
        print(
            f"re-scan:     ratio to first scan {statistics.median(rescan_ratios):4.2f}"
            "  (target <= 0.25)"
        )
        print(
            f"CPU:         first scan median {statistics.median(first_cpus):5.2f} s "
            f"(workers included), re-scan {statistics.median(rescan_cpus):5.2f} s"
        )

        rss_full = peak_rss_of_scan(big, work / "rss-full.db")
        rss_quarter = peak_rss_of_scan(small, work / "rss-quarter.db")
        print(
            f"peak RSS:    {rss_full:4.0f} MB at {args.count} files, {rss_quarter:.0f} MB at "
            f"{args.count // 4}; ratio {rss_full / rss_quarter:4.2f}"
            "  (targets < 150 MB, <= 1.20)"
        )
        print(f"done; {load()}")
        if args.json:
            figures = {
                "sha256sum_s": statistics.median(shas),
                "first_s": statistics.median(firsts),
                "rescan_s": statistics.median(rescans),
                "first_ratio": statistics.median(first_ratios),
                "rescan_ratio": statistics.median(rescan_ratios),
                "first_cpu_s": statistics.median(first_cpus),
                "rescan_cpu_s": statistics.median(rescan_cpus),
                "rss_mb": rss_full,
                "rss_quarter_mb": rss_quarter,
                "failures": failures,
            }
            print(json.dumps(figures))
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

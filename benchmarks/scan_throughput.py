"""Scan speed and memory, measured side by side in one run.

Generates N invoices of about 10 KB (default 20,000) plus a few of 2-3 MB with attachments,
then reports, all in this run:
  first scan time / sha256sum time over the same files   (target: at most 2.5)
  re-scan of the unchanged directory / first scan         (target: at most 0.25)
  peak RSS of a scan of N files, and of N/4 files         (target: under 150 MB, within 20 %)

Each scan runs as `python -m invoicectl scan` in a fresh process with a fresh journal, the
way cron runs it, so start-up and journal writes are counted.

    python benchmarks/scan_throughput.py [--count 20000] [--large 4] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from outbox import write_outbox  # noqa: E402


def timed(command: list[str], **kwargs: object) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one command in a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    subprocess.run(command, check=False, stdout=subprocess.DEVNULL, **kwargs)  # type: ignore[call-overload]
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    # ru_maxrss of children is the maximum over all children so far: only a rise is news.
    return elapsed, max(peak, before) / 1024


def scan(directory: Path, journal: Path) -> list[str]:
    return [sys.executable, "-m", "invoicectl", "scan", str(directory), "--journal", str(journal)]


def sha256sum(directory: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        f"find {directory} -name '*.xml' -print0 | xargs -0 sha256sum > /dev/null",
        shell=True,
        check=True,
    )
    return time.perf_counter() - start


def peak_rss_of_scan(directory: Path, journal: Path) -> float:
    """Peak RSS of one scan process tree, in MB, measured by a fresh wrapper process."""
    probe = (
        "import resource, subprocess, sys;"
        "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL);"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, *scan(directory, journal)],
        capture_output=True, text=True, check=True,
    )
    return int(out.stdout.strip()) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--large", type=int, default=4)
    parser.add_argument("--keep", type=Path, help="generate into DIR and keep it")
    args = parser.parse_args()

    work = args.keep or Path(tempfile.mkdtemp(prefix="invoicectl-bench-"))
    try:
        big = work / "outbox"
        small = work / "outbox-quarter"
        if not big.exists():
            write_outbox(big, args.count, args.large)
            write_outbox(small, args.count // 4, args.large)
        total = sum(p.stat().st_size for p in big.iterdir())
        print(f"files: {args.count} + {args.large} large, {total / 1e6:.0f} MB, cores: {os.cpu_count()}")

        sha_a = sha256sum(big)  # warms the page cache too
        journal = work / "journal.db"
        for leftover in work.glob("journal.db*"):
            leftover.unlink()
        first, _ = timed(scan(big, journal))
        rescan, _ = timed(scan(big, journal))
        sha_b = sha256sum(big)
        sha = min(sha_a, sha_b)
        print(f"sha256sum:   {sha:7.2f} s")
        print(f"first scan:  {first:7.2f} s   ratio to sha256sum {first / sha:5.2f}  (target <= 2.5)")
        print(f"re-scan:     {rescan:7.2f} s   ratio to first scan {rescan / first:5.2f}  (target <= 0.25)")

        rss_full = peak_rss_of_scan(big, work / "rss-full.db")
        rss_quarter = peak_rss_of_scan(small, work / "rss-quarter.db")
        print(
            f"peak RSS:    {rss_full:6.0f} MB at {args.count} files, {rss_quarter:.0f} MB at "
            f"{args.count // 4}; ratio {rss_full / rss_quarter:4.2f}  (targets < 150 MB, <= 1.20)"
        )
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""What ``invoicectl journal copy --to postgresql://...`` costs as the journal grows.

    .venv/bin/python benchmarks/journal_copy.py [--sizes 10000,100000] [--work DIR]

For each size it builds a SQLite journal of that many invoices, each sent and delivered
(``tests/historykit.add_history``: a stored blob, a revision, an attempt, a run per 100
invoices, and their chain events), starts a throwaway PostgreSQL server (``tests/pgserver``,
fsync off), and runs the real CLI in a subprocess to copy it into a new database; it prints
the copy's seconds, its peak RSS (the child's ``ru_maxrss``), the rows copied and whether the
SQLite file's sha256 was the same afterwards. Flat memory means the peak RSS does not grow
with the size.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from historykit import add_history  # noqa: E402
from pgserver import running_server  # noqa: E402

from invoicectl.journal import Journal  # noqa: E402


def build(path: Path, size: int) -> None:
    with Journal(path) as journal:
        for start in range(0, size, 20_000):
            add_history(journal, min(20_000, size - start), start=start)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


# A wrapper per copy: its children's peak RSS is the copy's alone (``ru_maxrss`` of a
# process's children is the largest of any of them).
_MEASURED = (
    "import resource, subprocess, sys; done = subprocess.run(sys.argv[1:]);"
    " print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr);"
    " sys.exit(done.returncode)"
)


def copy(path: Path, url: str) -> tuple[float, int, dict]:
    """(seconds, peak RSS in MB, the JSON document) of one copy in a child process."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _MEASURED, sys.executable, "-m", "invoicectl", "journal", "copy"]
        + ["--journal", str(path), "--to", url, "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    rss = int(done.stderr.strip().splitlines()[-1]) // 1024
    if done.returncode != 0:
        raise SystemExit(f"copy failed ({done.returncode}): {done.stdout}{done.stderr}")
    return seconds, rss, json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="invoicectl-copy-bench-"))
    sizes = [int(size) for size in args.sizes.split(",")]
    with running_server() as server:
        for size in sizes:
            path = work / f"journal-{size}.db"
            if not path.exists():
                started = time.perf_counter()
                build(path, size)
                print(f"built {size:,} invoices in {time.perf_counter() - started:.0f} s")
            before = sha256_of(path)
            # A new process per size: ru_maxrss of the children is the largest so far.
            seconds, rss, document = copy(path, server.new_database())
            same = sha256_of(path) == before
            print(
                f"size {size:>9,}: {seconds:7.1f} s, peak RSS {rss} MB, {document['rows']:,} rows,"
                f" {document['blobs_checked']:,} blobs checked, file unchanged: {same}",
                flush=True,
            )
    print(f"journals kept in {work}" if args.work else "", file=sys.stderr)


if __name__ == "__main__":
    main()

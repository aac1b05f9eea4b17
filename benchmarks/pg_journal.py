"""The PostgreSQL journal beside the SQLite one: memory of a big read, a first scan, a send.

    .venv/bin/python benchmarks/pg_journal.py [--invoices 100000] [--files 2000]
                                              [--sends 1000] [--url postgresql://...]

Without ``--url`` it starts a throwaway PostgreSQL server (``tests/pgserver.py``: initdb in a
temporary directory, fsync on as a real server has it); each measurement takes a new
database on it, and a new SQLite file beside it.

    rss        peak RSS of ``invoicectl status --format json`` (the real CLI, a subprocess,
               its stdout to /dev/null) on a journal of ``--invoices`` accepted invoices,
               built with plain SQL (one INSERT ... SELECT), and on an empty one
    scan       seconds of a first ``scan`` of ``--files`` files (benchmarks/outbox.py)
    send       seconds of a ``send`` of ``--sends`` files through the emulator on loopback
               (``invoicectl sandbox``: no latency, no limit), the real CLI

and prints each on both backends, side by side, and PostgreSQL / SQLite. One run each: the
machine is shared; read the ratio, not the seconds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from outbox import write_outbox  # noqa: E402

from invoicectl.journal import open_journal  # noqa: E402
from invoicectl.locations import JournalURL, Location  # noqa: E402

AT = "2026-01-15T10:00:00+00:00"
_COLUMNS = (
    "invoice_id, document_type, current_sha256, source_path, state, idempotency_key,"
    " transaction_id, remote_status, ingested_at, created_at, updated_at"
)
_SQLITE_FILL = f"""
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
INSERT INTO invoices ({_COLUMNS})
SELECT printf('INV-%07d', i), 'Invoice', printf('%064d', i), printf('/outbox/INV-%07d.xml', i),
       'accepted', printf('invoice-INV-%07d', i), printf('tx-%d', i), 'delivered', ?, ?, ?
FROM n
"""
_PG_FILL = f"""
INSERT INTO invoices ({_COLUMNS})
SELECT 'INV-' || lpad(i::text, 7, '0'), 'Invoice', lpad(i::text, 64, '0'),
       '/outbox/INV-' || lpad(i::text, 7, '0') || '.xml', 'accepted',
       'invoice-INV-' || lpad(i::text, 7, '0'), 'tx-' || i, 'delivered', %s, %s, %s
FROM generate_series(1, %s) AS i
"""


def fill(location: Location, count: int) -> None:
    """``count`` accepted, delivered invoices, by plain SQL (no chain: status does not read it)."""
    open_journal(location).close()
    if isinstance(location, JournalURL):
        import psycopg

        with psycopg.connect(location.connection_url(), autocommit=True) as conn:
            conn.execute(_PG_FILL, (AT, AT, AT, count))
            conn.execute("ANALYZE")
        return
    import sqlite3

    with sqlite3.connect(location) as conn:
        conn.execute(_SQLITE_FILL, (count, AT, AT, AT))


def cli(location: Location, *args: str, env: dict[str, str] | None = None) -> tuple[float, int]:
    """Seconds and peak RSS (MB) of ``invoicectl ARGS --journal LOCATION``, stdout discarded."""
    journal = location.connection_url() if isinstance(location, JournalURL) else str(location)
    started = time.perf_counter()
    with open(os.devnull, "w") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "invoicectl", *args, "--journal", journal],
            stdout=sink,
            stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )
        _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    stderr = process.stderr.read().decode() if process.stderr else ""
    if os.waitstatus_to_exitcode(status) not in (0, 4):
        raise SystemExit(f"invoicectl {' '.join(args)} failed: {stderr[-500:]}")
    return seconds, usage.ru_maxrss // 1024


class Places:
    """New journals on both backends: files in ``work``, databases on ``server_url``."""

    def __init__(self, work: Path, new_database) -> None:
        self.work, self.new_database, self.n = work, new_database, 0

    def both(self) -> tuple[Path, JournalURL]:
        self.n += 1
        return self.work / f"j{self.n}.db", JournalURL(self.new_database())


def measure_rss(places: Places, invoices: int) -> dict[str, tuple[int, int]]:
    results = {}
    empty_sqlite, empty_pg = places.both()
    full_sqlite, full_pg = places.both()
    for name, empty, full in (
        ("sqlite", empty_sqlite, full_sqlite),
        ("postgresql", empty_pg, full_pg),
    ):
        fill(empty, 0)
        fill(full, invoices)
        _, at_empty = cli(empty, "status", "--format", "json")
        _, at_full = cli(full, "status", "--format", "json")
        results[name] = (at_empty, at_full)
    return results


def measure_scan_and_send(places: Places, files: int, sends: int) -> dict[str, tuple[float, float]]:
    """A first scan's seconds and a send's, on each backend, the emulator on loopback."""
    scan_outbox = places.work / "scan-outbox"
    write_outbox(scan_outbox, files)
    results: dict[str, tuple[float, float]] = {}
    server = subprocess.Popen(
        [sys.executable, "-m", "invoicectl", "sandbox", "--port", "0", "--tier", "enterprise",
         "--rate", "100000000", "--concurrency", "1000"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        lines = [server.stdout.readline() for _ in range(3)]
        values = dict(line.strip().split("=", 1) for line in lines[1:])
        env = {key: values[key] for key in ("GOROUTE_BASE_URL", "GOROUTE_API_KEY")}
        for name in ("sqlite", "postgresql"):
            at = places.both()[0 if name == "sqlite" else 1]
            scan_seconds, _ = cli(at, "scan", str(scan_outbox), env=env)
            send_outbox = places.work / f"send-{name}"
            write_outbox(send_outbox, sends, seed=2, prefix=f"S{name[0].upper()}")
            at = places.both()[0 if name == "sqlite" else 1]
            send_seconds, _ = cli(
                at, "send", str(send_outbox), "--rate", "100000", "--concurrency", "50", env=env
            )
            results[name] = (scan_seconds, send_seconds)
    finally:
        server.terminate()
        server.wait(timeout=10)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--invoices", type=int, default=100_000)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--sends", type=int, default=1000)
    parser.add_argument("--url", help="a PostgreSQL server's URL (a database on it per run)")
    parser.add_argument("--skip", default="", help="rss,timing: what not to measure")
    arguments = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="invoicectl-pgbench-"))
    try:
        import pgserver

        with pgserver.running_server(fsync=True) as server:
            places = Places(work, server.new_database)
            if "rss" not in arguments.skip:
                for name, (empty, full) in measure_rss(places, arguments.invoices).items():
                    print(f"rss {name}: status --format json: {empty} MB empty, {full} MB at"
                          f" {arguments.invoices:,} invoices")  # fmt: skip
            if "timing" not in arguments.skip:
                timings = measure_scan_and_send(places, arguments.files, arguments.sends)
                (scan_l, send_l), (scan_p, send_p) = timings["sqlite"], timings["postgresql"]
                print(f"scan of {arguments.files:,} files: sqlite {scan_l:.2f} s, postgresql"
                      f" {scan_p:.2f} s, ratio {scan_p / scan_l:.2f}")  # fmt: skip
                print(f"send of {arguments.sends:,}: sqlite {send_l:.2f} s, postgresql"
                      f" {send_p:.2f} s, ratio {send_p / send_l:.2f}")  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""One benchmark against two checkouts, side by side in one run: the after/before ratio.

    python benchmarks/compare.py --before /work/bench-before --after . scan
    python benchmarks/compare.py --before OLD --after NEW
                                 startup|scan|rescan|send|reconcile|emulator
                                 [--rounds N] [--work DIR]

Each checkout runs with its own ``.venv/bin/python`` and from its own root, so it imports its
own invoicectl (``python -m`` puts the working directory first on ``sys.path``; the paths
imported are printed first). A round runs the benchmark once for each side, in an order that
alternates from round to round (before-after, after-before, ...), after one warm-up round
that is not counted. Each round's after/before ratio is taken within the round, since the
machine may be shared: the median of those ratios is the figure to quote, with their range.

What each side runs:
  startup    startup.py --rounds 5: ``--help``, ``status`` (empty journal) and ``send`` of an
             empty outbox, each also as a ratio to ``python -c pass``
  scan       scan_throughput.py --count 5000 --repeat 1 on one outbox that both sides scan:
             first scan, re-scan, their ratios to sha256sum and to the first scan, peak RSS
  scan20k    the same with 20,000 files (issue 13's first-scan target)
  rescan     rescan.py --count 100000 --rounds 3 on one outbox that both sides re-scan, each
             with the journal its own first scan made (once, before the warm-up round's
             timings): µs a file beyond start-up (pass --work DIR to keep both for a next run)
  send       send_throughput.py --seconds 0 --bulk 1000: 1,000 invoices to an emulator
             without latency or limit (its own ``invoicectl sandbox``): elapsed, CPU per
             invoice, peak RSS
  send10k    the same with 10,000 invoices (issue 13's sending targets)
  reconcile  reconcile_time.py twice: 1,000 cases at 1,000,000/min (the tool's own speed)
             and 400 cases at 2,000/min (limit-bound: the ratio to the minimum)
  emulator   emulator_throughput.py --sends 3000: sends/s the emulator serves
For reconcile and emulator, script_cpu_s is the CPU time of the whole script (staging, the
emulator and the load generator included). CPU times are what other load on a shared machine
disturbs least; wall times are the figures the README quotes.

startup, scan, scan20k, rescan, send and send10k run this directory's scripts with each side's
interpreter (they reach invoicectl only through ``python -m invoicectl``); reconcile and
emulator import invoicectl's modules, so each side runs the script of its own checkout, and
its printed lines are read.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
Figures = dict[str, float]


def last_json_line(output: str) -> Figures:
    figures = json.loads(output.strip().splitlines()[-1])
    failures = figures.pop("failures", [])
    if failures:
        raise ValueError(f"failed commands: {failures}")
    return figures


def groups(pattern: str, output: str) -> tuple[str, ...]:
    found = re.search(pattern, output, re.MULTILINE)
    if found is None:
        raise ValueError(f"no line matches {pattern!r}")
    return found.groups()


def reconcile_figures(output: str) -> Figures:
    """``measured`` is printed to 0.1 s; the ratio (3 decimals) and the request count give
    the elapsed time to four digits."""
    requests, rate = groups(r"^requests (\d+) at (\d+)/min", output)
    (ratio,) = groups(r"; ratio ([\d.]+)$", output)
    minimum = int(requests) / int(rate) * 60
    return {
        "elapsed_s": float(ratio) * minimum,
        "ratio_to_minimum": float(ratio),
        "requests": int(requests),
    }


def emulator_figures(output: str) -> Figures:
    accepted, elapsed = groups(r"^(\d+) sends accepted .* in ([\d.]+) s", output)
    return {"sends_per_s": int(accepted) / float(elapsed), "elapsed_s": float(elapsed)}


@dataclass(frozen=True)
class Run:
    """One script run for one side: its name in the report, arguments and how to read it."""

    label: str
    script: str
    args: tuple[str, ...]
    read: Callable[[str], Figures]
    own_copy: bool = False  # run the side's own copy of the script (it imports invoicectl)
    expect: tuple[tuple[str, float], ...] = ()  # figures that must come out exactly so


def runs(benchmark: str, work: Path) -> list[Run]:
    if benchmark == "startup":
        return [Run("startup", "startup.py", ("--rounds", "5", "--json"), last_json_line)]
    if benchmark in ("scan", "scan20k"):
        count = "5000" if benchmark == "scan" else "20000"
        keep = str(work / benchmark)
        args = ("--count", count, "--repeat", "1", "--keep", keep, "--json")
        return [Run(benchmark, "scan_throughput.py", args, last_json_line)]
    if benchmark == "rescan":
        args = ("--count", "100000", "--rounds", "3", "--keep", str(work / "rescan"), "--json")
        return [Run("rescan", "rescan.py", args, last_json_line)]
    if benchmark in ("send", "send10k"):
        bulk = 1000 if benchmark == "send" else 10000
        args = ("--seconds", "0", "--bulk", str(bulk), "--json")
        expect = (("bulk_accepted", bulk),)
        return [Run(benchmark, "send_throughput.py", args, last_json_line, expect=expect)]
    if benchmark == "reconcile":
        fast = ("--cases", "1000", "--rate", "1000000")
        paced = ("--cases", "400", "--rate", "2000")
        return [
            Run("unbounded", "reconcile_time.py", fast, reconcile_figures, own_copy=True),
            Run("2000/min", "reconcile_time.py", paced, reconcile_figures, own_copy=True),
        ]
    if benchmark == "emulator":
        args = ("--sends", "3000")
        return [Run("emulator", "emulator_throughput.py", args, emulator_figures, own_copy=True)]
    raise SystemExit(f"unknown benchmark {benchmark!r}")


DEFAULT_ROUNDS = {
    "startup": 20,
    "scan": 12,
    "scan20k": 6,
    "rescan": 4,
    "send": 6,
    "send10k": 3,
    "reconcile": 6,
    "emulator": 8,
}


@dataclass(frozen=True)
class Side:
    name: str
    root: Path

    @property
    def python(self) -> Path:
        return self.root / ".venv" / "bin" / "python"

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        env.pop("VIRTUAL_ENV", None)
        return env

    def run(self, run: Run) -> Figures:
        script = (self.root / "benchmarks" if run.own_copy else HERE) / run.script
        command = [str(self.python), str(script), *run.args]
        cpu = children_cpu()
        result = subprocess.run(
            command,
            cwd=self.root,
            env=self.environment(),
            capture_output=True,
            text=True,
            timeout=900,
        )
        cpu = children_cpu() - cpu
        if result.returncode != 0:
            raise SystemExit(
                f"{self.name}: {' '.join(command)} exited {result.returncode}:\n"
                f"{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
            )
        try:
            figures = run.read(result.stdout)
            for metric, value in run.expect:
                if figures[metric] != value:
                    raise ValueError(f"{metric} is {figures[metric]}, not {value}")
            if run.own_copy:  # the script's own figures are wall times only
                figures["script_cpu_s"] = cpu
        except (ValueError, IndexError, KeyError) as exc:
            raise SystemExit(f"{self.name}: cannot use {run.script}'s output ({exc}):\n"
                             f"{result.stdout[-2000:]}") from None  # fmt: skip
        return figures

    def describe(self) -> str:
        probe = "import invoicectl; print(invoicectl.__file__)"
        imported = subprocess.run(
            [str(self.python), "-c", probe],
            cwd=self.root,
            env=self.environment(),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if not Path(imported).resolve().is_relative_to(self.root.resolve()):
            raise SystemExit(f"{self.name}: {self.python} imports {imported}, not {self.root}")
        head = subprocess.run(
            ["git", "-C", str(self.root), "log", "-1", "--format=%h %s"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(self.root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        return f"{self.name:>6}: {head[:70]}{' (+ changes)' if dirty else ''}; imports {imported}"


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def load() -> str:
    return "load average " + " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("benchmark", choices=list(DEFAULT_ROUNDS))
    parser.add_argument("--before", type=Path, required=True, help="checkout with a .venv")
    parser.add_argument("--after", type=Path, required=True, help="checkout with a .venv")
    parser.add_argument("--rounds", type=int, help="counted rounds (default: per benchmark)")
    parser.add_argument("--work", type=Path, help="scratch directory (default: a temporary one)")
    args = parser.parse_args()
    rounds = args.rounds or DEFAULT_ROUNDS[args.benchmark]
    sides = [Side("before", args.before.resolve()), Side("after", args.after.resolve())]
    for side in sides:
        if not side.python.exists():
            raise SystemExit(f"{side.name}: no {side.python}")
        print(side.describe())

    work = args.work or Path(tempfile.mkdtemp(prefix="invoicectl-compare-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    print(f"{args.benchmark}: 1 warm-up round + {rounds} rounds; cores {os.cpu_count()}, {load()}")
    # figures[label][side][metric] -> one value per counted round
    figures: dict[str, dict[str, dict[str, list[float]]]] = {}
    try:
        for round_ in range(rounds + 1):
            order = sides if round_ % 2 == 0 else sides[::-1]
            for run in runs(args.benchmark, work):
                for side in order:
                    result = side.run(run)
                    if round_ == 0:
                        continue
                    for metric, value in result.items():
                        per_side = figures.setdefault(run.label, {}).setdefault(side.name, {})
                        per_side.setdefault(metric, []).append(value)
            if round_:
                print(f"  round {round_}/{rounds} done at {time.perf_counter() - started:.0f} s")
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)

    print(f"{'measure':<34} {'before':>10} {'after':>10}   after/before: median [range]")
    for label, per_side in figures.items():
        for metric, before in per_side["before"].items():
            after = per_side["after"][metric]
            ratios = [a / b for a, b in zip(after, before, strict=True) if b]
            name = f"{label} {metric}" if label != args.benchmark else metric
            print(
                f"{name:<34} {statistics.median(before):>10.4g} {statistics.median(after):>10.4g}"
                f"   {statistics.median(ratios):5.3f} [{min(ratios):.3f}-{max(ratios):.3f}]"
            )
    print(f"{rounds} rounds in {time.perf_counter() - started:.0f} s; {load()}")


if __name__ == "__main__":
    main()

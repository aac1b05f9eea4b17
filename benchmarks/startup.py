"""Start-up time of ``invoicectl --help``, ``status`` and ``send EMPTYDIR``, side by side.

Each round runs, in a fresh process each and in an order that rotates from round to round:
  python -c pass                    (the interpreter's own start-up, the yardstick)
  python -m invoicectl --help
  python -m invoicectl status       (on an empty journal, created before the first round)
  python -m invoicectl send EMPTY   (an empty outbox: a cron run with nothing to send, with
                                     a made-up GOROUTE_API_KEY; no request goes out; exit
                                     66 for an outbox with no *.xml, 0 before that exit code)
and takes each command's time as a ratio to ``python -c pass`` within that round, since the
machine may be shared: the medians over the rounds are the figures to quote.

The journal and the config live in a temporary directory (``INVOICECTL_JOURNAL`` and ``HOME``
point there; other ``INVOICECTL_*`` and ``GOROUTE_*`` variables are dropped). invoicectl's
modules are compiled to bytecode first, as ``pip install`` leaves them (see
scan_throughput.py). The interpreter is the one running this script, so it measures the
invoicectl that interpreter imports; ``--command`` times another entry point instead (for
example ``--command .venv/bin/invoicectl``).

    python benchmarks/startup.py [--rounds 20] [--command "python -m invoicectl"] [--json]
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def compile_invoicectl() -> None:
    """Bytecode for every invoicectl module, where ``pip install`` would have written it."""
    spec = importlib.util.find_spec("invoicectl")
    assert spec is not None and spec.submodule_search_locations is not None
    for directory in spec.submodule_search_locations:
        compileall.compile_dir(directory, quiet=1)


def clean_environment(home: Path) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("INVOICECTL_", "GOROUTE_", "XDG_"))
    }
    env["HOME"] = str(home)
    env["INVOICECTL_JOURNAL"] = str(home / "journal.db")
    # Never sent with: a send of an empty outbox makes no request.
    env["GOROUTE_API_KEY"] = "sk_test_startup_benchmark_0000"
    return env


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one command in a child process; a failure stops the benchmark
    (exit 66 is none: ``send`` says so of an outbox that holds no invoice).

    CPU time (user + system) is what other load on a shared machine disturbs least."""
    cpu = children_cpu()
    start = time.perf_counter()
    result = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if result.returncode not in (0, 66):
        raise SystemExit(f"{shlex.join(command)} exited {result.returncode}: {result.stderr!r}")
    return elapsed, children_cpu() - cpu


def load() -> str:
    return "load average " + " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=20, help="rounds of timings")
    parser.add_argument(
        "--command",
        help="how to start invoicectl (default: this interpreter with -m invoicectl)",
    )
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()
    invoicectl = shlex.split(args.command) if args.command else [sys.executable, "-m", "invoicectl"]
    commands = {
        "pass": [sys.executable, "-c", "pass"],
        "help": [*invoicectl, "--help"],
        "status": [*invoicectl, "status"],
    }
    home = Path(tempfile.mkdtemp(prefix="invoicectl-startup-"))
    commands["send"] = [*invoicectl, "send", str(home / "EMPTY")]

    try:
        env = clean_environment(home)
        (home / "EMPTY").mkdir()
        compile_invoicectl()
        # The empty journal: status refuses a journal that is not there (exit 1), and a
        # send of an empty outbox (exit 66) creates one.
        timed(commands["send"], env)
        for command in commands.values():  # warms the page cache
            timed(command, env)
        times: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        ratios: dict[str, list[float]] = {"help": [], "status": [], "send": []}
        names = list(commands)
        print(f"{shlex.join(invoicectl)}; cores: {os.cpu_count()}, {load()}")
        for round_ in range(args.rounds):
            shift = round_ % len(names)
            this_round = {}
            for name in names[shift:] + names[:shift]:
                this_round[name], cpu = timed(commands[name], env)
                times[name].append(this_round[name])
                cpus[name].append(cpu)
            for name in ratios:
                ratios[name].append(this_round[name] / this_round["pass"])
        medians = {name: statistics.median(values) for name, values in times.items()}
        ratio_medians = {name: statistics.median(values) for name, values in ratios.items()}
        cpu_medians = {name: statistics.median(values) for name, values in cpus.items()}
        print(
            f"python -c pass: median {medians['pass'] * 1000:6.1f} ms, CPU "
            f"{cpu_medians['pass'] * 1000:5.1f} ms ({args.rounds} rounds)"
        )
        for name in ratios:
            print(
                f"{name:>14}: median {medians[name] * 1000:6.1f} ms, CPU "
                f"{cpu_medians[name] * 1000:5.1f} ms; ratio to python -c pass "
                f"{ratio_medians[name]:5.2f} (rounds {min(ratios[name]):.2f}-"
                f"{max(ratios[name]):.2f})"
            )
        print(f"done; {load()}")
        if args.json:
            figures = {f"{name}_s": value for name, value in medians.items()}
            figures.update({f"{name}_cpu_s": value for name, value in cpu_medians.items()})
            figures.update({f"{name}_ratio": value for name, value in ratio_medians.items()})
            print(json.dumps(figures))
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()

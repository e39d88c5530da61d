"""Benchmark: start-up of the command line against its floors, measured in the same run (issue 28).

Two goals, each against a baseline run in this script on the same machine:

- ``mptool --help`` <= 0.15 CPU s (baseline: ``python -c pass`` and ``python -c "import typer"``,
  the interpreter and the CLI library, below which no typer CLI starts);
- a 1,000-record naive Bayes audit (``mptool pdtp``, the bundled Adult demo) <= 1.2 CPU s more
  than ``python -c "import sklearn.naive_bayes"`` alone (scikit-learn imports scipy.stats,
  pandas and pyarrow itself). The console script holds the garbage collector back while its
  modules load (:mod:`mptool.runtime.startup`), which the plain import does not: the demo is
  also measured beyond the same import with the collector held the same way (its own work).

Each command runs in a fresh interpreter; CPU time is user + system of the child
(``resource.getrusage(RUSAGE_CHILDREN)``), wall time from ``time.perf_counter``. One warm-up run
of each writes the bytecode caches (``PYTHONDONTWRITEBYTECODE`` is dropped from the children's
environment: an installed package has its caches). The minimum over the repeats is the figure
least disturbed by other load on a shared machine; the median is printed too, with the load.

``--base REV`` also times ``--help`` and the demo with the code of git revision REV (checked out
into a temporary git worktree; 2c5f829 is the tree before helper mil's issue 28 work), or with
the mptool source tree in REV when it is a folder, in the same run, the runs of the two trees
taking turns; the demo's pdtp.csv of both must be byte-identical.

Usage: python benchmarks/bench_startup.py [--repeat N] [--base REV|DIR]   (default 5; --repeat 2 for a quick look)
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HELP_GOAL_CPU_S = 0.15
#: The import floor with the garbage collector held back and frozen as the console script does it
#: (mptool.runtime.startup): what the demo's own work is measured beyond, beside the plain import.
HELD = "import sklearn.naive_bayes, gc held"
NB_GOAL_EXTRA_CPU_S = 1.2


ROOT = Path(__file__).resolve().parents[1]


def measure_all(runs: dict[str, tuple[list[str], dict[str, str]]], repeat: int,
                cwd: str) -> dict[str, tuple[list[float], list[float]]]:
    """CPU (user + system) and wall seconds of ``repeat`` runs of each command, after one warm-up run of each:
    ``repeat`` rounds of one run of each in turn, so a load that drifts during the benchmark weighs on every
    command alike. ``cwd`` is a folder without mptool in it: ``python -m`` puts the working folder first on
    the path, so the tree measured is the one ``PYTHONPATH`` names."""
    for cmd, env in runs.values():
        subprocess.run(cmd, env=env, capture_output=True, check=False, cwd=cwd)
    res: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in runs}
    for _ in range(repeat):
        for name, (cmd, env) in runs.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            done = subprocess.run(cmd, env=env, capture_output=True, check=False, cwd=cwd)
            res[name][1].append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            res[name][0].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            if done.returncode not in (0, 1):
                raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
    return res


def line(name: str, cpu: list[float], wall: list[float]) -> str:
    return (f"  {name:<34} CPU min {min(cpu):.3f} s, median {statistics.median(cpu):.3f} s; "
            f"wall min {min(wall):.3f} s, median {statistics.median(wall):.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--base", default=None, help="an older mptool source tree to time beside this one")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT)
    py = sys.executable
    load0 = os.getloadavg()[0]
    out = tempfile.mkdtemp(prefix="bench-startup-")
    runs = {
        "python -c pass": [py, "-c", "pass"],
        "python -c 'import typer'": [py, "-c", "import typer"],
        "mptool --help": [py, "-m", "mptool", "--help"],
        "python -c 'import sklearn.naive_bayes'": [py, "-c", "import sklearn.naive_bayes"],
        HELD: [py, "-c", "from mptool.runtime import startup; startup.hold(); import sklearn.naive_bayes; "
                         "startup.loaded()"],
        "mptool pdtp (1,000-record NB demo)": [py, "-m", "mptool", "pdtp", "--out", out, "--force", "-q", "-j", "1"],
    }
    base_tree, worktree = (Path(args.base).resolve(), False) if args.base and Path(args.base).is_dir() else (
        Path(tempfile.mkdtemp(prefix="bench-startup-base-")) / "tree", bool(args.base))
    if worktree:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(base_tree), args.base],
                       check=True)
    try:
        todo = {name: (cmd, env) for name, cmd in runs.items()}
        if args.base:
            old = {**env, "PYTHONPATH": str(base_tree)}
            old_out = tempfile.mkdtemp(prefix="bench-startup-base-out-")
            demo = runs["mptool pdtp (1,000-record NB demo)"]
            todo["mptool --help (--base)"] = (runs["mptool --help"], old)
            todo["mptool pdtp (--base)"] = ([*demo[:5], old_out, *demo[6:]], old)
        res = measure_all(todo, args.repeat, out)  # in turn: the load weighs on both trees alike
        if args.base:
            same = (Path(out) / "pdtp.csv").read_bytes() == (Path(old_out) / "pdtp.csv").read_bytes()
    finally:
        if worktree:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base_tree)], check=False)
    load1 = os.getloadavg()[0]
    print(f"bench_startup: {args.repeat} runs each after a warm-up; load {load0:.2f} before, {load1:.2f} after "
          f"({os.cpu_count()} CPUs)")
    for name, (cpu, wall) in res.items():
        print(line(name, cpu, wall))
    help_cpu = min(res["mptool --help"][0])
    typer_cpu = min(res["python -c 'import typer'"][0])
    print(f"mptool --help: {help_cpu:.3f} CPU s = {help_cpu / HELP_GOAL_CPU_S:.2f}x the {HELP_GOAL_CPU_S} s goal "
          f"({help_cpu - typer_cpu:+.3f} s over importing typer alone)")
    sk = min(res["python -c 'import sklearn.naive_bayes'"][0])
    nb = min(res["mptool pdtp (1,000-record NB demo)"][0])
    print(f"pdtp NB demo: {nb:.3f} CPU s = sklearn import {sk:.3f} s + {nb - sk:.3f} s "
          f"({(nb - sk) / NB_GOAL_EXTRA_CPU_S:.2f}x the {NB_GOAL_EXTRA_CPU_S} s goal beyond the import; "
          f"ratio to the import {nb / sk:.2f})")
    sk_med = statistics.median(res["python -c 'import sklearn.naive_bayes'"][0])
    nb_med = statistics.median(res["mptool pdtp (1,000-record NB demo)"][0])
    print(f"  by medians: {nb_med:.3f} = {sk_med:.3f} + {nb_med - sk_med:.3f} s "
          f"({(nb_med - sk_med) / NB_GOAL_EXTRA_CPU_S:.2f}x the goal)")
    held = min(res[HELD][0]), statistics.median(res[HELD][0])
    print(f"  beyond the import with the collector held as mptool holds it ({held[0]:.3f} s, median "
          f"{held[1]:.3f} s): {nb - held[0]:+.3f} s, by medians {nb_med - held[1]:+.3f} s")
    if args.base:
        old_help, old_nb = min(res["mptool --help (--base)"][0]), min(res["mptool pdtp (--base)"][0])
        old_med = statistics.median(res["mptool pdtp (--base)"][0])
        print(f"  by medians, --base {args.base}: beyond the sklearn import {old_med - sk_med:.3f} -> "
              f"{nb_med - sk_med:.3f} s")
        print(f"against --base {args.base}: --help {old_help:.3f} -> {help_cpu:.3f} CPU s "
              f"({old_help / help_cpu:.1f}x); "
              f"pdtp demo {old_nb:.3f} -> {nb:.3f} CPU s ({old_nb / nb:.2f}x; beyond the sklearn import "
              f"{old_nb - sk:.3f} -> {nb - sk:.3f} s); demo pdtp.csv {'byte-identical' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    main()

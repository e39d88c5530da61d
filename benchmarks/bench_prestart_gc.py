"""Benchmark: a loky worker's warm-up imports with the collector held back, against the same imports without (issue 25).

:func:`mptool.runtime.prestart.warm` is what each worker of a ``--jobs N`` run executes first: it
imports what the run's tasks need (pandas, scikit-learn's pipeline pieces, mptool's engines, the
estimator's module). In a fresh worker it holds the cyclic garbage collector back while these load
and then freezes what they made (:mod:`mptool.runtime.startup`, as the console script does).

Each run is a fresh interpreter that calls ``prestart.warm`` once, as a worker does:

- ``held``: ``warm(parent_pid=<another pid>, ...)``, the worker's case (the collector held);
- ``plain``: ``warm(parent_pid=<its own pid>, ...)``, which warm treats as the main process (the
  baseline: the same imports with the collector at its defaults).

The two take turns ``--repeats`` times, so a change of load hits both alike. Prints, per run, the
CPU seconds (user + system of the child, ``RUSAGE_CHILDREN``) and wall seconds, the load before the
rounds and after them, then the medians and the ratio held/plain.

Usage: python benchmarks/bench_prestart_gc.py [--repeats 6] [--estimator-module sklearn.neural_network]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CODE = """
import os, sys
from mptool.api.early import WARM_MODULES
from mptool.runtime import prestart
parent = os.getpid() if sys.argv[1] == "plain" else os.getppid()
pid, error = prestart.warm(parent, (*WARM_MODULES, sys.argv[2]))
assert error is None, error
"""


def one(kind: str, module: str) -> tuple[float, float]:
    """CPU and wall seconds of a fresh interpreter running one warm-up of kind ``kind``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", CODE, kind, module], env=env, check=True, cwd="/")
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--estimator-module", default="sklearn.neural_network")
    args = ap.parse_args()
    one("plain", args.estimator_module)  # bytecode and page caches warm for both
    print(f"load before: {os.getloadavg()[0]:.2f}")
    runs: dict[str, list[tuple[float, float]]] = {"plain": [], "held": []}
    for _ in range(args.repeats):
        for kind in runs:
            runs[kind].append(one(kind, args.estimator_module))
            print(f"{kind:5s} cpu {runs[kind][-1][0]:.2f} s  wall {runs[kind][-1][1]:.2f} s")
    print(f"load after: {os.getloadavg()[0]:.2f}")
    med = {k: (statistics.median(c for c, _ in v), statistics.median(w for _, w in v)) for k, v in runs.items()}
    for kind, (cpu, wall) in med.items():
        print(f"median {kind:5s} cpu {cpu:.2f} s  wall {wall:.2f} s")
    print(f"ratio held/plain: cpu {med['held'][0] / med['plain'][0]:.2f}  wall {med['held'][1] / med['plain'][1]:.2f}")


if __name__ == "__main__":
    main()

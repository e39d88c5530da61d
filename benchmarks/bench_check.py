"""Benchmark: ``mptool check`` on each bundled config with the bundled Adult data (issue 15: under 2 s).

Each check runs as its own process (``python -m mptool check adult.csv.gz --model CONFIG``);
wall time and CPU time (user + system of the child) are measured. The baseline, measured in
the same run, is ``python -c "import sklearn.naive_bayes"`` (pandas, scikit-learn and scipy:
what any tool that fits a scikit-learn model pays before it reads a byte; the floor of
``bench_startup.py``), the fastest of three runs. The line gives the check's total and its time
beyond that baseline. (Until 2026-11-28 the baseline imported ``mptool.cli.main`` and
``mptool.api.plan`` eagerly, which since the start-up work costs more than a whole ``check``.)

Usage: python benchmarks/bench_check.py [--configs nb,lr,knn,dt] (default: every bundled config)
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time

from mptool.inputs.bundled import ADULT_CSV, CONFIG_DIR

CONFIGS = ("nb", "lr", "gnb", "bnb", "mnb", "knn", "dt", "rf", "nn", "nn-paper")


def timed(args: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + system of the child) and the exit code of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    code = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, code


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default=",".join(CONFIGS), help="adult-NAME.yaml configs, comma-separated")
    args = ap.parse_args()
    py = sys.executable
    runs = [timed([py, "-c", "import sklearn.naive_bayes"]) for _ in range(3)]
    base_wall, base_cpu = min(r[0] for r in runs), min(r[1] for r in runs)  # the least disturbed of three
    load = os.getloadavg()[0]
    print(f"baseline (python -c 'import sklearn.naive_bayes'): {base_wall:.2f} s wall, {base_cpu:.2f} s CPU; "
          f"load {load:.1f}")
    for name in args.configs.split(","):
        cfg = CONFIG_DIR / f"adult-{name}.yaml"
        wall, cpu, code = timed([py, "-m", "mptool", "check", str(ADULT_CSV), "--model", str(cfg), "--jobs", "2"])
        print(
            f"check_adult_{name}: {cpu:.2f} s CPU, {wall:.2f} s wall (beyond the imports: {cpu - base_cpu:.2f} s CPU, "
            f"{wall - base_wall:.2f} s wall; {cpu / max(base_cpu, 1e-9):.1f}x the baseline CPU); exit {code}; "
            f"load {os.getloadavg()[0]:.1f}"
        )


if __name__ == "__main__":
    main()

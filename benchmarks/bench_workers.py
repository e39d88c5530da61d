"""Benchmark: workers only when they pay, whole ``mptool pdtp`` runs (issue 28 item 6).

The refit engine on 16 Adult records of T (``--sample 16`` of the 1,000 of configs/adult-rf.yaml,
the random forest cut to 10 trees, ``--engine refit``, ``--noise-floor 0``: 16 short refits, the
issue's case), each run a fresh process as a user starts it (``python -m mptool pdtp``):

- ``--jobs 1``: the baseline, this process alone;
- ``--jobs 0`` (the default): the planner (:func:`mptool.runtime.parallel.choose_workers`) weighs the
  refits, timed by the fit of A(T), against starting the workers, and says what it chose;
- ``--jobs 2``: two loky workers, taken as given (their line says the estimate).

The commands take turns, ``--repeat`` rounds. CPU is user + system of the child and of the children
it reaped (its loky workers, joined when it exits), from ``os.wait4``; wall from ``time.perf_counter``;
the load average before and after each run. Printed: each run, its ``workers for the refits`` line,
the ratios of ``--jobs 2`` over ``--jobs 0`` and over ``--jobs 1`` (CPU and wall, the minimum of the
rounds), and whether every pdtp.csv is byte-identical to the ``--jobs 1`` one.

Usage: python benchmarks/bench_workers.py [--repeat N] [--records K] [--trees N]   (defaults 1, 16, 10)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from mptool.inputs.bundled import ADULT_CSV, config

JOBS = ("1", "0", "2")


def timed(cmd: list[str], cwd: str) -> tuple[float, float, int, str]:
    """(CPU s of the child and the children it reaped, wall s, exit code, its stderr) of one process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd)
    err = proc.stderr.read().decode() if proc.stderr else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"{' '.join(cmd[:4])} failed ({code}): {err[-500:]}")
    return usage.ru_utime + usage.ru_stime, wall, code, err


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--records", type=int, default=16)
    ap.add_argument("--trees", type=int, default=10)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-workers-"))
    spec = yaml.safe_load(config("adult-rf.yaml").read_text())
    spec["model"]["params"]["n_estimators"] = args.trees
    spec_path = work / "adult-rf.yaml"
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    cpu: dict[str, list[float]] = {j: [] for j in JOBS}
    wall: dict[str, list[float]] = {j: [] for j in JOBS}
    csvs: dict[str, list[bytes]] = {j: [] for j in JOBS}
    print(f"# {args.records} Adult records of T (adult-rf.yaml, {args.trees} trees), --engine refit --noise-floor 0; "
          f"{os.cpu_count()} cores; python -m mptool pdtp per run, {args.repeat} round(s)")
    for r in range(args.repeat):
        for jobs in JOBS:
            out = work / f"r{r}-jobs{jobs}"
            cmd = [sys.executable, "-m", "mptool", "pdtp", str(ADULT_CSV), "--model", str(spec_path), "--out", str(out),
                   "--sample", str(args.records), "--engine", "refit", "--noise-floor", "0", "--jobs", jobs]
            load0 = os.getloadavg()[0]
            c, w, code, err = timed(cmd, str(work))  # cwd without mptool in it: PYTHONPATH names the tree measured
            load1 = os.getloadavg()[0]
            cpu[jobs].append(c)
            wall[jobs].append(w)
            csvs[jobs].append((out / "pdtp.csv").read_bytes())
            line = next((ln for ln in err.splitlines() if ln.startswith("workers for the refits")), "(no workers line)")
            print(f"# --jobs {jobs}: {c:.2f} CPU s, {w:.2f} s wall, exit {code}; load {load0:.1f} -> {load1:.1f}\n"
                  f"#   {line}")
    base = csvs["1"][0]
    identical = all(b == base for runs in csvs.values() for b in runs)
    c0, c1, c2 = (min(cpu[j]) for j in ("0", "1", "2"))
    w0, w1, w2 = (min(wall[j]) for j in ("0", "1", "2"))
    print(f"workers_jobs0_vs_jobs2: {c0:.2f} vs {c2:.2f} CPU s ({c2 / c0:.2f}x the CPU with two workers), "
          f"{w0:.2f} vs {w2:.2f} s wall ({w2 / w0:.2f}x); --jobs 1 {c1:.2f} CPU s, {w1:.2f} s wall (--jobs 2 over it: "
          f"{c2 / c1:.2f}x CPU, {w2 / w1:.2f}x wall); pdtp.csv identical: {identical}; "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()

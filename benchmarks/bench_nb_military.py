"""Benchmark: the whole ``mptool pdtp`` command on all 1,414,593 records of military.csv.gz (issue 28).

Categorical naive Bayes (Laplace smoothing) predicting ``grade`` from the five other columns,
T = every row, the exact naive Bayes engine, with a fingerprint key set (so the per-record
fingerprints are computed) -- everything the command does: start-up, reading the CSV, drawing
T, fitting A(T), the leave-one-out of every record, the bounds, fingerprints, writing pdtp.csv
and pdtp.json. Goal: <= 8 CPU s and <= 0.8 GB peak RSS.

Baseline, measured in the same run, each in a fresh interpreter: the floor any tool pays for
the same data -- importing scikit-learn, ``pandas.read_csv`` of the file (labels as a text array), encoding the five
columns, one ``CategoricalNB`` fit and one ``predict_proba`` of every record. CPU time is user +
system of that child alone (``os.wait4``), peak RSS its ``ru_maxrss``; the load is printed.
pdtp.json's own timings (wall seconds per phase) are printed too.

``--base REV`` also runs the whole command with the code of git revision REV (checked out into
a temporary git worktree; 2c5f829 is the tree before the issue 28 start-up and output work of
helper mil), alternating with this tree's runs, and checks that pdtp.csv is byte-identical and
pdtp.json equal but for its timings. ``--repeat N`` runs each command N times; the minimum CPU
time is the figure least disturbed by other load on a shared machine (the median is printed too).

Usage: python benchmarks/bench_nb_military.py [--no-key] [--out DIR] [--base REV] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import dataset  # benchmarks/_common.py: MPTOOL_DATASETS

ROOT = Path(__file__).resolve().parents[1]
SPEC = """data:
  label: grade
  train_size: null
  missing: drop
model:
  estimator: categorical_nb
  params: {alpha: 1.0}
  preprocess: auto
output:
  bin_size: 0.01
seed: 0
"""
BASELINE = """
import pandas as pd
from sklearn.naive_bayes import CategoricalNB
df = pd.read_csv({path!r})
y = df.pop("grade").to_numpy(dtype=str)  # labels as a text array, as mptool hands them to fit
X = df.apply(lambda c: pd.factorize(c)[0]).to_numpy()
CategoricalNB(alpha=1.0).fit(X, y).predict_proba(X)
"""
GOAL_CPU_S, GOAL_GB = 8.0, 0.8


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float, float]:
    """(CPU s, wall s, peak RSS GB, load average at its start) of one child process."""
    load, t0 = os.getloadavg()[0], time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tempfile.gettempdir())
    err = proc.stderr.read().decode() if proc.stderr else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd[:4])} failed ({proc.returncode}): {err[-500:]}")
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024**2, load


def without_timings(doc: dict) -> dict:
    """pdtp.json less what differs between two runs of the same audit: its timings (``timings``, the workers'
    ``fit_s``), the command line, start time and output folder, and the signature over them."""
    summary = {k: v for k, v in doc["summary"].items() if k not in ("timings", "out", "signature")}
    summary["workers"] = {k: v for k, v in summary.get("workers", {}).items() if k != "fit_s"}
    summary["manifest"] = {k: v for k, v in summary.get("manifest", {}).items() if k not in ("command", "started")}
    return {**doc, "summary": summary}


def line(name: str, runs: list[tuple[float, float, float, float]]) -> str:
    cpu, wall, rss = [r[0] for r in runs], [r[1] for r in runs], [r[2] for r in runs]
    each = ", ".join(f"{r[0]:.2f} at load {r[3]:.1f}" for r in runs)
    return (f"  {name:<58} CPU min {min(cpu):.2f} s (median {statistics.median(cpu):.2f}), wall min {min(wall):.2f} s, "
            f"peak RSS {max(rss):.2f} GB; each run's CPU s: {each}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-key", action="store_true", help="run without MPTOOL_FINGERPRINT_KEY (no fingerprints)")
    parser.add_argument("--out", default=None, help="keep the results in this folder")
    parser.add_argument("--base", default=None, help="git revision to time beside this tree (e.g. 2c5f829)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each command (default 1)")
    args = parser.parse_args()
    data = dataset("military.csv.gz")
    work = Path(tempfile.mkdtemp(prefix="bench-military-"))
    out = Path(args.out) if args.out else work / "out"
    spec = work / "military-nb.yaml"
    spec.write_text(SPEC)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("MPTOOL_FINGERPRINT_KEY", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode caches
    if not args.no_key:
        env["MPTOOL_FINGERPRINT_KEY"] = "bench-military-key"
    base_tree = work / "base"
    if args.base:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(base_tree), args.base],
                       check=True)
    try:
        def cli(dest: Path) -> list[str]:
            return [sys.executable, "-m", "mptool", "pdtp", str(data), "--model", str(spec), "--out", str(dest),
                    "--force", "--jobs", "1", "--quiet"]

        load0 = os.getloadavg()[0]
        floor, new, old = [], [], []
        for _ in range(args.repeat):
            floor.append(run([sys.executable, "-c", BASELINE.format(path=str(data))], env))
            new.append(run(cli(out), env))
            if args.base:
                old.append(run(cli(work / "base-out"), {**env, "PYTHONPATH": str(base_tree)}))
        load1 = os.getloadavg()[0]
        doc = json.loads((out / "pdtp.json").read_text())
        summary = doc["summary"]
        print(f"bench_nb_military: {summary['n_train']} records, engine {summary['engine']}, fingerprints "
              f"{'on' if not args.no_key else 'off'}; {args.repeat} run(s) each; load {load0:.1f} before, "
              f"{load1:.1f} after ({os.cpu_count()} CPUs)")
        print(line("floor (import sklearn, read_csv, encode, CategoricalNB fit + predict_proba)", floor))
        print(line("mptool pdtp (whole command), this tree", new))
        if args.base:
            print(line(f"mptool pdtp (whole command), base {args.base}", old))
        cpu, rss = min(r[0] for r in new), max(r[2] for r in new)
        base_cpu = min(r[0] for r in floor)
        print(f"  goal <= {GOAL_CPU_S} CPU s and <= {GOAL_GB} GB peak: CPU {cpu:.2f} s "
              f"({cpu / GOAL_CPU_S:.2f}x the goal), peak {rss:.2f} GB ({rss / GOAL_GB:.2f}x); "
              f"ratio to the floor: CPU {cpu / base_cpu:.2f}x by the minima, "
              f"{statistics.median(n[0] / f[0] for n, f in zip(new, floor, strict=True)):.2f}x by the median of each "
              f"round's pair (the floor is run just before the command: the load-independent ratio)")
        if args.base:
            old_cpu, old_rss = min(r[0] for r in old), max(r[2] for r in old)
            same_csv = (out / "pdtp.csv").read_bytes() == (work / "base-out" / "pdtp.csv").read_bytes()
            old_doc = json.loads((work / "base-out" / "pdtp.json").read_text())
            same_json = without_timings(doc) == without_timings(old_doc)
            print(f"  against base {args.base}: CPU {old_cpu:.2f} -> {cpu:.2f} s ({old_cpu / cpu:.2f}x), peak RSS "
                  f"{old_rss:.2f} -> {rss:.2f} GB; pdtp.csv {'byte-identical' if same_csv else 'DIFFERENT'}, "
                  f"pdtp.json {'equal' if same_json else 'DIFFERENT'} but for its timings, command line and signature")
        print("  pdtp.json timings (wall s): " + ", ".join(f"{k} {v}" for k, v in summary["timings"].items()))
    finally:
        if args.base:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base_tree)], check=False)


if __name__ == "__main__":
    main()

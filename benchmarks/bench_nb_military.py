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

Usage: python benchmarks/bench_nb_military.py [--no-key] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "datasets" / "military.csv.gz"
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


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float, int]:
    """(CPU s, wall s, peak RSS GB, exit code) of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd[:4])} failed ({proc.returncode}): {err[-500:]}")
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024**2, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-key", action="store_true", help="run without MPTOOL_FINGERPRINT_KEY (no fingerprints)")
    parser.add_argument("--out", default=None, help="keep the results in this folder")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-military-"))
    out = Path(args.out) if args.out else work / "out"
    spec = work / "military-nb.yaml"
    spec.write_text(SPEC)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("MPTOOL_FINGERPRINT_KEY", None)
    if not args.no_key:
        env["MPTOOL_FINGERPRINT_KEY"] = "bench-military-key"
    load0 = os.getloadavg()[0]
    base = run([sys.executable, "-c", BASELINE.format(path=str(DATA))], env)
    cli = run([sys.executable, "-m", "mptool", "pdtp", str(DATA), "--model", str(spec), "--out", str(out),
               "--force", "--jobs", "1", "--quiet"], env)
    load1 = os.getloadavg()[0]
    doc = json.loads((out / "pdtp.json").read_text())["summary"]
    print(f"bench_nb_military: {doc['n_train']} records, engine {doc['engine']}, fingerprints "
          f"{'on' if not args.no_key else 'off'}; load {load0:.1f} before, {load1:.1f} after ({os.cpu_count()} CPUs)")
    print(f"  baseline (import sklearn, read_csv, encode, CategoricalNB fit + predict_proba): CPU {base[0]:.2f} s, "
          f"wall {base[1]:.2f} s, peak RSS {base[2]:.2f} GB")
    print(f"  mptool pdtp (whole command):                                           CPU {cli[0]:.2f} s, "
          f"wall {cli[1]:.2f} s, peak RSS {cli[2]:.2f} GB")
    print(f"  ratio to the baseline: CPU {cli[0] / base[0]:.2f}x, peak RSS {cli[2] / base[2]:.2f}x; "
          f"goal <= {GOAL_CPU_S} CPU s ({cli[0] / GOAL_CPU_S:.2f}x) and <= {GOAL_GB} GB ({cli[2] / GOAL_GB:.2f}x)")
    print("  pdtp.json timings (wall s): " + ", ".join(f"{k} {v}" for k, v in doc["timings"].items()))


if __name__ == "__main__":
    main()

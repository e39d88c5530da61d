"""Benchmark: k-NN leave-one-out on 2,000 records of 8 binary features (k = 5), where most distances tie.

The exact k-NN engine (one ordered neighbour query per record, no refits) against the refit
engine at ``--jobs 2``, both as whole ``mptool pdtp`` runs on the same CSV and spec, measured
in the same run. Prints wall and CPU seconds (each process with its workers), both ratios,
the load, and whether the two pdtp.csv files are byte-identical.
The features are text 'on'/'off' (one-hot encoded: 16 integer columns), so the distance
between two records is one of 9 values and almost every k-th neighbour is tied.
Goal (issue 13): exact faster than refit, identical results.

Usage: python benchmarks/bench_knn_ties.py [--records 2000] [--refit-jobs 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from _common import run_timed  # benchmarks/_common.py: wall and CPU of a child process


def tied_csv(path: Path, n: int, seed: int = 12) -> None:
    """n records: 8 random bits as 'on'/'off' and a label that depends on three of them, with noise."""
    rng = np.random.default_rng(seed)
    F = rng.integers(0, 2, (n, 8))
    logit = F[:, :3].sum(axis=1) - 1.5
    label = np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), "yes", "no")
    frame = pd.DataFrame({f"f{j}": np.where(F[:, j] == 1, "on", "off") for j in range(8)})
    frame["label"] = label
    frame.to_csv(path, index=False)


def run(d: Path, name: str, *flags: str) -> tuple[float, float, bytes, str]:
    """Wall and CPU seconds (its workers included), pdtp.csv bytes and the verdict line of one ``mptool pdtp`` run."""
    out = d / name
    cmd = [sys.executable, "-m", "mptool", "pdtp", str(d / "tied.csv"), "--model", str(d / "knn.yaml")]
    res, elapsed, cpu = run_timed([*cmd, "--out", str(out), "-q", *flags], capture_output=True, text=True)
    if res.returncode not in (0, 1):
        raise SystemExit(f"{name}: exit {res.returncode}: {res.stderr.strip()}")
    return elapsed, cpu, (out / "pdtp.csv").read_bytes(), res.stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--refit-jobs", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        tied_csv(d / "tied.csv", args.records)
        spec = {
            "data": {"label": "label", "train_size": None, "missing": "drop"},
            "model": {"estimator": "knn", "params": {"n_neighbors": 5}, "preprocess": "auto"},
            "output": {"bin_size": 0.01},
            "seed": 0,
        }
        (d / "knn.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
        load0 = os.getloadavg()[0]
        t_exact, c_exact, exact, line = run(d, "exact", "--engine", "exact", "--jobs", "1")
        t_refit, c_refit, refit, _ = run(d, "refit", "--engine", "refit", "--jobs", str(args.refit_jobs))
    print(
        f"knn_ties_loo: {t_exact:.2f} s wall, {c_exact:.2f} CPU s for {args.records} records against refit "
        f"--jobs {args.refit_jobs} {t_refit:.1f} s wall, {c_refit:.1f} CPU s: {t_refit / t_exact:.1f}x in wall, "
        f"{c_refit / c_exact:.1f}x in CPU; pdtp.csv identical: {exact == refit}; whole runs incl. start-up "
        f"(CPU of each process and its workers); {line}; load {load0:.1f} before, {os.getloadavg()[0]:.1f} after"
    )


if __name__ == "__main__":
    main()

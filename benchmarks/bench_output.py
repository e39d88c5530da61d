"""Benchmark: where the military audit's time goes, and pdtp.csv's writer old (pandas) vs new (columnar).

The 1,414,593 records of military.csv.gz (predict ``grade``, categorical naive Bayes, every
row in T, the exact engine), run through the same calls as ``mptool pdtp``: read and prepare,
fit A(T), leave-one-out, the per-record table, fingerprints (the three are inside
``run_pdtp``; its JSON timings split them), then pdtp.csv rendered by the columnar writer
(:mod:`mptool.outputs.csvtext`) and by pandas' ``to_csv`` (the renderer before issue 28), in the
same run, and the two texts compared byte for byte. CPU is this process's user + system time
per phase, peak RSS the high-water mark after each phase (the pandas writer runs last, so its
own peak does not hide the new one's).

``--cli`` instead runs the whole command (``python -m mptool pdtp ... -q``) in a child process
and prints its CPU time, wall time, peak RSS and the phases of its pdtp.json. Goal (issue 28):
the whole CLI <= 8 CPU s and <= 0.8 GB peak.

Usage: python benchmarks/bench_output.py [--rows N] [--cli]   (--rows 200000 for a quick look)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import dataset  # benchmarks/_common.py: MPTOOL_DATASETS

SPEC = {
    "data": {"label": "grade", "train_size": None, "missing": "drop"},
    "model": {"estimator": "categorical_nb", "params": {"alpha": 1.0}, "preprocess": "auto"},
    "output": {"bin_size": 0.01},
    "seed": 0,
}
GOAL_CPU_S, GOAL_PEAK_GB = 8.0, 0.8


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


def quiet(total: int, label: str) -> contextlib.AbstractContextManager:
    return contextlib.nullcontext(lambda n: None)


def in_process(rows: int | None) -> None:
    import pandas as pd

    from mptool.api.pdtp import PdtpOptions, run_pdtp
    from mptool.inputs.prepare import prepare
    from mptool.inputs.spec import parse_spec
    from mptool.outputs.formats import CSV_FLOAT_FORMAT, to_csv

    load0 = os.getloadavg()[0]
    data: object = dataset("military.csv.gz")
    if rows is not None:
        data = pd.read_csv(data, nrows=rows)
    c0, w0 = cpu(), time.perf_counter()
    prep = prepare(data, parse_spec(SPEC))
    c1, w1 = cpu(), time.perf_counter()
    print(f"read + prepare: {c1 - c0:.2f} CPU s, {w1 - w0:.2f} s wall; T = {prep.train.n:,} records; "
          f"peak RSS {peak_gb():.2f} GB")
    out = run_pdtp(prep, PdtpOptions(jobs=1, engine="exact"), quiet)
    c2, w2 = cpu(), time.perf_counter()
    t = out.summary["timings"]
    phases = ", ".join(f"{k} {v:.2f}" for k, v in t.items())
    print(f"run_pdtp: {c2 - c1:.2f} CPU s, {w2 - w1:.2f} s wall (wall phases: {phases}); peak RSS {peak_gb():.2f} GB")
    table = out.table
    new = to_csv(table)
    c3 = cpu()
    print(f"pdtp.csv columnar writer: {c3 - c2:.2f} CPU s, {len(new) / 1e6:.0f} MB of text; "
          f"peak RSS {peak_gb():.2f} GB")
    old = table.to_csv(index=False, float_format=CSV_FLOAT_FORMAT, lineterminator="\n")
    c4 = cpu()
    same = "byte-identical" if old == new else "DIFFERENT"
    print(f"pdtp.csv pandas to_csv (before): {c4 - c3:.2f} CPU s; texts {same}; "
          f"ratio {(c4 - c3) / max(c3 - c2, 1e-9):.1f}x; peak RSS {peak_gb():.2f} GB")
    print(f"total without the old writer: {c3 - c0:.2f} CPU s; load {load0:.2f} before, {os.getloadavg()[0]:.2f} after "
          f"({os.cpu_count()} CPUs)")


def whole_cli() -> None:
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "military.yaml"
        spec.write_text(json.dumps(SPEC))  # JSON is YAML
        out = Path(tmp) / "out"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])  # this tree (cwd below holds no mptool)
        data = dataset("military.csv.gz")
        cmd = [sys.executable, "-m", "mptool", "pdtp", str(data), "--model", str(spec), "--out", str(out), "-q"]
        t0 = time.perf_counter()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, cwd=tmp)
        wall = time.perf_counter() - t0
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode not in (0, 1):
            raise SystemExit(done.stderr[-2000:])
        summary = json.loads((out / "pdtp.json").read_text())["summary"]
    used, peak = r.ru_utime + r.ru_stime, r.ru_maxrss / 1024**2
    phases = ", ".join(f"{k} {v:.2f}" for k, v in summary["timings"].items())
    print(f"mptool pdtp military (whole CLI): {used:.2f} CPU s ({used / GOAL_CPU_S:.2f}x the {GOAL_CPU_S:g} s goal), "
          f"{wall:.2f} s wall, peak RSS {peak:.2f} GB ({peak / GOAL_PEAK_GB:.2f}x the {GOAL_PEAK_GB} GB goal); "
          f"pdtp.json wall phases: {phases}; workers {summary.get('workers', {}).get('workers')}; "
          f"load {load0:.2f} before, {os.getloadavg()[0]:.2f} after ({os.cpu_count()} CPUs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="only the first N rows of the data")
    parser.add_argument("--cli", action="store_true", help="time the whole command in a child process")
    args = parser.parse_args()
    whole_cli() if args.cli else in_process(args.rows)


if __name__ == "__main__":
    main()

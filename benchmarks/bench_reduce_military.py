"""Benchmark: reduce-dtp, 20 greedy steps on military.csv.gz (1.41 M records, predict ``grade``).

Categorical naive Bayes with Laplace smoothing over all five categorical features, T = every
row (train_size null). Each step recomputes the PDTP of every remaining record (Long et al.
section 8). Goal: the 20 steps under 60 s on 2 cores.

Baseline: the generic per-step path (take the remaining records, fit A, run the
leave-one-out engine on them), timed over ``--baseline-steps`` steps and scaled to the
same number of steps.

CPU seconds (this process, ``time.process_time``; with ``--jobs 1`` no worker's CPU is missed)
and wall seconds are printed for both, with the load and the ratio of the two measured in the
same run.

Usage: python benchmarks/bench_reduce_military.py [--steps 20] [--baseline-steps 2] [--jobs 1]
Prints ``name: value unit (ratio vs baseline)`` lines.
"""

from __future__ import annotations

import argparse
import os
import time
from contextlib import nullcontext

from _common import dataset  # benchmarks/_common.py: MPTOOL_DATASETS

from mptool.api.reduce import ReduceOptions, Strategy, run_reduce
from mptool.inputs.prepare import prepare
from mptool.inputs.spec import parse_spec

SPEC = {
    "data": {"label": "grade", "train_size": None, "missing": "drop"},
    "model": {"estimator": "categorical_nb", "params": {"alpha": 1.0}, "preprocess": "auto"},
    "output": {"bin_size": 0.01},
    "seed": 0,
}


def _quiet(total: int, label: str):  # noqa: ANN202 - progress stand-in
    return nullcontext(lambda n: None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None, help="the CSV (default: military.csv.gz in $MPTOOL_DATASETS)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--baseline-steps", type=int, default=2, help="0 skips the baseline")
    ap.add_argument("--jobs", type=int, default=1)
    args = ap.parse_args()

    spec = parse_spec(SPEC, where="bench spec")
    t0 = time.perf_counter()
    prep = prepare(args.data or dataset("military.csv.gz"), spec)
    t_load = time.perf_counter() - t0
    print(f"reduce_military_load: {t_load:.1f} s (n={prep.train.n}, read CSV + draw T, not part of the steps)")

    opts = ReduceOptions(threshold=1.0, max_removals=args.steps, strategy=Strategy("greedy", 1), jobs=args.jobs)
    load0 = os.getloadavg()[0]
    c0, w0 = time.process_time(), time.perf_counter()
    out = run_reduce(prep, opts, _quiet)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    s = out.summary
    steps_s = s["timings"]["steps_s"]
    total_s = s["timings"]["total_s"]

    base_total = None
    if args.baseline_steps > 0:
        bopts = ReduceOptions(
            threshold=1.0, max_removals=args.baseline_steps, strategy=Strategy("greedy", 1), jobs=args.jobs,
            incremental=False,
        )
        c0 = time.process_time()
        b = run_reduce(prep, bopts, _quiet).summary
        b_cpu = time.process_time() - c0
        per_step = b["timings"]["steps_s"] / max(b["steps"], 1)
        base_total = b["timings"]["initial_s"] + per_step * s["steps"]
        # the generic path's CPU for the same number of steps, extrapolated as its wall time is (initial + per step)
        b_cpu_total = b_cpu * base_total / max(b["timings"]["total_s"], 1e-9)
        print(f"reduce_military_cpu: {cpu:.2f} CPU s ({wall:.1f} s wall) for {s['steps']} steps vs the generic path's "
              f"{b_cpu:.2f} CPU s for {b['steps']} steps, about {b_cpu_total:.1f} CPU s for {s['steps']}: "
              f"{b_cpu_total / max(cpu, 1e-9):.1f}x in CPU")
        # the generic path must give the same trace
        same = [r["row"] for r in b["trace"]] == [r["row"] for r in s["trace"][: len(b["trace"])]]
        print(f"reduce_military_generic_step: {per_step:.2f} s per step (engine {b['engine']}, trace agrees: {same})")

    ratio = f"{base_total / total_s:.1f}x faster than the generic path" if base_total else "no baseline"
    print(f"reduce_military_{s['steps']}_greedy_steps: {total_s:.1f} s (initial + steps; {ratio})")
    print(f"reduce_military_per_step: {steps_s / max(s['steps'], 1):.3f} s (engine {s['engine']})")
    print(f"reduce_military_trace: max PDTP {[round(r['max_pdtp_after'], 4) for r in s['trace']]}")
    print(f"reduce_military_reached: {s['reached']} at step {s['best_step']} (best max {s['best_max']:.4f})")
    print(f"reduce_military_load: {load0:.1f} before, {os.getloadavg()[0]:.1f} after ({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()

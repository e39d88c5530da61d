"""Benchmark: ``mptool mitigate`` on adult-nb with every defence, DP rows through the exact engine (issue 28, item 5).

1. ``mitigate`` (API, ``--jobs 1``) on configs/adult-nb.yaml, all defences: CPU and wall of the
   whole command. Goal: <= 30 s (it was 934 s when the five DP settings refitted every record).
2. Same run, the old path for comparison: the leave-one-out of one DP setting
   (``dp_categorical_nb eps=2``) by the refit engine on the first ``--refit-records`` records of
   T, against the exact engine on all of T; the refit's per-record cost times |T| times the
   five epsilons is the DP family's old cost, printed as a ratio to the new DP family cost.
   The two engines' outputs are compared on the refitted records (max |difference|).

Usage: python benchmarks/bench_mitigate_nb.py [--refit-records 60]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from mptool.api.mitigate import DP_EPSILONS, dp_spec, mitigate  # noqa: E402
from mptool.inputs.bundled import ADULT_CSV, config  # noqa: E402
from mptool.inputs.prepare import fit_checked, prepare, respecified  # noqa: E402
from mptool.inputs.spec import load_spec  # noqa: E402
from mptool.loo import LooRequest, RefitEngine  # noqa: E402
from mptool.loo.naive_bayes import NaiveBayesEngine  # noqa: E402


def clock() -> tuple[float, float]:
    return time.process_time(), time.perf_counter()


def since(t: tuple[float, float]) -> tuple[float, float]:
    return time.process_time() - t[0], time.perf_counter() - t[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--refit-records", type=int, default=60)
    args = ap.parse_args()
    spec = load_spec(config("adult-nb.yaml"))
    t = clock()
    result = mitigate(ADULT_CSV, spec, defences="all", jobs=1)
    cpu, wall = since(t)
    dp = result.table[result.table["family"] == "dp"]
    print(f"mitigate_adult_nb_all: {cpu:.1f} CPU s, {wall:.1f} s wall, {len(result.table)} settings "
          f"(goal <= 30 s; DP rows engine {sorted(set(dp['engine']))}, fits {sorted(set(dp['fits']))}); "
          f"load {os.getloadavg()[0]:.1f}")

    prep = prepare(ADULT_CSV, spec)
    dprep = respecified(prep, dp_spec(prep.spec, "dp_categorical_nb", 2.0))
    full = fit_checked(dprep.template, dprep.train)
    n = dprep.train.n

    def req(positions: np.ndarray) -> LooRequest:
        return LooRequest(dprep.spec, dprep.template, dprep.train, full, dprep.classes, positions, 1)

    t = clock()
    exact = NaiveBayesEngine().run(req(np.arange(n)), lambda k: None)
    e_cpu, e_wall = since(t)
    k = min(args.refit_records, n)
    t = clock()
    ref = RefitEngine().run(req(np.arange(k)), lambda k: None)
    r_cpu, r_wall = since(t)
    diff = float(np.abs(ref.p_loo - exact.p_loo[:k]).max())
    old = r_cpu / k * n * len(DP_EPSILONS)
    new = e_cpu * len(DP_EPSILONS)
    print(f"dp_nb_loo_eps2: exact engine {e_cpu:.2f} CPU s ({e_wall:.2f} s wall) for {n} records; refit engine "
          f"{r_cpu:.1f} CPU s ({r_wall:.1f} s wall) for {k} records = {r_cpu / k * 1e3:.0f} ms/record; DP family "
          f"({len(DP_EPSILONS)} epsilons x {n} records) old ~{old:.0f} CPU s vs new {new:.2f} CPU s = "
          f"{old / max(new, 1e-9):.0f}x; max |exact - refit| p_loo {diff:.1e}; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

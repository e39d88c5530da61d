"""Benchmark: PDTP of every one of the 1,414,593 records of military.csv.gz (predict ``grade``).

Categorical naive Bayes with Laplace smoothing over the five other (categorical) columns,
T = every row, the exact naive Bayes engine. The time covers everything ``mptool pdtp``
does: reading the CSV, drawing T, fitting A(T), the leave-one-out of every record and the
per-record table. Goal: under 30 s and under 4 GB peak RSS on 2 cores.

Usage: /work/venv/bin/python benchmarks/bench_nb_military.py
"""

from __future__ import annotations

import contextlib
import os
import resource
import time
from pathlib import Path

from mptool.api.pdtp import PdtpOptions, run_pdtp
from mptool.inputs.prepare import prepare
from mptool.inputs.spec import parse_spec

DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "military.csv.gz"
SPEC = {
    "data": {"label": "grade", "train_size": None, "missing": "drop"},
    "model": {"estimator": "categorical_nb", "params": {"alpha": 1.0}, "preprocess": "auto"},
    "output": {"bin_size": 0.01},
    "seed": 0,
}
GOAL_S = 30.0


def quiet(total: int, label: str) -> contextlib.AbstractContextManager:
    return contextlib.nullcontext(lambda n: None)


def main() -> None:
    t0 = time.perf_counter()
    prep = prepare(DATA, parse_spec(SPEC))
    t_read = time.perf_counter() - t0
    out = run_pdtp(prep, PdtpOptions(jobs=2, engine="exact"), quiet)
    total = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    s = out.summary
    print(
        f"nb_military_pdtp: {total:.1f} s for {prep.train.n} records ({total / GOAL_S:.2f}x the 30 s goal; "
        f"read+prepare {t_read:.1f} s, fit A(T) {s['timings']['fit_full_s']:.1f} s, "
        f"leave-one-out {s['timings']['leave_one_out_s']:.1f} s; "
        f"peak RSS {rss:.2f} GB; engine {s['engine']}; max PDTP {s['max']:.3f}; "
        f"load {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()

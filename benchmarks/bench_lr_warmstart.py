"""Benchmark: logistic regression leave-one-out on 1,000 Adult records (configs/adult-lr.yaml).

The warm-start engine (each A(T minus t) starts from A(T)'s parameters) against the refit
engine, same T, both at ``--jobs 2``, both with one BLAS thread per worker (the fits are
small; extra BLAS threads only contend). Also prints the largest difference between the
two engines' raw probabilities: warm start is exact to the solver's tolerance (lbfgs,
tol 1e-4 in this config), not to 1e-9. Goal: at least 5x.

Usage: /work/venv/bin/python benchmarks/bench_lr_warmstart.py [--records 1000]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: this process and loky workers
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from mptool.inputs.bundled import ADULT_CSV, config  # noqa: E402
from mptool.inputs.prepare import fit_checked, prepare  # noqa: E402
from mptool.inputs.spec import load_spec  # noqa: E402
from mptool.loo import LooRequest, RefitEngine  # noqa: E402
from mptool.loo.linear import LogisticWarmEngine  # noqa: E402
from mptool.privacy.calibration import bin_probabilities  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1000)
    args = ap.parse_args()
    spec = load_spec(config("adult-lr.yaml"), {"data.train_size": args.records})
    prep = prepare(ADULT_CSV, spec)
    full = fit_checked(prep.template, prep.train)
    req = LooRequest(spec, prep.template, prep.train, full, prep.classes, np.arange(prep.train.n), 2)
    t0 = time.perf_counter()
    warm = LogisticWarmEngine().run(req, lambda n: None)
    t_warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = RefitEngine().run(req, lambda n: None)
    t_ref = time.perf_counter() - t0
    raw = np.abs(warm.p_loo - ref.p_loo).max()
    binned = np.abs(bin_probabilities(warm.p_loo, 0.01) - bin_probabilities(ref.p_loo, 0.01))
    print(
        f"lr_warmstart_loo: {t_warm:.1f} s for {prep.train.n} records ({t_ref / t_warm:.1f}x vs refit {t_ref:.1f} s; "
        f"max |warm - refit| probability {raw:.1e} (solver tol {full.steps[-1][1].tol:g}), "
        f"{int((binned > 1e-12).any(axis=1).sum())} records differ after 0.01 binning; "
        f"load {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()

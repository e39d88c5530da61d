"""Benchmark: exact Newton leave-one-out for logistic regression on Adult (configs/adult-lr.yaml).

1. 1,000 Adult records (the config's T): the ``exact-newton-logistic`` engine against the
   refit engine at the config's ``tol 1e-9``, same T, same run, both ``--jobs 1`` with one
   BLAS thread. Times are of ``engine.run`` (the exact engine's own polish of A(T) included;
   scikit-learn's fit of A(T), common to both, not). Goal: >= 20x, no record in another
   0.01 bin.
2. Accuracy on the first ``--subset`` records of T: max |PDTP difference| (unbinned) and
   max |probability difference| against refits at ``tol 1e-12``, with the config's solver
   (lbfgs) and with ``newton-cholesky``. lbfgs stops on its relative-decrease test
   (ftol = 64 eps) before its gradient reaches 1e-12, so its refit is itself ~1e-7 off the
   optimum; scikit-learn's Newton solver is the sharper reference. Goal: <= 1e-6.
3. All 45,222 complete Adult records (``train_size: null``): ``run_pdtp`` with the exact
   engine, ``--jobs 1``; prints scikit-learn's fit of A(T) and the leave-one-out separately.
   Goal: a few minutes. ``--skip-all`` leaves it out.

Usage: python benchmarks/bench_lr_newton.py [--records 1000] [--subset 100] [--skip-all]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: one BLAS thread, as the engines use
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import yaml  # noqa: E402

from mptool.api.pdtp import PdtpOptions, run_pdtp  # noqa: E402
from mptool.inputs.bundled import ADULT_CSV, config  # noqa: E402
from mptool.inputs.prepare import fit_checked, prepare  # noqa: E402
from mptool.inputs.spec import load_spec, parse_spec  # noqa: E402
from mptool.loo import LooRequest, RefitEngine  # noqa: E402
from mptool.loo.linear import NewtonLogisticEngine  # noqa: E402
from mptool.privacy.calibration import bin_probabilities  # noqa: E402
from mptool.privacy.dtp import pdtp  # noqa: E402


def request(records: int, **params: object) -> LooRequest:
    """LooRequest for every record of the config's T (``records`` of them), with model.params overridden."""
    spec = load_spec(
        config("adult-lr.yaml"), {"data.train_size": records, **{f"model.params.{k}": v for k, v in params.items()}}
    )
    prep = prepare(ADULT_CSV, spec)
    full = fit_checked(prep.template, prep.train)
    return LooRequest(spec, prep.template, prep.train, full, prep.classes, np.arange(prep.train.n), 1)


CPU: dict[int, float] = {}  # CPU seconds (this process: --jobs 1) of the last run of each engine, by id


def timed(engine: object, req: LooRequest) -> tuple[object, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    result = engine.run(req, lambda n: None)
    CPU[id(engine)] = time.process_time() - c0
    return result, time.perf_counter() - t0


def raw_pdtp(result: object) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return pdtp(result.p_full, result.p_loo).pdtp


def speed(records: int) -> object:
    req = request(records)
    newton, refit = NewtonLogisticEngine(), RefitEngine()
    exact, t_exact = timed(newton, req)
    ref, t_ref = timed(refit, req)
    c_exact, c_ref = CPU[id(newton)], CPU[id(refit)]
    print(f"lr_newton_loo_{records}_cpu: {c_exact:.2f} CPU s vs refit {c_ref:.1f} CPU s: {c_ref / c_exact:.0f}x in CPU "
          f"(wall {t_exact:.2f} s vs {t_ref:.1f} s: {t_ref / t_exact:.0f}x); load {os.getloadavg()[0]:.1f}")
    moved = [
        (bin_probabilities(a, 0.01) != bin_probabilities(b, 0.01)).any(axis=1)
        for a, b in ((exact.p_full, ref.p_full), (exact.p_loo, ref.p_loo))
    ]
    print(
        f"lr_newton_loo_{records}: {t_exact:.2f} s for {records} records ({t_ref / t_exact:.0f}x vs refit "
        f"{t_ref:.1f} s at tol {req.full_model.steps[-1][1].tol:g}; max |exact - refit| probability "
        f"{max(np.abs(exact.p_full - ref.p_full).max(), np.abs(exact.p_loo - ref.p_loo).max()):.1e}, "
        f"max |dPDTP| {np.nanmax(np.abs(raw_pdtp(exact) - raw_pdtp(ref))):.1e}, "
        f"{int((moved[0] | moved[1]).sum())} records in another 0.01 bin; load {os.getloadavg()[0]:.1f})"
    )
    return exact


def accuracy(records: int, subset: int, exact: object) -> None:
    for solver in ("lbfgs", "newton-cholesky"):
        req = request(records, tol=1e-12, solver=solver)
        sub = LooRequest(req.spec, req.template, req.train, req.full_model, req.classes, np.arange(subset), 1)
        ref, t_ref = timed(RefitEngine(), sub)
        dp = max(np.abs(exact.p_full[:subset] - ref.p_full).max(), np.abs(exact.p_loo[:subset] - ref.p_loo).max())
        dpdtp = np.nanmax(np.abs(raw_pdtp(exact)[:subset] - raw_pdtp(ref)))
        print(
            f"lr_newton_vs_refit_tol1e-12_{solver}: max |dPDTP| {dpdtp:.1e} on {subset} records (goal <= 1e-6; "
            f"max |probability difference| {dp:.1e}; refit {t_ref:.1f} s; load {os.getloadavg()[0]:.1f})"
        )


def everything() -> None:
    raw = yaml.safe_load(config("adult-lr.yaml").read_text())
    raw["data"]["train_size"] = None  # every complete row
    prep = prepare(ADULT_CSV, parse_spec(raw))
    t0 = time.perf_counter()
    out = run_pdtp(
        prep, PdtpOptions(jobs=1, engine="exact"), lambda total, label: contextlib.nullcontext(lambda n: None)
    )
    total = time.perf_counter() - t0
    t = out.summary["timings"]
    print(
        f"lr_newton_all_adult: {total:.0f} s for {prep.train.n} records (scikit-learn fit of A(T) at tol "
        f"{prep.template.steps[-1][1].tol:g}: {t['fit_full_s']:.0f} s, leave-one-out {t['leave_one_out_s']:.0f} s; "
        f"engine {out.summary['engine']}, --jobs 1; max PDTP {out.table['pdtp'].max():.3f}; "
        f"load {os.getloadavg()[0]:.1f})"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--subset", type=int, default=100)
    ap.add_argument("--skip-all", action="store_true")
    args = ap.parse_args()
    exact = speed(args.records)
    accuracy(args.records, args.subset, exact)
    if not args.skip_all:
        everything()


if __name__ == "__main__":
    main()

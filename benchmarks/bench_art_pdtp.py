"""Benchmark: mptool against IBM ART's ``art.metrics.PDTP`` on the same data and model.

Categorical naive Bayes (configs/adult-nb.yaml), T = 200 Adult records. ART refits once
per record (``num_iter=1``) and takes the maximum probability ratio over every training
point and class, with its own 0.01 binning; mptool's ``--queries train`` computes the
same quantity in log units (column ``dtp_queries``), with the exact naive Bayes engine.
Prints the wall-time ratio and max |ln(ART value) - mptool value| over the 200 records.

ART is not an mptool dependency: run this with a separate environment, e.g.
  python3 -m venv /work/venv-art
  /work/venv-art/bin/pip install -e /work/main adversarial-robustness-toolbox
  /work/venv-art/bin/python benchmarks/bench_art_pdtp.py
"""

from __future__ import annotations

import contextlib
import os
import time

import numpy as np
from art.estimators.classification.scikitlearn import ScikitlearnClassifier
from art.metrics import PDTP
from sklearn.base import clone

from mptool.api.pdtp import PdtpOptions, run_pdtp
from mptool.inputs.bundled import ADULT_CSV, config
from mptool.inputs.prepare import fit_checked, prepare
from mptool.inputs.spec import load_spec
from mptool.loo.design import class_index

N = 200


def quiet(total: int, label: str) -> contextlib.AbstractContextManager:
    return contextlib.nullcontext(lambda n: None)


def main() -> None:
    spec = load_spec(config("adult-nb.yaml"), {"data.train_size": N})
    prep = prepare(ADULT_CSV, spec)
    T = prep.train

    t0 = time.perf_counter()
    ours = run_pdtp(prep, PdtpOptions(jobs=1, queries="train"), quiet)
    t_ours = time.perf_counter() - t0

    # ART sees the same encoded features and the same CategoricalNB (min_categories = domain sizes)
    t0 = time.perf_counter()
    full = fit_checked(prep.template, T)
    codes = np.asarray(full.steps[0][1].transform(T.X))
    y = class_index(T.y, prep.classes)
    clf = clone(prep.template.steps[-1][1]).fit(codes, y)
    target = ScikitlearnClassifier(model=clf)
    extra = ScikitlearnClassifier(model=clone(prep.template.steps[-1][1]))
    avg, _, _ = PDTP(target, extra, codes, np.eye(len(prep.classes))[y], num_iter=1)
    t_art = time.perf_counter() - t0

    ln_art = np.log(avg)
    diff = np.abs(ln_art - ours.table["dtp_queries"].to_numpy())
    print(
        f"art_pdtp_comparison: {t_ours:.2f} s mptool vs {t_art:.2f} s ART for {T.n} records "
        f"({t_art / t_ours:.0f}x; engine {ours.summary['engine']}, --queries train, ART num_iter=1); "
        f"max |ln(ART) - mptool dtp_queries| = {diff.max():.2e} ({int((diff > 1e-9).sum())} records differ); "
        f"max PDTP(self) {ours.summary['max']:.3f} vs max over T {ours.table['dtp_queries'].max():.3f}; "
        f"load {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()

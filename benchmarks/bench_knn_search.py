"""Benchmark: one (k+1)-neighbour search serves k-NN's leave-one-out, p_full and training accuracy (issue 28, item 4).

On ``--records`` Adult records (configs/adult-knn.yaml with adult-nb's fixed bins for the
numerics and education-num as categories, so that ``exact-knn`` accepts it; every record audited), in one run:

- new: ``KnnEngine.run`` on every record plus ``A(T).predict(T)`` (the training accuracy
  ``pdtp`` reports), on a freshly fitted A(T): one search of every training row, kept on the model;
- old: the three searches the engine and ``run_facts`` made before: the k nearest of every
  record (p_full), the k + 1 nearest (leave-one-out) and the k nearest again (predict on T).

Prints CPU and wall of both, the ratio, the load, and whether p_full, p_loo and the
predictions are bit-for-bit equal.

Usage: python benchmarks/bench_knn_search.py [--records 4000]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from mptool.inputs.bundled import ADULT_CSV, config  # noqa: E402
from mptool.inputs.neighbors import vote  # noqa: E402
from mptool.inputs.prepare import fit_checked, prepare  # noqa: E402
from mptool.inputs.spec import load_spec  # noqa: E402
from mptool.loo import LooRequest, select_engine  # noqa: E402
from mptool.loo.knn import KnnEngine  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=4000)
    args = ap.parse_args()
    bins = load_spec(config("adult-nb.yaml")).model.bins
    spec = load_spec(config("adult-knn.yaml"), {"data.train_size": args.records, "model.bins": dict(bins),
                                                 "data.categorical": ["education-num"]})
    prep = prepare(ADULT_CSV, spec)
    assert select_engine("auto", prep.spec, prep.template).name == "exact-knn"
    T, n = prep.train, prep.train.n
    pos = np.arange(n)

    model = fit_checked(prep.template, T)
    c0, w0 = time.process_time(), time.perf_counter()
    res = KnnEngine().run(LooRequest(prep.spec, prep.template, T, model, prep.classes, pos, 1), lambda k: None)
    pred = model.predict(T.X)
    new_cpu, new_wall = time.process_time() - c0, time.perf_counter() - w0

    old = fit_checked(prep.template, T)
    knn = old.steps[-1][1]
    Z = np.asarray(old[:-1].transform(T.X), dtype=np.float64)
    k, C = knn.n_neighbors, len(knn.classes_)
    c0, w0 = time.process_time(), time.perf_counter()
    d, i = knn._ordered(Z[pos], k)  # p_full (predict_proba on the audited records)
    p_full = vote(knn._y[i], d, C, knn.weights)
    p_loo = knn.predict_proba_excluding(Z[pos], pos)  # its own (k+1) search
    d, i = knn._ordered(Z, k)  # training accuracy (predict on T)
    old_pred = knn.classes_[np.argmax(vote(knn._y[i], d, C, knn.weights), axis=1)]
    old_cpu, old_wall = time.process_time() - c0, time.perf_counter() - w0

    same = (np.array_equal(res.p_full, p_full) and np.array_equal(res.p_loo, p_loo)
            and np.array_equal(pred, old_pred))
    print(f"knn_one_search_{n}: new {new_cpu:.2f} CPU s ({new_wall:.2f} s wall) vs three searches {old_cpu:.2f} CPU s "
          f"({old_wall:.2f} s wall) = {old_cpu / max(new_cpu, 1e-9):.2f}x CPU; bit-for-bit equal: {same}; "
          f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

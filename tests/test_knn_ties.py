"""k-NN on data built to tie: the tie rule, exact == refit bit for bit, and no dependence on --jobs/backend.

Eight binary features give at most 256 distinct records, so almost every k-th neighbour is
tied and duplicates abound; scikit-learn's own KNeighborsClassifier broke those ties by its
search order and thread count (issue 12). The rule of ``mptool.inputs.neighbors`` (distance, then
the record's content key, then training row; issue 26 added the content key) is checked against
a reference written here another way: integer distances and ``numpy.lexsort`` over (distance,
content key, row).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import run_cli, write_spec
from sklearn.neighbors import KNeighborsClassifier
from threadpoolctl import threadpool_limits

from mptool.inputs.models import resolve_estimator
from mptool.inputs.neighbors import TieStableKNeighborsClassifier, content_keys
from mptool.inputs.prepare import fit_checked, prepare
from mptool.inputs.spec import load_spec
from mptool.loo import LooRequest, RefitEngine, select_engine
from mptool.loo.knn import KnnEngine

K = 5


def binary_matrix(n: int, seed: int, copies: int = 12) -> np.ndarray:
    """n rows of 8 random bits, then ``copies`` extra copies of row 3 (a crowd at distance 0)."""
    F = np.random.default_rng(seed).integers(0, 2, (n, 8))
    return np.vstack([F, np.repeat(F[3:4], copies, axis=0)])


def tied_frame(n: int, seed: int = 0, onehot: bool = True) -> pd.DataFrame:
    """8 binary features (text 'on'/'off' to be one-hot encoded, or numbers 0/1) and a noisy label."""
    F = binary_matrix(n, seed)
    rng = np.random.default_rng(seed + 1)
    logit = F[:, :3].sum(axis=1) - 1.5
    label = np.where(rng.random(len(F)) < 1 / (1 + np.exp(-logit)), "yes", "no")
    cols = {f"f{j}": (np.where(F[:, j] == 1, "on", "off") if onehot else F[:, j]) for j in range(8)}
    return pd.DataFrame({**cols, "label": label})


# --- the rule against an independent reference ---


def reference_order(Q: np.ndarray, X: np.ndarray, metric: str, y: np.ndarray) -> np.ndarray:
    """Every training row, per query, sorted by (distance, content key, row) with numpy.lexsort (exact here)."""
    diff = Q[:, None, :] - X[None, :, :]
    key = {"l2": (diff**2).sum(-1), "l1": np.abs(diff).sum(-1), "linf": np.abs(diff).max(-1)}[metric]
    rows, content = np.arange(len(X)), content_keys(X, y)
    return np.array([np.lexsort((rows, content, key[i])) for i in range(len(Q))]), key


@pytest.mark.parametrize("metric,params", [("l2", {}), ("l1", {"p": 1}), ("linf", {"metric": "chebyshev"})])
@pytest.mark.parametrize("variant", ["binary", "integers", "halves"])  # matrix products / feature by feature
def test_tie_rule_is_distance_then_content_then_row(metric: str, params: dict, variant: str) -> None:
    X = binary_matrix(400, seed=1).astype(float) * (0.5 if variant == "halves" else 1.0)
    if variant != "binary":
        X[::7, 2] *= 3.0
    y = np.arange(len(X)) % 3
    Q = np.vstack([X[:50], X[::-9]])
    knn = TieStableKNeighborsClassifier(K, **params).fit(X, y)
    order, key = reference_order(Q, X, metric, y)
    dist, ind = knn.kneighbors(Q, K + 3)
    np.testing.assert_array_equal(ind, order[:, : K + 3])
    want = np.take_along_axis(key, order[:, : K + 3], axis=1)
    np.testing.assert_array_equal(dist, np.sqrt(want) if metric == "l2" else want)
    # one query at a time, or with one BLAS thread: the same bits
    with threadpool_limits(1):
        single = np.vstack([knn.kneighbors(Q[i : i + 1], K + 3)[1] for i in range(0, len(Q), 17)])
    np.testing.assert_array_equal(single, ind[::17])


def test_leave_one_out_neighbours_are_the_refit_neighbours() -> None:
    """kneighbors(None) and kneighbors_excluding: each row's list without itself equals the list
    of a classifier fitted without that row (row numbers mapped back), including row 3's many
    duplicates that sit before some of its copies."""
    X = binary_matrix(200, seed=2).astype(float)
    y = np.arange(len(X)) % 2
    knn = TieStableKNeighborsClassifier(K).fit(X, y)
    _, ind = knn.kneighbors()
    order, _ = reference_order(X, X, "l2", y)
    crowded = 0
    for t in range(len(X)):
        ref = order[t][order[t] != t][:K]
        np.testing.assert_array_equal(ind[t], ref)
        crowded += t not in order[t][: K + 1]
    assert crowded >= 5  # copies of row 3 placed after more than K+1 others at distance 0
    for t in (3, len(X) - 1, len(X) - 6):
        keep = np.arange(len(X)) != t
        loo = TieStableKNeighborsClassifier(K).fit(X[keep], y[keep])
        np.testing.assert_array_equal(np.flatnonzero(keep)[loo.kneighbors(X[[t]])[1][0]], ind[t])


@pytest.mark.parametrize("weights", ["uniform", "distance"])
def test_probabilities_match_an_independent_vote(weights: str) -> None:
    X = binary_matrix(300, seed=3).astype(float) * 0.5
    y = np.where(np.arange(len(X)) % 3 == 0, "a", "b")
    knn = TieStableKNeighborsClassifier(K, weights=weights).fit(X, y)
    Q = X[:60] + np.where(np.arange(8) < 2, 0.5, 0.0)  # some at distance 0, most not
    order, key = reference_order(Q, X, "l2", y)
    want = np.zeros((len(Q), 2))
    for i in range(len(Q)):
        nn = order[i, :K]
        d = np.sqrt(key[i, nn])
        w = np.ones(K) if weights == "uniform" else (d == 0) * 1.0 if (d == 0).any() else 1 / d
        for c, name in enumerate(("a", "b")):
            want[i, c] = w[y[nn] == name].sum() / w.sum()
    np.testing.assert_allclose(knn.predict_proba(Q), want, rtol=0, atol=1e-15)
    assert list(knn.predict(Q)) == [("a", "b")[int(np.argmax(r))] for r in knn.predict_proba(Q)]


def test_thread_count_and_batch_do_not_move_ties_on_2000_records() -> None:
    """The issue's case: 2,000 records of 8 bits, k=5. Most k-th neighbours tie; A(T)'s answer on
    every record is the same with 1 or 2 BLAS/OpenMP threads and in batches of any size."""
    X = binary_matrix(2000, seed=7).astype(float)
    y = np.random.default_rng(8).integers(0, 2, len(X))
    knn = TieStableKNeighborsClassifier(K).fit(X, y)
    with threadpool_limits(1):
        dist, ind = knn.kneighbors(X, K + 1)
        one = knn.predict_proba(X)
    assert (dist[:, K - 1] == dist[:, K]).mean() > 0.9  # built to tie
    with threadpool_limits(2):
        np.testing.assert_array_equal(knn.kneighbors(X, K + 1)[1], ind)
        np.testing.assert_array_equal(knn.predict_proba(X), one)
    np.testing.assert_array_equal(np.vstack([knn.predict_proba(X[a : a + 333]) for a in range(0, len(X), 333)]), one)


def test_agrees_with_sklearn_where_nothing_ties() -> None:
    rng = np.random.default_rng(4)
    X, Q, y = rng.normal(size=(300, 5)), rng.normal(size=(80, 5)), rng.integers(0, 3, 300)
    for params in ({}, {"weights": "distance"}, {"p": 1}, {"metric": "chebyshev"}):
        ours = TieStableKNeighborsClassifier(7, **params).fit(X, y)
        theirs = KNeighborsClassifier(7, **params).fit(X, y)
        np.testing.assert_array_equal(ours.kneighbors(Q)[1], theirs.kneighbors(Q)[1])
        np.testing.assert_allclose(ours.predict_proba(Q), theirs.predict_proba(Q), rtol=0, atol=1e-12)


def test_spec_knn_and_sklearn_path_both_use_the_tie_rule() -> None:
    from mptool.inputs.spec import ModelSpec

    for name in ("knn", "sklearn.neighbors.KNeighborsClassifier"):
        choice = resolve_estimator(ModelSpec(estimator=name, params={"n_neighbors": 3, "algorithm": "kd_tree"}), 0)
        assert choice.cls is TieStableKNeighborsClassifier, name
        assert choice.make().get_params()["n_neighbors"] == 3


# --- the engines: exact == refit bit for bit, and nothing depends on --jobs or the backend ---


def loo_both(tmp_path: Path, df: pd.DataFrame, **model) -> tuple:
    data = tmp_path / "d.csv"
    df.to_csv(data, index=False)
    spec = load_spec(write_spec(tmp_path / "s.yaml", "knn", model=model))
    prep = prepare(data, spec)
    assert select_engine("auto", spec, prep.template).name == "exact-knn"
    full = fit_checked(prep.template, prep.train)
    req = LooRequest(spec, prep.template, prep.train, full, prep.classes, np.arange(prep.train.n), 1)
    with threadpool_limits(1):
        return KnnEngine().run(req, lambda n: None), RefitEngine().run(req, lambda n: None)


@pytest.mark.parametrize(
    "onehot,model",
    [
        (True, {"params": {"n_neighbors": K}}),
        (False, {"preprocess": "none", "params": {"n_neighbors": K, "weights": "distance"}}),
        (False, {"preprocess": "none", "params": {"n_neighbors": 1, "metric": "manhattan"}}),
    ],
)
def test_exact_engine_equals_refit_bit_for_bit(tmp_path: Path, onehot: bool, model: dict) -> None:
    # 50 random rows of 8 bits and 12 copies of one: ties everywhere (was 100 rows: twice the refits)
    fast, ref = loo_both(tmp_path, tied_frame(50, seed=5, onehot=onehot), **model)
    np.testing.assert_array_equal(fast.p_full, ref.p_full)
    np.testing.assert_array_equal(fast.p_loo, ref.p_loo)


@pytest.fixture(scope="module")
def cluster(local_cluster):
    """conftest's two-worker Dask cluster (in this process, over TCP)."""
    return local_cluster


def test_pdtp_csv_identical_across_engines_jobs_and_backends(tmp_path: Path, cluster) -> None:
    """One-hot tied data: refit at --jobs 1/2 under loky, threading and Dask, and the exact engine.

    16 random rows of 8 bits and 12 copies of one of them: every record has tied neighbours (the
    copies are a crowd at distance 0); 28 records are still 16 chunks at 2 workers (was 30 + 12, once 60 + 12)."""
    csv = tmp_path / "tied.csv"
    tied_frame(16, seed=6).to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", "knn", model={"params": {"n_neighbors": K}})
    runs = {
        "refit-loky-1": ("--engine", "refit", "--backend", "loky", "--jobs", "1"),
        "refit-loky-2": ("--engine", "refit", "--backend", "loky", "--jobs", "2"),
        "refit-threading-2": ("--engine", "refit", "--backend", "threading", "--jobs", "2"),
        "refit-dask": ("--engine", "refit", "--backend", "dask", "--scheduler", cluster.scheduler_address),
        "exact-1": ("--engine", "exact", "--jobs", "1"),
        "exact-threading-2": ("--engine", "exact", "--backend", "threading", "--jobs", "2"),
    }
    outputs = {}
    for name, flags in runs.items():
        out = tmp_path / name
        res = run_cli("pdtp", csv, "--model", spec, "--out", out, "-q", *flags)
        assert res.code in (0, 1), (name, res.stderr)
        outputs[name] = (out / "pdtp.csv").read_bytes()
    reference = outputs["refit-loky-1"]
    assert reference.count(b"\n") == 16 + 12 + 1
    for name, data in outputs.items():
        assert data == reference, f"{name} differs from refit --jobs 1"

"""Fast paths of the exact engines against independent references (issue 28, items 3-5).

- DP categorical naive Bayes through the exact naive Bayes engine: the count downdate under
  the same seeded noise equals one refit of DPCategoricalNB per record (the refit engine);
  the noise does not depend on T's records, their number or order.
- k-NN: one (k+1)-neighbour search of every training row serves p_full, leave-one-out and the
  training accuracy, bit for bit what separate searches give.
- Logistic regression: the engine's changes (residuals in place, one score buffer, batched
  raw-coordinate shifts) give bit-for-bit the same results; tests/test_newton_lr.py (unchanged)
  holds it to tight scikit-learn refits, and benchmarks/bench_lr_fast.py compares it bit for bit
  with a base revision.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import mixed_frame, write_spec
from threadpoolctl import threadpool_limits

from mptool.inputs.dp_nb import DPCategoricalNB
from mptool.inputs.prepare import fit_checked, prepare
from mptool.inputs.spec import load_spec
from mptool.loo import LooRequest, RefitEngine, select_engine
from mptool.loo.naive_bayes import NaiveBayesEngine


def _request(tmp_path: Path, frame: pd.DataFrame, estimator: str, params: dict, **data: object) -> LooRequest:
    csv = tmp_path / "d.csv"
    frame.to_csv(csv, index=False)
    spec = load_spec(write_spec(tmp_path / "s.yaml", estimator, data={"train_size": None, **data},
                                model={"params": params}))
    prep = prepare(csv, spec)
    full = fit_checked(prep.template, prep.train)
    return LooRequest(spec, prep.template, prep.train, full, prep.classes, np.arange(prep.train.n), 1)


def _three_class_frame(n: int = 45) -> pd.DataFrame:
    df = mixed_frame(n, seed=5).drop(columns=["x1"])
    df.loc[::4, "label"] = "maybe"
    df.loc[3, "label"] = "rare"  # a class with one record: leaving it empties a count, floored at 1
    return df


# --------------------------------------------------------------------------- DP naive Bayes


@pytest.mark.parametrize("epsilon", [0.5, 8.0, 1e6])
@pytest.mark.parametrize("preprocess_none", [False, True], ids=["domain-encoder", "preprocess-none"])
def test_dp_nb_exact_engine_equals_refits(tmp_path: Path, epsilon: float, preprocess_none: bool) -> None:
    frame = _three_class_frame()
    if preprocess_none:
        frame = frame[["x2", "label"]]
    csv = tmp_path / "d.csv"
    frame.to_csv(csv, index=False)
    model = {"params": {"epsilon": epsilon, "alpha": 0.5}}
    if preprocess_none:
        model["preprocess"] = "none"
    data = {"train_size": None, "categorical": [] if preprocess_none else ["x2"]}
    spec = load_spec(write_spec(tmp_path / "s.yaml", "dp_categorical_nb", data=data, model=model))
    prep = prepare(csv, spec)
    assert select_engine("auto", spec, prep.template).name == "exact-naive-bayes"
    full = fit_checked(prep.template, prep.train)
    req = LooRequest(spec, prep.template, prep.train, full, prep.classes, np.arange(prep.train.n), 1)
    exact = NaiveBayesEngine().run(req, lambda n: None)
    ref = RefitEngine().run(req, lambda n: None)
    # Same operations in the same order as the refit: equal to rounding (1e-12 absolute on
    # probabilities in [0, 1]; in practice bit for bit).
    np.testing.assert_allclose(exact.p_full, ref.p_full, rtol=0, atol=1e-12)
    np.testing.assert_allclose(exact.p_loo, ref.p_loo, rtol=0, atol=1e-12)
    assert np.abs(exact.p_loo - exact.p_full).max() > 0  # the record's own counts move its prediction


def test_dp_nb_noise_does_not_depend_on_the_records_their_number_or_order() -> None:
    rng = np.random.default_rng(1)
    X = np.column_stack([rng.integers(0, 3, 40), rng.integers(0, 5, 40)])
    y = np.where(rng.random(40) < 0.5, "a", "b")

    def fitted(rows: np.ndarray) -> DPCategoricalNB:
        est = DPCategoricalNB(epsilon=1.0, n_categories=(3, 5), classes=("a", "b"), random_state=7)
        return est.fit(X[rows], y[rows])

    def noise(m: DPCategoricalNB, rows: np.ndarray) -> np.ndarray:
        counts = [np.bincount((y[rows] == "b").astype(int), minlength=2)]
        for j, n in enumerate((3, 5)):
            counts.append(np.array([[np.sum((y[rows] == c) & (X[rows, j] == v)) for v in range(n)] for c in "ab"]))
        noisy = [m.noisy_class_count_, *m.noisy_category_count_]
        return np.concatenate([(a - c).ravel() for a, c in zip(noisy, counts, strict=True)])

    every, fewer, shuffled = np.arange(40), np.arange(1, 40), rng.permutation(40)
    base = noise(fitted(every), every)
    # noisy - count is the draw up to one rounding of the addition (counts <= 40, noise O(3))
    for rows in (fewer, shuffled):
        np.testing.assert_allclose(noise(fitted(rows), rows), base, rtol=0, atol=1e-13)


def test_dp_nb_without_an_integer_seed_is_refitted(tmp_path: Path) -> None:
    req = _request(tmp_path, _three_class_frame(), "dp_categorical_nb", {"epsilon": 1.0, "random_state": None},
                   categorical=["x2"])
    why = NaiveBayesEngine().refuses(req.spec, req.template)
    assert why is not None and "integer random_state" in why
    assert select_engine("auto", req.spec, req.template).name == "refit"


def test_dp_nb_engine_is_the_refit_bit_for_bit(tmp_path: Path) -> None:
    """The downdate repeats the refit's operations in the refit's order: equal bits, so pdtp.csv is unchanged."""
    req = _request(tmp_path, _three_class_frame(60), "dp_categorical_nb", {"epsilon": 2.0}, categorical=["x2"])
    with threadpool_limits(1):
        exact = NaiveBayesEngine().run(req, lambda n: None)
        ref = RefitEngine().run(req, lambda n: None)
    assert np.array_equal(exact.p_full, ref.p_full) and np.array_equal(exact.p_loo, ref.p_loo)


# --------------------------------------------------------------------------- k-NN: one search


def _knn_frame(n: int = 70, seed: int = 2) -> pd.DataFrame:
    """6 binary features as text (one-hot: ties everywhere), a duplicate crowd, a noisy label."""
    rng = np.random.default_rng(seed)
    F = rng.integers(0, 2, (n, 6))
    F = np.vstack([F, np.repeat(F[3:4], 8, axis=0)])
    label = np.where(rng.random(len(F)) < 1 / (1 + np.exp(-(F[:, :2].sum(axis=1) - 1))), "yes", "no")
    return pd.DataFrame({**{f"f{j}": np.where(F[:, j] == 1, "on", "off") for j in range(6)}, "label": label})


@pytest.mark.parametrize("params", [{"n_neighbors": 5}, {"n_neighbors": 4, "weights": "distance"}])
def test_knn_one_search_serves_full_loo_and_accuracy(tmp_path: Path, params: dict, monkeypatch) -> None:
    from mptool.inputs.neighbors import TieStableKNeighborsClassifier
    from mptool.loo.knn import KnnEngine

    req = _request(tmp_path, _knn_frame(), "knn", params)
    model = req.full_model
    knn = model.steps[-1][1]
    searches: list[int] = []
    ordered = TieStableKNeighborsClassifier._ordered

    def counted(self, Q, m):
        searches.append(len(Q))
        return ordered(self, Q, m)

    monkeypatch.setattr(TieStableKNeighborsClassifier, "_ordered", counted)
    sample = np.array([0, 3, 5, 40, 71])  # 71: one of the copies of row 3
    exact = KnnEngine().run(LooRequest(req.spec, req.template, req.train, model, req.classes, sample, 1),
                            lambda n: None)
    predicted = model.predict(req.train.X)
    assert searches == [req.train.n]  # one search of every training row, nothing for predict on T
    monkeypatch.setattr(TieStableKNeighborsClassifier, "_ordered", ordered)
    # independent: a fresh fit (no stored search), separate searches as before the change
    fresh = fit_checked(req.template, req.train)
    Z = fresh[:-1].transform(req.train.X)
    fknn = fresh.steps[-1][1]
    assert np.array_equal(exact.p_full, fknn.predict_proba(Z[sample]))  # bit for bit
    assert np.array_equal(exact.p_loo, fknn.predict_proba_excluding(Z[sample], sample))
    assert np.array_equal(predicted, fknn.classes_[np.argmax(_proba_without_store(fknn, Z), axis=1)])
    ref = RefitEngine().run(LooRequest(req.spec, req.template, req.train, model, req.classes, sample, 1),
                            lambda n: None)
    assert np.array_equal(exact.p_loo, ref.p_loo)  # refits on T \ {t}: same tie rule, bit for bit
    assert knn.kneighbors(Z[:10], 3)[1].shape == (10, 3)  # other queries: a search of their own


def _proba_without_store(knn, Z: np.ndarray) -> np.ndarray:
    """predict_proba by a search of Z itself (the stored training search bypassed)."""
    from mptool.inputs.neighbors import vote

    dist, ind = knn._ordered(np.asarray(Z, dtype=np.float64), knn.n_neighbors)
    return vote(knn._y[ind], dist, len(knn.classes_), knn.weights)


def test_knn_stored_search_is_not_pickled_or_loaded(tmp_path: Path) -> None:
    import pickle

    import skops.io as sio

    req = _request(tmp_path, _knn_frame(), "knn", {"n_neighbors": 3})
    knn = req.full_model.steps[-1][1]
    knn.training_order()
    assert knn._train_order is not None
    assert getattr(pickle.loads(pickle.dumps(knn)), "_train_order", None) is None
    path = tmp_path / "m.skops"
    sio.dump(req.full_model, path)
    loaded = sio.load(path, trusted=sio.get_untrusted_types(file=path))
    assert getattr(loaded.steps[-1][1], "_train_order", None) is None
    Z = req.full_model[:-1].transform(req.train.X)
    assert np.array_equal(loaded.predict_proba(req.train.X), knn.predict_proba(Z))

"""Exact leave-one-out engines against the refit engine (the reference) on small random data.

Every dataset holds a record that is the only one of its class, a category seen once and
a constant feature. Naive Bayes and k-NN must equal refit to 1e-9, binned and unbinned.
Logistic regression (exact Newton engine): tests/test_newton_lr.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import mixed_frame, write_spec
from threadpoolctl import threadpool_limits

from mptool.inputs.prepare import fit_checked, prepare
from mptool.inputs.spec import load_spec
from mptool.loo import EXACT_ENGINES, LooRequest, RefitEngine, select_engine
from mptool.loo.knn import KnnEngine
from mptool.loo.naive_bayes import CategoricalCounts, NaiveBayesEngine
from mptool.privacy.calibration import bin_probabilities

BINS = {"x1": [-1.0, 0.0, 1.0], "x2": [1.0, 2.0, 3.0], "const": [0.0]}


def awkward_frame(n: int = 30, seed: int = 3) -> pd.DataFrame:
    """mixed_frame plus: a class with a single record, a category seen once, a constant column.

    30 records (50 until issue 25): what is compared (every record's leave-one-out, engine against refit)
    holds for any size; the awkward records are rows 0 and 1 whatever the size, and each refit is a
    full scikit-learn fit."""
    df = mixed_frame(n, seed)
    df.loc[0, "label"] = "maybe"
    df.loc[1, "color"] = "purple"
    df["const"] = 3.0
    return df


def run_both(tmp_path: Path, df: pd.DataFrame, estimator: str, engine, **sections):
    data = tmp_path / "d.csv"
    df.to_csv(data, index=False)
    spec = load_spec(write_spec(tmp_path / "s.yaml", estimator, **sections))
    prep = prepare(data, spec)
    assert engine.refuses(spec, prep.template) is None
    full = fit_checked(prep.template, prep.train)
    req = LooRequest(spec, prep.template, prep.train, full, prep.classes, np.arange(prep.train.n), 1)
    with threadpool_limits(1):  # tiny fits: BLAS threads only contend (10x slower on a busy 2-core box)
        fast = engine.run(req, lambda n: None)
        ref = RefitEngine().run(req, lambda n: None)
    return fast, ref, prep


def assert_close(fast, ref, tol: float) -> None:
    assert fast.p_loo.shape == ref.p_loo.shape
    np.testing.assert_allclose(fast.p_full, ref.p_full, rtol=0, atol=tol)
    np.testing.assert_allclose(fast.p_loo, ref.p_loo, rtol=0, atol=tol)
    for b in (0.01, 0.05):
        np.testing.assert_allclose(bin_probabilities(fast.p_loo, b), bin_probabilities(ref.p_loo, b), atol=tol)


@pytest.mark.parametrize(
    "estimator,sections",
    [
        ("categorical_nb", {}),
        ("categorical_nb", {"model": {"bins": BINS}}),
        ("categorical_nb", {"model": {"bins": BINS, "params": {"alpha": 0.3, "fit_prior": False}}}),
        ("bernoulli_nb", {"model": {"bins": BINS}}),
        ("multinomial_nb", {"model": {"bins": BINS, "params": {"alpha": 0.5}}}),
        ("gaussian_nb", {"model": {"bins": BINS}}),
    ],
)
def test_naive_bayes_equals_refit(tmp_path: Path, estimator: str, sections: dict) -> None:
    fast, ref, prep = run_both(tmp_path, awkward_frame(), estimator, NaiveBayesEngine(), **sections)
    assert_close(fast, ref, 1e-9)
    lonely = list(prep.classes).index("maybe")
    assert ref.p_loo[0, lonely] == 0.0 and fast.p_loo[0, lonely] == 0.0  # its class disappears


def test_gaussian_nb_follows_standard_scaler(tmp_path: Path) -> None:
    """Scaler mean/std downdated per record; x1 and x2 standardised on T \\ {t}."""
    df = awkward_frame()
    df.loc[1, "color"] = "red"  # see the ill-conditioned case below
    fast, ref, _ = run_both(tmp_path, df, "gaussian_nb", NaiveBayesEngine())
    assert_close(fast, ref, 1e-9)


@pytest.mark.parametrize("estimator", ["bernoulli_nb", "multinomial_nb"])
def test_discrete_nb_follows_scalers(tmp_path: Path, estimator: str) -> None:
    """BernoulliNB binarises standardised numerics at the mean of T \\ {t}; MultinomialNB
    min-max scales them to the extremes of T \\ {t} (unique minimum/maximum records, a
    constant column)."""
    df = awkward_frame()
    df["x3"] = np.random.default_rng(5).integers(0, 4, len(df)).astype(float)  # ties at the mean
    fast, ref, _ = run_both(tmp_path, df, estimator, NaiveBayesEngine())
    assert_close(fast, ref, 1e-9)


def test_gaussian_nb_category_seen_once_ill_conditioned(tmp_path: Path) -> None:
    """Removing the only 'purple' leaves a one-hot column of zeros with variance var_smoothing * 1:
    every class's log-likelihood gains -0.5e9 and sklearn's own answer carries ~1e-8 rounding,
    so this case is compared at 1e-6 (both sides are float-noise apart, not different models)."""
    fast, ref, _ = run_both(tmp_path, awkward_frame(), "gaussian_nb", NaiveBayesEngine())
    assert_close(fast, ref, 1e-6)


def test_preprocess_none_discrete_and_gaussian(tmp_path: Path) -> None:
    df = awkward_frame().drop(columns=["color", "size"])
    df["x1"] = df["x1"].abs()
    for est, params in (("gaussian_nb", {}), ("bernoulli_nb", {"binarize": 1.0}), ("multinomial_nb", {})):
        fast, ref, _ = run_both(tmp_path, df, est, NaiveBayesEngine(), model={"preprocess": "none", "params": params})
        assert_close(fast, ref, 1e-9)


@pytest.mark.parametrize("k,weights", [(1, "uniform"), (4, "distance")])
def test_knn_equals_refit_with_duplicates(tmp_path: Path, weights: str, k: int) -> None:
    df = awkward_frame(30)
    df = pd.concat([df, df.iloc[5:9]], ignore_index=True)  # exact duplicates: distance-0 ties
    model = {"bins": BINS, "params": {"n_neighbors": k, "weights": weights}}
    fast, ref, _ = run_both(tmp_path, df, "knn", KnnEngine(), model=model)
    assert_close(fast, ref, 1e-9)


def test_knn_raw_numeric(tmp_path: Path) -> None:
    df = awkward_frame(40).drop(columns=["color", "size"])
    model = {"preprocess": "none", "params": {"n_neighbors": 3}}
    fast, ref, _ = run_both(tmp_path, df, "knn", KnnEngine(), model=model)
    assert_close(fast, ref, 1e-9)


def test_categorical_counts_incremental_remove_equals_rebuild() -> None:
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 4, size=(30, 3))
    y = rng.integers(0, 2, size=30)
    c = CategoricalCounts.from_codes(codes, y, 2, np.array([4, 4, 4]), 1.0)
    c.remove(codes[7], int(y[7]))
    keep = np.arange(30) != 7
    d = CategoricalCounts.from_codes(codes[keep], y[keep], 2, np.array([4, 4, 4]), 1.0)
    np.testing.assert_array_equal(c.class_count, d.class_count)
    np.testing.assert_allclose(c.proba(codes), d.proba(codes), atol=1e-12)
    # and its leave-one-out equals removing then querying, by hand (naive Bayes formula)
    full, loo = d.loo_proba(codes[keep][:3], y[keep][:3])
    t_codes = codes[keep][0]
    e = CategoricalCounts.from_codes(codes[keep][1:], y[keep][1:], 2, np.array([4, 4, 4]), 1.0)
    manual = []
    for cls in range(2):
        n_c = e.class_count[cls]
        lp = np.log(n_c / e.class_count.sum())
        lp += sum(np.log((e.cat[i][cls, t_codes[i]] + 1) / (n_c + 4)) for i in range(3))
        manual.append(lp)
    manual = np.exp(manual - np.logaddexp(*manual))
    np.testing.assert_allclose(loo[0], manual, atol=1e-12)


def test_auto_picks_exact_and_refuses_with_reasons(tmp_path: Path, cli, mixed_csv: Path) -> None:
    spec = load_spec(write_spec(tmp_path / "nb.yaml", "categorical_nb"))
    data = tmp_path / "d.csv"
    awkward_frame().to_csv(data, index=False)
    prep = prepare(data, spec)
    assert select_engine("auto", spec, prep.template).name == "exact-naive-bayes"
    assert [e.name for e in EXACT_ENGINES] == ["exact-naive-bayes", "exact-knn", "exact-newton-logistic"]
    write_spec(tmp_path / "knn.yaml", "knn")  # numerics standardised on T: refused
    r = cli("pdtp", mixed_csv, "--model", tmp_path / "knn.yaml", "--engine", "exact", "--out", tmp_path / "o", "-q")
    assert r.code == 2
    assert "exact-knn: numerics standardised on T" in r.stderr
    write_spec(tmp_path / "mlp.yaml", "decision_tree")
    r = cli("pdtp", mixed_csv, "--model", tmp_path / "mlp.yaml", "--engine", "exact", "--out", tmp_path / "o2", "-q")
    assert r.code == 2 and "DecisionTreeClassifier is not" in r.stderr


def test_cli_reports_engine(tmp_path: Path, cli, mixed_csv: Path) -> None:
    write_spec(tmp_path / "nb.yaml", "categorical_nb", model={"bins": {"x1": [0.0]}})
    r = cli("pdtp", mixed_csv, "--model", tmp_path / "nb.yaml", "--out", tmp_path / "o", "-q")
    assert r.code in (0, 1)
    assert "engine exact-naive-bayes" in r.stdout
    table = pd.read_csv(tmp_path / "o" / "pdtp.csv")
    assert "dtp_upper" in table.columns

"""pdtp_raw(t) <= DTP(t) <= dtp_upper(t) for every record, with DTP(t) by brute force over every point.

Issue 18: the reference enumerates the whole product domain of small categorical data sets and
refits each model on T and on every T minus t with scikit-learn directly (its own encoders, no
mptool code), so DTP(t) = max over every x in X^m and class y of |ln p_T(y|x) - ln p_{T minus t}(y|x)|
on raw (unbinned) probabilities (Definition 4.2). mptool's numbers come from the CLI's pdtp.csv.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import write_spec
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import BernoulliNB, CategoricalNB, GaussianNB, MultinomialNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder

TOL = 1e-9
LR_PARAMS = {"C": 1.0, "solver": "newton-cg", "tol": 1e-12, "max_iter": 1000}


def _frame(rng: np.random.Generator, n: int, sizes: list[int], labels: list[str], p: list[float]) -> pd.DataFrame:
    cols = {f"f{i}": rng.choice([f"v{k}" for k in range(s)], n) for i, s in enumerate(sizes)}
    df = pd.DataFrame(cols)
    # the label depends on the first two features, so the models have something to learn
    score = (df["f0"] == "v0").astype(float) + 0.5 * (df["f1"] == "v1") + rng.normal(0, 0.7, n)
    order = np.argsort(np.argsort(score.to_numpy()))
    cum = np.cumsum(p)
    df["label"] = [labels[int(np.searchsorted(cum, (o + 0.5) / n))] for o in order]
    return df


def datasets() -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(18)
    out = {
        "three-features": _frame(rng, 40, [3, 2, 4], ["no", "yes"], [0.6, 0.4]),
        "rare-class": _frame(rng, 30, [2, 3, 2, 3], ["a", "b", "c"], [0.65, 0.28, 0.07]),
        "five-features-3-classes": _frame(rng, 60, [2, 3, 4, 2, 3], ["a", "b", "c"], [0.4, 0.35, 0.25]),
    }
    base = _frame(rng, 6, [2, 2, 2, 2, 2], ["no", "yes"], [0.5, 0.5])
    dup = pd.concat([base] * 4, ignore_index=True)
    dup.loc[[0, 7], "label"] = ["yes", "no"]  # duplicates that disagree on the label
    out["duplicates"] = dup
    single = _frame(rng, 50, [2, 3, 4], ["a", "b"], [0.6, 0.4])
    single.loc[49, "label"] = "z"  # a class of one record: it vanishes from T minus t
    out["singleton-class"] = single
    return out


def _reference(estimator: str, df: pd.DataFrame) -> np.ndarray:
    """DTP(t) of every record by brute force: refits on T minus t, every point of the domain.

    The encoders' categories are fixed (the whole domain), so their output does not depend on the
    rows they are fitted on: the data and the domain are encoded once, and each refit is the
    classifier's alone (the same numbers as refitting the encoder-plus-classifier pipeline).
    """
    feats = [c for c in df.columns if c != "label"]
    cats = [sorted(df[c].unique()) for c in feats]
    domain = pd.DataFrame(list(itertools.product(*cats)), columns=feats)
    classes = np.array(sorted(df["label"].unique()))

    if estimator == "categorical_nb":
        encoder = OrdinalEncoder(categories=cats)
    else:
        encoder = OneHotEncoder(categories=cats, sparse_output=False)
    encoder.fit(domain)
    X, D = encoder.transform(df[feats]), encoder.transform(domain)

    def model():
        if estimator == "categorical_nb":
            return CategoricalNB(alpha=1.0, min_categories=[len(c) for c in cats])
        if estimator == "bernoulli_nb":
            return BernoulliNB(alpha=1.0)
        if estimator == "multinomial_nb":
            return MultinomialNB(alpha=1.0)
        if estimator == "gaussian_nb":
            return GaussianNB()
        return LogisticRegression(**LR_PARAMS)

    def log_proba(m) -> np.ndarray:
        """ln p(y|x) in class order (log space: no underflow); -inf for a class the model lacks."""
        out = np.full((len(domain), len(classes)), -np.inf)
        with np.errstate(divide="ignore"):
            out[:, np.searchsorted(classes, m.classes_)] = m.predict_log_proba(D)
        return out

    y = df["label"].to_numpy()
    lp_full = log_proba(model().fit(X, y))
    dtp = np.empty(len(df))
    for t in range(len(df)):
        keep = np.arange(len(df)) != t
        lp_loo = log_proba(model().fit(X[keep], y[keep]))
        with np.errstate(invalid="ignore"):
            dtp[t] = np.abs(lp_full - lp_loo).max()
    return dtp


ESTIMATORS = ["categorical_nb", "bernoulli_nb", "multinomial_nb", "gaussian_nb", "logistic_regression"]


@pytest.mark.parametrize("estimator", ESTIMATORS)
@pytest.mark.parametrize("name", list(datasets()))
def test_every_record_within_its_bounds(tmp_path: Path, cli, estimator: str, name: str) -> None:
    df = datasets()[name]
    data = tmp_path / "d.csv"
    df.to_csv(data, index=False)
    params = {"logistic_regression": LR_PARAMS, "gaussian_nb": {}}.get(estimator, {"alpha": 1.0})
    spec = write_spec(tmp_path / "s.yaml", estimator, model={"params": params})
    r = cli("pdtp", data, "--model", spec, "--out", tmp_path / "o", "-q", "-j", "1")
    assert r.code in (0, 1), r.stderr
    got = pd.read_csv(tmp_path / "o" / "pdtp.csv").set_index("row").sort_index()
    assert list(got.index) == list(range(len(df)))
    assert got["dtp_upper"].notna().all(), f"{estimator} reports no bound"
    dtp = _reference(estimator, df.reset_index(drop=True))
    lower, upper = got["pdtp_raw"].to_numpy(), got["dtp_upper"].to_numpy()
    tol = TOL * np.maximum(1.0, np.where(np.isfinite(dtp), np.abs(dtp), 1.0))  # relative for huge values
    # pdtp_raw floors probabilities at 1e-12 (as bin_size 0), so it is finite and can only shrink a ratio
    assert np.all(np.isfinite(lower))
    assert np.all(lower <= dtp + tol), np.c_[lower, dtp]
    assert np.all((dtp <= upper + tol) | np.isinf(upper)), np.c_[dtp, upper][dtp > upper + tol]
    # infinite where a class vanishes, and else only where a probability underflowed: mptool's probabilities
    # are floats, 0 below e^-745 (GaussianNB on indicators), and the computed raw ratio is then infinite
    assert np.all(np.isinf(upper)[np.isinf(dtp)])
    assert np.all(~np.isinf(upper) | np.isinf(dtp) | (dtp > 700))
    assert np.all(got["pdtp"] <= got["dtp_upper_binned"] + TOL)  # the binned pair reads the same way


def test_the_papers_constant_is_not_a_posterior_bound(tmp_path: Path, cli) -> None:
    """Issue 18, item 1: max(PDTP, ln delta) of Prop. 6.5 (the old dtp_upper) is exceeded by the true DTP."""
    df = datasets()["three-features"]
    df.to_csv(tmp_path / "d.csv", index=False)
    spec = write_spec(tmp_path / "s.yaml", "categorical_nb", model={"params": {"alpha": 1.0}})
    assert cli("pdtp", tmp_path / "d.csv", "--model", spec, "--out", tmp_path / "o", "-q").code in (0, 1)
    got = pd.read_csv(tmp_path / "o" / "pdtp.csv").set_index("row").sort_index()
    ln_delta = json.loads((tmp_path / "o" / "pdtp.json").read_text())["summary"]["dtp"]["upper_bound"]["ln_delta"]
    dtp = _reference("categorical_nb", df)
    old = np.maximum(got["pdtp_raw"].to_numpy(), ln_delta)
    assert np.any(dtp > old + 1e-6)
    assert np.all(dtp <= got["dtp_upper"].to_numpy() + TOL)


def _numeric_frame() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    n = 36
    cat = rng.choice(["u", "v", "w"], n)
    num = rng.integers(0, 11, n).astype(float)
    num[:3] = [0.0, 10.0, 10.0]  # one record alone at the minimum: removing it moves MinMax's extreme
    label = np.where(num / 5 + (cat == "u") + rng.normal(0, 0.8, n) > 1.6, "yes", "no")
    return pd.DataFrame({"cat": cat, "num": num, "label": label})


def _numeric_model(estimator: str):
    from sklearn.compose import ColumnTransformer
    from sklearn.preprocessing import MinMaxScaler, StandardScaler

    scaler = MinMaxScaler(clip=True) if estimator == "multinomial_nb" else StandardScaler()
    pre = ColumnTransformer(
        [
            ("onehot", OneHotEncoder(categories=[["u", "v", "w"]], sparse_output=False), ["cat"]),
            ("numeric", scaler, ["num"]),
        ]
    )
    est = {
        "bernoulli_nb": BernoulliNB(alpha=1.0, binarize=0.0),
        "multinomial_nb": MultinomialNB(alpha=1.0),
        "gaussian_nb": GaussianNB(),
        "logistic_regression": LogisticRegression(**LR_PARAMS),
    }[estimator]
    return make_pipeline(pre, est)


@pytest.mark.parametrize("estimator", ["bernoulli_nb", "multinomial_nb", "gaussian_nb", "logistic_regression"])
def test_scaled_numeric_column_within_bound(tmp_path: Path, cli, estimator: str) -> None:
    """A scaler fitted on T moves with t: a grid of the numeric range (with every kink: the means and
    extremes of T and of T minus t) never shows a log-ratio above dtp_upper."""
    df = _numeric_frame()
    df.to_csv(tmp_path / "d.csv", index=False)
    params = {"logistic_regression": LR_PARAMS, "gaussian_nb": {}, "bernoulli_nb": {"alpha": 1.0, "binarize": 0.0}}.get(
        estimator, {"alpha": 1.0}
    )
    spec = write_spec(tmp_path / "s.yaml", estimator, model={"params": params})
    assert cli("pdtp", tmp_path / "d.csv", "--model", spec, "--out", tmp_path / "o", "-q", "-j", "1").code in (0, 1)
    got = pd.read_csv(tmp_path / "o" / "pdtp.csv").set_index("row").sort_index()
    X, y = df[["cat", "num"]], df["label"].to_numpy()
    full = _numeric_model(estimator).fit(X, y)
    for t in range(len(df)):
        keep = np.arange(len(df)) != t
        means = [df["num"].mean(), df["num"][keep].mean()]
        kinks = np.r_[
            np.linspace(0, 10, 41), df["num"], means, np.nextafter(means, -np.inf), np.nextafter(means, np.inf)
        ]
        grid = pd.DataFrame(list(itertools.product(["u", "v", "w"], np.clip(kinks, 0, 10))), columns=["cat", "num"])
        loo = _numeric_model(estimator).fit(X[keep], y[keep])
        dtp_grid = np.abs(np.log(full.predict_proba(grid)) - np.log(loo.predict_proba(grid))).max()
        assert got["pdtp_raw"][t] <= dtp_grid + TOL
        assert dtp_grid <= got["dtp_upper"][t] + TOL, (t, dtp_grid, got["dtp_upper"][t])

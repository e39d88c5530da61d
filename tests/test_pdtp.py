"""`mptool pdtp` against naive leave-one-out computations written independently here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import mixed_frame, run_cli, write_spec
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from mptool.privacy.calibration import bin_probabilities


def naive_bin(p: np.ndarray, width: float = 0.01) -> np.ndarray:
    """Bin centre by explicit edge comparison (independent of mptool.privacy.calibration)."""
    out = np.empty_like(p, dtype=float)
    edges = [round(k * width, 10) for k in range(int(round(1 / width)) + 1)]
    for i, v in np.ndenumerate(p):
        k = max(j for j in range(len(edges) - 1) if edges[j] <= v + 1e-12)
        out[i] = (edges[k] + edges[k + 1]) / 2
    return out


def naive_pdtp(full: np.ndarray, loo: np.ndarray) -> np.ndarray:
    return np.array(
        [max(abs(np.log(a) - np.log(b)) for a, b in zip(f, g, strict=True)) for f, g in zip(full, loo, strict=True)]
    )


def run_pdtp(tmp_path: Path, csv: Path, spec: Path, *extra: str) -> tuple[int, pd.DataFrame, dict]:
    out = tmp_path / "out"
    res = run_cli("pdtp", csv, "--model", spec, "--out", out, "--quiet", "--force", *extra)
    assert res.code in (0, 1), res.stderr
    table = pd.read_csv(out / "pdtp.csv")
    summary = json.loads((out / "pdtp.json").read_text())["summary"]
    return res.code, table, summary


def categorical_nb_proba(X: pd.DataFrame, y: np.ndarray, x: pd.Series, domains: dict, classes: list, alpha: float):
    """Laplace-smoothed categorical naive Bayes, straight from the formula."""
    logp = []
    for c in classes:
        rows = X[y == c]
        if len(rows) == 0:
            logp.append(-np.inf)
            continue
        lp = np.log(len(rows) / len(X))
        for col, dom in domains.items():
            lp += np.log((np.sum(rows[col] == x[col]) + alpha) / (len(rows) + alpha * len(dom)))
        logp.append(lp)
    logp = np.array(logp)
    p = np.exp(logp - logp[np.isfinite(logp)].max())
    return p / p.sum()


@pytest.mark.parametrize("bin_size", [0.01, 0.0])
def test_categorical_nb_matches_naive_formula(tmp_path, bin_size):
    df = mixed_frame(50, seed=3)[["color", "size", "x2", "label"]]
    csv = tmp_path / "d.csv"
    df.to_csv(csv, index=False)
    spec = write_spec(
        tmp_path / "s.yaml", "categorical_nb", model={"params": {"alpha": 1.0}}, output={"bin_size": bin_size}
    )
    _, table, summary = run_pdtp(tmp_path, csv, spec, "--engine", "refit", "--jobs", "1")
    X, y = df.drop(columns="label"), df["label"].to_numpy()
    classes = sorted(set(y))
    domains = {c: sorted(X[c].unique()) for c in X.columns}
    full = np.array([categorical_nb_proba(X, y, X.iloc[i], domains, classes, 1.0) for i in range(len(X))])
    loo = np.array(
        [
            categorical_nb_proba(X.drop(index=i), np.delete(y, i), X.iloc[i], domains, classes, 1.0)
            for i in range(len(X))
        ]
    )
    if bin_size:
        full, loo = naive_bin(full), naive_bin(loo)
    expected = naive_pdtp(full, loo)
    np.testing.assert_allclose(table["pdtp"].to_numpy(), expected, atol=1e-9, rtol=0)
    assert summary["max"] == pytest.approx(expected.max(), abs=1e-9)
    assert list(table["row"]) == list(range(50))


def hand_pipeline(estimator, X: pd.DataFrame) -> Pipeline:
    cats = [sorted(X["color"].unique()), sorted(X["size"].unique())]
    pre = ColumnTransformer(
        [
            ("cat", OneHotEncoder(categories=cats, sparse_output=False), ["color", "size"]),
            ("num", StandardScaler(), ["x1", "x2"]),
        ]
    )
    return Pipeline([("pre", pre), ("clf", estimator)])


@pytest.mark.parametrize(
    "name,make,n",
    [
        # n records, n + 1 fits by mptool and n + 1 by hand (was 50 and 30: the same comparison at twice the fits)
        ("logistic_regression", lambda: LogisticRegression(max_iter=1000, random_state=0), 24),
        (
            "mlp",
            lambda: MLPClassifier(
                hidden_layer_sizes=(64,), activation="tanh", learning_rate_init=0.01, max_iter=100, random_state=0
            ),
            16,
        ),
    ],
)
def test_lr_and_mlp_match_naive_refit(tmp_path, name, make, n):
    df = mixed_frame(n, seed=5)
    csv = tmp_path / "d.csv"
    df.to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", name)
    # the noise floor (20 more MLP fits) is not compared here: test_honest checks it
    _, table, _ = run_pdtp(tmp_path, csv, spec, "--engine", "refit", "--jobs", "1", "--noise-floor", "0")
    X, y = df.drop(columns="label"), df["label"].to_numpy()
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        full_model = hand_pipeline(make(), X).fit(X, y)
        full = full_model.predict_proba(X)
        loo = np.vstack(
            [
                hand_pipeline(make(), X).fit(X.drop(index=i), np.delete(y, i)).predict_proba(X.iloc[[i]])
                for i in range(n)
            ]
        )
    expected = naive_pdtp(naive_bin(full), naive_bin(loo))
    np.testing.assert_allclose(table["pdtp"].to_numpy(), expected, atol=1e-9, rtol=0)


def test_binning_edge_values():
    p = np.array([0.0, 0.004999, 0.005, 0.01, 0.29, 0.5, 0.995, 0.999999, 1.0])
    np.testing.assert_allclose(
        bin_probabilities(p, 0.01), [0.005, 0.005, 0.005, 0.015, 0.295, 0.505, 0.995, 0.995, 0.995], atol=1e-12
    )
    np.testing.assert_allclose(bin_probabilities(p, 0.01), naive_bin(p), atol=1e-12)
    # 0 disables binning: probabilities are only floored
    np.testing.assert_allclose(bin_probabilities(np.array([0.0, 0.3]), 0.0), [1e-12, 0.3])
    # a width that does not divide 1: the last bin [0.9, 1] is narrower
    np.testing.assert_allclose(bin_probabilities(np.array([0.0, 0.3, 0.95, 1.0]), 0.3), [0.15, 0.45, 0.95, 0.95])


def test_class_absent_after_removal(tmp_path):
    """A class with one record: without it the class has probability 0, binned to 0.005."""
    df = mixed_frame(30, seed=1)
    df.loc[7, "label"] = "rare"
    csv = tmp_path / "d.csv"
    df.to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", "logistic_regression")
    out = tmp_path / "out"
    res = run_cli("pdtp", csv, "--model", spec, "--out", out, "--engine", "refit", "--jobs", "1", "--show-values")
    assert res.code == 1
    assert "single training record" in res.stderr
    table = pd.read_csv(out / "pdtp.csv").set_index("row")
    r = table.loc[7]
    assert r["worst_class"] == "rare"
    assert r["p_loo"] == pytest.approx(0.005)
    assert r["pdtp"] == pytest.approx(np.log(r["p_full"] / 0.005), abs=1e-9)


def test_exit_codes_follow_the_threshold(tmp_path, mixed_csv):
    spec = write_spec(tmp_path / "s.yaml", "logistic_regression")
    ok = run_cli("pdtp", mixed_csv, "--model", spec, "--out", tmp_path / "a", "--threshold", "100", "-q")
    bad = run_cli("pdtp", mixed_csv, "--model", spec, "--out", tmp_path / "b", "--threshold", "0.001", "-q")
    assert ok.code == 0 and "DTP-1 holds" in ok.stdout
    assert bad.code == 1 and "DTP-1 VIOLATED" in bad.stdout
    summary = json.loads((tmp_path / "b" / "pdtp.json").read_text())["summary"]
    assert summary["verdict"] == "fail" and summary["violations"] > 0


def test_no_argument_demo_uses_bundled_adult(tmp_path):
    res = run_cli("pdtp", "--out", tmp_path / "demo", "--sample", "25")
    assert res.code in (0, 1), res.stderr
    assert "bundled UCI Adult" in res.stderr
    assert "DTP-1" in res.stdout
    summary = json.loads((tmp_path / "demo" / "pdtp.json").read_text())["summary"]
    assert summary["n"] == 25 and summary["n_train"] == 1000 and summary["estimator"] == "categorical_nb"


def test_records_option_selects_csv_rows(tmp_path, mixed_csv):
    spec = write_spec(tmp_path / "s.yaml", "gaussian_nb")
    _, table, _ = run_pdtp(tmp_path, mixed_csv, spec, "--records", "9,0,5")
    assert list(table["row"]) == [0, 5, 9]
    _, full, _ = run_pdtp(tmp_path, mixed_csv, spec)
    np.testing.assert_allclose(table["pdtp"], full.set_index("row").loc[[0, 5, 9], "pdtp"], atol=1e-12)
    res = run_cli("pdtp", mixed_csv, "--model", spec, "--records", "0,999", "--out", tmp_path / "x")
    assert res.code == 2 and "999" in res.stderr


def test_same_bytes_for_any_jobs(tmp_path):
    # 24 records (was 60): at --jobs 2 still 16 chunks (parallel.chunk_positions) spread over two workers
    csv = tmp_path / "d.csv"
    mixed_frame(24).to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", "random_forest", model={"params": {"n_estimators": 5}})
    # the forest's noise floor (order-dependent) runs at both --jobs on 5 records, not the default 20 (half the fits)
    flags = ("-q", "--engine", "refit", "--noise-floor", "5")
    one = run_cli("pdtp", csv, "--model", spec, "--out", tmp_path / "j1", "--jobs", "1", *flags)
    two = run_cli("pdtp", csv, "--model", spec, "--out", tmp_path / "j2", "--jobs", "2", *flags)
    assert one.code == two.code
    assert b"above_noise_floor" in (tmp_path / "j1" / "pdtp.csv").read_bytes().splitlines()[0]  # floor measured
    assert (tmp_path / "j1" / "pdtp.csv").read_bytes() == (tmp_path / "j2" / "pdtp.csv").read_bytes()


def test_results_are_not_overwritten_without_force(tmp_path, mixed_csv):
    spec = write_spec(tmp_path / "s.yaml", "gaussian_nb")
    first = run_cli("pdtp", mixed_csv, "--model", spec, "--out", tmp_path / "o", "-q")
    again = run_cli("pdtp", mixed_csv, "--model", spec, "--out", tmp_path / "o", "-q")
    assert first.code in (0, 1)
    assert again.code == 2 and "--force" in again.stderr

"""DTP beyond PDTP: stability deltas by hand, the bound against brute force over X^m, the
query-set estimate against a naive refit loop, and the Lipschitz constant by hand."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import write_spec

from mptool.inputs.models import fit, proba_in
from mptool.inputs.prepare import fit_checked, prepare
from mptool.inputs.spec import load_spec
from mptool.loo import LooRequest, select_engine
from mptool.loo.linear import lipschitz_constant
from mptool.loo.naive_bayes import nb_delta
from mptool.privacy.calibration import bin_probabilities
from mptool.privacy.stability import beyond_pdtp, stability_bound

#: n = 6, classes a (4) and b (2), m = 2 features with 3 and 2 values.
TINY = pd.DataFrame(
    {
        "f1": ["x", "y", "z", "x", "y", "x"],
        "f2": ["p", "q", "p", "p", "q", "q"],
        "label": ["a", "a", "a", "a", "b", "b"],
    }
)


def prepared(tmp_path: Path, df: pd.DataFrame, estimator: str, **sections):
    data = tmp_path / "d.csv"
    df.to_csv(data, index=False)
    spec = load_spec(write_spec(tmp_path / "s.yaml", estimator, **sections))
    prep = prepare(data, spec)
    full = fit_checked(prep.template, prep.train)
    engine = select_engine("auto", spec, prep.template)
    req = LooRequest(spec, prep.template, prep.train, full, prep.classes, np.arange(prep.train.n), 1)
    return prep, req, engine.run(req, lambda n: None)


def nocontext(n: int, label: str):
    from contextlib import nullcontext

    return nullcontext(lambda k: None)


def test_delta_formulas_by_hand() -> None:
    # Prop. 6.5: ((n_ymin + v) / n_ymin)^(m-1) * n/(n-1) = (5/2)^1 * 6/5 = 3
    assert nb_delta(6, 2, 2, 3) == pytest.approx(3.0)
    # Prop. 6.4: (n_ymin / (n_ymin - 1))^(m-1) * n/(n-1) = 2 * 6/5 = 2.4
    assert nb_delta(6, 2, 2) == pytest.approx(2.4)
    assert nb_delta(6, 1, 2) == math.inf  # a class of one: removing it leaves no estimate


def test_laplace_bound_on_tiny_data(tmp_path: Path) -> None:
    prep, req, result = prepared(tmp_path, TINY, "categorical_nb", model={"params": {"alpha": 1.0}})
    bound = stability_bound(prep.template, prep.train, prep.classes)
    assert bound.kind == "stability" and "6.5" in bound.reason
    assert bound.log_delta == pytest.approx(math.log(3.0))
    cols, summary = beyond_pdtp(req, result, None, "self", 0.01, nocontext)
    raw = np.abs(np.log(result.p_full) - np.log(result.p_loo)).max(axis=1)
    # Was max(raw PDTP, ln delta) with the paper's delta = 3: a bound on the class scores, not on the
    # posterior (issue 18). Now the exact per-record bound. Record 4 (f1=y, f2=q, class b; N_b = 2, n = 6):
    # score ratio g(x) = N_b/(N_b-1) * prod_i theta_bi(x_i)/theta'_bi(x_i) with Laplace smoothing;
    # its largest value is at x_t: 2 * ((2/5)/(1/4)) * ((3/4)/(2/3)) = 3.6, its smallest
    # 2 * ((2/5)/(2/4)) * ((1/4)/(1/3)) = 1.2 > 1, so the bound is ln 3.6.
    assert cols["dtp_upper"][4] == pytest.approx(math.log(3.6), abs=1e-12)
    assert np.all(cols["dtp_upper"] >= raw - 1e-12)
    assert summary["upper_bound"]["kind"] == "stability"


def test_unsmoothed_bound_takes_the_smaller_delta(tmp_path: Path) -> None:
    TINY.to_csv(tmp_path / "d.csv", index=False)
    spec = load_spec(write_spec(tmp_path / "s.yaml", "categorical_nb", model={"params": {"alpha": 0.0}}))
    prep = prepare(tmp_path / "d.csv", spec)
    bound = stability_bound(prep.template, prep.train, prep.classes)
    # Prop. 6.4 gives 2.4, Prop. 6.7 gives (4/3)^3 = 2.370...: the smaller holds
    assert bound.log_delta == pytest.approx(math.log(min(2.4, (4 / 3) ** 3)))


def test_bound_holds_over_the_whole_domain(tmp_path: Path) -> None:
    """Brute force DTP(t) = max over every x in X^m and y (Definition 4.2) <= dtp_upper(t)."""
    rng = np.random.default_rng(1)
    n = 40
    df = pd.DataFrame(
        {
            "f1": rng.choice(list("uvw"), n),
            "f2": rng.choice(list("pq"), n),
            "f3": rng.choice(list("rst"), n),
            "label": rng.choice(["a", "b"], n, p=[0.6, 0.4]),
        }
    )
    prep, req, result = prepared(tmp_path, df, "categorical_nb")
    cols, _ = beyond_pdtp(req, result, None, "self", 0.01, nocontext)
    T = prep.train
    domain = pd.DataFrame(list(itertools.product("uvw", "pq", "rst")), columns=["f1", "f2", "f3"])
    p_full = proba_in(req.full_model, domain, prep.classes)
    for t in range(T.n):
        keep = np.arange(T.n) != t
        p_loo = proba_in(fit(prep.template, T.X.iloc[keep], T.y[keep]), domain, prep.classes)
        dtp_t = np.abs(np.log(p_full) - np.log(p_loo)).max()
        assert dtp_t <= cols["dtp_upper"][t] + 1e-12


def naive_query_max(prep, queries: pd.DataFrame, bin_size: float) -> np.ndarray:
    T = prep.train
    full = fit(prep.template, T.X, T.y)
    a = np.log(bin_probabilities(proba_in(full, queries, prep.classes), bin_size))
    out = []
    for t in range(T.n):
        keep = np.arange(T.n) != t
        m = fit(prep.template, T.X.iloc[keep], T.y[keep])
        b = np.log(bin_probabilities(proba_in(m, queries, prep.classes), bin_size))
        out.append(np.abs(a - b).max())
    return np.array(out)


@pytest.mark.parametrize("estimator", ["categorical_nb", "decision_tree"])
def test_query_set_train_equals_naive_loop(tmp_path: Path, estimator: str, mixed_csv: Path) -> None:
    df = pd.read_csv(mixed_csv).head(30)
    prep, req, result = prepared(tmp_path, df, estimator, model={"bins": {"x1": [0.0]}})
    cols, summary = beyond_pdtp(req, result, prep.train.X, "train", 0.01, nocontext)
    np.testing.assert_allclose(cols["dtp_queries"], naive_query_max(prep, prep.train.X, 0.01), atol=1e-12)
    assert summary["queries"]["n_queries"] == 30
    pd_self = np.abs(
        np.log(bin_probabilities(result.p_full, 0.01)) - np.log(bin_probabilities(result.p_loo, 0.01))
    ).max(axis=1)
    assert np.all(cols["dtp_queries"] >= pd_self - 1e-12)  # x_t is among the queries


def test_queries_file_on_cli(tmp_path: Path, cli, mixed_csv: Path) -> None:
    spec = write_spec(tmp_path / "nb.yaml", "categorical_nb", model={"bins": {"x1": [0.0]}})
    q = tmp_path / "q.csv"
    pd.read_csv(mixed_csv).head(5).drop(columns=["label"]).to_csv(q, index=False)
    r = cli("pdtp", mixed_csv, "--model", spec, "--queries", q, "--out", tmp_path / "o", "-q")
    assert r.code in (0, 1), r.stderr
    table = pd.read_csv(tmp_path / "o" / "pdtp.csv")
    assert table["dtp_queries"].notna().all()
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"color": ["red"]}).to_csv(bad, index=False)
    r = cli("pdtp", mixed_csv, "--model", spec, "--queries", bad, "--out", tmp_path / "o2", "-q")
    assert r.code == 2 and "lacks feature column" in r.stderr


def test_knn_has_no_upper_bound(tmp_path: Path, mixed_csv: Path) -> None:
    df = pd.read_csv(mixed_csv).head(30)
    prep, req, result = prepared(tmp_path, df, "knn", model={"bins": {"x1": [0.0], "x2": [2.0]}})
    cols, summary = beyond_pdtp(req, result, None, "self", 0.01, nocontext)
    assert np.isnan(cols["dtp_upper"]).all()
    assert "not training stable" in summary["upper_bound"]["why"]


def test_lipschitz_constant_by_hand_and_bound_holds(tmp_path: Path) -> None:
    """One categorical block (contributes 1) and a numeric column in [-3, 5]: binary L = 1 * (1 + 5 + 1) = 7."""
    rng = np.random.default_rng(2)
    n = 30
    num = rng.uniform(-3, 5, n).round(2)
    num[0], num[1] = -3.0, 5.0
    cat = rng.choice(list("abc"), n)
    label = np.where(num + (cat == "a") + rng.normal(0, 1.5, n) > 1, "yes", "no")
    df = pd.DataFrame({"cat": cat, "num": num, "label": label})
    prep, req, result = prepared(tmp_path, df, "logistic_regression", model={"params": {"tol": 1e-10}})
    assert result.engine == "exact-newton-logistic"
    L = lipschitz_constant(prep.template, prep.train.schema, 2)
    assert L == pytest.approx(7.0)
    cols, summary = beyond_pdtp(req, result, None, "self", 0.01, nocontext)
    assert summary["upper_bound"]["kind"] == "lipschitz"
    # Was equal to Theorem 6.9's L * ||u_T - u_T\\t||_inf; the exact per-block bound is never above it.
    assert np.all(cols["dtp_upper"] <= 7.0 * result.param_shift + 1e-12)
    assert np.all(cols["dtp_upper"] > 0)
    # brute force over a grid of the domain: |log p_T - log p_T\t| <= dtp_upper(t)
    grid = pd.DataFrame(list(itertools.product("abc", np.linspace(-3, 5, 9))), columns=["cat", "num"])
    T = prep.train
    pf = proba_in(req.full_model, grid, prep.classes)
    for t in range(0, T.n, 5):
        keep = np.arange(T.n) != t
        pl = proba_in(fit(prep.template, T.X.iloc[keep], T.y[keep]), grid, prep.classes)
        assert np.abs(np.log(pf) - np.log(pl)).max() <= cols["dtp_upper"][t] + 1e-6

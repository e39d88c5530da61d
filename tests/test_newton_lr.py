"""The exact Newton engine for L2 logistic regression against tight scikit-learn refits.

The reference is the refit engine with ``solver: newton-cholesky, tol: 1e-12``: scikit-learn's
own Newton solver, stopped on its gradient. (lbfgs at ``tol 1e-12`` is not a reference: it
stops on its relative-decrease test, ftol = 64 eps, with a mean gradient still ~1e-8, and its
probabilities differ from the optimum by ~1e-7 on 1,000 Adult records.) The engine's answer
does not depend on the spec's solver or tol: it is the optimum of the objective they share.

Every dataset has one-hot and standardised numeric columns, a constant column and duplicate
records; the multinomial ones a class with two records and a class with one (whose removal
leaves K - 1 classes, or a binary problem).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import mixed_frame, write_spec
from threadpoolctl import threadpool_limits

from mptool.inputs.models import fit
from mptool.inputs.prepare import fit_checked, prepare
from mptool.inputs.spec import load_spec
from mptool.loo import LooRequest, RefitEngine, newton, select_engine
from mptool.loo.linear import NewtonLogisticEngine, raw_params
from mptool.privacy.calibration import bin_probabilities
from mptool.privacy.dtp import pdtp
from mptool.runtime.errors import InputError

TIGHT = {"solver": "newton-cholesky", "tol": 1e-12, "max_iter": 1000}


def frame(n: int = 26, labels: dict[int, str] | None = None, seed: int = 3) -> pd.DataFrame:
    """mixed_frame plus a constant column, three duplicated records and relabelled rows."""
    df = mixed_frame(n, seed)
    df["const"] = 3.0
    for row, label in (labels or {}).items():
        df.loc[row, "label"] = label
    return pd.concat([df, df.iloc[7:10]], ignore_index=True)


def request(tmp_path: Path, df: pd.DataFrame, params: dict, jobs: int = 1, backend: str = "loky"):
    data = tmp_path / "d.csv"
    df.to_csv(data, index=False)
    spec = load_spec(write_spec(tmp_path / "s.yaml", "logistic_regression", model={"params": params}))
    prep = prepare(data, spec)
    assert NewtonLogisticEngine().refuses(spec, prep.template) is None
    full = fit_checked(prep.template, prep.train)
    return LooRequest(spec, prep.template, prep.train, full, prep.classes, np.arange(prep.train.n), jobs, backend)


def assert_matches_refit(exact, ref) -> None:
    """|PDTP difference| <= 1e-6; raw and binned (0.01, 0.05) probabilities within 1e-8."""
    for a, b in ((exact.p_full, ref.p_full), (exact.p_loo, ref.p_loo)):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-8)
        for size in (0.01, 0.05):
            np.testing.assert_allclose(bin_probabilities(a, size), bin_probabilities(b, size), rtol=0, atol=1e-8)
    with np.errstate(divide="ignore", invalid="ignore"):  # p 0 (vanished class, saturated): inf or nan on both sides
        d_exact, d_ref = pdtp(exact.p_full, exact.p_loo).pdtp, pdtp(ref.p_full, ref.p_loo).pdtp
    finite = np.isfinite(d_ref)
    assert np.array_equal(finite, np.isfinite(d_exact))
    assert np.abs(d_exact[finite] - d_ref[finite]).max() <= 1e-6


def run_both(req):
    with threadpool_limits(1):
        return NewtonLogisticEngine().run(req, lambda n: None), RefitEngine().run(req, lambda n: None)


@pytest.mark.parametrize(
    "params",
    [{}, {"fit_intercept": False}, {"C": 0.05}, {"C": 50.0}],
    ids=["intercept", "no-intercept", "C=0.05", "C=50"],
)
def test_binary_equals_tight_refit(tmp_path: Path, params: dict) -> None:
    exact, ref = run_both(request(tmp_path, frame(), {**TIGHT, **params}))
    assert exact.engine == "exact-newton-logistic"
    assert_matches_refit(exact, ref)


@pytest.mark.parametrize(
    "labels,params",
    [
        ({0: "maybe", 1: "maybe", 2: "never", 3: "never", 4: "never"}, {}),  # 4 classes, one with 2 records
        ({0: "maybe", 1: "maybe", 2: "never", 3: "never", 4: "never"}, {"fit_intercept": False}),
        ({0: "maybe", 1: "never", 2: "never"}, {}),  # 'maybe' alone: removing it leaves 3 classes
        ({0: "maybe"}, {"fit_intercept": False}),  # 3 classes, 'maybe' alone: removing it leaves a binary problem
    ],
    ids=["4-classes", "4-classes-no-intercept", "class-vanishes", "to-binary-no-intercept"],
)
def test_multinomial_equals_tight_refit(tmp_path: Path, labels: dict, params: dict) -> None:
    exact, ref = run_both(request(tmp_path, frame(labels=labels), {**TIGHT, **params}))
    assert exact.p_loo.shape[1] == len(set(labels.values())) + 2
    assert_matches_refit(exact, ref)
    if list(labels.values()).count("maybe") == 1:
        assert exact.p_loo[0, 0] == 0.0 and np.isinf(exact.param_shift[0])  # its class is gone


def test_weak_penalty_on_separable_data(tmp_path: Path) -> None:
    """C = 1e6 on linearly separable data: probabilities saturate and the Hessian is nearly
    singular; Newton (damped, full steps once the decrement is negligible) still converges."""
    df = frame()
    df["label"] = np.where(df["x1"] > 0, "yes", "no")
    exact, ref = run_both(request(tmp_path, df, {**TIGHT, "C": 1e6, "max_iter": 10000}))
    assert_matches_refit(exact, ref)


def test_result_does_not_depend_on_solver_or_tol(tmp_path: Path) -> None:
    """scikit-learn's default lbfgs at tol 1e-4 only gives the starting point: same optima."""
    df = frame(labels={0: "maybe", 1: "maybe"})
    a = NewtonLogisticEngine().run(request(tmp_path, df, TIGHT), lambda n: None)
    b = NewtonLogisticEngine().run(request(tmp_path, df, {"solver": "lbfgs", "tol": 1e-4}), lambda n: None)
    np.testing.assert_allclose(a.p_full, b.p_full, rtol=0, atol=1e-10)
    np.testing.assert_allclose(a.p_loo, b.p_loo, rtol=0, atol=1e-9)


def test_parameter_shift_in_raw_coordinates(tmp_path: Path) -> None:
    """param_shift = max |u_T - u_T\\t| in raw-feature coordinates, checked against refits
    whose scaler is fitted on T \\ {t} (its own mean and scale), with and without intercept."""
    for params in ({}, {"fit_intercept": False}):
        req = request(tmp_path, frame(), {**TIGHT, **params})
        exact = NewtonLogisticEngine().run(req, lambda n: None)
        T = req.train

        def raw(model):
            ct, est = model.steps[0][1], model.steps[-1][1]
            sc = ct.named_transformers_["numeric"].steps[-1][1]
            sl = ct.output_indices_["numeric"]
            return raw_params(est.coef_, est.intercept_, sc.mean_, sc.scale_, sl)

        for t in (0, 5, 11, 27):  # 27: a duplicate
            keep = np.arange(T.n) != t
            want = np.abs(raw(req.full_model) - raw(fit(req.template, T.X.iloc[keep], T.y[keep]))).max()
            assert exact.param_shift[t] == pytest.approx(want, abs=1e-7)


def test_batches_make_results_independent_of_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches are fixed before records are spread over workers: byte-identical at any --jobs."""
    monkeypatch.setattr(newton, "BATCH_FLOATS", 7 * 40)  # 7 records per batch, several batches
    df = frame(labels={0: "maybe", 1: "maybe"})
    one = NewtonLogisticEngine().run(request(tmp_path, df, {}), lambda n: None)
    two = NewtonLogisticEngine().run(request(tmp_path, df, {}, jobs=2, backend="threading"), lambda n: None)
    assert one.p_loo.tobytes() == two.p_loo.tobytes() and one.p_full.tobytes() == two.p_full.tobytes()


def test_auto_uses_the_exact_engine_at_any_tol(tmp_path: Path) -> None:
    for params in ({}, {"tol": 1e-2}, {"solver": "saga"}, {"solver": "newton-cg", "penalty": "l2"}):
        spec = load_spec(write_spec(tmp_path / "s.yaml", "logistic_regression", model={"params": params}))
        prep = prepare(_csv(tmp_path), spec)
        assert select_engine("auto", spec, prep.template).name == "exact-newton-logistic"


def _csv(tmp_path: Path) -> Path:
    path = tmp_path / "d.csv"
    frame().to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    "params,why",
    [
        ({"l1_ratio": 1.0, "solver": "saga"}, "l1_ratio 1.0"),
        ({"penalty": "l1", "solver": "liblinear"}, "penalty 'l1'"),
        ({"solver": "liblinear"}, "solver 'liblinear' penalises the intercept"),
        ({"class_weight": "balanced"}, "class_weight"),
        ({"penalty": None}, "no L2 penalty"),
    ],
)
def test_refused_specs_fall_back_to_refit_under_auto(tmp_path: Path, params: dict, why: str) -> None:
    spec = load_spec(write_spec(tmp_path / "s.yaml", "logistic_regression", model={"params": params}))
    prep = prepare(_csv(tmp_path), spec)
    assert why in (NewtonLogisticEngine().refuses(spec, prep.template) or "")
    assert select_engine("auto", spec, prep.template).name == "refit"
    with pytest.raises(InputError, match="exact-newton-logistic: " + why.split()[0]):
        select_engine("exact", spec, prep.template)


def test_non_convergence_is_an_error_not_a_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    req = request(tmp_path, frame(), {})
    monkeypatch.setattr(newton, "MAX_NEWTON", 1)
    with pytest.raises(InputError, match="did not converge on T"):
        NewtonLogisticEngine().run(req, lambda n: None)
    monkeypatch.undo()
    monkeypatch.setattr(newton, "_converged", lambda size, last: np.zeros(len(size), dtype=bool))
    monkeypatch.setattr(newton, "MAX_CHORD", 1)  # every record falls back to damped Newton ...
    monkeypatch.setattr(newton, "MAX_FALLBACK", 1)  # ... which gives up after one iteration
    with pytest.raises(InputError, match=r"did not converge without CSV row \d+ .*--engine refit"):
        NewtonLogisticEngine().run(req, lambda n: None)

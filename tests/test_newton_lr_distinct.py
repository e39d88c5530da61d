"""The exact logistic engine's passes over distinct design rows and its one solve per group of equal records.

Issue 28 item 3. ``DistinctRows`` merges equal design rows (weighted by their records, with
their label counts) for every leave-one-out gradient pass, and records with the same design
row, label and raw numerics share one solve of A(T \\ {t}) (they leave the same multiset).
Checked here against the plain per-record definition of the gradient and against an
independent full Newton solve of every T \\ {t} from zero (``newton_solve`` on the rows of
T \\ {t}, exact Hessian, none of the leave-one-out machinery), on data full of duplicates:
binary and multinomial, with and without intercept (the no-intercept case moves the design
by the scaler's mean shift), and an ill-conditioned case (C = 1e4 on nearly separable data).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import mixed_frame, write_spec
from scipy.special import softmax

from mptool.inputs.prepare import fit_checked, prepare
from mptool.inputs.spec import load_spec
from mptool.loo import LooRequest, linear, newton
from mptool.loo.linear import NewtonLogisticEngine
from mptool.privacy.dtp import pdtp_of, raw_pdtp


def duplicated(labels: dict[int, str] | None = None, separable: bool = False) -> pd.DataFrame:
    """18 base records, most repeated 2-4 times, some repeats with the other label (same row, new record)."""
    df = mixed_frame(18, seed=5)
    if separable:
        df["label"] = np.where(df["x1"] > 0.1, "yes", "no")
    for row, label in (labels or {}).items():
        df.loc[row, "label"] = label
    reps = df.iloc[[3, 3, 4, 4, 4, 5, 6, 7, 7, 9, 11, 12, 12, 12, 15]].copy()
    flip = reps.iloc[[1, 6]].copy()  # same design row, other label: a different record
    flip["label"] = np.where(flip["label"] == "yes", "no", "yes")
    return pd.concat([df, reps, flip], ignore_index=True)


def request(tmp_path: Path, df: pd.DataFrame, params: dict, jobs: int = 1, backend: str = "loky") -> LooRequest:
    data = tmp_path / "d.csv"
    df.to_csv(data, index=False)
    spec = load_spec(write_spec(tmp_path / "s.yaml", "logistic_regression", model={"params": params}))
    prep = prepare(data, spec)
    full = fit_checked(prep.template, prep.train)
    return LooRequest(spec, prep.template, prep.train, full, prep.classes, np.arange(prep.train.n), jobs, backend)


CASES = [
    (None, {}, False),
    (None, {"fit_intercept": False}, False),
    ({0: "maybe", 1: "maybe", 2: "maybe"}, {}, False),  # three classes
    ({0: "maybe", 1: "maybe", 2: "maybe"}, {"fit_intercept": False}, False),
    (None, {"C": 1e4, "max_iter": 5000}, True),  # ill-conditioned: weak penalty, nearly separable
]
IDS = ["binary", "binary-no-intercept", "multinomial", "multinomial-no-intercept", "ill-conditioned"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple]:
    """Each case's request, setup and engine result, computed once for the module."""
    out = {}
    for case_id, (labels, params, separable) in zip(IDS, CASES, strict=True):
        req = request(tmp_path_factory.mktemp(case_id), duplicated(labels, separable), params)
        out[case_id] = (req, linear._setup(req), NewtonLogisticEngine().run(req, lambda n: None))
    return out


@pytest.mark.parametrize("case_id", IDS)
def test_distinct_row_gradient_equals_the_plain_sum(runs: dict, case_id: str) -> None:
    """loo_gradient over distinct rows = sum over T \\ {t} of (p(x_i + c) - onehot(y_i)) (x_i + c) + pen_t U."""
    req, st, _ = runs[case_id]
    opt, prob = st.opt, st.opt.prob
    assert len(opt.rows.X) < len(prob.X)  # the data has equal rows
    pos = np.arange(len(prob.X))
    pen_t, shift = linear._penalty_shift(st, pos)
    rng = np.random.default_rng(0)
    U = opt.U[None] + 0.05 * rng.standard_normal((len(pos), *opt.U.shape))
    got = newton.loo_gradient(opt, U, pos, pen_t, shift)
    onehot = np.eye(prob.n_classes)[prob.y]
    for t in pos:
        Xt = np.delete(prob.X, t, axis=0) + shift[t]
        S = Xt @ U[t].T
        R = (1 / (1 + np.exp(-S[:, 0])) - (np.delete(prob.y, t) == 1))[:, None] if prob.m == 1 else (
            softmax(S, axis=1) - np.delete(onehot, t, axis=0)
        )
        want = R.T @ Xt + pen_t[t] * U[t]
        # same function, other summation order: rounding of sums of ~50 terms of size <= 10
        np.testing.assert_allclose(got[t], want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("case_id", IDS)
def test_equals_independent_full_newton_solves(runs: dict, case_id: str) -> None:
    """Every record's p_loo against damped Newton on T \\ {t} from zero: raw PDTP within 1e-9, binned PDTP equal."""
    req, st, res = runs[case_id]
    prob = st.opt.prob
    pos = np.arange(len(prob.X))
    pen_t, shift = linear._penalty_shift(st, pos)
    ref = np.empty_like(res.p_loo)
    for t in pos:
        if st.counts[prob.y[t]] == 1:  # its class vanishes: solved by loo_without_class, as the engine does
            ref[t] = newton.loo_without_class(st.opt, int(t), pen_t[t], shift[t])
            continue
        keep = pos != t
        U = newton.newton_solve(prob, np.zeros_like(st.opt.U), pen_t[t], shift[t], rows=keep)
        ref[t] = newton.probabilities((prob.X[t] + shift[t]) @ U.T, prob.n_classes)
    # both sides are optima to a relative Newton step of 1e-10: PDTP (a log-ratio, slope <= 1 in the scores) within 1e-9
    np.testing.assert_allclose(raw_pdtp(res.p_full, res.p_loo), raw_pdtp(res.p_full, ref), rtol=0, atol=1e-9)
    for size in (0.01, 0.05):  # binned: equal exactly
        assert np.array_equal(pdtp_of(res.p_full, res.p_loo, size).pdtp, pdtp_of(res.p_full, ref, size).pdtp)


@pytest.mark.parametrize("case_id", ["binary", "multinomial-no-intercept"])
def test_equal_records_share_one_solve(runs: dict, case_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One solve per group of equal records (design row, label, raw numerics); the group shares it bit for bit."""
    req, st, res = runs[case_id]
    solved: list[int] = []
    real = linear.loo_optima

    def counting(opt, pos, pen_t, shift):  # type: ignore[no-untyped-def]
        solved.extend(pos.tolist())
        return real(opt, pos, pen_t, shift)

    monkeypatch.setattr(linear, "loo_optima", counting)
    again = NewtonLogisticEngine().run(req, lambda n: None)
    prob = st.opt.prob
    keys = np.hstack([prob.X, prob.y[:, None], st.raw])
    groups = {k.tobytes(): [] for k in keys}
    for t, k in enumerate(keys):
        groups[k.tobytes()].append(t)
    lone = sum(st.counts[prob.y[g[0]]] == 1 for g in groups.values())
    assert len(solved) == len(set(solved)) == len(groups) - lone < len(prob.X)
    for members in groups.values():
        for t in members[1:]:
            assert again.p_loo[t].tobytes() == again.p_loo[members[0]].tobytes()
            assert again.param_delta[t].tobytes() == again.param_delta[members[0]].tobytes()
    assert again.p_loo.tobytes() == res.p_loo.tobytes()


def test_byte_identical_across_jobs_with_duplicates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of distinct records are fixed before they are spread over workers: same bytes at any --jobs."""
    monkeypatch.setattr(newton, "BATCH_FLOATS", 5 * 40)  # a few records per batch, several batches
    df = duplicated({0: "maybe", 1: "maybe", 2: "maybe"})
    progress: list[int] = []
    one = NewtonLogisticEngine().run(request(tmp_path, df, {}), progress.append)
    two = NewtonLogisticEngine().run(request(tmp_path, df, {}, jobs=2, backend="threading"), lambda n: None)
    assert sum(progress) == len(df)  # progress counts every requested record, shared solves included
    for a, b in ((one.p_loo, two.p_loo), (one.p_full, two.p_full), (one.param_delta, two.param_delta)):
        assert a.tobytes() == b.tobytes()

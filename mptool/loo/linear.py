"""Leave-one-out for logistic regression, warm-started from the full model; Lipschitz bound.

Each A(T\\{t}) is fitted by the same solver, with the same parameters, on T\\{t}, but
starts from A(T)'s parameters instead of zero: removing one record moves the optimum very
little, so the solver needs a few iterations instead of dozens. The result equals the
refit **to the solver's tolerance** (``tol``, default 1e-4 on the gradient), not to 1e-9:
both are stopped approximations of the same optimum.

Preprocessing is followed exactly: one-hot and binned blocks do not depend on T; the
StandardScaler's mean and variance are downdated for each t. The warm start is A(T)'s
function re-expressed in T\\{t}'s scaled coordinates (w'_j = w_j s'_j / s_j,
b' = b + sum_j w_j (mu'_j - mu_j) / s_j), so the solver starts at the full model.

Theorem 6.9 (Long et al. 6.4) bounds DTP_{A,T}(t) by L * ||u_T - u_{T\\{t}}||_inf, where u
is the parameter vector and L a Lipschitz constant of x -> log p_u(.|x) in u under the
infinity norm. We take u in the coordinates of the raw features (one-hot indicators and
unscaled numerics: w_raw_j = w_j / s_j, b_raw = b - sum_j w_j mu_j / s_j), so the scaler,
which also moves with t, is part of u. Derivation of L: log p_y = z_y - logsumexp(z) with
z_k = w_k . x + b_k, so d log p_y / d z_k = 1[k = y] - p_k, whose absolute values sum to
2 (1 - p_y) <= 2 (multinomial), and |d log p_y / d z| = 1 - p_y <= 1 with a single logit
z (binary). By the mean value theorem and Hölder, |log p_y(u) - log p_y(u')| <=
c * max_k |z_k(u) - z_k(u')| <= c * (||x||_1 + 1) * ||u - u'||_inf, with c = 1 (binary) or
2, and the +1 only with an intercept. Over the feature domain, ||x||_1 <= (number of
one-hot blocks, each contributing one 1) + sum over numerics of max(|min|, |max|) of the
column's observed range in the CSV. Hence L = c * (X1 + 1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import expit, softmax
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from threadpoolctl import threadpool_limits

from mptool.inputs.data import Schema
from mptool.inputs.models import fit, proba_in
from mptool.inputs.spec import Spec
from mptool.loo.base import LooRequest, LooResult
from mptool.loo.bounds import pairwise_shift_bound
from mptool.loo.design import GroupStats, class_index, design_parts, onehot_widths, scale_of, scaler_kind
from mptool.runtime.parallel import chunk_positions, run_tasks

#: Solvers that accept a warm start.
WARM_SOLVERS = ("lbfgs", "newton-cg", "newton-cholesky", "sag", "saga")


@dataclass(frozen=True)
class LinearLooResult(LooResult):
    """LooResult plus ||u_T - u_{T\\{t}}||_inf per record (raw-feature coordinates; inf if a class vanished).

    ``param_delta`` holds the vector u_T - u_{T\\{t}} itself, one row per record in the layout of
    :func:`raw_params` (a row of inf where a class vanished); ``dtp_upper`` needs it.
    """

    param_shift: np.ndarray | None = None
    param_delta: np.ndarray | None = None


def raw_params(coef: np.ndarray, intercept: np.ndarray, mu: np.ndarray, s: np.ndarray, sl: slice) -> np.ndarray:
    """Parameters in raw-feature coordinates, flattened: the scaled block divided by s, intercept shifted."""
    w = np.array(coef, dtype=float)
    b = np.array(intercept, dtype=float)
    if sl.stop > sl.start:
        b = b - (w[:, sl] * (mu / s)).sum(axis=1)
        w[:, sl] = w[:, sl] / s
    return np.concatenate([w.ravel(), b.ravel()])


def lipschitz_constant(template: Any, schema: Schema, n_classes: int) -> float:
    """L of Theorem 6.9 for log-softmax of a linear model over the CSV's feature ranges (module docstring)."""
    parts = design_parts(template)
    assert not isinstance(parts, str)
    stateless, scaled, est = parts
    x1 = float(sum(len(cols) for _, cols in stateless))  # one 1 per one-hot block
    for name in scaled if len(template.steps) > 1 else schema.names:
        col = schema.column(name)
        x1 += max(abs(col.minimum or 0.0), abs(col.maximum or 0.0))
    c = 1.0 if n_classes == 2 else 2.0
    return c * (x1 + (1.0 if est.fit_intercept else 0.0))


def _warm_chunk(
    est: Any, Z: np.ndarray, raw: np.ndarray, sl: slice, mu: np.ndarray, s: np.ndarray, stats: GroupStats,
    y: np.ndarray, y_idx: np.ndarray, classes: np.ndarray, positions: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Warm-started leave-one-out fits for ``positions``: (p_loo, u_T - u_{T\\{t}} per record, raw coordinates)."""
    coef, intercept = est.coef_, est.intercept_
    u_full = raw_params(coef, intercept, mu, s, sl)
    n = len(y)
    out = np.empty((len(positions), len(classes)))
    delta = np.full((len(positions), u_full.size), np.inf)
    keep = np.ones(n, dtype=bool)
    warm = clone(est).set_params(warm_start=True)  # refitted in place from the parameters set below
    counts = np.bincount(y_idx, minlength=len(classes))
    for i, t in enumerate(positions):
        keep[t] = False
        Zt = Z.copy()
        mu_t, s_t = mu, s
        if sl.stop > sl.start:
            m_new, m2_new = stats.without(raw[[t]], np.zeros(1, dtype=np.int64))
            mu_t, s_t = m_new[0], scale_of(m2_new[0] / (n - 1))
            Zt[:, sl] = (raw - mu_t) / s_t
        same_classes = counts[y_idx[t]] > 1
        clf = warm if same_classes else clone(est)
        if same_classes:
            w = np.array(coef, dtype=float)
            b = np.array(intercept, dtype=float)
            if sl.stop > sl.start:
                b = b + (w[:, sl] * ((mu_t - mu) / s)).sum(axis=1)
                w[:, sl] = w[:, sl] * s_t / s
            clf.coef_, clf.intercept_ = w, b
        # integer labels in class order: the same problem as the string labels, without re-sorting strings
        clf = _fit_quiet(clf, Zt[keep], y_idx[keep])
        out[i] = _proba(clf, Zt[t], len(classes))
        if same_classes:
            delta[i] = u_full - raw_params(clf.coef_, clf.intercept_, mu_t, s_t, sl)
        keep[t] = True
    return out, delta


def _proba(clf: Any, z: np.ndarray, n_classes: int) -> np.ndarray:
    """``predict_proba`` of a fitted LogisticRegression for one row, without input validation:
    expit of the decision for two classes, softmax otherwise; columns by integer class."""
    d = z @ np.asarray(clf.coef_).T + np.asarray(clf.intercept_)
    if d.shape[0] == 1:
        p1 = expit(d[0])
        p = np.array([1.0 - p1, p1])
    else:
        p = softmax(d[None, :])[0]
    out = np.zeros(n_classes)
    out[np.asarray(clf.classes_, dtype=np.int64)] = p
    return out


def _limited_chunk(*args: Any) -> tuple[np.ndarray, np.ndarray]:
    """``_warm_chunk`` with one BLAS thread: the fits are small and records already run in parallel."""
    with threadpool_limits(1):
        return _warm_chunk(*args)


def _fit_quiet(clf: Any, X: np.ndarray, y: np.ndarray) -> Any:
    return fit(clf, X, y) if not getattr(clf, "warm_start", False) else _fit_warm(clf, X, y)


def _fit_warm(clf: Any, X: np.ndarray, y: np.ndarray) -> Any:
    """Fit in place (``fit`` from models clones, which would drop the warm-start coefficients)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", UserWarning)
        clf.fit(X, y)
    return clf


#: Largest solver tolerance at which ``--engine auto`` trusts the warm start to equal refit.
AUTO_MAX_TOL = 1e-8


class LogisticWarmEngine:
    """Logistic regression leave-one-out, warm-started from A(T); equal to refit to solver tolerance."""

    name = "warm-start-logistic"

    def refuses(self, spec: Spec, template: Any) -> str | None:
        est = template.steps[-1][1] if isinstance(template, Pipeline) else template
        if type(est) is not LogisticRegression:
            return f"{type(est).__name__} is not LogisticRegression"
        if est.solver not in WARM_SOLVERS:
            return f"solver '{est.solver}' has no warm start"
        if est.class_weight is not None:
            return "class_weight (balanced weights change with T)"
        parts = design_parts(template)
        if isinstance(parts, str):
            return parts
        if parts[1] and scaler_kind(template) != "standard":
            return "numerics behind a scaler other than StandardScaler"
        return None

    def auto_refuses(self, spec: Spec, template: Any) -> str | None:
        """Why ``--engine auto`` should not pick this engine for ``spec`` (None = pick it).

        A warm start stops within the solver's tolerance of the optimum, like a cold refit, but
        not at the same point: with scikit-learn's default tol=1e-4 the two differ by up to ~1e-2
        in probability on Adult, enough to move records across 0.01 bins. With tol <= 1e-8 they
        agree to ~1e-6, so auto uses the warm start only then; --engine exact uses it anyway.
        """
        est = template.steps[-1][1] if isinstance(template, Pipeline) else template
        if est.tol > AUTO_MAX_TOL:
            return (
                f"warm start matches refit only to the solver tolerance (tol={est.tol:g}); auto uses it when "
                f"model.params.tol <= {AUTO_MAX_TOL:g} (or pass --engine exact)"
            )
        return None

    def run(self, request: LooRequest, advance: Callable[[int], None]) -> LinearLooResult:
        T = request.train
        model = request.full_model
        pos = np.asarray(request.positions, dtype=np.int64)
        est = model.steps[-1][1]
        if len(model.steps) > 1:
            ct = model.steps[0][1]
            Z = np.asarray(ct.transform(T.X), dtype=float)
            sl = ct.output_indices_.get("numeric", slice(0, 0))
            parts = design_parts(request.template)
            scaled_cols = parts[1] if not isinstance(parts, str) else []
        else:
            Z = T.X.to_numpy(dtype=float)
            sl, scaled_cols = slice(0, 0), []
        if scaled_cols:
            raw = T.X[scaled_cols].to_numpy(dtype=float)
            sc = ct.named_transformers_["numeric"].steps[-1][1]
            mu, s = np.asarray(sc.mean_, dtype=float), np.asarray(sc.scale_, dtype=float)
        else:
            raw, mu, s = np.empty((T.n, 0)), np.empty(0), np.empty(0)
        stats = GroupStats.of(raw, np.zeros(T.n, dtype=np.int64), 1)
        y_idx = class_index(T.y, request.classes)
        chunks = chunk_positions(pos, request.jobs)
        parts_out = run_tasks(
            _warm_chunk,
            ((est, Z, raw, sl, mu, s, stats, T.y, y_idx, request.classes, c) for c in chunks),
            jobs=request.jobs,
            backend=request.backend,
            on_result=lambda r: advance(len(r[0])),
        )
        C = len(request.classes)
        p_loo = np.vstack([p for p, _ in parts_out]) if parts_out else np.empty((0, C))
        delta = np.vstack([d for _, d in parts_out]) if parts_out else np.empty((0, 0))
        shift = np.abs(delta).max(axis=1) if delta.size else np.zeros(len(delta))
        p_full = proba_in(model, T.X.iloc[pos], request.classes)
        return LinearLooResult(p_full=p_full, p_loo=p_loo, engine=self.name, param_shift=shift, param_delta=delta)


# --------------------------------------------------------------------------- DTP upper bound
#
# Kept apart from the engine above: it needs only u_T - u_{T\{t}} (``LinearLooResult.param_delta``,
# raw-feature coordinates), whichever engine computed A(T\{t}).


def linear_blocks(template: Any, schema: Schema) -> list[tuple[slice, np.ndarray]] | str:
    """The design columns of a logistic-regression pipeline as blocks with their reachable raw values.

    One-hot blocks (categoricals, binned numerics) reach their K indicator patterns; a numeric
    column (standardised or raw) reaches the CSV's [min, max], represented by its two ends.
    Columns follow the ColumnTransformer's output order. A string says why no bound applies.
    """
    parts = design_parts(template)
    if isinstance(parts, str):
        return parts
    if len(template.steps) == 1:
        cols = [schema.column(name) for name in schema.names]
        return [(slice(j, j + 1), np.array([[c.minimum], [c.maximum]], dtype=float)) for j, c in enumerate(cols)]
    blocks, start = [], 0
    for _name, tr, cols in template.steps[0][1].transformers:
        widths = onehot_widths(tr)
        if widths is None:  # a scaled numeric block: raw coordinates, one column each
            widths = [1] * len(cols)
            states = [np.array([[schema.column(c).minimum], [schema.column(c).maximum]], dtype=float) for c in cols]
        else:
            states = [np.eye(w) for w in widths]
        for w, S in zip(widths, states, strict=True):
            blocks.append((slice(start, start + w), S))
            start += w
    return blocks


def linear_dtp_upper(blocks: list[tuple[slice, np.ndarray]], param_delta: np.ndarray) -> np.ndarray:
    """Per-record upper bound of DTP(t) over the feature domain from u_T - u_{T\\{t}} (raw probabilities).

    Proof sketch. Logistic regression predicts softmax(z) with z_k(x) = w_k . x + b_k (two
    classes: softmax(0, z), i.e. the sigmoid). In raw-feature coordinates, A(T)'s and
    A(T\\{t})'s scalers are folded into the parameters (w_raw = w / s, b_raw = b - sum w mu / s,
    :func:`raw_params`), so D_k(x) = z_k(x) - z'_k(x) = dw_k . x + db_k is affine in the raw x.
    By the lemma of ``mptool.loo.bounds``, |ln p_T(y|x) - ln p_{T\\{t}}(y|x)| <=
    max_{a,b} (D_a(x) - D_b(x)), and over a product of blocks the supremum of the affine
    D_a - D_b is db_a - db_b + sum over blocks of its largest value on the block: the largest
    coefficient difference within a one-hot block, and the larger of the two range ends times
    the coefficient difference for a numeric column. This is the per-block Hölder bound made
    exact; it never exceeds Theorem 6.9's L * ||u_T - u_{T\\{t}}||_inf (which multiplies the
    largest shift by the sum of every column's largest |x_j|).

    ``param_delta`` is (records, K*d + K) in the layout of :func:`raw_params`; a row with a
    non-finite entry (a class vanished with t) gets an infinite bound.
    """
    delta = np.asarray(param_delta, dtype=float)
    r = len(delta)
    d = max((sl.stop for sl, _ in blocks), default=0)
    K = delta.shape[1] // (d + 1) if r else 1
    finite = np.isfinite(delta).all(axis=1)
    safe = np.where(np.isfinite(delta), delta, 0.0)
    dW = safe[:, : K * d].reshape(r, K, d)
    db = safe[:, K * d :]
    if K == 1:  # binary: sklearn's single logit is class 1 against a zero score for class 0
        dW = np.concatenate([np.zeros_like(dW), dW], axis=1)
        db = np.concatenate([np.zeros_like(db), db], axis=1)
    hs = [np.einsum("vw,rkw->rkv", S, dW[:, :, sl]) for sl, S in blocks]
    return np.where(finite, pairwise_shift_bound(db, hs), np.inf)

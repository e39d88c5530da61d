"""Exact leave-one-out for L2 logistic regression by Newton's method; Lipschitz bound.

A(T) and every A(T\\{t}) are the exact optima of the objective scikit-learn's
LogisticRegression minimises (``mptool.loo.newton``): A(T) polished from scikit-learn's fit
by damped Newton, each A(T\\{t}) by Newton-type steps on T\\{t}'s own objective started at
A(T)'s optimum, to a relative Newton step of 1e-10. Records with the same design row, label
and raw numerics leave the same multiset T\\{t}: one solve serves them all (the same answer).
A refit stops where its solver's ``tol`` lets it (scikit-learn's default 1e-4 moves PDTP by up to ~1 on Adult), so this
engine is closer to the model the spec describes than a refit at any ``tol``: both p_full
and p_loo come from exact optima, and ``auto`` uses the engine at every ``tol``.

Preprocessing is followed exactly: one-hot and binned blocks do not depend on T; the
StandardScaler's mean mu' and scale s' on T\\{t} are downdated for each t. T\\{t}'s problem
is solved in T's scaled coordinates z = (x - mu) / s, an affine change of variables: with
w_j = w'_j s_j / s'_j the data term is unchanged, the penalty on w_j becomes
(s'_j / s_j)^2 / C, and the mean shift (mu_j - mu'_j) / s_j is absorbed by the intercept
(without intercept it is added to every row, ``shift``).

Refused (``--engine exact`` exits 2 naming why): penalties other than L2 (l1, elasticnet,
none / C = inf: no unique optimum), liblinear (it penalises the intercept and fits
one-vs-rest), class_weight, scalers other than StandardScaler, imputers fitted on T.

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

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.pipeline import Pipeline

from mptool.inputs.data import Schema
from mptool.inputs.spec import Spec
from mptool.loo.base import LooRequest, LooResult
from mptool.loo.bounds import pairwise_shift_bound
from mptool.loo.design import GroupStats, class_index, design_parts, onehot_widths, scale_of, scaler_kind
from mptool.loo.newton import (
    FullOptimum,
    NewtonNotConverged,
    Problem,
    loo_optima,
    loo_without_class,
    probabilities,
)
from mptool.loo.refit import LooFitError, loo_chunk, loo_fit_failed
from mptool.runtime.errors import InputError
from mptool.runtime.parallel import chunk_positions, one_thread, run_tasks


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





def logistic_regression() -> type | None:
    """scikit-learn's ``LogisticRegression`` if ``sklearn.linear_model`` is imported, else None (no estimator can
    be one then): checking a naive Bayes spec does not import linear_model and what it pulls in (issue 28)."""
    return getattr(sys.modules.get("sklearn.linear_model"), "LogisticRegression", None)

#: Solvers whose objective is the L2 problem of ``mptool.loo.newton`` (liblinear penalises the intercept).
L2_SOLVERS = ("lbfgs", "newton-cg", "newton-cholesky", "sag", "saga")


def l2_refusal(est: Any) -> str | None:
    """Why ``est`` does not minimise the L2 objective of ``mptool.loo.newton`` (None: it does)."""
    penalty = getattr(est, "penalty", "deprecated")
    l1_ratio = getattr(est, "l1_ratio", 0.0)
    C = float(est.C)
    if penalty is None or not (np.isfinite(C) and C > 0):
        return "no L2 penalty (penalty None or C = inf): the optimum need not be unique or exist"
    if penalty not in ("deprecated", "l2"):
        return f"penalty '{penalty}': only the L2 penalty has the smooth objective Newton's method solves exactly"
    if l1_ratio not in (0, 0.0, None):
        return f"l1_ratio {l1_ratio}: the L1 part is not smooth; the exact engine solves L2 only"
    if est.solver not in L2_SOLVERS:
        return f"solver '{est.solver}' penalises the intercept and fits one-vs-rest: a different objective"
    if est.class_weight is not None:
        return "class_weight: the exact engine solves the unweighted objective only"
    return None


@dataclass(frozen=True)
class _Setup:
    """What every batch needs: A(T)'s exact optimum and the scaler statistics of T."""

    opt: FullOptimum
    raw: np.ndarray  # (n, q) the standardised numerics, raw
    mu: np.ndarray  # (q,) T's scaler
    s: np.ndarray
    stats: GroupStats
    sl: slice  # the numeric block in the design
    C: float
    counts: np.ndarray  # records per class in T


def _penalty_shift(st: _Setup, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per record: T\\{t}'s penalty (b, D) and design shift (b, D) in T's coordinates (module docstring)."""
    prob = st.opt.prob
    b, n = len(pos), len(prob.X)
    pen_t = np.broadcast_to(prob.pen, (b, len(prob.pen))).copy()
    shift = np.zeros_like(pen_t)
    if st.raw.shape[1]:
        mu_t, m2_t = st.stats.without(st.raw[pos], np.zeros(b, dtype=np.int64))
        s_t = scale_of(m2_t / (n - 1))
        pen_t[:, st.sl] = (s_t / st.s) ** 2 / st.C
        if not prob.intercept:
            shift[:, st.sl] = (st.mu - mu_t) / st.s
    return pen_t, shift


def _raw(st: _Setup, U: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """``raw_params`` of parameters U (m, D) in T's coordinates with design shift (D,)."""
    p = st.opt.prob.X.shape[1] - int(st.opt.prob.intercept)
    W = U[:, :p]
    b = (U[:, p] if st.opt.prob.intercept else np.zeros(len(U))) + W @ shift[:p]
    return raw_params(W, b, st.mu, st.s, st.sl)


def _raw_batch(st: _Setup, U: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """``_raw`` of each record's parameters U (b, m, D) with design shifts (b, D): (b, raw size).

    Without a shift (the design has an intercept) all records at once, with the same
    operations per record as ``raw_params`` (same values, bit for bit); else record by record.
    """
    if shift.any():
        return np.array([_raw(st, U[i], shift[i]) for i in range(len(U))]).reshape(len(U), -1)
    p = st.opt.prob.X.shape[1] - int(st.opt.prob.intercept)
    w = np.array(U[:, :, :p], dtype=float)
    b = U[:, :, p] + 0.0 if st.opt.prob.intercept else np.zeros(U.shape[:2])
    sl = st.sl
    if sl.stop > sl.start:
        b = b - (w[:, :, sl] * (st.mu / st.s)).sum(axis=2)
        w[:, :, sl] = w[:, :, sl] / st.s
    return np.concatenate([w.reshape(len(U), -1), b], axis=1)


def _newton_chunk(st: _Setup, batches: list[np.ndarray], covered: int) -> tuple[np.ndarray, np.ndarray, int]:
    """p_{A(T\\{t})}(.|x_t) and u_T - u_{T\\{t}} (raw coordinates; inf where a class vanished) per record.

    ``covered``: how many requested records these stand for (equal records share one answer), for progress.
    """
    prob = st.opt.prob
    probs, shifts = [], []
    u_full = _raw(st, st.opt.U, np.zeros(prob.X.shape[1]))
    with one_thread("blas"):
        for pos in batches:
            pen_t, shift = _penalty_shift(st, pos)
            out = np.empty((len(pos), prob.n_classes))
            moved = np.full((len(pos), u_full.size), np.inf)
            lone = st.counts[prob.y[pos]] == 1
            for j in np.flatnonzero(lone):
                out[j] = loo_without_class(st.opt, int(pos[j]), pen_t[j], shift[j])
            ok = np.flatnonzero(~lone)
            if ok.size:
                U = loo_optima(st.opt, pos[ok], pen_t[ok], shift[ok])
                xt = prob.X[pos[ok]] + shift[ok]
                out[ok] = probabilities(np.einsum("bkd,bd->bk", U, xt), prob.n_classes)
                moved[ok] = u_full - _raw_batch(st, U, shift[ok])
            probs.append(out)
            shifts.append(moved)
    return np.vstack(probs), np.vstack(shifts), covered


class NewtonLogisticEngine:
    """Exact leave-one-out for L2 logistic regression: Newton from A(T)'s optimum (module docstring)."""

    name = "exact-newton-logistic"

    def refuses(self, spec: Spec, template: Any) -> str | None:
        est = template.steps[-1][1] if isinstance(template, Pipeline) else template
        if type(est) is not logistic_regression():
            return f"{type(est).__name__} is not LogisticRegression"
        why = l2_refusal(est)
        if why is not None:
            return why
        parts = design_parts(template)
        if isinstance(parts, str):
            return parts
        if parts[1] and scaler_kind(template) != "standard":
            return "numerics behind a scaler other than StandardScaler"
        return None

    def run(self, request: LooRequest, advance: Callable[[int], None]) -> LinearLooResult:
        T = request.train
        pos = np.asarray(request.positions, dtype=np.int64)
        try:
            st = _setup(request)
            self._check_classes(request, st, pos)
            reps, which = _distinct_records(st, pos)
            size = st.opt.batch_size()
            batches = [reps[i : i + size] for i in range(0, len(reps), size)]  # fixed: results never depend on jobs
            per_rep = np.bincount(which, minlength=len(reps))
            groups = chunk_positions(np.arange(len(batches)), request.jobs)
            parts = run_tasks(
                _newton_chunk,
                (
                    (st, [batches[i] for i in g], int(per_rep[g[0] * size : (g[-1] + 1) * size].sum()))
                    for g in groups
                ),
                jobs=request.jobs,
                backend=request.backend,
                on_result=lambda r: advance(r[2]),
                shared=(st,),
            )
        except NewtonNotConverged as exc:
            where = "on T" if exc.position < 0 else f"without CSV row {T.rows[exc.position]}"
            raise InputError(
                f"model: {self.name} did not converge {where} ({exc.detail}); the problem is too "
                "ill-conditioned for an exact answer (use a smaller C or --engine refit)"
            ) from None
        prob = st.opt.prob
        p_full = probabilities(prob.X[pos] @ st.opt.U.T, prob.n_classes)
        C = prob.n_classes
        p_loo = np.vstack([p for p, _, _ in parts])[which] if parts else np.empty((0, C))
        delta = np.vstack([d for _, d, _ in parts])[which] if parts else np.empty((0, 0))
        shift = np.abs(delta).max(axis=1) if delta.size else np.zeros(len(delta))
        return LinearLooResult(p_full=p_full, p_loo=p_loo, engine=self.name, param_shift=shift, param_delta=delta)

    @staticmethod
    def _check_classes(request: LooRequest, st: _Setup, pos: np.ndarray) -> None:
        """A record that is the only one of its class in a two-class T leaves one class: the refit's error."""
        if len(request.classes) != 2:
            return
        lone = pos[st.counts[st.opt.prob.y[pos]] == 1]
        if lone.size:
            T = request.train
            try:
                loo_chunk(request.template, T.X, T.y, request.classes, lone[:1])
            except LooFitError as exc:
                raise loo_fit_failed(T, exc) from None


def _distinct_records(st: _Setup, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions to solve (one per group of equal records, in order of first occurrence) and,
    for each requested position, the index of its group's representative.

    Records with the same design row, label and raw standardised values leave the same
    multiset T \\ {t}, so A(T \\ {t}) is the same problem and its answer is shared exactly
    (45,222 Adult records: 39,240 distinct).
    """
    prob = st.opt.prob
    if len(pos) == 0:
        return pos, np.zeros(0, dtype=np.int64)
    keys = np.hstack([prob.X[pos], prob.y[pos, None].astype(float), st.raw[pos]])
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return pos[first[order]], rank[np.asarray(inverse).ravel()]


def _setup(request: LooRequest) -> _Setup:
    """The design in T's coordinates, A(T)'s exact optimum (polished from scikit-learn's fit), scaler stats."""
    T, model = request.train, request.full_model
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
    y = class_index(T.y, request.classes)
    K, C, icpt = len(request.classes), float(est.C), bool(est.fit_intercept)
    X = np.hstack([Z, np.ones((T.n, 1))]) if icpt else Z
    pen = np.full(X.shape[1], 1.0 / C)
    if icpt:
        pen[-1] = 0.0
    prob = Problem(np.ascontiguousarray(X), y, K, pen, icpt)
    U0 = np.hstack([est.coef_, est.intercept_[:, None]]) if icpt else np.array(est.coef_, dtype=float)
    with one_thread("blas"):
        opt = FullOptimum.solve(prob, U0)
    stats = GroupStats.of(raw, np.zeros(T.n, dtype=np.int64), 1)
    return _Setup(opt, raw, mu, s, stats, sl, C, np.bincount(y, minlength=K))


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

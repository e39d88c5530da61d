"""Exact leave-one-out for naive Bayes: remove a record's sufficient statistics, no refit.

Naive Bayes is fitted from counts (categorical, Bernoulli, multinomial) or per-class means
and variances (Gaussian). Removing record t changes only the statistics of its own class
and the class prior, so p_{A(T\\{t})}(.|x_t) follows in closed form for every t at once
(Long et al. section 4.2: PDTP needs A(T\\{t}); section 8 audits 1.6 M records this way).

The engine follows the whole pipeline exactly or refuses it:

- ``CategoricalNB`` behind mptool's ``DomainEncoder`` (fixed domains; ``min_categories``
  set to the domain sizes), scalar ``alpha`` > 0, no ``class_prior``.
- ``BernoulliNB`` / ``MultinomialNB`` over a fixed design (one-hot categoricals, binned
  numerics, raw numerics with ``preprocess: none``), plus the scaler mptool puts in front of
  them: ``MultinomialNB`` behind ``MinMaxScaler(clip=True)`` (extremes of T \\ {t}, so
  every record's scaled value moves when t held the minimum or maximum) and ``BernoulliNB``
  (binarize 0) behind ``StandardScaler`` (a value is 1 when it exceeds the mean of T \\ {t});
  see ``_NumericBlock``. Other scaler/estimator pairings are refused.
- ``GaussianNB``: fixed design plus ``StandardScaler`` numerics; the scaler's mean and
  standard deviation are downdated per record and the class statistics re-expressed in the
  new coordinates, and ``var_smoothing * max variance`` is recomputed on T \\ {t}.
- mptool's epsilon-DP ``DPCategoricalNB`` with an integer seed: its noise depends on the public
  domain and the seed only, so the counts are downdated under the same noise
  (``mptool.loo.dp_naive_bayes``).
- Never: ``SimpleImputer`` (its median moves), class priors given by hand.

A class whose only record leaves disappears from A(T\\{t}); its probability is 0, as in
``models.proba_in``.

Incremental use (e.g. reduce-dtp): :class:`CategoricalCounts` holds the counts; build it
once with :meth:`CategoricalCounts.from_codes`, query every record with
:meth:`CategoricalCounts.loo_proba`, and drop a record with :meth:`CategoricalCounts.remove`
without rebuilding.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import logsumexp
from sklearn.naive_bayes import BernoulliNB, CategoricalNB, GaussianNB, MultinomialNB
from sklearn.pipeline import Pipeline

from mptool.inputs.dp_nb import DPCategoricalNB
from mptool.inputs.models import ColumnTransformer, DomainEncoder, proba_in
from mptool.inputs.spec import Spec
from mptool.loo.base import LooRequest, LooResult
from mptool.loo.bounds import pairwise_shift_bound
from mptool.loo.design import (
    Design,
    GroupStats,
    build_design,
    class_index,
    design_parts,
    distinct_rows,
    first_rows,
    fixed_blocks,
    scale_of,
    scaler_kind,
)
from mptool.loo.dp_naive_bayes import dp_engine_run, dp_refusal

#: Rows per vectorised block (bounds memory at about block * classes * features floats).
BLOCK = 1 << 16


def _normalise(jll: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Softmax over the classes present (absent ones get probability 0), like predict_proba."""
    jll = np.where(present, jll, -np.inf)
    return np.exp(jll - logsumexp(jll, axis=1, keepdims=True))


def smoothing_alpha(est: Any) -> float | None:
    """The effective scalar smoothing sklearn uses, or None if it is not a positive scalar."""
    a = est.alpha
    if not np.isscalar(a):
        return None
    a = float(a)
    if not est.force_alpha:
        a = max(a, 1e-10)
    return a if a > 0 else None


# --------------------------------------------------------------------------- categorical


@dataclass
class CategoricalCounts:
    """Sufficient statistics of CategoricalNB: class counts and per-feature category counts.

    ``cat[i]`` has shape (classes, codes of feature i). Probabilities follow sklearn:
    log p(x_i=v|c) = log(N_civ + alpha) - log(N_c + alpha K_i), prior log N_c/n (or uniform
    over the classes present when ``fit_prior`` is False).
    """

    class_count: np.ndarray
    cat: list[np.ndarray]
    n_codes: np.ndarray
    alpha: float
    fit_prior: bool = True

    @classmethod
    def from_codes(
        cls, codes: np.ndarray, y_idx: np.ndarray, n_classes: int, n_codes: np.ndarray, alpha: float,
        fit_prior: bool = True,
    ) -> CategoricalCounts:
        """Count ``codes`` (n x m ints) per class index ``y_idx`` in one pass."""
        n_codes = np.asarray(n_codes, dtype=np.int64)
        class_count = np.bincount(y_idx, minlength=n_classes).astype(float)
        cat = [
            np.bincount(y_idx * k + codes[:, i], minlength=n_classes * k).reshape(n_classes, k).astype(float)
            for i, k in enumerate(n_codes)
        ]
        return cls(class_count, cat, n_codes, float(alpha), fit_prior)

    def remove(self, codes_row: np.ndarray, y: int) -> None:
        """Take one record (its codes and class index) out of the counts, in place."""
        self.class_count[y] -= 1
        for i, v in enumerate(codes_row):
            self.cat[i][y, v] -= 1

    def proba(self, codes: np.ndarray) -> np.ndarray:
        """p_{A(T)}(.|x) for rows of ``codes`` (the model these counts describe)."""
        present = self.class_count > 0
        jll = np.zeros((len(codes), len(self.class_count)))
        with np.errstate(divide="ignore"):
            for i, k in enumerate(self.n_codes):
                flp = np.log(self.cat[i] + self.alpha) - np.log(self.class_count + self.alpha * k)[:, None]
                jll += flp[:, codes[:, i]].T
            jll += self._log_prior(self.class_count)
        return _normalise(jll, present[None, :])

    def _log_prior(self, counts: np.ndarray) -> np.ndarray:
        if not self.fit_prior:
            return np.zeros_like(counts)
        with np.errstate(divide="ignore"):
            return np.log(counts) - np.log(counts.sum(axis=-1, keepdims=True))

    def loo_proba(self, codes: np.ndarray, y_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(p_{A(T)}(.|x_t), p_{A(T\\{t})}(.|x_t)) for records t of the counted set, vectorised.

        Only the own class's counts drop by one (class count and the cell of each of x_t's
        values); every class's prior changes with n - 1. A class left empty gets 0.
        """
        r, C = len(codes), len(self.class_count)
        rows = np.arange(r)
        jll = np.zeros((r, C))
        own = np.zeros(r)  # feature part of the own class after removal
        nc_own = self.class_count[y_idx] - 1
        for i, k in enumerate(self.n_codes):
            counts = self.cat[i][:, codes[:, i]].T  # (r, C)
            jll += np.log(counts + self.alpha) - np.log(self.class_count + self.alpha * k)
            with np.errstate(divide="ignore", invalid="ignore"):
                own += np.log(counts[rows, y_idx] - 1 + self.alpha) - np.log(nc_own + self.alpha * k)
        p_full = _normalise(jll + self._log_prior(self.class_count), np.ones((1, C), dtype=bool))
        loo_counts = np.broadcast_to(self.class_count, (r, C)).copy()
        loo_counts[rows, y_idx] = nc_own
        jll[rows, y_idx] = own
        present = loo_counts > 0
        if self.fit_prior:
            with np.errstate(divide="ignore"):
                prior = np.log(loo_counts) - np.log(loo_counts.sum(axis=1, keepdims=True))
        else:
            prior = np.zeros_like(loo_counts)
        return p_full, _normalise(jll + prior, present)

    def loo_proba_at(self, t_codes: np.ndarray, t_y: np.ndarray, queries: np.ndarray) -> np.ndarray:
        """p_{A(T\\{t})}(.|q) for each record t (rows of ``t_codes``, ``t_y``) and query q.

        Shape (records, queries, classes); used for the query-set DTP estimate.
        """
        r, Q, C = len(t_codes), len(queries), len(self.class_count)
        jll = np.zeros((Q, C))
        for i, k in enumerate(self.n_codes):
            jll += np.log(self.cat[i][:, queries[:, i]].T + self.alpha) - np.log(self.class_count + self.alpha * k)
        out = np.broadcast_to(jll, (r, Q, C)).copy()
        rows = np.arange(r)
        nc_own = self.class_count[t_y] - 1
        own = np.zeros((r, Q))
        for i, k in enumerate(self.n_codes):
            cnt = self.cat[i][t_y][:, queries[:, i]] - (queries[None, :, i] == t_codes[:, i, None])
            with np.errstate(divide="ignore", invalid="ignore"):
                own += np.log(cnt + self.alpha) - np.log(nc_own + self.alpha * k)[:, None]
        out[rows, :, t_y] = own
        loo_counts = np.broadcast_to(self.class_count, (r, C)).copy()
        loo_counts[rows, t_y] = nc_own
        if self.fit_prior:
            with np.errstate(divide="ignore"):
                prior = np.log(loo_counts) - np.log(loo_counts.sum(axis=1, keepdims=True))
            out += prior[:, None, :]
        present = (loo_counts > 0)[:, None, :]
        out = np.where(present, out, -np.inf)
        return np.exp(out - logsumexp(out, axis=2, keepdims=True))


def categorical_parts(template: Any) -> tuple[DomainEncoder, CategoricalNB] | str:
    """The encoder and estimator of an exact-followable CategoricalNB pipeline, or why not."""
    if not isinstance(template, Pipeline) or len(template.steps) != 2:
        return "CategoricalNB without mptool's domain encoder (preprocess: none) sees raw values"
    pre, est = template.steps[0][1], template.steps[1][1]
    if not isinstance(pre, ColumnTransformer) or len(pre.transformers) != 1:
        return "unexpected preprocessing in front of CategoricalNB"
    enc = pre.transformers[0][1]
    if not isinstance(enc, DomainEncoder):
        return "CategoricalNB needs mptool's fixed-domain encoder"
    if est.class_prior is not None:
        return "class_prior given by hand"
    if smoothing_alpha(est) is None:
        return "alpha must be a positive scalar"
    n_codes = np.asarray(enc.n_codes())
    mc = est.min_categories
    if mc is None or np.any(np.asarray(mc) < n_codes):
        return "min_categories below the domain sizes lets the category count depend on T"
    return enc, est



@dataclass(frozen=True)
class CategoricalState:
    """T encoded once for a categorical naive Bayes request: its codes, class indices, counts and distinct rows.

    The engine, the DTP bound and the training accuracy each needed T's codes, counts and distinct
    (x, y) rows; on the 1.41 M military records computing them three times cost about 1 CPU s (issue 28).
    ``first``/``inverse``: the first row of each distinct (codes row, class) pair of T and every row's pair.
    """

    codes: np.ndarray
    y_idx: np.ndarray
    counts: CategoricalCounts
    first: np.ndarray
    inverse: np.ndarray

    def among(self, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the row of T standing for each distinct pair among the rows ``pos``, first seen first; each one's pair)."""
        inverse, pairs = pd.factorize(self.inverse[pos])
        return self.first[pairs], np.asarray(inverse, dtype=np.int64)


def categorical_state(request: LooRequest) -> CategoricalState:
    """:class:`CategoricalState` of the request's T, computed on first use and kept in ``request.memo``."""
    if (state := request.memo.get("categorical")) is None:
        enc, est = categorical_parts(request.template)  # type: ignore[misc]
        T = request.train
        codes = enc.transform(T.X[list(request.template.steps[0][1].transformers[0][2])])
        y_idx = class_index(T.y, request.classes)
        counts = CategoricalCounts.from_codes(
            codes, y_idx, len(request.classes), np.asarray(est.min_categories), smoothing_alpha(est), est.fit_prior
        )
        first, inverse = distinct_rows(codes, y_idx)
        codes = codes.astype(np.min_scalar_type(int(codes.max()) if codes.size else 0))  # kept: 1 byte a cell, not 8
        state = request.memo["categorical"] = CategoricalState(codes, y_idx, counts, first, inverse)
    return state


def categorical_accuracy(request: LooRequest) -> float | None:
    """A(T)'s accuracy on T, ``mean(A(T).predict(T.X) == T.y)``, predicting each distinct (x, y) of T once;
    None unless A is a CategoricalNB pipeline the engine follows.

    CategoricalNB predicts row by row from the codes the pipeline's encoder gives (the same
    :class:`CategoricalState` codes), and the records of one pair share their label's class: the
    same comparisons, gathered.
    """
    est = request.template.steps[-1][1] if isinstance(request.template, Pipeline) else request.template
    if type(est) is not CategoricalNB or isinstance(categorical_parts(request.template), str):
        return None
    state = categorical_state(request)
    est = request.full_model.steps[-1][1]
    hit = est.predict(np.asarray(state.codes[state.first], dtype=np.int64)) == np.asarray(request.train.y)[state.first]
    return float(np.mean(hit[state.inverse]))

def gaussian_params(
    X: np.ndarray, scaled: np.ndarray, cstats: GroupStats, gstats: GroupStats, y_idx: np.ndarray,
    n_classes: int, pos: np.ndarray | None, var_smoothing: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """GaussianNB on T \\ {t} for each t in ``pos`` (or on T itself when ``pos`` is None, one row).

    Returns (log prior (r, C), theta (r, C, d), var (r, C, d), mu (r, d), s (r, d), class counts
    (r, C)): with z = (x - mu)/s (the scaler on the same set; mu 0, s 1 for unscaled columns),
    class mean theta = (m_c - mu)/s, class variance v_c/s^2 plus epsilon = var_smoothing *
    max_j var_j in those coordinates.
    """
    n = len(X)
    cnt, cmean, cm2 = cstats.count, cstats.mean, cstats.m2
    if pos is None:
        r, loo_cnt = 1, cnt[None, :].copy()
        gmu, gvar = gstats.mean[:1], gstats.m2[:1] / n
        m, v, size = cmean[None], cm2[None].copy(), n
    else:
        yt, r = y_idx[pos], len(pos)
        cnew = cstats.without(X[pos], yt)
        gnew = gstats.without(X[pos], np.zeros(r, dtype=np.int64))
        gmu, gvar = gnew[0], gnew[1] / (n - 1)  # (r, d): statistics of T \ {t}
        # class statistics after removal, (r, C, d)
        loo_cnt = np.broadcast_to(cnt, (r, n_classes)).copy()
        loo_cnt[np.arange(r), yt] -= 1
        m = np.broadcast_to(cmean, (r, *cmean.shape)).copy()
        v = np.broadcast_to(cm2, (r, *cm2.shape)).copy()
        m[np.arange(r), yt] = cnew[0]
        v[np.arange(r), yt] = cnew[1]
        size = n - 1
    mu = np.where(scaled, gmu, 0.0)
    s = np.where(scaled, scale_of(gvar), 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = v / loo_cnt[:, :, None]
        prior = np.log(loo_cnt / size)
    theta = (m - mu[:, None, :]) / s[:, None, :]
    var_c = v / (s**2)[:, None, :]
    all_var = gvar / s**2
    eps = var_smoothing * all_var.max(axis=1)
    return prior, theta, var_c + eps[:, None, None], mu, s, loo_cnt


def _gaussian_setup(
    design: Design, y_idx: np.ndarray, n_classes: int
) -> tuple[np.ndarray, np.ndarray, GroupStats, GroupStats]:
    """The Gaussian engine's design (fixed then standardised columns), which are scaled, and its statistics."""
    X = np.hstack([design.fixed, design.raw])
    scaled = np.zeros(X.shape[1], dtype=bool)
    scaled[design.fixed.shape[1] :] = True
    return X, scaled, GroupStats.of(X, y_idx, n_classes), GroupStats.of(X, np.zeros(len(X), dtype=np.int64), 1)


def gaussian_loo(design: Design, y_idx: np.ndarray, n_classes: int, positions: np.ndarray,
                 advance: Callable[[int], None]) -> np.ndarray:
    """p_{A(T\\{t})}(.|x_t) of GaussianNB (with standardised numerics), every t in ``positions``.

    With the parameters of :func:`gaussian_params`,
    jll_c = log prior_c - 1/2 sum log(2 pi var_cj) - 1/2 sum (z_j - theta_cj)^2 / var_cj.
    """
    X, scaled, cstats, gstats = _gaussian_setup(design, y_idx, n_classes)
    out = np.empty((len(positions), n_classes))
    for start in range(0, len(positions), BLOCK // 16):
        pos = positions[start : start + BLOCK // 16]
        prior, theta, var_c, mu, s, loo_cnt = gaussian_params(
            X, scaled, cstats, gstats, y_idx, n_classes, pos, design.est.var_smoothing
        )
        z = (X[pos] - mu) / s
        present = loo_cnt > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            jll = prior - 0.5 * np.sum(np.log(2.0 * np.pi * var_c), axis=2)
            jll = jll - 0.5 * np.sum((z[:, None, :] - theta) ** 2 / var_c, axis=2)
        jll = np.where(present, jll, -np.inf)
        out[start : start + len(pos)] = _normalise(jll, present)
        advance(len(pos))
    return out


def minmax_scaling(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MinMaxScaler's (scale, offset) for extremes lo, hi: x' = x * scale + offset (scale 1 on a zero range)."""
    rng = hi - lo
    scale = 1.0 / np.where(rng < 10 * np.finfo(float).eps, 1.0, rng)
    return scale, -lo * scale


class _NumericBlock:
    """Raw numerics that a scaler fitted on T transforms; their per-class sums or counts on T \\ {t}.

    - MultinomialNB behind MinMaxScaler(clip=True): x' = x * scale + offset with
      scale = 1 / (max' - min') (1 when the range is 0) and offset = -min' * scale, where
      min'/max' are the extremes of T \\ {t} (the second smallest/largest value when x_t
      alone held one). The class feature count is sum x' = scale * S_c' + n_c' * offset;
      x_t' is clipped into [0, 1].
    - BernoulliNB (binarize 0) behind StandardScaler: (x - mu')/s' > 0 exactly when
      x > mu', with mu' = (S - x_t) / (n - 1); the class count of values above mu' comes from
      the sorted class values.
    """

    def __init__(self, raw: np.ndarray, y_idx: np.ndarray, n_classes: int) -> None:
        self.raw, self.y_idx, self.C = raw, y_idx, n_classes
        self.n = len(raw)
        Y = np.eye(n_classes)[y_idx]
        self.sums = Y.T @ raw  # (C, q)
        self.total = raw.sum(axis=0)
        self.counts = Y.sum(axis=0)
        self.sorted = [np.sort(raw[y_idx == c], axis=0) for c in range(n_classes)]
        srt = np.sort(raw, axis=0)
        self.lo, self.hi = srt[0], srt[-1]
        self.lo2 = srt[1] if self.n > 1 else srt[0]  # equals lo when the minimum is shared
        self.hi2 = srt[-2] if self.n > 1 else srt[-1]

    def loo_scaling(self, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(scale, offset) of MinMaxScaler fitted on T \\ {t}, one row per record of ``pos``."""
        x = self.raw[pos]
        lo = np.where(x == self.lo, self.lo2, self.lo)
        hi = np.where(x == self.hi, self.hi2, self.hi)
        return minmax_scaling(lo, hi)

    def minmax(self, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = self.raw[pos]
        yt = self.y_idx[pos]
        r = len(pos)
        scale, offset = self.loo_scaling(pos)
        sums = np.broadcast_to(self.sums, (r, *self.sums.shape)).copy()
        sums[np.arange(r), yt] -= x
        cnt = np.broadcast_to(self.counts, (r, self.C)).copy()
        cnt[np.arange(r), yt] -= 1
        fc = sums * scale[:, None, :] + cnt[:, :, None] * offset[:, None, :]
        return fc, np.clip(x * scale + offset, 0.0, 1.0)

    def bernoulli(self, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = self.raw[pos]
        yt = self.y_idx[pos]
        r, q = x.shape
        mu = (self.total - x) / (self.n - 1)
        above = np.empty((r, self.C, q))
        for c in range(self.C):
            for j in range(q):
                col = self.sorted[c][:, j]
                above[:, c, j] = len(col) - np.searchsorted(col, mu[:, j], side="right")
        xb = (x > mu).astype(float)
        above[np.arange(r), yt] -= xb
        return above, xb


def discrete_loo(design: Design, y_idx: np.ndarray, n_classes: int, positions: np.ndarray,
                 advance: Callable[[int], None]) -> np.ndarray:
    """p_{A(T\\{t})}(.|x_t) of BernoulliNB / MultinomialNB over a fixed design, every t.

    Removing t subtracts its (binarised) feature vector from its class's feature counts and
    one from the class count; the other classes keep their log-probabilities.
    """
    est = design.est
    X = design.fixed
    bern = isinstance(est, BernoulliNB)
    if bern and est.binarize is not None:
        X = (X > est.binarize).astype(float)
    alpha = smoothing_alpha(est)
    Y = np.eye(n_classes)[y_idx]
    fc = Y.T @ X
    cc = Y.sum(axis=0)
    numeric = _NumericBlock(design.raw, y_idx, n_classes) if design.raw.shape[1] else None
    out = np.empty((len(positions), n_classes))
    for start in range(0, len(positions), BLOCK // 16):
        pos = positions[start : start + BLOCK // 16]
        yt = y_idx[pos]
        r = len(pos)
        rows = np.arange(r)
        x = X[pos]
        fcs = np.broadcast_to(fc, (r, *fc.shape)).copy()
        fcs[rows, yt] -= x
        ccs = np.broadcast_to(cc, (r, n_classes)).copy()
        ccs[rows, yt] -= 1
        if numeric is not None:
            num_fc, num_x = numeric.bernoulli(pos) if bern else numeric.minmax(pos)
            fcs = np.concatenate([fcs, num_fc], axis=2)
            x = np.concatenate([x, num_x], axis=1)
        smoothed = fcs + alpha
        with np.errstate(divide="ignore", invalid="ignore"):
            if bern:
                flp = np.log(smoothed) - np.log(ccs + 2 * alpha)[:, :, None]
                neg = np.log(1 - np.exp(flp))
                jll = np.einsum("rd,rcd->rc", x, flp - neg) + neg.sum(axis=2)
            else:
                flp = np.log(smoothed) - np.log(smoothed.sum(axis=2))[:, :, None]
                jll = np.einsum("rd,rcd->rc", x, flp)
            if est.fit_prior:
                jll = jll + np.log(ccs) - np.log(ccs.sum(axis=1, keepdims=True))
        present = ccs > 0
        out[start : start + r] = _normalise(np.where(present, jll, -np.inf), present)
        advance(r)
    return out


# --------------------------------------------------------------------------- engine


class NaiveBayesEngine:
    """Exact leave-one-out for scikit-learn's naive Bayes classifiers (see module docstring)."""

    name = "exact-naive-bayes"

    def refuses(self, spec: Spec, template: Any) -> str | None:
        est = template.steps[-1][1] if isinstance(template, Pipeline) else template
        if type(est) is DPCategoricalNB:
            return dp_refusal(template)
        if type(est) not in (CategoricalNB, GaussianNB, BernoulliNB, MultinomialNB):
            return f"{type(est).__name__} is not one of scikit-learn's naive Bayes classifiers"
        if isinstance(est, CategoricalNB):
            parts = categorical_parts(template)
            return parts if isinstance(parts, str) else None
        if isinstance(est, GaussianNB):
            if est.priors is not None:
                return "priors given by hand"
        elif est.class_prior is not None:
            return "class_prior given by hand"
        elif smoothing_alpha(est) is None:
            return "alpha must be a positive scalar"
        parts = design_parts(template)
        if isinstance(parts, str):
            return parts
        kind = scaler_kind(template) if parts[1] else None
        followed = {GaussianNB: "standard", MultinomialNB: "minmax", BernoulliNB: "standard"}[type(est)]
        if kind is not None and kind != followed:
            return f"{type(est).__name__} behind a {kind} scaler: only {followed} scaling is followed"
        if kind == "standard" and isinstance(est, BernoulliNB) and est.binarize != 0:
            return "BernoulliNB on standardised numerics is followed only with binarize: 0"
        return None

    def run(self, request: LooRequest, advance: Callable[[int], None]) -> LooResult:
        T = request.train
        est = request.template.steps[-1][1] if isinstance(request.template, Pipeline) else request.template
        C = len(request.classes)
        pos = np.asarray(request.positions, dtype=np.int64)
        if isinstance(est, DPCategoricalNB):
            p_full, p_loo = dp_engine_run(request, advance)
            return LooResult(p_full=p_full, p_loo=p_loo, engine=self.name)
        if isinstance(est, CategoricalNB):
            state = categorical_state(request)
            first, inverse = state.among(pos)  # once per distinct (x, y): the same numbers
            weight = np.bincount(inverse, minlength=len(first))
            fulls, loos = [], []
            for start in range(0, len(first), BLOCK):
                f = first[start : start + BLOCK]
                pf, pl = state.counts.loo_proba(state.codes[f], state.y_idx[f])
                fulls.append(pf)
                loos.append(pl)
                advance(int(weight[start : start + BLOCK].sum()))
            if not fulls:
                return LooResult(p_full=np.empty((0, C)), p_loo=np.empty((0, C)), engine=self.name)
            return LooResult(p_full=np.vstack(fulls)[inverse], p_loo=np.vstack(loos)[inverse], engine=self.name,
                             groups=(first_rows(inverse), inverse))
        y_idx = class_index(T.y, request.classes)
        design = build_design(request.template, T.X)
        if isinstance(est, GaussianNB):
            p_loo = gaussian_loo(design, y_idx, C, pos, advance)
        else:
            p_loo = discrete_loo(design, y_idx, C, pos, advance)
        p_full = proba_in(request.full_model, T.X.iloc[pos], request.classes)
        return LooResult(p_full=p_full, p_loo=p_loo, engine=self.name)


# --------------------------------------------------------------------------- DTP upper bound
#
# Proof sketch (the lemma is in ``mptool.loo.bounds``). Naive Bayes predicts the softmax of
# the class scores S_c(x) = ln p(c) + sum_i ln p(x_i | c), so the posterior log-ratio of
# A(T) against A(T\{t}) is bounded by max over class pairs (a, b) of sup_x (D_a - D_b), with
# D_c = S_c - S'_c separable over the features. Removing t (class y) changes only class y's
# statistics and every prior by the same n/(n-1), so for categorical and Bernoulli naive
# Bayes over a fixed design D_c = -ln(n/(n-1)) for c != y and the bound is
#   max(sup_x ln g(x), -inf_x ln g(x)),  ln g(x) = ln(N_y/(N_y-1)) + sum_i ln(theta_yi(x_i) / theta'_yi(x_i)),
# each sup/inf taken feature by feature over the feature's domain. Props. 6.4/6.5 bound the
# class scores; the normaliser sum_k p'(k|x) e^{D_k} adds at most the spread of the D_k,
# which this per-record pairwise form accounts for exactly (no doubling of the exponent).
# A scaler fitted on T (MultinomialNB's MinMaxScaler, BernoulliNB's StandardScaler + binarize)
# moves every class's statistics of that column; those columns are blocks whose states are the
# raw values where the scaled value changes slope (MinMax: the extremes of T and of T\{t} and
# the CSV range's ends) or the reachable pairs (bit under T, bit under T\{t}) (binarize at the
# mean of T resp. T\{t}); the pairwise form covers them too.


def log_nb_delta(n: int, n_ymin: int, m: int, v: int | None = None) -> float:
    """ln delta of Prop. 6.4 (``v`` None: no smoothing) or Prop. 6.5 (Laplace, ``v`` values per feature).

    The paper's stability constant, reported for reference: it bounds the class scores, not
    the posterior (see :func:`nb_dtp_upper`). A sum of logarithms: delta itself overflows a
    float for a few thousand features (m), its logarithm stays finite.
    """
    if n < 2 or n_ymin < 1 or m < 1:
        return math.inf
    size = math.log(n / (n - 1))
    if v is None:
        if n_ymin == 1:
            return math.inf
        return (m - 1) * math.log(n_ymin / (n_ymin - 1)) + size
    return (m - 1) * math.log((n_ymin + v) / n_ymin) + size


def log_lsq_delta(m: int) -> float:
    """ln delta = (m + 1) ln(4/3) of Prop. 6.7 for naive Bayes with m features (|X| = m + 1)."""
    return (m + 1) * math.log(4.0 / 3.0)


def _exp(x: float) -> float:
    return math.exp(x) if x < 700 else math.inf


def nb_delta(n: int, n_ymin: int, m: int, v: int | None = None) -> float:
    """delta of Prop. 6.4 / 6.5 (inf where it exceeds a float); see :func:`log_nb_delta`."""
    return _exp(log_nb_delta(n, n_ymin, m, v))


def lsq_delta(m: int) -> float:
    """delta = (4/3)^(m+1) of Prop. 6.7 (inf where it exceeds a float); see :func:`log_lsq_delta`."""
    return _exp(log_lsq_delta(m))


def paper_delta(alpha: float | None, n: int, n_ymin: int, m: int, v: int) -> tuple[float | None, str, dict[str, Any]]:
    """(ln delta, which proposition, details) of Long et al. 6.3 for naive Bayes; ln delta None if none applies.

    Prop. 6.5 for Laplace smoothing (alpha = 1), Props. 6.4/6.7 (the smaller delta) without
    smoothing. These bound the class-score ratio; ``dtp_upper`` does not use them.
    """
    details: dict[str, Any] = {"n": n, "n_ymin": n_ymin, "m": m, "v": v, "alpha": alpha}
    if alpha is not None and np.isclose(alpha, 1.0):
        return log_nb_delta(n, n_ymin, m, v), "Prop. 6.5 (Laplace smoothing)", details
    if alpha is not None and 0 <= alpha <= 1e-10:
        details["lsq_delta_prop_6_7"] = lsq_delta(m)
        log_delta = min(log_nb_delta(n, n_ymin, m), log_lsq_delta(m))
        return log_delta, "Props. 6.4 and 6.7 (no smoothing; the smaller delta)", details
    return None, f"alpha = {alpha}: Props. 6.4/6.5 cover alpha = 0 and alpha = 1 only", details


def nb_dtp_upper(request: LooRequest) -> np.ndarray | str:
    """Upper bound of DTP(t) over the whole feature domain for each requested record (raw probabilities).

    Exact evaluation of the pairwise score-shift bound (``mptool.loo.bounds``; proof sketch
    above this section) from the statistics of T and T\\{t}: categorical, Bernoulli,
    multinomial and Gaussian naive Bayes, the pipelines the exact engine follows. Infinite
    when t is the only record of its class (the class disappears from A(T\\{t})). Returns the
    reason as a string for pipelines the engine refuses.
    """
    est = request.template.steps[-1][1] if isinstance(request.template, Pipeline) else request.template
    why = NaiveBayesEngine().refuses(request.spec, request.template)
    if why is not None:
        return f"no closed-form statistics of T\\{{t}} ({why})"
    if isinstance(est, CategoricalNB):
        return _categorical_bound(request)
    if isinstance(est, BernoulliNB | MultinomialNB):
        return _discrete_bound(request)
    return _gaussian_bound(request)


def _categorical_bound(request: LooRequest) -> np.ndarray:
    """The bound for CategoricalNB, in closed form: only class y_t's counts and the priors move.

    Every other class's score shifts by the same ln((n-1)/n), so the pairwise bound is
    max(sup_x ln g(x), -inf_x ln g(x)) with ln g = ln(N_y/(N_y-1)) (fitted prior; 0 otherwise)
    + sum_i [ln theta_yi(x_i) - ln theta'_yi(x_i)]. Per feature i (K_i smoothing categories,
    count c = N_{y,i,x_ti} of t's value): at v = x_ti the term is ln((c+a)/(c-1+a)) + d_i, at
    every other value d_i = ln((N_y-1+a K_i)/(N_y+a K_i)) < 0; the largest term is at x_ti, the
    smallest at any other value of the feature's domain (or x_ti when the domain has one value).
    """
    enc, est = categorical_parts(request.template)  # type: ignore[misc]
    state = categorical_state(request)  # T's codes and counts, shared with the engine
    codes, counts = state.codes, state.counts
    a, cc = counts.alpha, counts.class_count
    pos, inverse = state.among(np.asarray(request.positions, dtype=np.int64))  # once per distinct (x, y), gathered
    y = state.y_idx[pos]
    nc = cc[y]
    with np.errstate(divide="ignore", invalid="ignore"):
        base = np.log(nc) - np.log(nc - 1) if est.fit_prior else np.zeros(len(pos))
        hi, lo = base.copy(), base.copy()
        for i, (k, dom) in enumerate(zip(counts.n_codes, enc.n_codes(), strict=True)):
            c = counts.cat[i][y, codes[pos, i]]
            d = np.log(nc - 1 + a * k) - np.log(nc + a * k)
            own = np.log(c + a) - np.log(c - 1 + a) + d
            hi += own
            lo += d if dom > 1 else own
    bound = np.maximum(np.maximum(hi, -lo), 0.0)
    others = (cc > 0).sum() - 1  # classes besides y_t that both models predict
    return np.where(nc <= 1, np.inf, np.where(others > 0, bound, 0.0))[inverse]


def _linear_coef(F: np.ndarray, cc: np.ndarray, alpha: float, bern: bool) -> tuple[np.ndarray, np.ndarray]:
    """(A, B) with class score = prior + x . A + sum B, from feature counts F (..., C, d) and class counts cc.

    Bernoulli: A = ln theta - ln(1 - theta), B = ln(1 - theta), theta = (F + alpha) / (cc + 2 alpha).
    Multinomial: A = ln((F + alpha) / sum_j (F_j + alpha)), B = 0.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        if bern:
            denom = np.log(cc + 2 * alpha)[..., None]
            ln_on = np.log(F + alpha) - denom
            ln_off = np.log(cc[..., None] - F + alpha) - denom
            return ln_on - ln_off, ln_off
        flp = np.log(F + alpha) - np.log((F + alpha).sum(axis=-1, keepdims=True))
        return flp, np.zeros_like(flp)


def _log_priors(cc: np.ndarray, fit_prior: bool) -> np.ndarray:
    if not fit_prior:
        return np.zeros_like(cc)
    with np.errstate(divide="ignore"):
        return np.log(cc) - np.log(cc.sum(axis=-1, keepdims=True))


def _discrete_bound(request: LooRequest) -> np.ndarray | str:
    """The bound for BernoulliNB / MultinomialNB over the design the exact engine follows."""
    T = request.train
    blocks = fixed_blocks(request.template, T)
    if isinstance(blocks, str):
        return blocks
    design = build_design(request.template, T.X)
    est, X = design.est, design.fixed
    bern = isinstance(est, BernoulliNB)
    if bern and est.binarize is not None:
        X = (X > est.binarize).astype(float)
        blocks = [(sl, (S > est.binarize).astype(float)) for sl, S in blocks]
    alpha, C = smoothing_alpha(est), len(request.classes)
    y_idx = class_index(T.y, request.classes)
    Y = np.eye(C)[y_idx]
    cc = Y.sum(axis=0)
    scaled_cols = [T.schema.column(c) for c in design_parts(request.template)[1]]
    numeric = _ScaledColumns(design.raw, y_idx, C, bern, scaled_cols)
    F_T = np.hstack([Y.T @ X, numeric.full_counts()])
    A_T, B_T = _linear_coef(F_T, cc, alpha, bern)
    pos = np.asarray(request.positions, dtype=np.int64)
    out = np.empty(len(pos))
    for start in range(0, len(pos), BLOCK // 16):
        p = pos[start : start + BLOCK // 16]
        y, rows = y_idx[p], np.arange(len(p))
        fc = np.broadcast_to(Y.T @ X, (len(p), C, X.shape[1])).copy()
        fc[rows, y] -= X[p]
        cc_loo = np.broadcast_to(cc, (len(p), C)).copy()
        cc_loo[rows, y] -= 1
        states, num_fc = numeric.loo(p)
        A_L, B_L = _linear_coef(np.concatenate([fc, num_fc], axis=2), cc_loo, alpha, bern)
        const = _log_priors(cc, est.fit_prior) - _log_priors(cc_loo, est.fit_prior) + (B_T - B_L).sum(axis=2)
        dA = A_T - A_L
        hs = [np.einsum("vw,rcw->rcv", S, dA[:, :, sl]) for sl, S in blocks]
        d0 = X.shape[1]
        for j, (s_T, s_L) in enumerate(states):
            hs.append(s_T[:, None, :] * A_T[None, :, d0 + j, None] - s_L[:, None, :] * A_L[:, :, d0 + j, None])
        finite = np.isfinite(A_L).all(axis=(1, 2)) & np.isfinite(B_L).all(axis=(1, 2))
        bound = pairwise_shift_bound(const, hs, cc > 0)
        out[start : start + len(p)] = np.where((cc[y] <= 1) | ~finite, np.inf, bound)
    return out


class _ScaledColumns:
    """Numerics a scaler fitted on T transforms, as bound blocks (see the section comment).

    BernoulliNB behind StandardScaler, binarize 0: a value's bit is x > mean; the states of a
    column are the pairs (bit under T, bit under T\\{t}) some x in the CSV's [min, max] reaches.
    MultinomialNB behind MinMaxScaler(clip=True): the scaled value is piecewise linear in x
    with kinks at the extremes, so the states are x in {CSV min, CSV max, min and max of T,
    min and max of T\\{t}}, each carried through both scalings.
    """

    def __init__(self, raw: np.ndarray, y_idx: np.ndarray, n_classes: int, bern: bool, columns: list[Any]) -> None:
        self.block = _NumericBlock(raw, y_idx, n_classes)
        self.bern = bern
        self.dom_lo = np.array([c.minimum for c in columns], dtype=float)
        self.dom_hi = np.array([c.maximum for c in columns], dtype=float)
        self.Y = np.eye(n_classes)[y_idx]

    def _scaled_T(self) -> np.ndarray:
        b = self.block
        if self.bern:
            return (b.raw > b.total / b.n).astype(float)
        scale, offset = minmax_scaling(b.lo, b.hi)
        return np.clip(b.raw * scale + offset, 0.0, 1.0)

    def full_counts(self) -> np.ndarray:
        """Per-class sums of the scaled values on T, (classes, columns)."""
        return self.Y.T @ self._scaled_T() if self.block.raw.shape[1] else np.empty((self.Y.shape[1], 0))

    def loo(self, pos: np.ndarray) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray]:
        """Per column (state values under T, under T\\{t}), each (records, states); and T\\{t}'s class sums."""
        b = self.block
        if not b.raw.shape[1]:
            return [], np.empty((len(pos), self.Y.shape[1], 0))
        if self.bern:
            num_fc, _ = b.bernoulli(pos)
            return self._bit_states(b.total / b.n, (b.total - b.raw[pos]) / (b.n - 1)), num_fc
        num_fc, _ = b.minmax(pos)
        scale_T, off_T = minmax_scaling(b.lo, b.hi)
        scale_L, off_L = b.loo_scaling(pos)
        out = []
        for j in range(b.raw.shape[1]):
            lo_L = -off_L[:, j] / scale_L[:, j]
            pts = np.stack(
                [np.full(len(pos), v) for v in (self.dom_lo[j], self.dom_hi[j], b.lo[j], b.lo[j] + 1 / scale_T[j])]
                + [lo_L, lo_L + 1 / scale_L[:, j]],
                axis=1,
            )
            pts = np.clip(pts, self.dom_lo[j], self.dom_hi[j])
            s_T = np.clip(pts * scale_T[j] + off_T[j], 0.0, 1.0)
            s_L = np.clip(pts * scale_L[:, j, None] + off_L[:, j, None], 0.0, 1.0)
            out.append((s_T, s_L))
        return out, num_fc

    def _bit_states(self, mu_T: np.ndarray, mu_L: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """(bit under T, bit under T\\{t}) pairs reachable in [min, max]; unreachable ones NaN.

        Reachability is decided with a little slack, so rounding in the means can only add states.
        """
        out = []
        bT = np.array([0.0, 1.0, 1.0, 0.0])
        bL = np.array([0.0, 1.0, 0.0, 1.0])
        for j in range(len(mu_T)):
            m, mL = mu_T[j], mu_L[:, j]
            lo, hi = self.dom_lo[j], self.dom_hi[j]
            eps = 1e-9 * (1.0 + np.abs(m))
            ok = np.stack(
                [
                    lo <= np.minimum(m, mL) + eps,  # x below both means
                    hi > np.maximum(m, mL) - eps,  # above both
                    (mL > m - eps) & (hi > m - eps) & (lo <= mL + eps),  # between: 1 under T, 0 under T\{t}
                    (m > mL - eps) & (hi > mL - eps) & (lo <= m + eps),  # between: 0 under T, 1 under T\{t}
                ],
                axis=1,
            )
            out.append((np.where(ok, bT, np.nan), np.where(ok, bL, np.nan)))
        return out


def _gaussian_bound(request: LooRequest) -> np.ndarray | str:
    """The bound for GaussianNB: one-hot blocks by their patterns, numeric columns as quadratics.

    A numeric column's score shift h_c(x) = l_c(x) - l'_c(x), with l the class's Gaussian
    log-density in raw x (mean mu + s theta, variance var s^2), is a quadratic in x; so is
    h_a - h_b, whose maximum over the CSV's [min, max] is at an end or at its vertex. The
    states of the column are both ends and every pair's vertex inside the range. Every class
    moves here (the scaler and var_smoothing * max variance follow T\\{t}).
    """
    T, template = request.train, request.template
    design = build_design(template, T.X)
    C, y_idx = len(request.classes), class_index(T.y, request.classes)
    X, scaled, cstats, gstats = _gaussian_setup(design, y_idx, C)
    if len(template.steps) == 1:
        onehot, cont = [], list(zip(range(X.shape[1]), T.X.columns, strict=True))
    else:
        onehot = fixed_blocks(template, T)
        if isinstance(onehot, str):
            return onehot
        d0 = design.fixed.shape[1]
        cont = list(zip(range(d0, X.shape[1]), design_parts(template)[1], strict=True))
    vs = design.est.var_smoothing
    P_T = gaussian_params(X, scaled, cstats, gstats, y_idx, C, None, vs)
    pos = np.asarray(request.positions, dtype=np.int64)
    out = np.empty(len(pos))
    for start in range(0, len(pos), BLOCK // 16):
        p = pos[start : start + BLOCK // 16]
        P_L = gaussian_params(X, scaled, cstats, gstats, y_idx, C, p, vs)
        const = P_T[0] - P_L[0]
        hs = []
        for sl, S in onehot:
            at0 = _gauss_logpdf(P_T, sl, 0.0) - _gauss_logpdf(P_L, sl, 0.0)  # (r, C, w)
            at1 = _gauss_logpdf(P_T, sl, 1.0) - _gauss_logpdf(P_L, sl, 1.0)
            hs.append(at0.sum(axis=2)[:, :, None] + np.einsum("vw,rcw->rcv", S, at1 - at0))
        for j, name in cont:
            col = T.schema.column(name)
            pts = _quadratic_states(P_T, P_L, j, float(col.minimum), float(col.maximum))
            sl = slice(j, j + 1)
            hs.append(_gauss_logpdf(P_T, sl, pts[:, None, :]) - _gauss_logpdf(P_L, sl, pts[:, None, :]))
        with np.errstate(invalid="ignore"):
            bound = pairwise_shift_bound(const, hs, cstats.count > 0)
        bad = ~np.all([np.isfinite(h).all(axis=(1, 2)) for h in hs], axis=0) if hs else np.zeros(len(p), bool)
        out[start : start + len(p)] = np.where((cstats.count[y_idx[p]] <= 1) | bad, np.inf, bound)
    return out


def _gauss_logpdf(P: tuple, sl: slice, x: Any) -> np.ndarray:
    """Class Gaussian log-density of raw value(s) x in design columns ``sl``: (r, C, w) or (r, C, states)."""
    _, theta, var, mu, s, _ = P
    th, v = theta[:, :, sl], var[:, :, sl]
    z = (x - mu[:, None, sl]) / s[:, None, sl]
    with np.errstate(divide="ignore", invalid="ignore"):
        return -0.5 * np.log(2.0 * np.pi * v) - 0.5 * (z - th) ** 2 / v


def _quadratic_states(P_T: tuple, P_L: tuple, j: int, lo: float, hi: float) -> np.ndarray:
    """Raw values of column j where some h_a - h_b can peak: lo, hi and each pair's vertex in [lo, hi]; (r, V)."""
    coef = []
    for _, theta, var, mu, s, _ in (P_T, P_L):
        V = var[:, :, j] * (s[:, None, j] ** 2)  # raw-coordinate variance
        m = mu[:, None, j] + s[:, None, j] * theta[:, :, j]  # raw-coordinate mean
        coef.append((-0.5 / V, m / V))
    a = coef[0][0] - coef[1][0]  # h_c(x) = a_c x^2 + b_c x + const
    b = coef[0][1] - coef[1][1]
    r, C = a.shape
    pts = [np.full(r, lo), np.full(r, hi)]
    for i in range(C):
        for k in range(i + 1, C):
            Q, L = a[:, i] - a[:, k], b[:, i] - b[:, k]
            with np.errstate(divide="ignore", invalid="ignore"):
                vx = np.where(Q != 0, -L / (2 * Q), lo)
            pts.append(np.clip(np.nan_to_num(vx, nan=lo), lo, hi))
    return np.stack(pts, axis=1)

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
- Never: ``SimpleImputer`` (its median moves), class priors given by hand.

A class whose only record leaves disappears from A(T\\{t}); its probability is 0, as in
``models.proba_in``.

Incremental use (e.g. reduce-dtp): :class:`CategoricalCounts` holds the counts; build it
once with :meth:`CategoricalCounts.from_codes`, query every record with
:meth:`CategoricalCounts.loo_proba`, and drop a record with :meth:`CategoricalCounts.remove`
without rebuilding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import logsumexp
from sklearn.compose import ColumnTransformer
from sklearn.naive_bayes import BernoulliNB, CategoricalNB, GaussianNB, MultinomialNB
from sklearn.pipeline import Pipeline

from mptool.inputs.models import DomainEncoder, proba_in
from mptool.inputs.spec import Spec
from mptool.loo.base import LooRequest, LooResult
from mptool.loo.design import Design, GroupStats, build_design, class_index, design_parts, scale_of, scaler_kind

#: Rows per vectorised block (bounds memory at about block * classes * features floats).
BLOCK = 1 << 16


def _normalise(jll: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Softmax over the classes present (absent ones get probability 0), like predict_proba."""
    jll = np.where(present, jll, -np.inf)
    return np.exp(jll - logsumexp(jll, axis=1, keepdims=True))


def _alpha(est: Any) -> float | None:
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
    if _alpha(est) is None:
        return "alpha must be a positive scalar"
    n_codes = np.asarray(enc.n_codes())
    mc = est.min_categories
    if mc is None or np.any(np.asarray(mc) < n_codes):
        return "min_categories below the domain sizes lets the category count depend on T"
    return enc, est


def gaussian_loo(design: Design, y_idx: np.ndarray, n_classes: int, positions: np.ndarray,
                 advance: Callable[[int], None]) -> np.ndarray:
    """p_{A(T\\{t})}(.|x_t) of GaussianNB (with standardised numerics), every t in ``positions``.

    With z = (x - mu')/s' (scaler on T \\ {t}): class mean (m_c - mu')/s', class variance
    v_c/s'^2, plus epsilon = var_smoothing * max_j var_j(T \\ {t}) in those coordinates;
    jll_c = log prior_c - 1/2 sum log(2 pi var_cj) - 1/2 sum (z_j - theta_cj)^2 / var_cj.
    """
    est = design.est
    X = np.hstack([design.fixed, design.raw])
    d_fixed = design.fixed.shape[1]
    scaled = np.zeros(X.shape[1], dtype=bool)
    scaled[d_fixed:] = True
    n = len(X)
    out = np.empty((len(positions), n_classes))
    zeros = np.zeros(n, dtype=np.int64)
    cstats = GroupStats.of(X, y_idx, n_classes)
    gstats = GroupStats.of(X, zeros, 1)
    for start in range(0, len(positions), BLOCK // 16):
        pos = positions[start : start + BLOCK // 16]
        yt = y_idx[pos]
        r = len(pos)
        cnt, cmean, cm2 = cstats.count, cstats.mean, cstats.m2
        cnew = cstats.without(X[pos], yt)
        gnew = gstats.without(X[pos], zeros[pos])
        gmu, gvar = gnew[0], gnew[1] / (n - 1)  # (r, d): statistics of T \ {t}
        mu = np.where(scaled, gmu, 0.0)
        s = np.where(scaled, scale_of(gvar), 1.0)
        # class statistics after removal, (r, C, d)
        loo_cnt = np.broadcast_to(cnt, (r, n_classes)).copy()
        loo_cnt[np.arange(r), yt] -= 1
        m = np.broadcast_to(cmean, (r, *cmean.shape)).copy()
        v = np.broadcast_to(cm2, (r, *cm2.shape)).copy()
        m[np.arange(r), yt] = cnew[0]
        v[np.arange(r), yt] = cnew[1]
        with np.errstate(divide="ignore", invalid="ignore"):
            v = v / loo_cnt[:, :, None]
        theta = (m - mu[:, None, :]) / s[:, None, :]
        var_c = v / (s**2)[:, None, :]
        all_var = gvar / s**2
        eps = est.var_smoothing * all_var.max(axis=1)
        var_c = var_c + eps[:, None, None]
        z = (X[pos] - mu) / s
        present = loo_cnt > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            prior = np.log(loo_cnt / (n - 1))
            jll = prior - 0.5 * np.sum(np.log(2.0 * np.pi * var_c), axis=2)
            jll = jll - 0.5 * np.sum((z[:, None, :] - theta) ** 2 / var_c, axis=2)
        jll = np.where(present, jll, -np.inf)
        out[start : start + r] = _normalise(jll, present)
        advance(r)
    return out


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

    def minmax(self, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = self.raw[pos]
        yt = self.y_idx[pos]
        r = len(pos)
        lo = np.where(x == self.lo, self.lo2, self.lo)
        hi = np.where(x == self.hi, self.hi2, self.hi)
        rng = hi - lo
        scale = 1.0 / np.where(rng < 10 * np.finfo(float).eps, 1.0, rng)
        offset = -lo * scale
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
    alpha = _alpha(est)
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
        elif _alpha(est) is None:
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
        y_idx = class_index(T.y, request.classes)
        C = len(request.classes)
        pos = np.asarray(request.positions, dtype=np.int64)
        if isinstance(est, CategoricalNB):
            enc, cat_est = categorical_parts(request.template)  # type: ignore[misc]
            codes = enc.transform(T.X[list(request.template.steps[0][1].transformers[0][2])])
            counts = CategoricalCounts.from_codes(
                codes, y_idx, C, np.asarray(cat_est.min_categories), _alpha(cat_est), cat_est.fit_prior
            )
            fulls, loos = [], []
            for start in range(0, len(pos), BLOCK):
                p = pos[start : start + BLOCK]
                pf, pl = counts.loo_proba(codes[p], y_idx[p])
                fulls.append(pf)
                loos.append(pl)
                advance(len(p))
            cat_p = (np.vstack(fulls), np.vstack(loos)) if fulls else (np.empty((0, C)),) * 2
            return LooResult(p_full=cat_p[0], p_loo=cat_p[1], engine=self.name)
        design = build_design(request.template, T.X)
        if isinstance(est, GaussianNB):
            p_loo = gaussian_loo(design, y_idx, C, pos, advance)
        else:
            p_loo = discrete_loo(design, y_idx, C, pos, advance)
        p_full = proba_in(request.full_model, T.X.iloc[pos], request.classes)
        return LooResult(p_full=p_full, p_loo=p_loo, engine=self.name)

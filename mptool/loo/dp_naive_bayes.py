"""Exact leave-one-out for mptool's epsilon-DP categorical naive Bayes: downdate the counts, keep the noise.

:class:`mptool.inputs.dp_nb.DPCategoricalNB` adds Laplace noise to every cell of its count
tables; the draws come from ``random_state`` in an order fixed by the public domain alone (K
classes, the sizes n_j of the features: :meth:`DPCategoricalNB.noise`), never by T's records,
their number or their order. With an integer seed, A(T \\ {t}) -- the same estimator fitted on
T \\ {t} with the same seed, as the refit engine fits it -- therefore adds *the same* noise to
counts that differ from T's in exactly d + 1 cells: the class count N_y and the cells
N_{y, j, x_j} of t's class y and codes x, each one lower. Its post-processing (clip at 0,
floor the class counts at 1, smooth with alpha, normalise) is per cell and per class row, so
only class y's prior, the normaliser of the priors, and class y's row of each feature table
change. This module recomputes exactly those, with the refit's own operations in the refit's
order ((N - 1) + noise, the row sums of the smoothed row, the logs, the joint log-likelihood
summed feature by feature, the normalisation), so p_{A(T\\{t})}(.|x_t) equals the refit's
(tests: ``tests/test_engines_fast.py``, to 1e-12, in practice bit for bit).

Refused (``--engine auto`` refits): ``random_state`` not an integer (a fresh seed per fit draws
new noise; A(T) and A(T \\ {t}) would not be paired), preprocessing other than mptool's
fixed-domain encoder (or none). The DP guarantee is the estimator's (``mptool.inputs.dp_nb``);
this engine only computes the paired-seed PDTP faster.
"""

from __future__ import annotations

from collections.abc import Callable
from numbers import Integral
from typing import Any

import numpy as np
from scipy.special import logsumexp
from sklearn.pipeline import Pipeline

from mptool.inputs.dp_nb import DPCategoricalNB, _codes
from mptool.inputs.models import ColumnTransformer, DomainEncoder, proba_in
from mptool.loo.design import class_index

#: Records per vectorised block.
BLOCK = 1 << 14


def dp_refusal(template: Any) -> str | None:
    """Why the exact engine cannot follow this DP naive Bayes pipeline (None: it can)."""
    est = template.steps[-1][1] if isinstance(template, Pipeline) else template
    seed = est.random_state
    if isinstance(seed, bool) or not isinstance(seed, Integral):
        return "DPCategoricalNB without an integer random_state: A(T) and A(T\\{t}) would draw different noise"
    if est.n_categories is None or est.classes is None:
        return "DPCategoricalNB without its public domain (n_categories and classes)"
    if not isinstance(template, Pipeline) or len(template.steps) == 1:
        return None
    pre = template.steps[0][1]
    if len(template.steps) != 2 or not isinstance(pre, ColumnTransformer):
        return "unexpected preprocessing in front of DPCategoricalNB"
    if not all(isinstance(tr, DomainEncoder) for _, tr, _ in pre.transformers):
        return "DPCategoricalNB needs mptool's fixed-domain encoder"
    return None


def _model_codes(model: Any, X: Any) -> np.ndarray:
    """The estimator's input codes for rows X (the fitted pipeline's fixed-domain encoding)."""
    Z = model[:-1].transform(X) if isinstance(model, Pipeline) and len(model.steps) > 1 else X
    est = model.steps[-1][1] if isinstance(model, Pipeline) else model
    return _codes(Z, np.asarray(est.n_categories, dtype=np.int64).ravel())


def dp_loo(est: DPCategoricalNB, codes: np.ndarray, y_idx: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """p_{A(T\\{t})}(.|x_t) in ``est.classes`` order for each t in ``pos`` (module docstring).

    ``est`` carries the parameters (epsilon, alpha, domain, seed); ``codes`` (n, d) and
    ``y_idx`` (indices into ``est.classes``) are T.
    """
    sizes = np.asarray(est.n_categories, dtype=np.int64).ravel()
    K, alpha = len(list(est.classes)), float(est.alpha)
    class_noise, table_noise = est.noise(K, sizes)
    counts = np.bincount(y_idx, minlength=K).astype(float)
    tables = [np.bincount(y_idx * n + codes[:, j], minlength=K * n).reshape(K, n).astype(float)
              for j, n in enumerate(sizes.tolist())]
    full_smoothed = [np.maximum(t + e, 0.0) + alpha for t, e in zip(tables, table_noise, strict=True)]
    full_flp = [np.log(s) - np.log(s.sum(axis=1, keepdims=True)) for s in full_smoothed]
    r = len(pos)
    rows, yt, xt = np.arange(r), y_idx[pos], codes[pos]
    noisy = np.broadcast_to(counts + class_noise, (r, K)).copy()
    noisy[rows, yt] = (counts[yt] - 1.0) + class_noise[yt]
    prior = np.maximum(noisy, 1.0)
    jll = np.log(prior) - np.log(prior.sum(axis=1, keepdims=True))
    for j in range(len(sizes)):
        x = xt[:, j]
        term = full_flp[j][:, x].T.copy()  # (r, K): classes other than t's keep A(T)'s row
        own_row = full_smoothed[j][yt].copy()  # (r, n_j): t's class row, its cell x_j one count lower
        own_row[rows, x] = np.maximum((tables[j][yt, x] - 1.0) + table_noise[j][yt, x], 0.0) + alpha
        term[rows, yt] = np.log(own_row[rows, x]) - np.log(own_row.sum(axis=1))
        jll += term
    return np.exp(jll - logsumexp(jll, axis=1, keepdims=True))


def dp_engine_run(request: Any, advance: Callable[[int], None]) -> tuple[np.ndarray, np.ndarray]:
    """(p_full, p_loo) in ``request.classes`` order for the requested records of a DP naive Bayes spec."""
    T, model = request.train, request.full_model
    est: DPCategoricalNB = model.steps[-1][1] if isinstance(model, Pipeline) else model
    public = np.asarray(list(est.classes), dtype=object)
    codes = _model_codes(model, T.X)
    y_idx = class_index(T.y, public)
    pos = np.asarray(request.positions, dtype=np.int64)
    cols = class_index(public, request.classes) if set(public.tolist()) <= set(request.classes.tolist()) else None
    if cols is None:  # a public class T lacks (pdtp and mitigate refuse this before any fit)
        raise ValueError("the DP model's public class set has classes outside T's")
    loos = []
    for start in range(0, len(pos), BLOCK):
        p = pos[start : start + BLOCK]
        out = np.zeros((len(p), len(request.classes)))
        out[:, cols] = dp_loo(est, codes, y_idx, p)
        loos.append(out)
        advance(len(p))
    p_loo = np.vstack(loos) if loos else np.empty((0, len(request.classes)))
    return proba_in(model, T.X.iloc[pos], request.classes), p_loo

"""Risk screening for the refit engine: which records to refit first.

A refit per record is the only way to get PDTP (Long et al. 4.2) for models without an
exact engine, and a run that only needs one confirmed violator (``--fail-fast``) finishes
sooner when the likeliest violators are refitted first. The screen scores every record
from A(T) alone (no refit), and the refit engine runs its chunks in descending score.

The order changes nothing computed: every record's PDTP comes from its own refit, the
results are written in row order, and a run in risk order is byte-identical to one in row
order. Only how soon a violator is found depends on the screen.

Scores (larger = refit sooner), picked by measurement (``benchmarks/bench_fail_fast.py``,
Adult, 300 records, against full refits):

- ``influence`` (``MLPClassifier``): the PDTP predicted by one Newton step on the output
  layer without the record (:func:`mlp_influence_loo`: the network's last hidden layer held
  fixed, its L2 ``alpha`` as the output layer's penalty). Records the network memorised move
  the most. It beat the loss, the margin and the gradient norm on the paper's network:
  Spearman 0.87 against the true PDTP (the others 0.77), 3 of the true top-10 among its
  first 10 and 5 among its first 30 (the others none), the first record above PDTP 5 after 4
  refits (loss 35).
- ``confidence`` (scikit-learn forests): -ln of the record's smallest class probability
  under A(T), floored at bin_size / 2 (:func:`confidence_score`). A refit without t
  redraws every tree's bootstrap (same seed, one record fewer), so a forest's PDTP is
  mostly resampling noise, largest on the log of a small probability. No score predicts it
  well; over two draws of T this one found 10 violators within 21-25 refits (the loss:
  126-166; the trees' spread, :func:`forest_spread_score`: 19-25) and 3-5 of the true
  top-10 within the first 30 (loss 1, spread 2).
- ``loss`` (every other model): -ln p_T(y_t | x_t), the record's loss under A(T). For two
  classes the confidence margin p_T(y_t) - max_{y != y_t} p_T(y) is a monotone function of it
  (the same order), so the margin is not a separate choice on binary data.

The gradient norm (:func:`mlp_gradient_score`), the margin and the trees' spread are the
alternatives measured; they stay here for the benchmark. Decision trees (Adult, 300
records): the loss has Spearman 0.65 against PDTP, the confidence -0.62.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from scipy.special import expit
from sklearn.pipeline import Pipeline

from mptool.loo.design import class_index


def _instance(est: Any, module: str, *names: str) -> bool:
    """Whether ``est`` is one of scikit-learn's classes ``names`` of ``module``, without importing it.

    A fitted estimator of such a class means the module is imported already; otherwise it is
    not, and importing it only to answer no would cost every audit start-up time (issue 28).
    """
    mod = sys.modules.get(module)
    return mod is not None and isinstance(est, tuple(getattr(mod, n) for n in names))


def _forest(est: Any) -> bool:
    """Forests whose refits redraw every bootstrap (``confidence`` screen)."""
    return _instance(est, "sklearn.ensemble", "RandomForestClassifier", "ExtraTreesClassifier")


def _mlp(est: Any) -> bool:
    return _instance(est, "sklearn.neural_network", "MLPClassifier")


#: Scores are rounded to this many decimals before ordering, so a last-bit difference in a
#: prediction (BLAS threads) cannot change the order; ties go to the earlier position in T.
ROUND_DECIMALS = 9


def loss_score(p_full: np.ndarray, y_idx: np.ndarray) -> np.ndarray:
    """-ln p_T(y_t | x_t) per record (the log-loss of A(T) on the record; inf where p is 0)."""
    p = p_full[np.arange(len(y_idx)), y_idx]
    with np.errstate(divide="ignore"):
        return -np.log(p)


def confidence_score(p_full: np.ndarray, floor: float) -> np.ndarray:
    """-ln max(min_y p_T(y | x_t), floor): how small the record's least likely class is (log scale, floored)."""
    return -np.log(np.maximum(p_full.min(axis=1), floor))


def margin_score(p_full: np.ndarray, y_idx: np.ndarray) -> np.ndarray:
    """max_{y != y_t} p_T(y | x_t) - p_T(y_t | x_t): the negated confidence margin (larger = less sure)."""
    rows = np.arange(len(y_idx))
    own = p_full[rows, y_idx]
    other = p_full.copy()
    other[rows, y_idx] = -np.inf
    return other.max(axis=1) - own


def _activation(name: str, z: np.ndarray) -> np.ndarray:
    """Hidden activation of MLPClassifier at ``z``."""
    if name == "tanh":
        return np.tanh(z)
    if name == "relu":
        return np.maximum(z, 0.0)
    if name == "logistic":
        return expit(z)
    return z  # identity


def _derivative(name: str, a: np.ndarray) -> np.ndarray:
    """Derivative of MLPClassifier's hidden activation, from the activation's output ``a``."""
    if name == "tanh":
        return 1.0 - a * a
    if name == "relu":
        return (a > 0).astype(float)
    if name == "logistic":
        return a * (1.0 - a)
    return np.ones_like(a)


def _mlp_head(model: Any, X: Any) -> tuple[Any, np.ndarray] | None:
    """The fitted MLPClassifier of ``model`` and the last hidden layer's outputs on X with a 1 appended."""
    est = model.steps[-1][1] if isinstance(model, Pipeline) else model
    if not _mlp(est):
        return None
    a = model[:-1].transform(X) if isinstance(model, Pipeline) else X
    a = np.asarray(a.toarray() if hasattr(a, "toarray") else a, dtype=float)
    for W, b in zip(est.coefs_[:-1], est.intercepts_[:-1], strict=True):
        a = _activation(est.activation, a @ W + b)
    return est, np.column_stack([a, np.ones(len(a))])


def _outputs(z: np.ndarray, softmax: bool) -> np.ndarray:
    """The network's output probabilities from its output-layer logits (one logistic unit or softmax)."""
    if softmax:
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    return expit(z)


def _leverage(phi: np.ndarray, w: np.ndarray, alpha: float) -> np.ndarray:
    """M_t = Phi_t H^{-1} Phi_t^T per record, H = sum_t W_t (x) phi_t phi_t^T + alpha I (output-layer Hessian)."""
    n_out, n_feat = w.shape[1], phi.shape[1]
    H = np.empty((n_out, n_feat, n_out, n_feat))
    for a in range(n_out):
        for b in range(n_out):
            H[a, :, b, :] = phi.T @ (w[:, a, b][:, None] * phi)
    H = H.reshape(n_out * n_feat, n_out * n_feat)
    H += (alpha + 1e-9 * np.trace(H) / len(H)) * np.eye(len(H))
    Hinv = np.linalg.inv(H).reshape(n_out, n_feat, n_out, n_feat)
    M = np.empty((len(phi), n_out, n_out))
    for a in range(n_out):
        for b in range(n_out):
            M[:, a, b] = np.einsum("ni,ni->n", phi @ Hinv[a, :, b, :], phi)
    return M


def mlp_influence_loo(model: Any, X: Any, y: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """A(T)'s probabilities on X and approximate leave-one-out ones (columns: the MLP's classes_); None if no MLP.

    Holding the last hidden layer's outputs phi_t fixed, the output layer is a (multinomial)
    logistic regression with the network's L2 penalty ``alpha``. One Newton step from A(T)
    on T minus t moves t's logits by z_{-t} - z_t = M_t (I - W_t M_t)^{-1} (p_t - y_t), with
    M_t = Phi_t H^{-1} Phi_t^T (Sherman-Morrison-Woodbury on the output layer's Hessian H
    minus t's term W_t (x) phi_t phi_t^T): the classical approximate leave-one-out. Records
    the network memorised (high leverage) move the most.
    """
    head = _mlp_head(model, X)
    if head is None:
        return None
    est, phi = head
    softmax = est.out_activation_ == "softmax"
    z = phi[:, :-1] @ est.coefs_[-1] + est.intercepts_[-1]
    p = _outputs(z, softmax)
    y_idx = np.searchsorted(est.classes_, y)
    target = np.zeros_like(p)
    if softmax:
        target[np.arange(len(y)), y_idx] = 1.0
        w = p[:, :, None] * (np.eye(p.shape[1])[None] - p[:, None, :])  # diag(p) - p p^T per record
    else:
        target[:, 0] = y_idx == 1
        w = (p * (1.0 - p))[:, :, None]
    M = _leverage(phi, w, est.alpha)
    step = np.linalg.solve(np.eye(p.shape[1])[None] - w @ M, (p - target)[:, :, None])
    p_loo = _outputs(z + (M @ step)[:, :, 0], softmax)
    if not softmax:
        p, p_loo = np.column_stack([1.0 - p, p]), np.column_stack([1.0 - p_loo, p_loo])
    return p, p_loo


def mlp_influence_score(model: Any, X: Any, y: np.ndarray, floor: float) -> np.ndarray | None:
    """Predicted PDTP: max_y |ln p_T(y|x_t) - ln p_{-t}(y|x_t)| of :func:`mlp_influence_loo`, floored at ``floor``."""
    got = mlp_influence_loo(model, X, y)
    if got is None:
        return None
    p, p_loo = (np.maximum(q, floor) for q in got)
    return np.abs(np.log(p) - np.log(p_loo)).max(axis=1)


def mlp_gradient_score(model: Any, X: Any, y: np.ndarray) -> np.ndarray | None:
    """||d loss_t / d theta|| over every weight and bias of a fitted MLPClassifier (None for other models).

    Backpropagation per record: a dense layer's weight gradient is the outer product of its
    input a and its error delta, of norm ||a|| * ||delta||, so the squared norm over all
    layers is sum_l (||a_{l-1}||^2 + 1) * ||delta_l||^2.
    """
    est = model.steps[-1][1] if isinstance(model, Pipeline) else model
    if not _mlp(est):
        return None
    a = model[:-1].transform(X) if isinstance(model, Pipeline) else X
    inputs = [np.asarray(a.toarray() if hasattr(a, "toarray") else a, dtype=float)]
    for W, b in zip(est.coefs_[:-1], est.intercepts_[:-1], strict=True):
        inputs.append(_activation(est.activation, inputs[-1] @ W + b))
    softmax = est.out_activation_ == "softmax"
    p = _outputs(inputs[-1] @ est.coefs_[-1] + est.intercepts_[-1], softmax)
    y_idx = np.searchsorted(est.classes_, y)
    target = np.zeros_like(p)
    if softmax:
        target[np.arange(len(y)), y_idx] = 1.0
    else:
        target[:, 0] = y_idx == 1
    delta = p - target
    total = (np.sum(inputs[-1] ** 2, axis=1) + 1.0) * np.sum(delta**2, axis=1)
    for layer in range(len(inputs) - 2, -1, -1):
        delta = (delta @ est.coefs_[layer + 1].T) * _derivative(est.activation, inputs[layer + 1])
        total += (np.sum(inputs[layer] ** 2, axis=1) + 1.0) * np.sum(delta**2, axis=1)
    return np.sqrt(total)


def forest_spread_score(model: Any, X: Any, floor: float) -> np.ndarray | None:
    """max_y sd_trees(p_y(x_t)) / (sqrt(B) * max(p_y(x_t), floor)) for a fitted forest (None for other models).

    A refit on T minus t redraws every tree's bootstrap (the seed is the same, the draws over
    one record fewer are not), so p_{T minus t}(y|x_t) differs from p_T(y|x_t) by resampling
    noise of about sqrt(2) * sd / sqrt(B) on top of the record's own effect; on the log
    scale of PDTP that noise is largest where a class's probability is small.
    """
    est = model.steps[-1][1] if isinstance(model, Pipeline) else model
    if not _forest(est) or not getattr(est, "estimators_", None):
        return None
    Xt = model[:-1].transform(X) if isinstance(model, Pipeline) else X
    total = total_sq = 0.0
    for tree in est.estimators_:
        q = tree.predict_proba(Xt)
        total, total_sq = total + q, total_sq + q * q
    B = len(est.estimators_)
    mean = total / B
    sd = np.sqrt(np.maximum(total_sq / B - mean * mean, 0.0))
    return (sd / (np.sqrt(B) * np.maximum(mean, floor))).max(axis=1)


def screen_scores(model: Any, X: Any, y: np.ndarray, p_full: np.ndarray, classes: np.ndarray, floor: float
                  ) -> tuple[np.ndarray, str]:
    """Screening scores of the records (X, y) under A(T) = ``model`` (larger = refit sooner) and the screen's name.

    ``influence`` for an MLPClassifier, ``confidence`` for a forest, else ``loss`` (the module
    docstring says why); ``p_full`` are A(T)'s probabilities on X in ``classes`` order and
    ``floor`` the smallest probability binning leaves (bin_size / 2).
    """
    got = mlp_influence_score(model, X, y, floor)
    if got is not None:
        return got, "influence"
    est = model.steps[-1][1] if isinstance(model, Pipeline) else model
    if _forest(est):
        return confidence_score(p_full, floor), "confidence"
    return loss_score(p_full, class_index(y, classes)), "loss"


def risk_order(scores: np.ndarray) -> np.ndarray:
    """Indices of ``scores`` from the highest (rounded) score down; equal scores keep index order; NaN last."""
    s = np.round(np.asarray(scores, dtype=float), ROUND_DECIMALS)
    s = np.where(np.isnan(s), -np.inf, s)
    return np.lexsort((np.arange(len(s)), -s)).astype(np.int64)

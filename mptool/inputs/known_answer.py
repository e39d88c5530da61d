"""A randomized classifier whose records' influence is known: the ground truth of the replicate engine's tests.

Used by tests/test_randomness.py, tests/test_ka3.py and docs/randomness.md only (a dotted path with
``--allow-import mptool.inputs.known_answer``). For a query x its probability of class 1 is
sigmoid(z_seed + z_order + m(x)):

- z_seed ~ N(0, ``noise``^2), drawn from ``numpy.random.default_rng([random_state, n])``: a
  refit with one row fewer redraws it (as minibatch shuffling or bootstrap do);
- z_order = ``order_effect`` * the standardised share of class 1 among the first ``head`` rows
  minus the share in all rows: depends on the row order only, mean 0 over random orders;
- m(x) = +-``memorise`` towards the label of a training row with x's exact feature values and
  weight 1 (``weight_feature``: the column whose value 0 makes a row weight 0, never memorised).

So, over the training randomness: removing a record whose features appear once with weight 1
moves its expected prediction by the memorised shift (PDTP of the expected prediction about 2 to
3 with the defaults: large influence); removing one of several identical rows or a weight-0 row
changes only n and the order (expected influence about 0: a null). :func:`true_pdtp` computes that
expected influence exactly (docs/randomness.md section 2's theta_t), so tests can check the replicate
engine's bounds and decisions against it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy.special import expit, logit
from scipy.stats import hypergeom, norm
from sklearn.base import BaseEstimator, ClassifierMixin

#: The dotted path of :class:`KnownAnswerClassifier` and the module ``--allow-import`` must name.
ESTIMATOR, MODULE = "mptool.inputs.known_answer.KnownAnswerClassifier", "mptool.inputs.known_answer"


def known_frame(seed: int, unique: int = 8, copies: int = 12, zeros: int = 6) -> tuple[pd.DataFrame, np.ndarray]:
    """A data set with known answers: columns x, w (the weight feature), label; and each row's kind.

    ``unique`` records present once with weight 1 (kind ``large``: memorised), one record present
    ``copies`` times and ``zeros`` records of weight 0 (kind ``null``: expected influence about 0).
    """
    rng = np.random.default_rng(seed)
    rows = [(float(i), 1.0, int(rng.integers(2))) for i in range(unique)]
    lab = int(rng.integers(2))
    rows += [(1000.0, 1.0, lab)] * copies
    rows += [(2000.0 + z, 0.0, int(rng.integers(2))) for z in range(zeros)]
    kind = np.array(["large"] * unique + ["null"] * (copies + zeros))
    return pd.DataFrame(rows, columns=["x", "w", "label"]), kind


def known_spec(seed: int = 0, **params: Any) -> dict[str, Any]:
    """A spec (as a mapping) of :class:`KnownAnswerClassifier` on :func:`known_frame`: noise 1, weight column w."""
    return {"data": {"label": "label", "train_size": None, "missing": "drop"},
            "model": {"estimator": ESTIMATOR, "params": {"weight_feature": 1, "noise": 1.0, **params},
                      "preprocess": "none"},
            "output": {"bin_size": 0.01}, "seed": seed}


def _expected_release(n: int, n1: int, shift: float, est: KnownAnswerClassifier, bin_size: float) -> np.ndarray:
    """E over the seed noise and the row order of the binned (Long et al. 5.2) (p(class 0), p(class 1)).

    The fit on n rows, n1 of class 1: z_order = order_effect * (h / m - n1 / n) / scale with h, the
    class-1 rows among the first m = min(head, n) of a uniformly random order, hypergeometric; z_seed
    ~ N(0, noise^2). Each bin's probability is a difference of normal CDFs at the logits of its edges.
    """
    m = min(est.head, n)
    share = n1 / n
    scale = np.sqrt(max(share * (1 - share), 1e-12) / m)
    h = np.arange(max(0, m - (n - n1)), min(m, n1) + 1)
    c = (est.order_effect * (h / m - share) / scale + shift)[:, None]
    weight = hypergeom.pmf(h, n, n1, m)
    n_bins = int(np.ceil(np.round(1.0 / bin_size, 9)))
    lo = np.arange(n_bins) * bin_size
    hi = np.append(np.minimum(lo[1:], 1.0), 1.0)
    centre = (lo + hi) / 2.0
    with np.errstate(divide="ignore"):
        a, b = logit(lo), logit(hi)  # p1 in [lo, hi) <=> z in [a, b); p0 in [lo, hi) <=> z in (-b, -a]
    if est.noise > 0:
        p1 = norm.cdf((b - c) / est.noise) - norm.cdf((a - c) / est.noise)
        p0 = norm.cdf((-a - c) / est.noise) - norm.cdf((-b - c) / est.noise)
    else:  # no seed noise: z = c exactly
        p1, p0 = ((a <= c) & (c < b)).astype(float), ((-b < c) & (c <= -a)).astype(float)
    return np.array([weight @ (p0 @ centre), weight @ (p1 @ centre)])


def true_pdtp(frame: pd.DataFrame, row: int, bin_size: float = 0.01, **params: Any) -> float:
    """The exact PDTP theta_t (docs/randomness.md section 2) of row ``row`` of ``frame`` (:func:`known_frame`).

    theta_t = max_y |ln q_T(y) - ln q_{T minus t}(y)|, q_S the expected binned probability on x_t of
    :class:`KnownAnswerClassifier` trained on S (``params`` as in :func:`known_spec`, all of ``frame``
    as T), over its seed noise and a uniformly random row order: what the replicate engine estimates.
    ``bin_size`` > 0 (the binned gate). ValueError where duplicates of x_t disagree on the label (the
    memorised value would depend on the order).
    """
    est = KnownAnswerClassifier(**{"weight_feature": 1, "noise": 1.0, **params})
    X = frame.drop(columns="label").to_numpy(dtype=float)
    y01 = (frame["label"].to_numpy() == np.unique(frame["label"])[1]).astype(int)
    same = np.all(X == X[row], axis=1)
    if est.weight_feature is not None:
        same &= X[:, est.weight_feature] != 0
    q = []
    for keep in (np.ones(len(X), dtype=bool), np.arange(len(X)) != row):
        labels = set(y01[same & keep].tolist())
        if len(labels) > 1:
            raise ValueError("duplicates of the record disagree on the label")
        shift = est.memorise * (2.0 * labels.pop() - 1.0) if labels else 0.0
        q.append(_expected_release(int(keep.sum()), int(y01[keep].sum()), shift, est, bin_size))
    return float(np.max(np.abs(np.log(q[0]) - np.log(q[1]))))


class KnownAnswerClassifier(ClassifierMixin, BaseEstimator):
    """Noise from the seed and n, an order effect, and a memorised label per weight-1 training point."""

    def __init__(self, random_state: int | None = 0, noise: float = 2.0, order_effect: float = 0.5,
                 memorise: float = 6.0, head: int = 10, weight_feature: int | None = None) -> None:
        self.random_state = random_state
        self.noise = noise
        self.order_effect = order_effect
        self.memorise = memorise
        self.head = head
        self.weight_feature = weight_feature

    def _keys(self, X: np.ndarray) -> list[bytes]:
        return [np.ascontiguousarray(row).tobytes() for row in X]

    def fit(self, X: Any, y: Any) -> KnownAnswerClassifier:
        X = np.asarray(X, dtype=float)
        y = np.asarray(y)
        self.classes_ = np.unique(y)
        if len(self.classes_) != 2:
            raise ValueError("KnownAnswerClassifier needs exactly two classes")
        y01 = (y == self.classes_[1]).astype(float)
        n = len(y)
        rng = np.random.default_rng([0 if self.random_state is None else int(self.random_state), n])
        z_seed = float(rng.normal(0.0, self.noise))
        share = y01.mean()
        m = min(self.head, n)
        scale = np.sqrt(max(share * (1 - share), 1e-12) / m)
        z_order = self.order_effect * float((y01[:m].mean() - share) / scale)
        self.shift_ = z_seed + z_order
        weight = np.ones(n, dtype=bool) if self.weight_feature is None else X[:, self.weight_feature] != 0
        self.memory_ = {k: 2.0 * v - 1.0 for k, v, w in zip(self._keys(X), y01, weight, strict=True) if w}
        self.n_features_in_ = X.shape[1]
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        X = np.asarray(X, dtype=float)
        m = np.array([self.memory_.get(k, 0.0) for k in self._keys(X)]) * self.memorise
        p1 = expit(self.shift_ + m)
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X: Any) -> np.ndarray:
        return self.classes_[(self.predict_proba(X)[:, 1] > 0.5).astype(int)]

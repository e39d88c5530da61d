"""mptool's own epsilon-DP categorical naive Bayes: the Laplace (histogram) mechanism on its counts.

Categorical naive Bayes is a function of its sufficient statistics only: the class counts
``N_k`` (K cells) and, for each of the d features, the table ``N_kjc`` of records of class k
whose feature j takes category c (K x n_j cells). :class:`DPCategoricalNB` releases all of
these counts with Laplace noise and builds the classifier from the noisy counts.

Derivation (Dwork & Roth, *The Algorithmic Foundations of Differential Privacy*, 2014:
Definition 3.1 L1 sensitivity, Theorem 3.6 the Laplace mechanism, Proposition 2.1
post-processing):

- Neighbours are add/remove-one-record, the relation DTP uses (Long et al. section 4.2,
  Definition 4.1: T against T \\ {t}).
- Removing record t = (x, y) from T lowers exactly one cell of the class histogram (N_y) by
  1 and exactly one cell of each feature table (N_{y, j, x_j}) by 1: every record has one
  class and one code per feature (an empty cell has its own code, the encoder's "missing").
  The count vector of all K + K * sum_j n_j cells therefore moves by exactly d + 1 in L1: its
  L1 sensitivity is d + 1.
- Adding independent Laplace(0, (d + 1) / epsilon) noise to EVERY cell, including cells whose
  count is 0, is epsilon-DP (the Laplace mechanism). Equivalently: each of the d + 1
  histograms gets Laplace(1/epsilon') noise, epsilon' = epsilon / (d + 1), is epsilon'-DP
  (disjoint cells: parallel composition within a histogram), and the d + 1 histograms
  compose sequentially to epsilon.
- Clipping the noisy counts at 0, flooring the class counts at 1, Laplace smoothing with
  ``alpha`` and normalising are post-processing, so the classifier (and every probability it
  outputs) is epsilon-DP.

The assumption, stated as diffprivlib states its ``bounds``: **the feature domain (the set of
categories of every feature) and the class set are public**, fixed before T is seen. The cells
that get noise must not depend on which records are in T; if they did (e.g. categories read off
T), a category present only in record t would reveal t by the table's shape. Here they are
parameters: ``n_categories`` (codes 0..n_j - 1 of feature j) and ``classes``. Under mptool's
pipelines (:func:`mptool.inputs.models.build_pipeline`) they come from the schema: the
categories of ``data.categorical`` columns, ``model.bins`` edges, or a numeric column's values
-- all taken from the whole CSV, never from T, so T and T \\ {t} get the same cells. That is
not a public domain when the CSV is T (``train_size: null``) or holds it: mptool claims
DTP <= epsilon (``mptool mitigate``'s ``dtp_bound``) only for a domain the spec declares
(``model.params.classes`` and ``n_categories`` or ``model.bins`` edges;
:func:`mptool.inputs.models.dp_domain_problem`), and edges computed from the data are not
public either. A fit without them is refused rather than reading them off the training data.
mptool reports T's classes, so a T lacking one of the CSV's label values is refused
(mptool.inputs.models.check_public_classes).

Why it matters for DTP: if A is epsilon-DP, then for every set S of models
P[A(T) in S] <= e^epsilon P[A(T \\ {t}) in S]; integrating the non-negative bounded function
m -> p_m(y | x) gives E p_{A(T)}(y | x) <= e^epsilon E p_{A(T \\ {t})}(y | x) and the converse,
which is exactly Long et al.'s Definition 4.1 (section 4.2) for the classifier's expected
output over its training noise: DTP <= epsilon. (Long et al. do not state this as a theorem;
section 9, "Difference between DTP and DP", and section 7 contrast DP, a guarantee over the
algorithm's randomness, with DTP, a measurement.) mptool's paired-seed PDTP measures something
else: A(T) and A(T \\ {t}) are fitted with the same seed, so the same noise draws cancel in
the comparison and the PDTP shows how far t moves one noisy model, not the guarantee.

Noise is drawn from ``random_state`` in a fixed order (class counts, then each feature's
table row by row), so a seed gives the same model for any --jobs, and refits with the spec's
seed are paired.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

import numpy as np
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state


def _positive_finite(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0 (got {value!r})")
    return float(value)


def _codes(X: Any, sizes: np.ndarray) -> np.ndarray:
    """``X`` as integer codes, each feature j within 0..sizes[j] - 1 (ValueError otherwise)."""
    Z = np.asarray(X.toarray() if hasattr(X, "toarray") else X, dtype=float)
    if Z.ndim != 2 or Z.shape[1] != len(sizes):
        raise ValueError(f"expected {len(sizes)} feature columns of category codes")
    if not np.all(np.isfinite(Z)) or np.any(Z != np.round(Z)) or np.any(Z < 0) or np.any(Z >= sizes):
        raise ValueError("a feature value is not a category code of its public domain")
    return Z.astype(np.int64)


class DPCategoricalNB(ClassifierMixin, BaseEstimator):
    """epsilon-DP categorical naive Bayes: Laplace((d + 1) / epsilon) noise on every count (module docstring).

    ``X`` holds category codes 0..n_categories[j] - 1 per feature (mptool's DomainEncoder
    output); ``classes`` is the public class set. ``alpha`` (> 0) is Laplace smoothing, as in
    scikit-learn's CategoricalNB; with a huge epsilon the model is CategoricalNB's.
    """

    def __init__(self, epsilon: float = 1.0, alpha: float = 1.0, n_categories: Any = None,
                 classes: Any = None, random_state: Any = None) -> None:
        self.epsilon, self.alpha = epsilon, alpha
        self.n_categories, self.classes, self.random_state = n_categories, classes, random_state

    _parameter_constraints: dict = {}  # checked by _validate_params below (mptool.inputs.models._check_params)

    def _validate_params(self) -> None:
        """Refuse epsilon or alpha that is not a finite number > 0, and a malformed domain (ValueError)."""
        _positive_finite(self.epsilon, "epsilon")
        _positive_finite(self.alpha, "alpha")
        if self.n_categories is not None:
            sizes = np.asarray(self.n_categories, dtype=object).ravel()
            if not all(isinstance(n, Integral) and not isinstance(n, bool) and n >= 1 for n in sizes):
                raise ValueError("n_categories must be whole numbers >= 1, one per feature")
        if self.classes is not None and len(set(list(self.classes))) < 2:
            raise ValueError("classes must list at least two distinct classes")

    def _domain(self, X: Any, y: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Codes, class indices and the public domain sizes; ValueError for anything outside the domain."""
        if self.n_categories is None or self.classes is None:
            raise ValueError("DPCategoricalNB needs the public domain (n_categories and classes); "
                             "it never reads it off the training data")
        sizes = np.asarray(self.n_categories, dtype=np.int64).ravel()
        Z = _codes(X, sizes)
        pos = {c: i for i, c in enumerate(list(self.classes))}
        idx = np.array([pos.get(v, -1) for v in np.asarray(y).tolist()], dtype=np.int64)
        if np.any(idx < 0):
            raise ValueError("a label is not in the public class set")
        return Z, idx, sizes

    def fit(self, X: Any, y: Any) -> DPCategoricalNB:
        """Count, add Laplace((d + 1) / epsilon) noise to every cell, then post-process (module docstring)."""
        self._validate_params()
        Z, idx, sizes = self._domain(X, y)
        K, d = len(self.classes), len(sizes)
        self.noise_scale_ = (d + 1) / float(self.epsilon)
        class_count = np.bincount(idx, minlength=K).astype(float)
        tables = [np.bincount(idx * n + Z[:, j], minlength=K * n).reshape(K, n).astype(float)
                  for j, n in enumerate(sizes.tolist())]
        class_noise, table_noise = self.noise(K, sizes)
        self.noisy_class_count_ = class_count + class_noise
        self.noisy_category_count_ = [t + e for t, e in zip(tables, table_noise, strict=True)]
        self.classes_ = np.asarray(list(self.classes), dtype=object)
        self.n_features_in_ = d
        self._post_process()
        return self

    def noise(self, n_classes: int, sizes: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """The Laplace((d + 1) / epsilon) draws ``fit`` adds: K for the class counts, then (K, n_j) per feature.

        Drawn from ``random_state`` in that fixed order; how many and in which order depend only
        on the public domain (K classes, the sizes n_j), never on T's records, their number or
        order: T and T \\ {t} fitted with the same integer seed get the same noise, which is what
        lets the exact engine (``mptool.loo.dp_naive_bayes``) downdate the counts instead of refitting.
        """
        rng = check_random_state(self.random_state)
        scale = (len(sizes) + 1) / float(self.epsilon)
        class_noise = rng.laplace(0.0, scale, n_classes)
        return class_noise, [rng.laplace(0.0, scale, (n_classes, int(n))) for n in np.asarray(sizes).tolist()]

    def _post_process(self) -> None:
        """Clip at 0, floor class counts at 1, smooth with alpha, take logs (all post-processing)."""
        prior = np.maximum(self.noisy_class_count_, 1.0)
        self.class_log_prior_ = np.log(prior) - np.log(prior.sum())
        self.feature_log_prob_ = []
        for t in self.noisy_category_count_:
            smoothed = np.maximum(t, 0.0) + float(self.alpha)
            self.feature_log_prob_.append(np.log(smoothed) - np.log(smoothed.sum(axis=1, keepdims=True)))

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """log p(y | x) = log prior_y + sum_j log p(x_j | y), normalised (naive Bayes)."""
        Z = _codes(X, np.asarray(self.n_categories, dtype=np.int64).ravel())
        jll = np.tile(self.class_log_prior_, (len(Z), 1))
        for j, flp in enumerate(self.feature_log_prob_):
            jll += flp[:, Z[:, j]].T
        return jll - logsumexp(jll, axis=1, keepdims=True)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities in the order of ``classes_``."""
        return np.exp(self.predict_log_proba(X))

    def predict(self, X: Any) -> np.ndarray:
        """The most probable class."""
        return self.classes_[np.argmax(self.predict_log_proba(X), axis=1)]

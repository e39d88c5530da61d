"""Differentially private classifiers from IBM's diffprivlib, behind spec-friendly parameters.

An epsilon-DP training algorithm has DTP <= epsilon (Long et al. section 4.2, Definition 4.1) for
the probabilities over the algorithm's own randomness; the one-line derivation is in
:mod:`mptool.inputs.dp_nb`, mptool's own DP categorical naive Bayes, which needs no diffprivlib.
These wrappers take only scalar parameters (a spec's ``model.params``) and
fix the data bounds in advance (bounds taken from the data would leak it and void the
guarantee). diffprivlib is an optional dependency (``pip install mptool[dp]``); it is imported
when a model is fitted, so a spec naming these estimators fails with a clear error without it.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin


def diffprivlib_problem() -> str | None:
    """None when diffprivlib imports, else why not (it is missing or does not work with this scikit-learn)."""
    try:
        import diffprivlib.models  # noqa: F401
    except ImportError as exc:
        return f"diffprivlib cannot be imported ({exc.__class__.__name__}: {str(exc).splitlines()[0][:120]})"
    return None


def _dense(X: Any) -> np.ndarray:
    return np.asarray(X.toarray() if hasattr(X, "toarray") else X, dtype=float)


def _models() -> Any:
    why = diffprivlib_problem()
    if why is not None:
        raise ValueError(f"{why}; install it with: pip install 'mptool[dp]'")
    import diffprivlib.models

    return diffprivlib.models


class DPGaussianNB(ClassifierMixin, BaseEstimator):
    """diffprivlib's epsilon-DP Gaussian naive Bayes (Vaidya et al.); features clipped to [lower, upper]."""

    def __init__(self, epsilon: float = 1.0, lower: float = -3.0, upper: float = 3.0, random_state: Any = None) -> None:
        self.epsilon, self.lower, self.upper, self.random_state = epsilon, lower, upper, random_state

    def _clip(self, X: Any) -> np.ndarray:
        return np.clip(_dense(X), self.lower, self.upper)

    def fit(self, X: Any, y: Any) -> DPGaussianNB:
        Z = self._clip(X)
        bounds = (np.full(Z.shape[1], float(self.lower)), np.full(Z.shape[1], float(self.upper)))
        self.model_ = _models().GaussianNB(epsilon=self.epsilon, bounds=bounds, random_state=self.random_state)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.model_.fit(Z, y)
        self.classes_ = self.model_.classes_
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        return self.model_.predict_proba(self._clip(X))

    def predict(self, X: Any) -> np.ndarray:
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


class DPLogisticRegression(ClassifierMixin, BaseEstimator):
    """diffprivlib's epsilon-DP logistic regression (objective perturbation); rows clipped to data_norm."""

    def __init__(self, epsilon: float = 1.0, data_norm: float = 5.0, C: float = 1.0, random_state: Any = None) -> None:
        self.epsilon, self.data_norm, self.C, self.random_state = epsilon, data_norm, C, random_state

    def fit(self, X: Any, y: Any) -> DPLogisticRegression:
        self.model_ = _models().LogisticRegression(
            epsilon=self.epsilon, data_norm=self.data_norm, C=self.C, random_state=self.random_state
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.model_.fit(_dense(X), y)
        self.classes_ = self.model_.classes_
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        return self.model_.predict_proba(_dense(X))

    def predict(self, X: Any) -> np.ndarray:
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]

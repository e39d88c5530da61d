"""The untargeted shadow-model attack (Shokri et al., section V; Long et al. 5.3, Algorithm 1).

Step 2 (Algorithm 1): every shadow model j labels every record r of its query set with
f(r) = (x_r, y_r, q_j(r)) and "in" when r was in its training set, else "out". Step 3: an
attack classifier trained on these rows is queried with (x_t, y_t, c(x_t)) and accepts
"member" iff p_in > p_out. The attack classifier is the paper's fully connected network
with one hidden layer of 32 ReLU units, learning rate 0.01, 30 epochs (scikit-learn's
MLPClassifier with Adam in place of plain NLL/SGD training).

``per_class=True`` follows Shokri et al. V-D instead: one attack model per class label,
each trained on the rows of that label with features (x, q).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

import mptool.inputs.models  # noqa: F401 - registers the fit filters guard_fit holds (ConvergenceWarning muted)
from mptool.inputs.data import Schema
from mptool.runtime.signals import guard_fit


def resolve_features(choice: str, synthetic: bool) -> str:
    """``xyq`` or ``yq`` for ``--untargeted-features`` ``choice``.

    ``xyq`` is Long et al.'s attack set (Algorithm 1 line 5: the record x, its label y, the
    model's output q); ``yq`` is Shokri et al.'s (section V: y and q only). ``auto`` takes ``xyq``
    with population shadow data, as the paper's protocol does, and ``yq`` with synthetic shadow
    data (marginals, noisy, synthesize), whose records do not look like real ones, so an attack
    that learnt from their x does not carry over to real targets (measured in
    benchmarks/bench_synthesis.py: purchase-style data, AUC 0.50-0.52 with x against 0.93-0.96
    without).
    """
    if choice == "auto":
        return "yq" if synthetic else "xyq"
    return choice


@dataclass(frozen=True)
class FeatureEncoder:
    """Fixed numeric encoding of records for the attack classifier.

    Categorical columns are one-hot over their schema domain; numeric columns are
    standardised with the candidate set's mean and standard deviation (empty cells -> 0).
    With ``use_record`` False (Shokri et al.'s features) every record encodes to no columns.
    """

    schema: Schema
    means: dict[str, float]
    stds: dict[str, float]
    use_record: bool = True

    @classmethod
    def fit(cls, X: pd.DataFrame, schema: Schema, use_record: bool = True) -> FeatureEncoder:
        means, stds = {}, {}
        for c in schema.columns:
            if c.kind == "numeric":
                v = pd.to_numeric(X[c.name], errors="coerce").to_numpy(dtype=float)
                means[c.name] = float(np.nanmean(v)) if np.isfinite(v).any() else 0.0
                sd = float(np.nanstd(v)) if np.isfinite(v).any() else 0.0
                stds[c.name] = sd if sd > 0 else 1.0
        return cls(schema, means, stds, use_record)

    def transform(self, X: pd.DataFrame) -> np.ndarray:
        if not self.use_record:
            return np.zeros((len(X), 0))
        blocks = []
        for c in self.schema.columns:
            if c.kind == "numeric":
                v = pd.to_numeric(X[c.name], errors="coerce").to_numpy(dtype=float)
                blocks.append(np.nan_to_num((v - self.means[c.name]) / self.stds[c.name])[:, None])
            else:
                cats = list(c.categories or ())
                # Categorical(values, categories).codes: -1 outside the categories (pandas' own lookup)
                codes = pd.CategoricalDtype(cats).categories.get_indexer_for(X[c.name])
                onehot = np.zeros((len(X), len(cats)))
                ok = codes >= 0
                onehot[np.flatnonzero(ok), codes[ok]] = 1.0
                blocks.append(onehot)
        return np.hstack(blocks) if blocks else np.zeros((len(X), 0))


def attack_features(x_enc: np.ndarray, y_idx: np.ndarray, q: np.ndarray, n_classes: int) -> np.ndarray:
    """f = (x, one-hot y, q) row-wise (Long et al., Algorithm 1 line 5)."""
    onehot = np.zeros((len(y_idx), n_classes))
    onehot[np.arange(len(y_idx)), y_idx] = 1.0
    return np.hstack([x_enc, onehot, q])


def make_attack_classifier(seed: int) -> Any:
    """One hidden layer of 32 ReLU units, learning rate 0.01, 30 epochs (Long et al. 5.3)."""
    from sklearn.neural_network import MLPClassifier  # imported when an attack model is made (issue 28)

    return MLPClassifier(
        hidden_layer_sizes=(32,), activation="relu", learning_rate_init=0.01, max_iter=30, random_state=seed
    )


@dataclass
class UntargetedAttack:
    """A trained attack model (or one per class)."""

    models: dict[Any, Any]  # class index (or -1 for the single model) -> fitted classifier / constant p_in
    per_class: bool
    n_classes: int

    def score(self, x_enc: np.ndarray, y_idx: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """p_in of each query; "member" iff p_in > p_out (i.e. > 0.5)."""
        p_in = np.empty(len(y_idx))
        if self.per_class:
            for c in np.unique(y_idx):
                rows = np.flatnonzero(y_idx == c)
                p_in[rows] = _p_in(self.models.get(int(c), 0.5), np.hstack([x_enc[rows], q[rows]]))
        else:
            p_in[:] = _p_in(self.models[-1], attack_features(x_enc, y_idx, q, self.n_classes))
        return p_in, p_in > 0.5


def _p_in(model: Any, F: np.ndarray) -> np.ndarray:
    if isinstance(model, float):
        return np.full(len(F), model)
    return model.predict_proba(F)[:, list(model.classes_).index(1)]


def _train_one(F: np.ndarray, labels: np.ndarray, seed: int) -> Any:
    if len(np.unique(labels)) < 2:
        return float(labels[0]) if len(labels) else 0.5
    clf = make_attack_classifier(seed)
    with guard_fit():  # the fit filters (a ConvergenceWarning muted), and no half-trained attack MLP after a Ctrl-C
        clf.fit(F, labels)
    return clf


def train_untargeted(
    x_enc: np.ndarray, y_idx: np.ndarray, q: np.ndarray, member: np.ndarray, n_classes: int, seed: int, per_class: bool
) -> UntargetedAttack:
    """Train the attack model on D_attack (rows from Algorithm 1: features and in/out labels)."""
    labels = member.astype(int)
    if not per_class:
        single = _train_one(attack_features(x_enc, y_idx, q, n_classes), labels, seed)
        return UntargetedAttack({-1: single}, False, n_classes)
    models = {}
    for c in np.unique(y_idx):
        rows = np.flatnonzero(y_idx == c)
        models[int(c)] = _train_one(np.hstack([x_enc[rows], q[rows]]), labels[rows], seed)
    return UntargetedAttack(models, True, n_classes)

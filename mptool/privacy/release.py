"""Release policies: what the deployed model reveals of its probability vector (Shokri et al. VIII-A).

A release policy is a function of one probability vector, applied to every output of the
model before anything is measured: ``pdtp``, ``reduce-dtp`` and ``attack`` measure the model
*as released*, and PDTP is then taken between the released outputs of A(T) and A(T\\{t})
(Long et al., Definition 4.3, with the released vector as the classifier's response), after
the usual binning (section 5.2). Because the policy is a function of the two outputs alone,
a sweep over policies needs no refit: it is this function applied to the stored
p_{A(T)} and p_{A(T\\{t})} arrays.

The steps, in this order (each optional; ``label_only`` excludes the others):

- ``temperature`` t > 0: p_i^(1/t) / sum_j p_j^(1/t), i.e. the softmax of the logits ln p
  divided by t (Shokri's "increase entropy"); t > 1 flattens the vector, a probability of 0
  stays 0.
- ``top_k`` k: the k largest probabilities are released as they are, the others as 0 (Shokri's
  "restrict the prediction vector to top k classes"). Not renormalised: the released values
  are the model's own. Ties go to the class first in label order.
- ``round`` d: each probability rounded to d decimals, to nearest (numpy's ``round``, half to
  even); not renormalised, so the vector may not sum to 1 (Shokri's "coarsen precision").
- ``label_only``: only the predicted label, as the one-hot vector of the argmax (first class
  on ties): Shokri's extreme case "returns only the label".

What it means for PDTP: a released 0 is binned like any probability (to b/2, or floored at
1e-12 with bin size 0), so under ``label_only`` a record's PDTP is 0 when removing it leaves
the predicted label unchanged and the binning cap ln((1 - b/2)/(b/2)) (5.29 for b = 0.01)
when it flips the label; under ``top_k`` a class that enters or leaves the top k moves
between its probability and 0. Rounding, like binning, can raise a record's PDTP (two
probabilities either side of a rounding edge move apart) as well as lower it.

A temperature alone hides nothing: it is a bijection of the probability vector for a known t
(p_i is proportional to q_i^t), so an adversary who knows or estimates t undoes it, and
attacks on the logit (LiRA, RMIA; for two classes logit q = logit p / t exactly) are not
weakened. PDTP, a log-ratio of released values, still falls by about the factor t. So a
temperature lowers the measure without lowering the risk: :func:`is_invertible` flags it, and
``mptool mitigate`` lists it but never recommends it. Top-k, rounding and label-only do
discard information (and binning at b, applied after any policy, discards some too).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.pipeline import Pipeline

#: The policy keys, in the order of ``output.release`` in a spec.
RELEASE_KEYS = ("top_k", "round", "temperature", "label_only")


def release(
    p: np.ndarray,
    *,
    top_k: int | None = None,
    round: int | None = None,  # noqa: A002 -- the spec's key
    temperature: float | None = None,
    label_only: bool = False,
) -> np.ndarray:
    """The released array of a (records x classes) probability array (module docstring; Shokri VIII-A)."""
    p = np.asarray(p, dtype=float)
    if p.ndim != 2:
        raise ValueError("release: expected a (records x classes) array")
    if label_only:
        out = np.zeros_like(p)
        out[np.arange(len(p)), np.argmax(p, axis=1)] = 1.0
        return out
    out = p.copy()
    if temperature is not None and temperature != 1.0:
        with np.errstate(divide="ignore"):
            logits = np.log(out) / temperature
        logits -= logits.max(axis=1, keepdims=True)
        out = np.exp(logits)
        out /= out.sum(axis=1, keepdims=True)
    if top_k is not None and top_k < p.shape[1]:
        order = np.argsort(-out, axis=1, kind="stable")
        drop = order[:, top_k:]
        np.put_along_axis(out, drop, 0.0, axis=1)
    if round is not None:
        out = np.round(out, round)
    return out


def policy_dict(policy: Any) -> dict[str, Any]:
    """The set keys of a release policy (a spec's ``output.release``, a mapping or None) as a dict."""
    if policy is None:
        return {}
    raw = policy if isinstance(policy, dict) else policy.model_dump()
    return {k: raw[k] for k in RELEASE_KEYS if raw.get(k) not in (None, False)}


def apply_policy(p: np.ndarray, policy: Any) -> np.ndarray:
    """``p`` as released under ``policy`` (None or no key set: ``p`` itself, unchanged)."""
    keys = policy_dict(policy)
    return release(p, **keys) if keys else np.asarray(p, dtype=float)


def is_invertible(policy: Any) -> bool:
    """True when ``policy`` only re-scales the output (a temperature and nothing else): the released
    vector determines the model's own vector, so it lowers PDTP without hiding anything."""
    keys = policy_dict(policy)
    return set(keys) == {"temperature"}


def describe(policy: Any) -> str:
    """A short label of a policy for tables: ``full vector``, ``top_k=1``, ``round=2``, ``label_only``."""
    keys = policy_dict(policy)
    if not keys:
        return "full vector"
    return ", ".join("label_only" if k == "label_only" else f"{k}={v}" for k, v in keys.items())


class ReleasedClassifier(ClassifierMixin, BaseEstimator):
    """A classifier whose ``predict_proba`` is the released vector of ``estimator``'s (for ``attack``).

    The attacks fit and query many models (targets, shadows); wrapping the spec's estimator
    makes every one of them release as the deployed model does, with no change to the
    attacks. ``predict`` is the argmax of the released vector (first class on ties).
    """

    def __init__(self, estimator: Any = None, policy: dict[str, Any] | None = None) -> None:
        self.estimator = estimator
        self.policy = policy

    def fit(self, X: Any, y: Any) -> ReleasedClassifier:
        self.estimator_ = clone(self.estimator).fit(X, y)
        self.classes_ = self.estimator_.classes_
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        return release(self.estimator_.predict_proba(X), **(self.policy or {}))

    def predict(self, X: Any) -> np.ndarray:
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


def released_template(template: Any, policy: Any) -> Any:
    """``template`` (a pipeline or an estimator) with its classifier wrapped in :class:`ReleasedClassifier`."""
    keys = policy_dict(policy)
    if not keys:
        return template
    if isinstance(template, Pipeline):
        name, est = template.steps[-1]
        return Pipeline([*template.steps[:-1], (name, ReleasedClassifier(est, keys))])
    return ReleasedClassifier(template, keys)

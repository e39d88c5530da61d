"""Release policies: what the deployed model reveals of its probability vector (Shokri et al. VIII-A).

A release policy is a function of one probability vector, applied to every output of the
model before anything is measured: ``pdtp``, ``reduce-dtp``, ``mitigate`` and ``attack`` measure
the model as released, less what an attacker can undo (below), and PDTP is then taken between
the released outputs of A(T) and A(T\\{t}) (Long et al., Definition 4.3, with the released vector
as the classifier's response), after
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

What the gate measures (issue 26): never less than an attacker can reconstruct. Long et al.'s
adversary knows the training algorithm (section 3), the release policy included, and gets the
released vector (section 5.3). So the policy *as measured* (:func:`gate_policy`) keeps only the
steps that discard information; a step an attacker undoes is dropped before PDTP is taken:

- ``temperature`` is never measured. For a known t it is a bijection of the vector (p_i is
  proportional to q_i^t; for two classes logit q = logit p / t), so the untempered vector is
  what the attacker has; PDTP of the released values would fall by about the factor t while the
  risk stays (attacks on the logit, LiRA and RMIA, are not weakened). Combined with other steps,
  they are measured on the untempered vector: at least as informative as the release.
- ``top_k`` with k >= (number of classes) - 1 is not measured: the released values are the
  model's own, not renormalised, so the one class left out is 1 minus their sum (for two classes,
  top_k 1 releases the whole vector). With ``round`` the reconstruction is exact up to the rounding,
  and the gate measures the rounded full vector.
- ``top_k`` below that, ``round`` and ``label_only`` discard information no attacker can restore:
  they are measured as released and named on every verdict (the verdict line, pdtp.json's
  ``release`` block, junit.xml), since the number then describes the release, not the model.

So a temperature (alone) leaves every verdict as without it: DTP is invariant under an invertible
release, and ``mptool mitigate`` lists temperatures but never recommends one.
Top-k, rounding and label-only do discard information (and binning at b, applied after any
policy, discards some too).
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
    # `is`, not `in (None, False)`: 0 == False, so `round: 0` (hard 0/1 outputs) was dropped and the full vector
    # measured instead, unnamed (red3-10)
    return {k: raw[k] for k in RELEASE_KEYS if raw.get(k) is not None and raw.get(k) is not False}


def apply_policy(p: np.ndarray, policy: Any) -> np.ndarray:
    """``p`` as released under ``policy`` (None or no key set: ``p`` itself, unchanged)."""
    keys = policy_dict(policy)
    return release(p, **keys) if keys else np.asarray(p, dtype=float)


def gate_policy(policy: Any, n_classes: int) -> dict[str, Any]:
    """The steps of ``policy`` an attacker cannot undo, i.e. what the gate measures (module docstring).

    Drops ``temperature`` (a bijection for a known t) and ``top_k`` >= ``n_classes`` - 1 (the one
    class left out is 1 minus the sum of the released values); keeps ``top_k`` below that,
    ``round`` and ``label_only``.
    """
    keys = policy_dict(policy)
    keys.pop("temperature", None)
    if keys.get("top_k") is not None and keys["top_k"] >= n_classes - 1:
        keys.pop("top_k")
    return keys


def measured(p: np.ndarray, policy: Any) -> np.ndarray:
    """``p`` as the gate measures it under ``policy``: :func:`gate_policy`'s steps (classes: ``p``'s columns)."""
    p = np.asarray(p, dtype=float)
    keys = gate_policy(policy, p.shape[1]) if p.ndim == 2 else policy_dict(policy)
    return release(p, **keys) if keys else p


def is_invertible(policy: Any, n_classes: int | None = None) -> bool:
    """True when ``policy`` is set but hides nothing an attacker cannot undo (:func:`gate_policy` is empty):
    a temperature, or top-k of all classes but one (``n_classes`` given). It changes no verdict."""
    keys = policy_dict(policy)
    if n_classes is None:
        return set(keys) == {"temperature"}
    return bool(keys) and not gate_policy(policy, n_classes)


def release_summary(policy: Any, n_classes: int) -> dict[str, Any]:
    """pdtp.json's release keys: ``release`` (the policy as given), ``release_measured`` (what the gate
    measured of it, :func:`gate_policy`) and ``release_note`` (:func:`measured_note`)."""
    return {"release": policy_dict(policy), "release_measured": gate_policy(policy, n_classes),
            "release_note": measured_note(policy, n_classes)}


def measured_note(policy: Any, n_classes: int) -> str:
    """One clause naming the policy and what the gate measured of it ('' without a policy)."""
    keys, kept = policy_dict(policy), gate_policy(policy, n_classes)
    if not keys:
        return ""
    if not kept:
        return (f"release policy {describe(policy)} is invertible (an attacker undoes it), so the full "
                "probability vector is measured")
    dropped = [k for k in keys if k not in kept]
    undone = f" ({', '.join(dropped)} undone as invertible: measured as {describe(kept)})" if dropped else ""
    return f"release policy {describe(policy)}: measured as released, not the full probability vector{undone}"


def describe(policy: Any) -> str:
    """A short label of a policy for tables: ``full vector``, ``top_k=1``, ``round=2``, ``label_only`` (as given)."""
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

"""Confidence intervals of the attack metrics: a seeded percentile bootstrap over targets.

The attempts of one target are not independent (the same record, attacked in every iteration
under both halves), so the bootstrap resamples *targets* with replacement and keeps all of a
drawn target's attempts: resample b gives target t the weight w_bt (how often it was drawn,
multinomial with T draws over T targets). Every metric of a resample is the metric of the
attempts with those weights -- the same as repeating each target's attempts w_bt times:

- accuracy, precision, recall, F1, advantage (TPR - FPR) from weighted confusion counts;
- ROC AUC from weighted counts per distinct score (ties count one half), exactly as
  ``roc_auc_score`` on the repeated attempts;
- TPR at x% FPR as in :func:`mptool.attacks.metrics.tpr_at_fpr`: the largest TPR over
  score thresholds whose FPR is at most x%.

The interval is the 2.5th and 97.5th percentile of :data:`RESAMPLES` resamples, drawn from
the spec's seed (one tag per attack), so a rerun gives the same interval. TPR at x% FPR is
*not estimable* (no interval) with fewer than 1/x non-member attempts: below that, a single
false positive already exceeds x%.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import sparse

from mptool.attacks.metrics import LOW_FPR, finite_scores

#: Bootstrap resamples per attack.
RESAMPLES = 1000
#: Two-sided confidence level of the intervals.
CONFIDENCE = 0.95
#: Resamples handled at once (bounds memory at CHUNK x distinct scores floats).
CHUNK = 50
#: Seed tag of the bootstrap (mptool.attacks.shadows.rng_for); the attack's index is added.
TAG_BOOTSTRAP = 201
METHOD = (
    f"percentile bootstrap over targets ({RESAMPLES} resamples of the targets with replacement, all attempts "
    f"of a drawn target kept; seeded); {CONFIDENCE:.0%} two-sided"
)


class Attempts:
    """One attack's attempts aggregated per target: confusion counts and per-score member/non-member counts."""

    def __init__(self, member: np.ndarray, decision: np.ndarray, score: np.ndarray) -> None:
        member, decision = np.asarray(member, dtype=bool), np.asarray(decision, dtype=bool)
        n_targets = member.shape[-1]
        target = np.broadcast_to(np.arange(n_targets), member.shape).ravel()
        m, d = member.ravel(), decision.ravel()
        s = finite_scores(np.asarray(score, dtype=float)).ravel()
        self.n_targets = n_targets
        self.nonmembers = int((~m).sum())
        cells = np.stack([d & m, d & ~m, ~d & m, ~d & ~m], axis=1).astype(float)  # tp, fp, fn, tn
        self.confusion = np.zeros((n_targets, 4))
        np.add.at(self.confusion, target, cells)
        _, group = np.unique(s, return_inverse=True)  # ascending score groups
        n_groups = int(group.max()) + 1 if group.size else 0
        shape = (n_targets, n_groups)
        self.pos = sparse.csr_matrix((m.astype(float), (target, group)), shape=shape)
        self.neg = sparse.csr_matrix(((~m).astype(float), (target, group)), shape=shape)


def resample_stats(att: Attempts, weights: np.ndarray) -> dict[str, np.ndarray]:
    """Every metric for each row of ``weights`` (resamples x targets): arrays of length resamples."""
    w = np.asarray(weights, dtype=float)
    tp, fp, fn, tn = (w @ att.confusion).T
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(tp + fp > 0, tp / (tp + fp), 0.0)
        recall = np.where(tp + fn > 0, tp / (tp + fn), 0.0)
        fpr_dec = np.where(fp + tn > 0, fp / (fp + tn), 0.0)
        f1 = np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0)
        out = {
            "accuracy": (tp + tn) / (tp + fp + fn + tn),
            "precision": precision,
            "recall": recall,
            "f1": f1,
            "advantage": recall - fpr_dec,
        }
        # score groups x resamples, highest score first (C order: the cumulative sums run down the rows)
        pos = np.ascontiguousarray(np.asarray(att.pos.T @ w.T)[::-1])
        neg = np.ascontiguousarray(np.asarray(att.neg.T @ w.T)[::-1])
        n_pos, n_neg = pos.sum(axis=0), neg.sum(axis=0)
        tp = np.cumsum(pos, axis=0)  # members scored at or above each group
        above = tp - pos  # members scored strictly above
        out["auc"] = (neg * (above + 0.5 * pos)).sum(axis=0) / (n_pos * n_neg)
        fpr = np.cumsum(neg, axis=0) / n_neg
        for key, limit in LOW_FPR.items():
            out[key] = np.where(fpr <= limit + 1e-15, tp, 0.0).max(axis=0, initial=0.0) / n_pos
    return out


def _interval(values: np.ndarray) -> dict[str, float | None]:
    v = values[np.isfinite(values)]
    if not v.size:
        return {"low": None, "high": None}
    tail = (1 - CONFIDENCE) / 2
    low, high = np.quantile(v, [tail, 1 - tail])
    return {"low": float(low), "high": float(high)}


def bootstrap_intervals(
    member: np.ndarray, decision: np.ndarray, score: np.ndarray, rng: np.random.Generator
) -> dict[str, Any]:
    """The interval of every metric of one attack (attempts shaped (..., targets)); see the module docstring."""
    att = Attempts(member, decision, score)
    t = att.n_targets
    stats: dict[str, list[np.ndarray]] = {}
    for start in range(0, RESAMPLES, CHUNK):
        weights = rng.multinomial(t, np.full(t, 1.0 / t), size=min(CHUNK, RESAMPLES - start))
        for key, values in resample_stats(att, weights).items():
            stats.setdefault(key, []).append(values)
    out: dict[str, Any] = {"method": METHOD, "confidence": CONFIDENCE, "resamples": RESAMPLES, "targets": t}
    for key, parts in stats.items():
        out[key] = _interval(np.concatenate(parts))
    for key, limit in LOW_FPR.items():
        needed = int(round(1 / limit))
        if att.nonmembers < needed:
            out[key] = {
                "low": None, "high": None, "estimable": False,
                "why": f"{att.nonmembers} non-member attempts; at least {needed} are needed to observe "
                f"a {limit:.1%} false-positive rate",
            }
        else:
            out[key]["estimable"] = True
    return out

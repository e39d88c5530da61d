"""Label-only membership inference: the robustness of the predicted label under perturbations.

Choquette-Choo et al., "Label-Only Membership Inference Attacks" (ICML 2021), section 4
(data-augmentation attack): a model is more robust around its training records, so the
adversary, who sees only predicted labels, queries the model on x and on N perturbed copies
x'_1..x'_N of x and counts how many keep the correct label. "Member" when that fraction is at
least a threshold tau, calibrated on shadow models trained on data the adversary knows.

For tabular data the perturbation is the one the paper applies to binary features (each
flipped with a probability), generalised to any column as mptool's ``noisy:F`` shadow data
(:func:`mptool.attacks.shadows.synthesize`): in each copy a fraction :data:`FRACTION` of the
features (at least one), chosen at random, is replaced by the value of that feature in a
random record of D, so every copy stays in each column's domain (categories, bins).

- ``label_only``: score = 0 when f(x) != y (y the true label), else (1 + sum_j 1[f(x'_j) = y] / N) / 2:
  the records the model gets wrong rank lowest (the paper's boundary-distance attack gives them
  distance 0, as ART's does), the others by the share of copies that keep the true label, so the
  ranking refines the gap attack's (member iff f(x) = y) and never merges what it separates.
- ``label_free``: the adversary lacks y (the variant ART's users asked for): score =
  sum_j 1[f(x'_j) = f(x)] / N, the stability of the model's own label around x.

The labels are the argmax of the released vector (first class on ties), so under the
``label_only`` release policy both attacks see exactly what they see under a full release:
they measure what releasing labels only still leaks. The threshold is the one of highest
TPR - FPR over ``--shadows`` shadow models (the pool's seeded halves of D, so each shadow is
the pool's model of that index) on the targets' own copies, whose membership the adversary
knows there (Choquette-Choo et al. 4.1: "threshold ... chosen with shadow models"); ties go
to the smallest such tau. The target models are refitted for the queries (the same seeded fits
as the protocol's A(D1), A(D2)).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mptool.attacks.shadows import pool_member_rows, resample_features, rng_for
from mptool.inputs.models import fit, proba_in
from mptool.runtime import signals
from mptool.runtime.parallel import chunk_positions, run_tasks

NAME, NAME_FREE = "label_only", "label_free"
#: Perturbed copies of each target (the paper uses up to a few hundred; 32 keeps a run's queries small).
COPIES = 32
#: Fraction of a copy's features resampled from their marginal in D (at least one).
FRACTION = 0.2
#: Seed tag of the copies.
TAG_LABEL_ONLY = 131


def noisy_copies(X: pd.DataFrame, tpos: np.ndarray, copies: int, fraction: float, seed: int) -> pd.DataFrame:
    """``copies`` perturbed copies of each record of D at ``tpos`` (target-major order, module docstring)."""
    return resample_features(X, np.repeat(tpos, copies), fraction, rng_for(seed, TAG_LABEL_ONLY))


def label_chunk(
    template: Any, X: pd.DataFrame, y: np.ndarray, classes: np.ndarray, masks: np.ndarray, queries: pd.DataFrame,
) -> np.ndarray:
    """For each training mask (rows of ``masks`` over D): fit A and return its label index on every query row."""
    out = np.empty((len(masks), len(queries)), dtype=np.int64)
    for row, mask in enumerate(masks):
        signals.check()
        idx = np.flatnonzero(mask)
        model = fit(template, X.iloc[idx], y[idx])
        out[row] = np.argmax(proba_in(model, queries, classes), axis=1)  # the released vector's label
    return out


def query_models(
    template: Any, X: pd.DataFrame, y: np.ndarray, classes: np.ndarray, masks: np.ndarray, queries: pd.DataFrame,
    jobs: int, backend: str, advance: Callable[[int], None],
) -> np.ndarray:
    """:func:`label_chunk` over ``masks`` in parallel: (models, queries) label indices, independent of --jobs."""
    chunks = chunk_positions(np.arange(len(masks)), jobs, per_job=1)
    parts = run_tasks(
        label_chunk, ((template, X, y, classes, masks[c], queries) for c in chunks),
        jobs=jobs, backend=backend, on_result=lambda r: advance(len(r)),
    )
    return np.concatenate(list(parts), axis=0)


def scores(labels: np.ndarray, targets: int, copies: int, y_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(label_only, label_free) scores per model and target from labels (models, targets + targets*copies):
    the originals first, then the copies in target-major order (module docstring)."""
    own = labels[:, :targets]  # f(x)
    noisy = labels[:, targets:].reshape(len(labels), targets, copies)  # f(x'_j)
    correct = own == y_idx[None, :]
    right = np.where(correct, (1.0 + (noisy == y_idx[None, :, None]).mean(axis=2)) / 2.0, 0.0)
    stable = (noisy == own[:, :, None]).mean(axis=2)
    return right, stable


def best_threshold(score: np.ndarray, member: np.ndarray) -> float:
    """The smallest tau of highest TPR - FPR for "member iff score >= tau" over the shadows' attempts."""
    cands = np.unique(score)
    pos, neg = max(int(member.sum()), 1), max(int((~member).sum()), 1)
    best, tau = -np.inf, float(cands[0]) if cands.size else 1.0
    for c in cands:
        said = score >= c
        adv = (said & member).sum() / pos - (said & ~member).sum() / neg
        if adv > best + 1e-12:
            best, tau = adv, float(c)
    return tau


@dataclass(frozen=True)
class LabelOnly:
    """Both variants' scores and decisions per attempt (iterations, 2, targets) and their thresholds."""

    score: np.ndarray
    decision: np.ndarray
    free_score: np.ndarray
    free_decision: np.ndarray
    tau: float
    tau_free: float


def attack(
    template: Any, X: pd.DataFrame, y: np.ndarray, classes: np.ndarray, y_idx: np.ndarray, tpos: np.ndarray,
    in_first: np.ndarray, n_half: int, shadows: int, seed: int, jobs: int, backend: str,
    progress: Callable[[int, str], Any],
) -> LabelOnly:
    """Both label-only attacks on A(D1), A(D2) of every iteration, thresholds from ``shadows`` shadow models."""
    t = len(tpos)
    queries = pd.concat([X.iloc[tpos].reset_index(drop=True), noisy_copies(X, tpos, COPIES, FRACTION, seed)],
                        ignore_index=True)
    ty = y_idx[tpos]
    shadow_masks = pool_member_rows(len(y), np.arange(shadows), n_half, seed)
    with progress(shadows, f"label-only shadow models ({COPIES} copies per target)") as advance:
        labels = query_models(template, X, y, classes, shadow_masks, queries, jobs, backend, advance)
    s_lo, s_free = scores(labels, t, COPIES, ty)
    member_sh = shadow_masks[:, tpos]
    tau, tau_free = best_threshold(s_lo, member_sh), best_threshold(s_free, member_sh)
    target_masks = np.concatenate([np.stack([m, ~m]) for m in in_first])  # A(D1), A(D2) per iteration
    with progress(len(target_masks), "label-only queries of the target models") as advance:
        labels = query_models(template, X, y, classes, target_masks, queries, jobs, backend, advance)
    s_lo, s_free = scores(labels, t, COPIES, ty)
    shape = (len(in_first), 2, t)
    s_lo, s_free = s_lo.reshape(shape), s_free.reshape(shape)
    return LabelOnly(s_lo, s_lo >= tau, s_free, s_free >= tau_free, tau, tau_free)


def describe(result: LabelOnly, shadows: int, free: bool) -> dict[str, Any]:
    """attack.json's extra values of one variant."""
    return {
        "threshold": result.tau_free if free else result.tau,
        "copies": COPIES,
        "fraction_resampled": FRACTION,
        "calibration_shadows": shadows,
        "score": "share of perturbed copies keeping the model's own label on x (no true label)" if free
        else "0 if x is misclassified, else (1 + share of its perturbed copies predicted as the true label) / 2",
    }

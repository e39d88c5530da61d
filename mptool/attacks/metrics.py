"""Metrics of a membership attack over all its attempts (Long et al. 5.4, Yeom et al. Definition 4).

Every function takes plain arrays of per-attempt truths, decisions and scores, so each
number can be recomputed from ``attempts.csv`` (one row per attempt: the attack's score and
decision on one target under one target model). AUC and TPR at a fixed FPR come from every
attempt's score; the ROC points kept in attack.json are a subset for plotting only.

Under the protocol each target is attacked equally often as a member and as a non-member,
so accuracy = (TPR + 1 - FPR) / 2 and the advantage TPR - FPR (Yeom et al., Definition 4)
equals 2 * accuracy - 1 exactly.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.metrics import roc_auc_score, roc_curve

#: Most ROC points kept per attack in attack.json.
ROC_POINTS = 200

#: FPR limits of the low-FPR operating points (Carlini et al. recommend reporting them).
LOW_FPR = {"tpr_at_1pct_fpr": 0.01, "tpr_at_0.1pct_fpr": 0.001}

#: attempts.csv columns.
ATTEMPT_COLUMNS = {
    "row": "0-based data row of the target in the input CSV (header excluded)",
    "iteration": "protocol iteration (0-based); each target is attacked under A(D1) and A(D2) in it",
    "attack": "attack name (as in attack.json)",
    "member": "1 if the target was in the attacked model's training half, else 0",
    "score": "the attack's score, higher = more likely a member (non-finite values as +-1e300; NaN as 0)",
    "decision": "1 if the attack guessed 'member', else 0",
}

#: How attack.json's metrics are computed (written beside them).
METRICS_NOTE = {
    "attempts": "every metric is computed from the attempts in attempts.csv (one row per attack on a target)",
    "advantage": "TPR - FPR (Yeom et al., Definition 4); equals 2 * accuracy - 1 because every target is "
    "attacked equally often as a member and as a non-member",
    "auc": "ROC AUC of the scores of every attempt (sklearn.metrics.roc_auc_score)",
    "tpr_at_fpr": "largest TPR over score thresholds whose FPR is at most 1% (0.1%), from every attempt; with "
    "fewer than 100 (1000) non-member attempts this is the TPR at zero false positives",
    "roc": "at most 200 points of the full ROC curve, for plotting only; drawn as steps they never lie above it",
}


def tpr_at_fpr(fpr: np.ndarray, tpr: np.ndarray, limit: float) -> float:
    """Largest TPR on the ROC curve with FPR <= ``limit``."""
    ok = fpr <= limit + 1e-15
    return float(tpr[ok].max()) if ok.any() else 0.0


def downsample_roc(fpr: np.ndarray, tpr: np.ndarray, points: int = ROC_POINTS) -> tuple[list[float], list[float]]:
    """At most ``points`` points of a ROC curve for plotting on a log-FPR axis, end points kept.

    Half of the points are evenly spaced along the curve; the other half are, for FPR
    values evenly spaced on a log scale and at 1% and 0.1%, the point of highest TPR at or
    below that FPR, so the low-FPR region keeps its detail (exact at 1% and 0.1%). Any subset
    of ROC points drawn as steps (TPR held until the next point's FPR) lies on or below the
    full curve: a plot never flatters.
    """
    fpr, tpr = np.asarray(fpr, dtype=float), np.asarray(tpr, dtype=float)
    if len(fpr) <= points:
        return fpr.tolist(), tpr.tolist()
    even = np.round(np.linspace(0, len(fpr) - 1, points // 2)).astype(int)
    positive = fpr[fpr > 0]
    n_grid = points - len(even) - len(LOW_FPR)
    grid = np.logspace(np.log10(positive.min()), 0.0, n_grid) if positive.size else np.array([])
    grid = np.concatenate([grid, list(LOW_FPR.values())])
    on_grid = np.searchsorted(fpr, grid * (1 + 1e-12), side="right") - 1  # fpr is non-decreasing
    idx = np.unique(np.concatenate([even, on_grid[on_grid >= 0], [0, len(fpr) - 1]]))
    return fpr[idx].tolist(), tpr[idx].tolist()


def finite_scores(score: np.ndarray) -> np.ndarray:
    """Scores as ranked for the ROC: NaN -> 0, +-inf -> +-1e300 (as written to attempts.csv)."""
    return np.nan_to_num(np.asarray(score, dtype=float), nan=0.0, posinf=1e300, neginf=-1e300)


def binary_metrics(member: np.ndarray, decision: np.ndarray, score: np.ndarray) -> dict[str, Any]:
    """Accuracy, precision, recall, F1, advantage (TPR - FPR), ROC AUC, TPR at 1% / 0.1% FPR, ROC points.

    Precision with no "member" guess is 0 (as F1); AUC is None when only one truth occurs.
    """
    member = np.asarray(member, dtype=bool).ravel()
    decision = np.asarray(decision, dtype=bool).ravel()
    score = np.asarray(score, dtype=float).ravel()
    tp = int(np.sum(decision & member))
    fp = int(np.sum(decision & ~member))
    fn = int(np.sum(~decision & member))
    tn = int(np.sum(~decision & ~member))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    fpr_dec = fp / (fp + tn) if fp + tn else 0.0
    out: dict[str, Any] = {
        "n_attacks": int(member.size),
        "accuracy": (tp + tn) / member.size if member.size else float("nan"),
        "precision": precision,
        "recall": recall,
        "f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
        "advantage": recall - fpr_dec,
        "auc": None,
        "tpr_at_1pct_fpr": None,
        "tpr_at_0.1pct_fpr": None,
        "roc": {"fpr": [], "tpr": []},
    }
    if 0 < member.sum() < member.size:
        finite = finite_scores(score)
        # every threshold: drop_intermediate would drop collinear points and can lower the TPR at x% FPR
        fpr, tpr, _ = roc_curve(member, finite, drop_intermediate=False)
        out["auc"] = float(roc_auc_score(member, finite))
        for key, limit in LOW_FPR.items():
            out[key] = tpr_at_fpr(fpr, tpr, limit)
        f, t = downsample_roc(fpr, tpr)
        out["roc"] = {"fpr": f, "tpr": t}
    return out


def correlations(accuracy: np.ndarray, pdtp_mean: np.ndarray) -> dict[str, float | None]:
    """Pearson and Spearman correlation of per-target accuracy with mean PDTP, with p-values.

    None where undefined (fewer than 3 records with both values, or a constant input).
    """
    a = np.asarray(accuracy, dtype=float)
    p = np.asarray(pdtp_mean, dtype=float)
    ok = np.isfinite(a) & np.isfinite(p)
    empty: dict[str, float | None] = {"pearson": None, "pearson_p": None, "spearman": None, "spearman_p": None}
    if ok.sum() < 3 or np.ptp(a[ok]) == 0 or np.ptp(p[ok]) == 0:
        return empty
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r, rp = stats.pearsonr(a[ok], p[ok])
        s, sp = stats.spearmanr(a[ok], p[ok])
    return {"pearson": float(r), "pearson_p": float(rp), "spearman": float(s), "spearman_p": float(sp)}


def attempts_frame(
    rows: np.ndarray, member: np.ndarray, results: dict[str, tuple[np.ndarray, np.ndarray]]
) -> pd.DataFrame:
    """attempts.csv: one row per attack per attempt, in attack, iteration, model (A(D1), A(D2)), target order.

    ``rows`` (targets,) are the targets' CSV rows; ``member`` and each result's score and
    decision have shape (iterations, 2, targets).
    """
    n_iter, n_models, n_targets = member.shape
    iteration = np.repeat(np.arange(n_iter), n_models * n_targets)
    target_rows = np.tile(np.asarray(rows), n_iter * n_models)
    parts = [
        pd.DataFrame(
            {
                "row": target_rows,
                "iteration": iteration,
                "attack": name,
                "member": member.reshape(-1).astype(np.int8),
                "score": finite_scores(sc.reshape(-1)),
                "decision": np.asarray(dc, dtype=bool).reshape(-1).astype(np.int8),
            }
        )
        for name, (sc, dc) in results.items()
    ]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(ATTEMPT_COLUMNS))




def strongest_attack(attacks: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The attack of highest TPR at 1% FPR (ties: higher AUC, then accuracy), Carlini et al.'s criterion,
    with that attack's bootstrap interval on its TPR at 1% FPR when the attack entry has one.

    None when no attack has a ROC (a single truth among the attempts).
    """
    ranked = [k for k, v in attacks.items() if v.get("tpr_at_1pct_fpr") is not None]
    if not ranked:
        return None
    best = max(ranked, key=lambda k: (attacks[k]["tpr_at_1pct_fpr"], attacks[k]["auc"], attacks[k]["accuracy"]))
    m = attacks[best]
    out = {
        "name": best,
        "tpr_at_1pct_fpr": m["tpr_at_1pct_fpr"],
        "tpr_at_0.1pct_fpr": m["tpr_at_0.1pct_fpr"],
        "auc": m["auc"],
        "accuracy": m["accuracy"],
        "nonmember_attempts": m["n_attacks"] // 2,
        "criterion": "highest TPR at 1% FPR, ties broken by AUC then accuracy",
    }
    intervals = m.get("intervals") or {}
    if isinstance(intervals.get("tpr_at_1pct_fpr"), dict):  # the attack's own bootstrap interval (intervals.py)
        out["tpr_at_1pct_fpr_interval"] = {
            **intervals["tpr_at_1pct_fpr"],
            **{k: intervals[k] for k in ("confidence", "resamples", "targets", "method") if k in intervals},
        }
    return out

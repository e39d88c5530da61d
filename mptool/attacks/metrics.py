"""Metrics of a membership attack over all its attempts (Long et al. 5.4, Yeom et al. Definition 4).

Every function takes plain arrays of per-attempt truths, decisions and scores, so each
number can be recomputed from ``attempts.csv``.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from scipy import stats
from sklearn.metrics import roc_auc_score, roc_curve

#: Most ROC points kept per attack in attack.json.
ROC_POINTS = 200


def tpr_at_fpr(fpr: np.ndarray, tpr: np.ndarray, limit: float) -> float:
    """Largest TPR on the ROC curve with FPR <= ``limit``."""
    ok = fpr <= limit + 1e-15
    return float(tpr[ok].max()) if ok.any() else 0.0


def downsample_roc(fpr: np.ndarray, tpr: np.ndarray, points: int = ROC_POINTS) -> tuple[list[float], list[float]]:
    """At most ``points`` ROC points, end points kept, evenly spaced along the curve."""
    if len(fpr) <= points:
        return fpr.tolist(), tpr.tolist()
    idx = np.unique(np.round(np.linspace(0, len(fpr) - 1, points)).astype(int))
    return fpr[idx].tolist(), tpr[idx].tolist()


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
        finite = np.nan_to_num(score, nan=0.0, posinf=1e300, neginf=-1e300)
        fpr, tpr, _ = roc_curve(member, finite)
        out["auc"] = float(roc_auc_score(member, finite))
        out["tpr_at_1pct_fpr"] = tpr_at_fpr(fpr, tpr, 0.01)
        out["tpr_at_0.1pct_fpr"] = tpr_at_fpr(fpr, tpr, 0.001)
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

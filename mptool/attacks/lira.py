"""The likelihood-ratio attack, LiRA (Carlini et al., "Membership Inference Attacks From
First Principles", IEEE S&P 2022), online and offline.

Each prediction is scaled to phi = ln(p_y / (1 - p_y)) (the logit of the true class's
binned probability, finite because binning keeps p_y in [0.005, 0.995]). For a target
record, phi of the in-shadows and of the out-shadows are modelled as Gaussians
N(mu_in, s_in^2) and N(mu_out, s_out^2).

- online: score = ln N(phi_obs; mu_in, s_in^2) - ln N(phi_obs; mu_out, s_out^2), "member"
  iff score > 0.
- offline (out-models only): score = Phi((phi_obs - mu_out) / s_out), the one-sided
  probability that an out-model is less confident than the target; "member" iff the score
  exceeds 0.5, i.e. phi_obs is above the out-models' mean. Offline LiRA is meant for
  ROC/low-FPR use; its accuracy at this fixed decision point is conservative.

With few shadows per side, per-record variances are unstable; as Carlini et al. do for
small shadow counts, one global variance per side (pooled over every target) is used when
either side has fewer than ``PER_RECORD_MIN`` models. Standard deviations are floored at
``STD_FLOOR`` so a constant shadow output does not give an infinite likelihood.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

PER_RECORD_MIN = 16
STD_FLOOR = 0.05


def logit_confidence(probs: np.ndarray, y_idx: int) -> np.ndarray:
    """phi = ln p_y - ln(1 - p_y) per row of binned probability vectors."""
    p = np.clip(np.atleast_2d(probs)[:, y_idx], 1e-12, 1 - 1e-12)
    return np.log(p) - np.log1p(-p)


def pooled_std(groups: list[np.ndarray]) -> float:
    """Standard deviation around each group's own mean, pooled over groups (Carlini's fixed variance)."""
    dev = [g - g.mean() for g in groups if len(g)]
    if not dev:
        return STD_FLOOR
    return max(float(np.sqrt(np.mean(np.concatenate(dev) ** 2))), STD_FLOOR)


def lira_online(
    phi_obs: np.ndarray, phi_in: np.ndarray, phi_out: np.ndarray, std_in: float | None, std_out: float | None
) -> tuple[np.ndarray, np.ndarray]:
    """Online LiRA log-likelihood ratio; ``std_*`` None = per-record standard deviations."""
    s_in = max(float(np.std(phi_in)), STD_FLOOR) if std_in is None else std_in
    s_out = max(float(np.std(phi_out)), STD_FLOOR) if std_out is None else std_out
    score = norm.logpdf(phi_obs, np.mean(phi_in), s_in) - norm.logpdf(phi_obs, np.mean(phi_out), s_out)
    return score, score > 0


def lira_offline(phi_obs: np.ndarray, phi_out: np.ndarray, std_out: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Offline LiRA: Phi((phi_obs - mu_out) / s_out); "member" iff above 0.5."""
    s_out = max(float(np.std(phi_out)), STD_FLOOR) if std_out is None else std_out
    score = norm.cdf((phi_obs - np.mean(phi_out)) / s_out)
    return score, score > 0.5

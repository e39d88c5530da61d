"""Kullback-Leibler membership information leakage (Farokhi & Kaafar, Definition 2, Remark 3
and Theorem 1), estimated only where it is defined, in nats, with the bound it implies.

**What.** For record i, with P1 (P0) the distribution of what the adversary observes from a
model trained with (without) the record,

    rho_KL(i) = D_KL(P1 || P0) + D_KL(P0 || P1)        [nats: natural logarithms]

**On which statistic.** The paper applies it to the model parameters; mptool applies it to a
continuous scalar an adversary can compute from a black-box output: phi = ln(p_y / (1 - p_y)),
the logit of the model's *unbinned* probability of the record's true label y, from the
auditor's own in/out shadow models (the pool or the per-target pairs). The released output
is binned, and binning is a function of the unbinned output, so by the data-processing
inequality the leakage (and the total variation below) of the binned release is at most that
of the unbinned phi. For two classes phi determines the whole output; with more classes the
bound covers attacks that use the true-label probability only (threshold, LiRA).

**Gaussian approximation (Remark 3) in one dimension.** With N(m1, v1), N(m0, v0) fitted to
phi of the in and out shadows (sample mean, variance with denominator n),

    rho = (v1/v0 + v0/v1 - 2) / 2 + (m1 - m0)^2 (1/v0 + 1/v1) / 2.

No ridge or floor is added. Where the approximation cannot be fitted the estimate is
``None`` with a reason (:data:`REASONS`), never a number made by a regulariser:

- ``too few models``: fewer than ``MIN_MODELS`` shadows on a side;
- ``point mass``: every model on one side gives the same phi (e.g. a memoriser's p_y = 1)
  while the two sides differ; the Gaussian KL is infinite and the bound below is vacuous;
- ``saturated``: more than half of a side at the probability floor or ceiling (p_y within
  ``1e-12`` of 0 or 1), where phi is clipped and no Gaussian describes it.

When both sides are the same point mass, the record changes nothing the statistic shows and
rho = 0 exactly.

**Small-sample level.** With n1 and n0 models and identical in/out Gaussians, the plug-in
estimate is not 0: its expectation is :func:`small_sample_level`, about 2 (1/n1 + 1/n0)
nats (the mean-difference and variance-ratio terms each contribute about 1/n1 + 1/n0).
Values near that level are indistinguishable from no leakage; the summary reports it.

**The bound (Theorem 1).** Its proof (Le Cam, then Pinsker and Jensen) bounds the total
variation TV(P1, P0) = sup over adversaries of P(guess in | in) - P(guess in | out), the
membership advantage of Yeom et al.: TV <= sqrt(min(KL10, KL01) / 2) <= sqrt(rho) / 2. (The
theorem's display writes this as a bound on the probability of success; under equal priors
the best accuracy is (1 + TV) / 2.) So per record, advantage_i <= min(1, sqrt(rho_i) / 2),
and over records mean advantage <= mean_i min(1, sqrt(rho_i) / 2) <= sqrt(mean_i rho_i) / 2
(the paper's averaged form). Under mptool's balanced protocol accuracy = (1 + advantage) / 2.
The bound holds for the true rho; an estimate from finitely many shadows under a Gaussian
approximation can understate it (heavy tails, saturation), and a measured attack above the
"bound" says exactly that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: Fewest shadow models per side for an estimate.
MIN_MODELS = 8
#: Probability floor/ceiling below/above which p_y counts as saturated (phi is clipped there).
SATURATION = 1e-12
#: Reasons an estimate is missing.
REASONS = ("too few models", "point mass", "saturated")


@dataclass(frozen=True)
class LeakageEstimate:
    """rho_KL of one record in nats (None when not estimable, with the reason) and the sample sizes."""

    value: float | None
    reason: str | None
    n_in: int
    n_out: int


def gaussian_kl(mu_a: np.ndarray, cov_a: np.ndarray, mu_b: np.ndarray, cov_b: np.ndarray) -> float:
    """D_KL(N(mu_a, cov_a) || N(mu_b, cov_b)) for d-dimensional Gaussians, in nats."""
    d = len(mu_a)
    inv_b = np.linalg.inv(cov_b)
    diff = mu_b - mu_a
    _, logdet_a = np.linalg.slogdet(cov_a)
    _, logdet_b = np.linalg.slogdet(cov_b)
    return float(0.5 * (np.trace(inv_b @ cov_a) - d + diff @ inv_b @ diff + logdet_b - logdet_a))


def true_label_logit(probs: np.ndarray, y_idx: int) -> tuple[np.ndarray, np.ndarray]:
    """phi = ln p_y - ln(1 - p_y) per row of unbinned probability vectors, and which rows are saturated."""
    p = np.atleast_2d(np.asarray(probs, dtype=float))[:, y_idx]
    saturated = (p <= SATURATION) | (p >= 1 - SATURATION)
    p = np.clip(p, SATURATION, 1 - SATURATION)
    return np.log(p) - np.log1p(-p), saturated


def kl_leakage(
    phi_in: np.ndarray,
    phi_out: np.ndarray,
    saturated_in: np.ndarray | None = None,
    saturated_out: np.ndarray | None = None,
) -> LeakageEstimate:
    """Symmetric Gaussian KL leakage rho_KL of one record from the in/out shadows' phi (module docstring)."""
    a, b = np.asarray(phi_in, dtype=float), np.asarray(phi_out, dtype=float)
    n_in, n_out = len(a), len(b)
    if min(n_in, n_out) < MIN_MODELS:
        return LeakageEstimate(None, "too few models", n_in, n_out)
    for sat in (saturated_in, saturated_out):
        if sat is not None and np.mean(sat) > 0.5:
            return LeakageEstimate(None, "saturated", n_in, n_out)
    m1, m0 = float(a.mean()), float(b.mean())
    v1, v0 = float(a.var()), float(b.var())
    flat1, flat0 = np.ptp(a) == 0, np.ptp(b) == 0
    if flat1 and flat0 and m1 == m0:
        return LeakageEstimate(0.0, None, n_in, n_out)
    if flat1 or flat0 or v1 <= 0 or v0 <= 0:
        return LeakageEstimate(None, "point mass", n_in, n_out)
    s1, s0 = np.array([[v1]]), np.array([[v0]])
    mu1, mu0 = np.array([m1]), np.array([m0])
    value = gaussian_kl(mu1, s1, mu0, s0) + gaussian_kl(mu0, s0, mu1, s1)
    return LeakageEstimate(max(value, 0.0), None, n_in, n_out)


def advantage_bound(rho: np.ndarray) -> np.ndarray:
    """Farokhi & Kaafar Theorem 1 per record: membership advantage <= min(1, sqrt(rho) / 2)."""
    return np.minimum(1.0, 0.5 * np.sqrt(np.maximum(np.asarray(rho, dtype=float), 0.0)))


def small_sample_level(n_in: np.ndarray, n_out: np.ndarray) -> np.ndarray:
    """Expected plug-in rho (nats) when in and out phi are the same Gaussian, for n_in, n_out >= 4 models.

    With sample variances v = s^2 chi2_{n-1} / n: E[1/v] = n / ((n - 3) s^2), so the
    mean-difference term is (1/n1 + 1/n0) (n0/(n0 - 3) + n1/(n1 - 3)) / 2 and the
    variance-ratio term ((n1 - 1)/n1 * n0/(n0 - 3) + (n0 - 1)/n0 * n1/(n1 - 3)) / 2 - 1;
    about 2 (1/n1 + 1/n0) for many models.
    """
    n1, n0 = np.asarray(n_in, dtype=float), np.asarray(n_out, dtype=float)
    inv1, inv0 = n1 / (n1 - 3), n0 / (n0 - 3)
    mean_term = 0.5 * (1 / n1 + 1 / n0) * (inv0 + inv1)
    ratio_term = 0.5 * ((n1 - 1) / n1 * inv0 + (n0 - 1) / n0 * inv1) - 1
    return mean_term + ratio_term


def summarise(estimates: list[LeakageEstimate], per_target_accuracy: dict[str, np.ndarray]) -> dict[str, Any]:
    """attack.json's kl_leakage block: estimates, why some are missing, the Theorem 1 bound and the
    strongest measured attack on the same records (per-target accuracy under the balanced protocol)."""
    rho = np.array([np.nan if e.value is None else e.value for e in estimates], dtype=float)
    ok = np.isfinite(rho)
    reasons = {r: sum(e.reason == r for e in estimates) for r in REASONS}
    out: dict[str, Any] = {
        "statistic": "logit of the shadow models' unbinned probability of the record's true label",
        "method": "Farokhi & Kaafar Definition 2, Gaussian approximation of Remark 3 (one dimension), no ridge",
        "units": "nats",
        "estimated": int(ok.sum()),
        "not_estimable": {r: n for r, n in reasons.items() if n},
        "mean": float(rho[ok].mean()) if ok.any() else None,
        "median": float(np.median(rho[ok])) if ok.any() else None,
        "small_sample_level": None,
        "bound": None,
        "measured": None,
    }
    if not ok.any():
        return out
    n_in = np.array([e.n_in for e in estimates])[ok]
    n_out = np.array([e.n_out for e in estimates])[ok]
    out["small_sample_level"] = float(small_sample_level(n_in, n_out).mean())
    adv = float(advantage_bound(rho[ok]).mean())
    out["bound"] = {
        "advantage": adv,
        "accuracy": 0.5 + adv / 2,
        "theorem_1_averaged": float(advantage_bound(np.array([rho[ok].mean()]))[0]),
        "meaning": "Theorem 1 per record, averaged: mean advantage (TPR - FPR) <= mean of min(1, sqrt(rho) / 2); "
        "accuracy = (1 + advantage) / 2 under the balanced protocol; theorem_1_averaged is sqrt(mean rho) / 2",
    }
    if per_target_accuracy:
        name = max(per_target_accuracy, key=lambda k: float(np.mean(per_target_accuracy[k][ok])))
        acc = float(np.mean(per_target_accuracy[name][ok]))
        out["measured"] = {
            "attack": name,
            "accuracy": acc,
            "advantage": 2 * acc - 1,
            "records": int(ok.sum()),
            "within_bound": bool(2 * acc - 1 <= adv),
        }
    return out

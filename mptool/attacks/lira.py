"""The likelihood-ratio attack, LiRA (Carlini et al., "Membership Inference Attacks From
First Principles", IEEE S&P 2022), online and offline, on binned releases.

**Statistic.** Carlini et al. scale a model's confidence on the record's true label y to
phi = ln(p_y / (1 - p_y)) and model phi over models trained with the record ("in") and
without it ("out") as Gaussians N(mu_in, s_in^2), N(mu_out, s_out^2).

**What the attacker observes.** mptool releases binned probabilities (Long et al. 5.2): the
target model's p_y is known only up to its bin [k b, (k+1) b), i.e. phi lies in the interval
[L_k, U_k) = [logit(k b), logit((k+1) b)) of logit space, with L = -inf for the first bin and
U = +inf for the last (censored ends: every p_y above 1 - b is one observation). Near
p = 0.995 one bin is about one unit of logit, so treating the bin centre as an exact value
and evaluating a Gaussian *density* there (the textbook score) is wrong exactly where
members sit. The likelihood of the observation is the Gaussian's mass on the bin:

    P(k | mu, s) = Phi((U_k - mu) / s) - Phi((L_k - mu) / s),

and the online score is ln P(k | mu_in, s_in) - ln P(k | mu_out, s_out) ("member" iff > 0).
The offline score is the out-models' mid-distribution function at the observation,
P(phi_out < L_k) + P(L_k <= phi_out < U_k) / 2 (ties count half), "member" iff > 0.5.
Without binning (bin_size 0) the interval is a point and both reduce to Carlini et al.'s
density ratio and one-sided Gaussian CDF.

**Fitting mu and s from shadows.** The shadows' outputs are binned like the target's (the
attacker's view); each is represented by the logit of its bin centre. Per record and side,
mu is the mean of the n models' phi. The variance is shrunk towards the within-record
variance pooled over all targets, v_pool, with a prior worth ``PRIOR_MODELS`` models (the
posterior mean of a scaled-inverse-chi^2 prior centred on v_pool):

    s^2 = (n v_record + PRIOR_MODELS v_pool) / (n + PRIOR_MODELS).

With few models per side this is Carlini et al.'s fixed (pooled) variance, with many it is
their per-example variance, and nothing switches in between, so adding shadows can only
sharpen the per-record estimate. A side whose models all fall in one bin has sample variance
0, but its latent spread is only unknown below the bin's width: s is floored at the standard
deviation of a uniform over one bin in logit space, b / (p (1 - p) sqrt(12)) at p = the side's
mean (the logit's derivative times the bin width; Sheppard's quantisation scale), and at
``MIN_STD`` in any case.

The earlier model (a density at the bin centre, a 0.05 floor on s, pooled variances below 16
models per side and per-record above) made LiRA weaker as the shadow budget grew on binned
releases (issue 21: TPR at 1% FPR 0.092 with 16 models, 0.072 with 64 on the Adult MLP); see
benchmarks/bench_attack_strength.py for the comparison.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import log_ndtr, ndtr
from scipy.stats import norm

#: Models' worth of the pooled variance in each record's variance (shrinkage strength).
PRIOR_MODELS = 16
#: Smallest standard deviation of phi in any case (logit units).
MIN_STD = 1e-3
#: Floor of the legacy exact-observation functions below (lira_online / lira_offline with std None).
STD_FLOOR = 0.05
#: Probability clip that keeps an unbinned phi finite.
CLIP = 1e-12


def logit_confidence(probs: np.ndarray, y_idx: int) -> np.ndarray:
    """phi = ln p_y - ln(1 - p_y) per row of probability vectors (clipped to [1e-12, 1 - 1e-12])."""
    p = np.clip(np.atleast_2d(probs)[:, y_idx], CLIP, 1 - CLIP)
    return np.log(p) - np.log1p(-p)


def logit_interval(probs: np.ndarray, y_idx: int, bin_size: float) -> tuple[np.ndarray, np.ndarray]:
    """The interval [lo, hi) of logit space an observed (binned) p_y stands for; lo == hi unbinned.

    A binned value is its bin's centre (mptool.privacy.calibration.bin_probabilities); its
    bin is [k b, min((k + 1) b, 1)), and the end bins reach -inf / +inf in logit space.
    """
    p = np.atleast_2d(np.asarray(probs, dtype=float))[:, y_idx]
    if bin_size <= 0:
        phi = logit_confidence(np.atleast_2d(probs), y_idx)
        return phi, phi
    lower = np.floor(np.round(p / bin_size, 9)) * bin_size
    upper = np.minimum(lower + bin_size, 1.0)
    with np.errstate(divide="ignore"):
        lo = np.where(lower <= 0, -np.inf, _logit(lower))
        hi = np.where(upper >= 1, np.inf, _logit(upper))
    return lo, hi


def _logit(p: np.ndarray) -> np.ndarray:
    """ln p - ln(1 - p) of bin edges strictly inside (0, 1)."""
    q = np.clip(p, 1e-300, 1 - 1e-16)
    return np.log(q) - np.log1p(-q)


def log_likelihood(lo: np.ndarray, hi: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """ln P(lo <= phi < hi) under N(mean, std^2), or the log density at lo where lo == hi.

    Computed from log Phi on the side of the mean where the tail is small, so far-out
    bins keep finite, ordered values.
    """
    lo, hi = np.broadcast_arrays(np.asarray(lo, dtype=float), np.asarray(hi, dtype=float))
    mean, std = np.broadcast_to(mean, lo.shape), np.broadcast_to(std, lo.shape)
    exact = lo == hi
    a, b = (lo - mean) / std, (hi - mean) / std
    flip = a > 0  # both ends above the mean: use the upper tail, Phi(b) - Phi(a) = Phi(-a) - Phi(-b)
    a, b = np.where(flip, -b, a), np.where(flip, -a, b)
    la, lb = log_ndtr(a), log_ndtr(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        mass = lb + np.log1p(-np.exp(la - lb))
        dens = norm.logpdf(np.where(exact, lo, 0.0), mean, std)
    return np.where(exact, dens, mass)


def mid_cdf(lo: np.ndarray, hi: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """P(phi < lo) + P(lo <= phi < hi) / 2 under N(mean, std^2); Phi((lo - mean) / std) where lo == hi."""
    return 0.5 * (ndtr((np.asarray(lo) - mean) / std) + ndtr((np.asarray(hi) - mean) / std))


@dataclass(frozen=True)
class SideFit:
    """Per-record Gaussians of phi for one side (in or out): means, standard deviations, model counts."""

    mean: np.ndarray
    std: np.ndarray
    count: np.ndarray
    pooled_std: float


def fit_side(groups: list[np.ndarray], bin_size: float, prior_models: float = PRIOR_MODELS) -> SideFit:
    """Shrunk per-record Gaussians of phi, one per group of shadow phi values (module docstring)."""
    count = np.array([len(g) for g in groups], dtype=float)
    mean = np.array([g.mean() if len(g) else 0.0 for g in groups])
    ss = np.array([np.sum((g - g.mean()) ** 2) if len(g) else 0.0 for g in groups])
    pooled = float(ss.sum() / count.sum()) if count.sum() else 0.0
    var = (ss + prior_models * pooled) / (count + prior_models)
    std = np.maximum(np.sqrt(var), quantisation_std(mean, bin_size))
    return SideFit(mean, std, count.astype(int), float(np.sqrt(pooled)))


def quantisation_std(mean: np.ndarray, bin_size: float) -> np.ndarray:
    """Standard deviation of a uniform over one bin in logit space at phi = mean (at least MIN_STD)."""
    if bin_size <= 0:
        return np.full(np.shape(mean), MIN_STD)
    p = np.clip(1.0 / (1.0 + np.exp(-np.asarray(mean, dtype=float))), bin_size / 2, 1 - bin_size / 2)
    return np.maximum(bin_size / (p * (1 - p) * np.sqrt(12.0)), MIN_STD)


def lira_binned(
    lo: np.ndarray, hi: np.ndarray, fit_in: tuple[float, float], fit_out: tuple[float, float]
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Online and offline LiRA of observations [lo, hi) of one record: ((score, member?), (score, member?)).

    ``fit_in`` and ``fit_out`` are (mean, std) of the record's in and out Gaussians.
    """
    online = log_likelihood(lo, hi, *fit_in) - log_likelihood(lo, hi, *fit_out)
    offline = mid_cdf(lo, hi, *fit_out)
    return (online, online > 0), (offline, offline > 0.5)


# Exact-observation LiRA with given or per-record standard deviations (the textbook form).


def pooled_std(groups: list[np.ndarray]) -> float:
    """Standard deviation around each group's own mean, pooled over groups (Carlini's fixed variance)."""
    dev = [g - g.mean() for g in groups if len(g)]
    if not dev:
        return STD_FLOOR
    return max(float(np.sqrt(np.mean(np.concatenate(dev) ** 2))), STD_FLOOR)


def lira_online(
    phi_obs: np.ndarray, phi_in: np.ndarray, phi_out: np.ndarray, std_in: float | None, std_out: float | None
) -> tuple[np.ndarray, np.ndarray]:
    """Online LiRA log-likelihood ratio of exact observations; ``std_*`` None = per-record (floored at 0.05)."""
    s_in = max(float(np.std(phi_in)), STD_FLOOR) if std_in is None else std_in
    s_out = max(float(np.std(phi_out)), STD_FLOOR) if std_out is None else std_out
    score = norm.logpdf(phi_obs, np.mean(phi_in), s_in) - norm.logpdf(phi_obs, np.mean(phi_out), s_out)
    return score, score > 0


def lira_offline(phi_obs: np.ndarray, phi_out: np.ndarray, std_out: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Offline LiRA of exact observations: Phi((phi_obs - mu_out) / s_out); "member" iff above 0.5."""
    s_out = max(float(np.std(phi_out)), STD_FLOOR) if std_out is None else std_out
    score = norm.cdf((phi_obs - np.mean(phi_out)) / s_out)
    return score, score > 0.5

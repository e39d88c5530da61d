"""Output post-processing of predicted probabilities: binning and flooring.

The single place where probabilities are coarsened before any ratio is taken
(Long et al., section 5.2, "Binning the Predictions").
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: Floor applied when binning is off (bin_size 0), so a log-ratio stays finite.
PROB_FLOOR = 1e-12


def bin_probabilities(p: np.ndarray, bin_size: float) -> np.ndarray:
    """Replace each probability by the centre of its bin of width ``bin_size``.

    Bins are ``[k*b, (k+1)*b)`` for k = 0, 1, ...; a probability of exactly 1 falls in the
    last bin. With b = 0.01 a probability of 0 becomes 0.005 and 1 becomes 0.995, so the
    largest possible |log-ratio| is ln(0.995/0.005) ~= 5.29 (Long et al., section 5.2).
    The quotient p/b is rounded to 9 decimals before flooring, so a value on a bin edge
    (e.g. 0.29, whose float quotient is 28.999999999999996) lands in the bin it starts.
    When 1/b is not a whole number the last bin is narrower and its centre is the
    midpoint of ``[k*b, 1]``.

    ``bin_size == 0`` disables binning: probabilities are floored at ``PROB_FLOOR``.
    """
    p = np.asarray(p, dtype=float)
    if bin_size <= 0:
        return np.maximum(p, PROB_FLOOR)
    n_bins = int(np.ceil(np.round(1.0 / bin_size, 9)))
    k = np.floor(np.round(np.clip(p, 0.0, 1.0) / bin_size, 9))
    k = np.clip(k, 0, n_bins - 1)
    lower = k * bin_size
    upper = np.minimum(lower + bin_size, 1.0)
    return (lower + upper) / 2.0


def max_log_ratio(bound: float) -> float:
    """Largest |ln p - ln p'| possible after binning with width ``bound`` (0 = floor only)."""
    lo = bin_probabilities(np.array([0.0]), bound)[0]
    hi = bin_probabilities(np.array([1.0]), bound)[0]
    return float(np.log(hi) - np.log(lo))


#: Bins scanned exactly by :func:`binned_bound`; beyond them a closed-form bound is used.
_SCANNED_BINS = 64


def binned_bound(raw_bound: np.ndarray, bin_size: float) -> np.ndarray:
    """Upper bound of the binned DTP given an upper bound ``raw_bound`` of the raw one.

    If |ln p - ln p'| <= B for every query and class, the binned log-ratio
    |ln b(p) - ln b(p')| (b = :func:`bin_probabilities`) is at most
    f(B) = max over bins k of ln b(min(1, e^B * top_k)) - ln c_k, where c_k is bin k's centre
    and top_k its upper edge: b is non-decreasing, p' in bin k has b(p') = c_k and p <=
    e^B p' < e^B top_k (the symmetric case is the same with p and p' swapped). Bins k >= 64
    (other than the last) are covered by (e^B (k+1) + 1/2) / (k + 1/2), which decreases in k.
    The result is capped at :func:`max_log_ratio`. Consequence: any B > 0 allows a one-bin step
    from bin 0 to bin 1, so with binning the bound is never below ln 3 > 1, however small B is:
    binning can turn a tiny raw change into a DTP-1 violation, and no raw bound rules that out.
    ``bin_size`` 0 (floor only) gives min(B, cap): flooring both probabilities cannot widen a ratio.
    """
    B = np.asarray(raw_bound, dtype=float)
    cap = max_log_ratio(bin_size)
    if bin_size <= 0:
        return np.minimum(B, cap)
    if B.size > 4096:  # elementwise: once per distinct value (bit pattern), then gathered (issue 28)
        codes, distinct = pd.factorize(np.ascontiguousarray(B).reshape(-1).view(np.int64))
        once = _binned(np.asarray(distinct, dtype=np.int64).view(np.float64), bin_size, cap)
        return once[codes].reshape(B.shape)
    return _binned(B, bin_size, cap)


def _binned(B: np.ndarray, bin_size: float, cap: float) -> np.ndarray:
    """:func:`binned_bound` of ``B`` (a float array) for a bin size > 0, value by value."""
    n_bins = int(np.ceil(np.round(1.0 / bin_size, 9)))
    k = np.unique(np.r_[np.arange(min(n_bins, _SCANNED_BINS)), n_bins - 1])
    top = np.minimum((k + 1) * bin_size, 1.0)
    log_centre = np.log(bin_probabilities(np.minimum(k * bin_size, 1.0), bin_size))
    finite = np.where(np.isfinite(B), B, 0.0)
    out = np.empty(B.shape)
    flat_B, flat_out = finite.ravel(), out.ravel()
    for s in range(0, flat_B.size, 4096):
        with np.errstate(over="ignore"):
            e = np.exp(flat_B[s : s + 4096])[:, None]
        scanned = np.log(bin_probabilities(np.minimum(1.0, e * top[None, :]), bin_size)) - log_centre[None, :]
        best = scanned.max(axis=1)
        if n_bins - 1 > _SCANNED_BINS:
            k0 = _SCANNED_BINS
            best = np.maximum(best, np.log((e[:, 0] * (k0 + 1) + 0.5 + 1e-6) / (k0 + 0.5)))  # 1e-6: edge rounding
        flat_out[s : s + 4096] = best
    out = np.minimum(flat_out.reshape(B.shape), cap)
    out = np.where(B <= 0, 0.0, out)
    out = np.where(np.isnan(B), np.nan, out)
    return np.where(np.isposinf(B), cap, out)

"""Output post-processing of predicted probabilities: binning and flooring.

The single place where probabilities are coarsened before any ratio is taken
(Long et al., section 5.2, "Binning the Predictions").
"""

from __future__ import annotations

import numpy as np

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

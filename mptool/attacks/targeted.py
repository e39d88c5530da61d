"""The targeted attacks of Long et al. (section 5.3): distance-based and frequency-based.

Both attack one record t at a time from its shadow evidence: the binned prediction vectors
on x_t of shadow models trained with t ("in") and without t ("out"), and the target
model's binned output q = c(x_t). Each function takes the q of several attacks on the same
record (rows) and returns a score (higher = "member") and the decision.
"""

from __future__ import annotations

import numpy as np

#: Pseudo-count added to the frequency attack's bin-match counts (see :func:`frequency`).
FREQUENCY_PSEUDOCOUNT = 0.5


def kl_divergence(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """D_KL(P || Q) = sum_i p_i log(p_i / q_i) per row (Long et al. 5.3, step 2); inputs > 0."""
    p = np.atleast_2d(p)
    return np.sum(p * (np.log(p) - np.log(q)), axis=1)


def distance(q: np.ndarray, in_preds: np.ndarray, out_preds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distance-based targeted attack.

    p_in and p_out are the averages of the in and out shadow prediction vectors; accept H1
    (t in T) iff D_KL(q || p_out) > D_KL(q || p_in). Score = D_KL(q||p_out) - D_KL(q||p_in);
    a tie (score 0, e.g. a model whose output ignores t) is decided "out".
    """
    q = np.atleast_2d(q)
    p_in = np.mean(in_preds, axis=0)
    p_out = np.mean(out_preds, axis=0)
    score = kl_divergence(q, p_out[None, :]) - kl_divergence(q, p_in[None, :])
    return score, score > 0


def frequency(q: np.ndarray, in_preds: np.ndarray, out_preds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Frequency-based targeted attack.

    For each class i, o_in_i (o_out_i) counts the in (out) shadows whose binned probability
    of class i equals q_i; accept H1 iff prod_i o_in_i / o_out_i > 1. Deviation from the
    paper, which leaves 0/0 and x/0 undefined: the counts become frequencies
    (o + 0.5) / (m + 1) over the m in (out) shadows, so zeros stay finite and pools with
    unequal numbers of in and out models compare fairly; a class that no shadow matches
    contributes a factor 1. Score = sum_i log of the ratio; ties are "out".
    """
    q = np.atleast_2d(q)
    match_in = np.isclose(in_preds[None, :, :], q[:, None, :], rtol=0, atol=1e-9).sum(axis=1)
    match_out = np.isclose(out_preds[None, :, :], q[:, None, :], rtol=0, atol=1e-9).sum(axis=1)
    c = FREQUENCY_PSEUDOCOUNT
    f_in = (match_in + c) / (len(in_preds) + 2 * c)
    f_out = (match_out + c) / (len(out_preds) + 2 * c)
    seen = (match_in + match_out) > 0  # a class no shadow matched carries no evidence: factor 1
    score = np.sum(np.where(seen, np.log(f_in) - np.log(f_out), 0.0), axis=1)
    score = np.where(np.abs(score) < 1e-12, 0.0, score)
    return score, score > 0

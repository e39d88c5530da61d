"""Influence beyond training randomness: a record's PDTP estimated over replicates, with a decision.

For a training algorithm whose output depends on a seed or on the order of the rows (Long et
al. section 9: random initialisation, minibatch order, bootstrap draws), A(T) is a random
classifier. Its released prediction on x_t is a random variable over the training randomness
omega, and one paired refit measures that randomness as much as the record's influence.

**The quantity.** With q_S(y) = E_omega[ release_b(p_{A_omega(S)}(y | x_t)) ], the expected
released (binned, Long et al. 5.2) probability of the classifier trained on S,

    theta_t = max_y | ln q_T(y) - ln q_{T minus t}(y) |,

the PDTP (Definitions 4.3/4.4) of the *randomised* algorithm, whose output is the mixture over
omega of the classifiers it may train. For a deterministic A it is the PDTP of today's engines.
Binning comes first, then the expectation: E of a bin centre is smooth in the distribution, so a
small shift of a mean never jumps a bin edge, and the floor b/2 bounds every log-ratio (<= 5.29).

**The estimate.** R replicates omega_1..omega_R (a seed and a row permutation each) are drawn on
both sides with common random numbers: replicate r of T minus t uses the seed and the order of
replicate r of T with t's row left out. With the means m_T, m_L of the R pairs, d_y = ln m_T(y) -
ln m_L(y) and theta-hat = max_y |d_y|. The standard error of d_y is the delta method's over the
paired replicates, se_y = sd_r(p_T^r(y)/m_T(y) - p_L^r(y)/m_L(y)) / sqrt(R), floored at one bin's
quantisation (b / sqrt(12), Sheppard), with Student's t on R - 1 degrees of freedom. The per-record
bounds are a one-sided 95 % lower bound max_y |d_y| - t_{1-0.05/(kL)} se_y (Bonferroni over the k
classes and the L planned looks) and a one-sided 95 % upper bound max_y |d_y| + t_{1-0.05/L} se_y:
repeated confidence bounds (Jennison and Turnbull, JRSS B 51, 1989), valid at whichever look a
record stopped, as its p-values below are; a decision also corrects across records, so a bound
past the threshold can still leave a record undecided.

**The decision.** Two tests per record on the same statistics:

- violation (H0: theta_t <= tau): p_y = S(z) + S(z + 2 tau / se_y), z = (|d_y| - tau) / se_y, S the
  t survival function (the supremum over d_y in [-tau, tau]); p = min(1, k min_y p_y) over k classes;
- below the threshold (H0: theta_t >= tau): p = max_y S((tau - |d_y|) / se_y) (intersection-union).

Replicates are added in looks (``--replicates MIN:MAX`` doubles MIN up to MAX); a record's p-value
is Bonferroni over the planned looks, min(1, L min_look p), valid whatever the stopping rule. The
error across records is controlled by Benjamini-Hochberg (default: the false-discovery rate of
each decision at ``ALPHA``; records not evaluated count with p = 1), by Holm (family-wise) or per
record. BH rejects every hypothesis only when every p <= alpha, so "every record decided below"
(DTP-1 holds) is wrong with probability <= alpha, and under no true violator a "VIOLATED" verdict
is wrong with probability <= alpha (BH controls the family-wise error under the global null);
both hold under independence or positive dependence of the p-values (records share the T
replicates), Holm under any dependence.

The per-record spread of p_{A(T)}(y_t | x_t) over the T replicates (its standard deviation) is
the quantity of Long et al.'s Figure 7: the scale the influence is compared with. The per-record
Gaussian view of in/out predictions over training randomness follows LiRA (Carlini et al.,
"Membership Inference Attacks From First Principles", IEEE S&P 2022), here on probabilities.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import t as student_t

#: Error level of the decisions (and 1 - the confidence of the intervals).
ALPHA = 0.05
#: Error controls across records: Benjamini-Hochberg (FDR), Holm (FWER), or per record.
CONTROLS = {
    "bh": "false-discovery rate (Benjamini-Hochberg) of the violations and of the below-threshold decisions",
    "holm": "family-wise error rate (Holm) of the violations and of the below-threshold decisions",
    "record": "per record (no correction across records)",
}
#: The values of the ``violation`` column of a randomized audit.
UNDECIDED = "undecided"


@dataclass(frozen=True)
class RecordStats:
    """Per record: estimate, one-sided 95 % bounds, p-values of the two tests, the mean predictions."""

    estimate: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    p_violation: np.ndarray
    p_below: np.ndarray
    worst: np.ndarray  # class index of the estimate's maximum
    m_full: np.ndarray  # (n, k) mean released prediction of the T replicates
    m_loo: np.ndarray  # (n, k) the same of the T minus t replicates


def record_stats(pt: np.ndarray, pl: np.ndarray, threshold: float, bin_size: float, looks: int = 1) -> RecordStats:
    """Statistics of one record set from paired replicates ``pt``, ``pl`` of shape (n, R, k).

    The entries are released probabilities already binned (or floored, bin size 0); R >= 2 is
    the same for every record of the call. See the module docstring for the formulas.
    ``looks``: the bounds are at level 0.05 / ``looks`` each, repeated confidence bounds over that
    many planned looks (Jennison and Turnbull, JRSS B 51, 1989), so that a record stopped at any
    look is still covered at the stated level, as its p-values are Bonferroni over the looks
    (docs/randomness.md section 5). The p-values do not depend on ``looks``.
    """
    pt, pl = np.asarray(pt, dtype=float), np.asarray(pl, dtype=float)
    n, r, k = pt.shape
    if r < 2:
        raise ValueError("need at least 2 replicates per record")
    mt, ml = pt.mean(axis=1), pl.mean(axis=1)
    d = np.log(mt) - np.log(ml)
    u = pt / mt[:, None, :] - pl / ml[:, None, :]
    sd = u.std(axis=1, ddof=1)
    quantum = bin_size / np.sqrt(12.0) * np.sqrt(1.0 / mt**2 + 1.0 / ml**2)
    se = np.maximum(np.maximum(sd, quantum), 1e-12) / np.sqrt(r)
    df = r - 1
    absd = np.abs(d)
    # Repeated one-sided bounds at 0.05 / looks each: the lower one also Bonferroni over the k classes (the
    # violation test's), the upper one the intersection-union test's (no correction over the classes).
    level = ALPHA / max(1, int(looks))
    abs_lo = np.maximum(absd - student_t.ppf(1.0 - level / k, df) * se, 0.0)
    abs_hi = absd + student_t.ppf(1.0 - level, df) * se
    if bin_size > 0:  # no released log-ratio exceeds ln((1 - b/2) / (b/2)) (5.29 for b = 0.01)
        abs_hi = np.minimum(abs_hi, np.log((1 - bin_size / 2) / (bin_size / 2)))
    z = (absd - threshold) / se
    p_y = student_t.sf(z, df) + student_t.sf(z + 2 * threshold / se, df)
    p_violation = np.minimum(1.0, k * p_y.min(axis=1))
    p_below = student_t.sf((threshold - absd) / se, df).max(axis=1)
    worst = np.argmax(absd, axis=1)
    idx = np.arange(n)
    return RecordStats(absd[idx, worst], abs_lo.max(axis=1), abs_hi.max(axis=1), p_violation, p_below, worst,
                       mt, ml)


def adjusted_rejections(p: np.ndarray, control: str, alpha: float = ALPHA) -> np.ndarray:
    """Which hypotheses with p-values ``p`` are rejected under ``control`` (``CONTROLS``) at ``alpha``."""
    p = np.asarray(p, dtype=float)
    m = len(p)
    if m == 0:
        return np.zeros(0, dtype=bool)
    if control == "record":
        return p <= alpha
    order = np.lexsort((np.arange(m), p))
    ranked = p[order]
    ranks = np.arange(1, m + 1)
    out = np.zeros(m, dtype=bool)
    if control == "bh":
        ok = np.nonzero(ranked <= alpha * ranks / m)[0]
        if ok.size:
            out[order[: ok.max() + 1]] = True
        return out
    if control == "holm":
        fail = np.nonzero(ranked > alpha / (m - ranks + 1))[0]
        stop = fail.min() if fail.size else m
        out[order[:stop]] = True
        return out
    raise ValueError(f"unknown error control {control!r}")


def decide(p_violation: np.ndarray, p_below: np.ndarray, control: str, looks: int, alpha: float = ALPHA,
           alpha_violation: float | None = None) -> np.ndarray:
    """The ``violation`` value of each record: True, False or ``UNDECIDED`` (object array).

    ``p_violation``/``p_below`` are each record's smallest p-value over the looks so far (NaN:
    not evaluated, counted as 1); they are Bonferroni-corrected over the ``looks`` planned, then
    ``control`` is applied across all records, separately for the two tests. A record rejected by
    both (impossible with a consistent interval) counts as a violation. ``alpha_violation`` (default
    ``alpha``) is the violations' level alone: ``--fail-fast`` spends the rest on its screen
    (:func:`screen_level`).
    """
    pv = np.minimum(1.0, looks * np.nan_to_num(np.asarray(p_violation, dtype=float), nan=1.0))
    pb = np.minimum(1.0, looks * np.nan_to_num(np.asarray(p_below, dtype=float), nan=1.0))
    viol = adjusted_rejections(pv, control, alpha if alpha_violation is None else alpha_violation)
    below = adjusted_rejections(pb, control, alpha) & ~viol
    out = np.full(len(pv), UNDECIDED, dtype=object)
    out[viol] = True
    out[below] = False
    return out


def counts(decisions: np.ndarray) -> dict[str, int]:
    """How many records are decided violations, decided below the threshold, and undecided."""
    d = list(decisions)
    return {
        "violations": sum(1 for v in d if v is True),
        "below": sum(1 for v in d if v is False),
        "undecided": sum(1 for v in d if v is UNDECIDED or v == UNDECIDED),
    }


#: ``--fail-fast``: the share of ``ALPHA`` its depth-first screen spends on violations; the audit keeps the rest.
SCREEN_SHARE = 0.5


def screen_level(rank: int, alpha: float = ALPHA * SCREEN_SHARE) -> float:
    """The level of the record at 0-based position ``rank`` of the risk order in the ``--fail-fast`` screen.

    alpha * 2^-(rank + 1): the weights sum to at most ``alpha``, so by the union bound (a
    weighted Bonferroni) the screen calls any record with theta_t <= tau a violation with
    probability <= ``alpha``, whatever the dependence of the records' p-values, provided the
    order is fixed before the replicates are drawn (it comes from A(T)'s own fit, whose seed is
    not one of the replicates').
    """
    return float(alpha * 2.0 ** -(rank + 1))


def screen_records(n: int, alpha: float = ALPHA * SCREEN_SHARE, audit_alpha: float = ALPHA * (1 - SCREEN_SHARE)
                   ) -> int:
    """How many of ``n`` records the screen tests: those whose level beats the audit's first BH/Holm step.

    Record ``rank`` is screened while screen_level(rank) >= audit_alpha / n (at least one record):
    past that the audit's smallest-p level (alpha / n for BH and Holm) is the better use of a replicate.
    """
    k = 0
    while k < n and screen_level(k, alpha) >= audit_alpha / n:
        k += 1
    return max(1, k)

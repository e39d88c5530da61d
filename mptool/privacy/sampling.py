"""What a sample of records says about the whole training set (``--sample K``).

DTP-1 (Long et al. section 5) holds when *no* record of T has PDTP above the threshold. A
random sample of K records can confirm a violation (any sampled violator is one), but it
cannot show that none exists: it bounds only the *fraction* of T above the threshold. With
v violators among K records drawn at random, the one-sided 95% Clopper-Pearson upper bound
is the p with P(Binomial(K, p) <= v) = 0.05, i.e. the 0.95 quantile of Beta(v + 1, K - v)
(1 when v = K); for v = 0 it is 1 - 0.05^(1/K), about 3/K.

The sample is drawn without replacement, where the count of violators is hypergeometric;
the binomial bound is conservative for it (checked in tests/test_fail_fast.py).
"""

from __future__ import annotations

from typing import Any

from scipy.stats import beta

#: Confidence level of the upper bound printed and written for a sample.
CONFIDENCE = 0.95


def clopper_pearson_upper(violations: int, k: int, confidence: float = CONFIDENCE) -> float:
    """One-sided Clopper-Pearson upper confidence bound on a proportion: ``violations`` of ``k`` draws."""
    if not 0 <= violations <= k or k < 1:
        raise ValueError(f"need 0 <= violations <= k and k >= 1 (got {violations} of {k})")
    if violations == k:
        return 1.0
    return float(beta.ppf(confidence, violations + 1, k - violations))


def sample_summary(k: int, n_train: int, violations: int, complete: bool) -> dict[str, Any]:
    """The ``summary.sample`` block: K of n_train records drawn, violations seen, the bound on T's fraction.

    ``complete`` is False when ``--fail-fast`` stopped before every sampled record was
    refitted: the records refitted were then chosen by the screen, not at random, so no
    bound is given (the violation found is exact). A sample of all of T gives the exact fraction.
    """
    if not complete:
        upper, method = None, "none: --fail-fast stopped before every sampled record was refitted"
    elif k == n_train:
        upper, method = violations / n_train, "exact: the sample is all of T"
    else:
        upper = clopper_pearson_upper(violations, k)
        method = "one-sided 95% Clopper-Pearson upper bound on the fraction of T above the threshold"
    return {"k": k, "n_train": n_train, "violations": violations, "fraction_upper_95": upper, "method": method}

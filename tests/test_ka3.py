"""The replicate engine near the threshold, on ground truth: interval coverage and error rates (issue 27).

tests/test_randomness.py checks the null rate and the power far from the threshold (nulls at
theta ~ 0, large records at theta ~ 4.4), where even a standard error 100 times too small passes.
Here the known-answer classifier's memorised shift is set so that a record's exact PDTP
(:func:`mptool.inputs.known_answer.true_pdtp`, docs/randomness.md section 2) lies at 0 or in
0.49-1.48, and the engine's reported bounds (``pdtp_low``, ``pdtp_high``: ``result.stats.lower`` and
``.upper``, mptool/api/randomized.py) and decisions are checked against it.

One record per engine run: every record of a run shares the replicates of A(T) and, with this
classifier, the seed noise of every A(T minus t) (it depends only on n), so records of one run are
not independent; runs with different spec seeds are. The engine runs as in ``mptool pdtp
--replicates 4:8 --jobs 1`` (BH at 5 %; with one record BH is the per-record test, and BH never
rejects a record whose own p-value exceeds 5 %, so the per-record rates below are those it states).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from mptool.inputs.known_answer import MODULE, KnownAnswerClassifier, known_frame, known_spec, true_pdtp
from mptool.inputs.prepare import fit_checked, prepare
from mptool.inputs.spec import parse_spec
from mptool.loo.base import LooRequest
from mptool.loo.replicates import ReplicateEngine, ReplicatePlan
from mptool.privacy.calibration import bin_probabilities
from mptool.privacy.influence import ALPHA

FRAME, KIND = known_frame(0)  # rows 0-7 once with weight 1 (row 0 label 1, row 3 label 0), 9-20 copies, 21-25 weight 0
BELOW = (1.55, 1.65, 1.72)  # memorised shifts giving theta 0.825, 0.891, 0.939: just below tau = 1
ABOVE = (1.9, 2.0, 2.08)  # theta 1.065, 1.136, 1.195: just above
AROUND = (1.0, 1.3, 2.3, 2.45)  # theta 0.487, 0.665, 1.360, 1.476
RUNS = 10  # spec seeds per shift (5 for row 0, 5 for row 3) and per null row
FLICKER = 1e-3  # each assertion fails with probability <= 1e-3 where the engine meets its stated rate


def _runs(memorise: float, rows: tuple[int, ...], seeds: range) -> list[tuple[float, float, float, object]]:
    """(theta, pdtp_low, pdtp_high, violation) of one engine run per (row, seed): one record each, --replicates 4:8."""
    prep = prepare(FRAME, parse_spec(known_spec(0, memorise=memorise), "spec"), (MODULE,))
    T = prep.train
    full = fit_checked(prep.template, T)
    engine = ReplicateEngine(ReplicatePlan(4, 8, threshold=1.0, bin_size=prep.spec.output.bin_size))
    out = []
    for i, seed in enumerate(seeds):
        row = rows[i % len(rows)]
        spec = prep.spec.model_copy(update={"seed": seed})
        req = LooRequest(spec, prep.template, T, full, prep.classes, np.flatnonzero(T.rows == row), jobs=1)
        res = engine.run(req, lambda _k: None)
        out.append((true_pdtp(FRAME, row, memorise=memorise), float(res.stats.lower[0]), float(res.stats.upper[0]),
                    res.decisions[0]))
    return out


@pytest.fixture(scope="module")
def runs() -> dict[str, list]:
    """120 independent engine runs: 20 nulls (a copy, a weight-0 row), 100 large records at 10 shifts.

    Every run has its own spec seed (a shared seed would give two shifts the same replicate draws).
    """
    out = {"null": _runs(6.0, (9, 21), range(RUNS * 2))}
    base = RUNS * 2
    for name, shifts in (("below", BELOW), ("above", ABOVE), ("around", AROUND)):
        out[name] = []
        for m in shifts:
            out[name] += _runs(m, (0, 3), range(base, base + RUNS))
            base += RUNS
    return out


def _allowed(n: int, rate: float) -> int:
    """The most misses out of n the test allows: the one-sided binomial bound P(Bin(n, rate) > c) <= FLICKER."""
    return int(binom.isf(FLICKER, n, rate))


def test_truth_matches_fits_of_the_classifier() -> None:
    """true_pdtp against the classifier itself, fitted 1,500 times per side with random seeds and row orders
    (a record at theta ~ 1.06; the nulls' theta < 0.002 is below what such a check resolves).

    Tolerance: 4 Monte-Carlo standard errors of the log-ratio of means (delta method over the draws,
    T and T minus t drawn independently), + 1e-9 for the float sums.
    """
    X, y = FRAME[["x", "w"]].to_numpy(dtype=float), FRAME["label"].to_numpy()
    rng = np.random.default_rng(27)
    for row, memorise in ((0, 1.9),):
        draws = {True: [], False: []}
        for _ in range(1500):
            seed, order = int(rng.integers(2**31 - 1)), rng.permutation(len(y))
            for full in (True, False):
                o = order if full else order[order != row]
                est = KnownAnswerClassifier(seed, noise=1.0, memorise=memorise, weight_feature=1).fit(X[o], y[o])
                draws[full].append(bin_probabilities(est.predict_proba(X[[row]])[0], 0.01))
        pt, pl = np.array(draws[True]), np.array(draws[False])
        d = np.log(pt.mean(0)) - np.log(pl.mean(0))
        se = np.sqrt(pt.var(0, ddof=1) / pt.mean(0) ** 2 + pl.var(0, ddof=1) / pl.mean(0) ** 2) / np.sqrt(1500)
        worst = int(np.argmax(np.abs(d)))
        assert abs(np.abs(d[worst]) - true_pdtp(FRAME, row, memorise=memorise)) <= 4 * se[worst] + 1e-9


def test_the_cases_sit_where_they_should() -> None:
    assert KIND[[0, 3]].tolist() == ["large", "large"] and KIND[[9, 21]].tolist() == ["null", "null"]
    assert all(0.8 <= true_pdtp(FRAME, r, memorise=m) <= 0.95 for m in BELOW for r in (0, 3))
    assert all(1.05 <= true_pdtp(FRAME, r, memorise=m) <= 1.2 for m in ABOVE for r in (0, 3))
    assert all(true_pdtp(FRAME, r, memorise=6.0) < 2e-3 for r in (9, 21))


def test_bounds_cover_the_true_pdtp_at_the_nominal_level(runs) -> None:
    """[pdtp_low, pdtp_high] is two one-sided 95 % bounds: nominal coverage 90 %.

    Slack: misses <= _allowed(n, 0.10), the one-sided binomial bound at 1e-3 (120 runs: 23 misses,
    coverage >= 80.8 %). The runs are seeded, so the outcome is the same on every machine and in any
    test order; the bound says how unlikely a failure would be for other seeds if the engine met 90 %.
    It guards regressions, not the last points: over 3,000 runs per case the bounds per look (before
    2026-11-28) covered 0.86-0.89 for theta in 0.8-1.5 at 4:8, the repeated bounds at 0.05/L 0.92-0.99
    (docs/randomness.md section 5).
    """
    all_runs = [r for part in runs.values() for r in part]
    covered = [low <= theta <= high for theta, low, high, _ in all_runs]
    assert len(covered) == 120
    assert len(covered) - sum(covered) <= _allowed(len(covered), 2 * ALPHA)


def test_records_just_below_the_threshold_are_rarely_called_violations(runs) -> None:
    """theta in 0.8-0.95: decided a violation at most at the stated 5 % (+ the binomial slack at 1e-3: 6 of 30)."""
    wrong = [v is True for *_, v in runs["below"]]
    assert len(wrong) == 30 and sum(wrong) <= _allowed(len(wrong), ALPHA)


def test_records_just_above_the_threshold_are_rarely_called_below(runs) -> None:
    """theta in 1.05-1.2: decided below the threshold at most at the stated 5 % (+ the same slack: 6 of 30)."""
    wrong = [v is False for *_, v in runs["above"]]
    assert len(wrong) == 30 and sum(wrong) <= _allowed(len(wrong), ALPHA)


def test_nulls_are_rarely_called_violations_and_their_bounds_cover_theta(runs) -> None:
    """The nulls (theta < 0.002): violations at most at 5 % (5 of 20), bounds missing theta at most 10 % (7 of 20)."""
    nulls = runs["null"]
    assert sum(v is True for *_, v in nulls) <= _allowed(len(nulls), ALPHA)
    assert sum(not low <= theta <= high for theta, low, high, _ in nulls) <= _allowed(len(nulls), 0.10)

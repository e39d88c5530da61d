"""Randomized training (issue 27 items 1-4): detection, the replicate engine, its statistics and calibration.

Ground truth: mptool.inputs.known_answer.KnownAnswerClassifier, whose prediction depends on the seed
and n (a redrawn logit shift), on the row order (the first rows' label share) and on a memorised
label for each weight-1 training point. Records that appear once with weight 1 have a large
expected influence (PDTP of the expected prediction about 4); one of 12 identical copies and a
weight-0 record have none. Rows rnd-1 .. rnd-6 of docs/bad-input.md are tested at the end.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import run_cli, write_spec
from test_bad_input import assert_refused, snapshot

import mptool
from mptool.cli.pdtp import qualified_verdict, replicate_verdict_line
from mptool.inputs.known_answer import ESTIMATOR, MODULE, known_frame, known_spec
from mptool.inputs.prepare import fit_checked, prepare
from mptool.inputs.spec import parse_spec
from mptool.loo.randomness import detect, replicate_order, replicate_seed
from mptool.loo.replicates import ReplicatePlan, parse_replicates
from mptool.privacy.influence import adjusted_rejections, decide, record_stats
from mptool.runtime.errors import InputError

KA = ESTIMATOR
ALLOW = (MODULE,)


@pytest.fixture(scope="module")
def calibration() -> dict:
    """Two draws (spec seeds 0, 1): the replicate engine's and the paired refit engine's decisions per kind."""
    out: dict = {"new": {"large": [], "null": []}, "old": {"large": [], "null": []}, "fits": []}
    for seed in (0, 1):
        df, kind = known_frame(seed)
        new = mptool.pdtp(df, known_spec(seed), allow_import=ALLOW, replicates="4:8", jobs=1)
        old = mptool.pdtp(df, known_spec(seed), allow_import=ALLOW, engine="refit", jobs=1, noise_floor=0)
        k = kind[new.table["row"].to_numpy()]
        for name in ("large", "null"):
            out["new"][name] += [v is True for v in new.table["violation"][k == name]]
            out["old"][name] += list(old.table["violation"][kind[old.table["row"].to_numpy()] == name])
        out["fits"].append(new.summary["replicates"]["fits"])
        out["summary"] = new.summary
    return out


# --------------------------------------------------------------------------- calibration on ground truth


def test_known_answer_nulls_flagged_at_most_the_stated_rate(calibration) -> None:
    null = calibration["new"]["null"]
    assert len(null) == 36
    assert np.mean(null) <= 0.05  # the stated error rate (BH at 5%); 0 of 36 expected


def test_known_answer_large_influence_flagged_at_least_90_percent(calibration) -> None:
    large = calibration["new"]["large"]
    assert len(large) == 16 and np.mean(large) >= 0.9


def test_paired_refit_counts_randomness_as_influence(calibration) -> None:
    """Today's engine on the same records: a single paired refit flags nulls (the issue's finding)."""
    assert np.mean(calibration["old"]["null"]) > 0.05


def test_summary_says_randomness_and_error_control(calibration) -> None:
    s = calibration["summary"]
    assert s["engine"] == "replicates" and s["randomness"]["sources"] == "seed and row order"
    rep = s["replicates"]
    assert rep["error_control"] == "bh" and rep["schedule"] == [4, 8] and rep["looks"] == 2
    assert s["violations"] + s["decided_below"] + s["undecided"] == s["n"]


def _boundary(rng: np.random.Generator, n: int, r: int) -> tuple[np.ndarray, np.ndarray]:
    """Replicates whose expected-prediction PDTP is exactly 1: E p_T(1) = 0.6, E p_L(1) = 0.6 / e (Beta draws)."""
    mean_l = 0.6 / np.e
    pt1 = rng.beta(3.0, 2.0, size=(n, r))
    pl1 = rng.beta(2.0, 2.0 * (1 - mean_l) / mean_l, size=(n, r))
    return np.stack([1 - pt1, pt1], axis=2), np.stack([1 - pl1, pl1], axis=2)


@pytest.mark.parametrize("r", [4, 16])
def test_per_record_tests_hold_their_level_at_the_boundary(r: int) -> None:
    """At theta = tau exactly both one-sided tests reject, and each bound misses tau, for at most 5% of records
    (+ 3 Monte-Carlo sd)."""
    pt, pl = _boundary(np.random.default_rng(r), 4000, r)
    s = record_stats(pt, pl, threshold=1.0, bin_size=0.0)
    slack = 3 * np.sqrt(0.05 * 0.95 / 4000)  # Monte-Carlo sd of a 5% rate over 4000 records
    assert np.mean(s.p_violation <= 0.05) <= 0.05 + slack
    assert np.mean(s.p_below <= 0.05) <= 0.05 + slack
    assert np.mean(s.lower > 1.0) <= 0.05 + slack  # each bound is one-sided 95 %
    assert np.mean(s.upper < 1.0) <= 0.05 + slack


def test_error_controls_against_hand_values() -> None:
    p = np.array([0.001, 0.02, 0.03, 0.04, 0.3])
    assert adjusted_rejections(p, "record").tolist() == [True, True, True, True, False]
    assert adjusted_rejections(p, "bh").tolist() == [True, True, True, True, False]  # 0.04 <= 0.05*4/5
    assert adjusted_rejections(p, "holm").tolist() == [True, False, False, False, False]  # 0.02 > 0.05/4
    d = decide(np.array([0.001, 0.9, np.nan]), np.array([0.9, 0.001, np.nan]), "bh", looks=1)
    assert d.tolist() == [True, False, "undecided"]
    assert decide(np.array([0.03]), np.array([0.9]), "record", looks=2).tolist() == ["undecided"]  # 2 looks: 0.06


# --------------------------------------------------------------------------- detection


def _detect(**params):
    df, _ = known_frame(0)
    prep = prepare(df, parse_spec(known_spec(0, **params), "spec"), ALLOW)
    T = prep.train
    return detect(prep.template, fit_checked(prep.template, T), T.X, T.y, prep.classes, 0)


def test_detection_names_the_source() -> None:
    assert _detect().sources == "seed and row order"
    assert _detect(order_effect=0.0).sources == "seed"
    assert _detect(noise=0.0).sources == "row order"
    none = _detect(noise=0.0, order_effect=0.0)
    assert not none.randomized and none.max_change == 0.0


class _TieSeedTree:
    """A classifier whose model depends on its seed only for some seeds (as a decision tree whose seed breaks
    ties: several seeds give the spec's tree). ``same``: the seeds that give the spec seed's model."""

    same: frozenset[int] = frozenset()

    def __init__(self, random_state: int = 0) -> None:
        self.random_state = random_state

    def get_params(self, deep: bool = True) -> dict:
        return {"random_state": self.random_state}

    def set_params(self, **params):
        self.random_state = params["random_state"]
        return self

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        self.shift_ = 0.0 if self.random_state in self.same else 0.1
        return self

    def predict_proba(self, X):
        p = np.full(len(X), 0.3 + self.shift_)
        return np.column_stack([p, 1 - p])


def test_detection_tries_more_seeds_than_one_that_gives_the_same_model() -> None:
    """The first other seed gives the spec seed's model (a tie-breaking seed); the second one differs: found,
    with seeds_tried 2. When all three give the same model the training is called deterministic in the
    seed, with seeds_tried 3 (the documented miss: docs/randomness.md section 1)."""
    from mptool.loo.randomness import SEEDS, _draws, detection_fits, planned_fits

    X, y = pd.DataFrame({"x": np.arange(8.0)}), np.array([0, 1] * 4)
    seeds, _ = _draws(0, len(y))
    assert SEEDS == 3 and len(set(seeds)) == 3 and 0 not in seeds

    class Tree(_TieSeedTree):
        same = frozenset({0, seeds[0]})

    found = detect(Tree(0), Tree(0).fit(X, y), X, y, np.array([0, 1]), 0)
    assert found.seed is True and found.seeds_tried == 2 and found.max_change == pytest.approx(0.1, rel=1e-12)
    assert detection_fits(Tree(0), found) == 1 + 2 + 2  # as is, 2 seeds, a permutation and its reverse

    class Tied(_TieSeedTree):
        same = frozenset({0, *seeds})

    missed = detect(Tied(0), Tied(0).fit(X, y), X, y, np.array([0, 1]), 0)
    assert missed.seed is False and missed.seeds_tried == 3 and not missed.randomized
    assert detection_fits(Tied(0), missed) == planned_fits(Tied(0)) == 1 + 3 + 2
    first = detect(Tree(0), Tree(0).fit(X, y), X, y, np.array([0, 1]), 0, first=True)  # mptool check's way
    assert first.seed is True and first.seeds_tried == 2


def test_deterministic_estimator_keeps_the_refit_engine_byte_identical(tmp_path: Path) -> None:
    """No randomness detected: auto runs today's refit engine and writes the same pdtp.csv."""
    df, _ = known_frame(0)
    csv = tmp_path / "d.csv"
    df.to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", KA, model={"params": {"noise": 0.0, "order_effect": 0.0,
                                                                  "weight_feature": 1}, "preprocess": "none"})
    outs = []
    for engine in ("auto", "refit"):
        res = run_cli("pdtp", csv, "-m", spec, "--allow-import", ALLOW[0], "--engine", engine, "--out",
                      tmp_path / engine, "--jobs", "1", "-q", "--noise-floor", "0", "--records", "0,3,9,20")
        assert res.code in (0, 1), res.stderr
        outs.append((tmp_path / engine / "pdtp.csv").read_bytes())
    assert outs[0] == outs[1]


def test_exact_engines_skip_detection_and_knn_stays_on_todays_refit(tmp_path: Path, mixed_csv: Path) -> None:
    """Naive Bayes and logistic regression: exact engines, no detection. k-NN on standardised numerics has
    no exact engine: detection finds no randomness and the refit engine's values are unchanged."""
    for est in ("gaussian_nb", "logistic_regression"):
        spec = write_spec(tmp_path / f"{est}.yaml", est)
        r = mptool.pdtp(mixed_csv, spec, jobs=1)
        assert r.summary["engine"].startswith("exact") and r.summary["randomness"]["checked"] is False
    spec = write_spec(tmp_path / "knn.yaml", "knn")
    rows = [0, 7, 21, 40]
    auto = mptool.pdtp(mixed_csv, spec, jobs=1, noise_floor=0, records=rows)
    refit = mptool.pdtp(mixed_csv, spec, jobs=1, engine="refit", noise_floor=0, records=rows)
    assert auto.summary["engine"] == "refit" and auto.summary["randomness"]["randomized"] is False
    assert auto.table.to_csv(index=False) == refit.table.to_csv(index=False)


# --------------------------------------------------------------------------- the engine


def test_replicate_seeds_and_orders_are_reproducible() -> None:
    assert replicate_seed(0, 3) == replicate_seed(0, 3) != replicate_seed(0, 4)
    assert np.array_equal(replicate_order(7, 2, 50), replicate_order(7, 2, 50))
    assert sorted(replicate_order(7, 2, 50).tolist()) == list(range(50))
    assert ReplicatePlan(4, 32).schedule() == [4, 8, 16, 32] and ReplicatePlan(3, 10).schedule() == [3, 6, 10]
    assert parse_replicates("5") == (5, 5) and parse_replicates(None) == (4, 32)


def test_results_do_not_depend_on_jobs() -> None:
    df, _ = known_frame(3, unique=4, copies=4, zeros=2)
    a = mptool.pdtp(df, known_spec(3), allow_import=ALLOW, replicates="4:8", jobs=1)
    b = mptool.pdtp(df, known_spec(3), allow_import=ALLOW, replicates="4:8", jobs=2, backend="threading")
    pd.testing.assert_frame_equal(a.table, b.table)  # exactly: the same fits, whatever the workers


def test_fail_fast_stops_at_a_decided_violation() -> None:
    df, kind = known_frame(0)
    r = mptool.pdtp(df, known_spec(0), allow_import=ALLOW, replicates="4:8", jobs=1, fail_fast=True)
    s = r.summary
    assert s["verdict"] == "fail" and s["complete"] is False and s["stopped"]["reason"] == "fail-fast"
    assert kind[s["stopped"]["row"]] == "large" and len(r.table) < len(df)
    assert s["replicates"]["fits"] < 100


def test_budget_leaves_records_undecided_and_never_says_holds() -> None:
    df, _ = known_frame(0)
    r = mptool.pdtp(df, known_spec(0, memorise=0.0), allow_import=ALLOW, replicates="4:64", budget=80, jobs=1)
    s = r.summary
    assert s["replicates"]["fits"] <= 80 and s["replicates"]["budget_exhausted"] is True
    assert s["undecided"] > 0 and s["verdict"] == "undecided" and s["violations"] == 0
    line = qualified_verdict(s, replicate_verdict_line(s))
    assert line.startswith("DTP-1 not established") and "holds" not in line
    assert set(r.table["violation"].map(str)) <= {"True", "False", "undecided"}


def test_sample_with_replicates_never_says_holds() -> None:
    s = {"verdict": "pass", "violations": 0, "decided_below": 3, "undecided": 0, "n": 3, "max": 0.1,
         "threshold": 1.0, "n_train": 30, "timings": {"total_s": 1.0},
         "sample": {"k": 3, "n_train": 30, "fraction_upper_95": 0.63},
         "replicates": {"confidence": 0.95, "error_control": "bh", "error_control_means": "FDR",
                        "replicates_min": 4, "replicates_max": 8, "fits": 9, "budget_exhausted": False}}
    line = qualified_verdict(s, replicate_verdict_line(s))
    assert line.startswith("DTP-1 not established") and "63" in line


def test_cli_reports_randomness_on_stderr_and_undecided_in_the_csv(tmp_path: Path) -> None:
    df, _ = known_frame(0)
    csv = tmp_path / "d.csv"
    df.to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", KA, model={"params": {"weight_feature": 1, "noise": 1.0},
                                                      "preprocess": "none"})
    res = run_cli("pdtp", csv, "-m", spec, "--allow-import", ALLOW[0], "--out", tmp_path / "o", "--jobs", "1",
                  "--replicates", "4:4")
    assert res.code == 1
    assert "randomness: A(T) depends on seed and row order" in res.stderr
    text = (tmp_path / "o" / "pdtp.csv").read_text()
    assert ",undecided," in text and ",True," in text
    assert "DTP-1 VIOLATED" in res.stdout and "undecided" in res.stdout


# --------------------------------------------------------------------------- bad input (rnd-1 .. rnd-6)


@pytest.mark.parametrize("flags, fragment", [
    (["--replicates", "1:8"], "--replicates must be MIN:MAX"),  # rnd-1
    (["--replicates", "8:4"], "--replicates must be MIN:MAX"),  # rnd-2
    (["--budget", "0"], "--budget must be a whole number of fits >= 1"),  # rnd-3
    (["--error-control", "fdr"], "--error-control must be one of bh, holm, record"),  # rnd-4
])
def test_bad_replicate_flags_are_refused(tmp_path: Path, mixed_csv: Path, flags, fragment) -> None:
    spec = write_spec(tmp_path / "s.yaml", "gaussian_nb")
    out = tmp_path / "out"
    out.mkdir()
    before = snapshot(out)
    res = run_cli("pdtp", mixed_csv, "-m", spec, "--out", out, "--jobs", "1", *flags)
    assert_refused(res, [fragment], out, before)


def test_replicates_engine_refused_outside_pdtp(tmp_path: Path, mixed_csv: Path) -> None:  # rnd-5
    spec = write_spec(tmp_path / "s.yaml", "gaussian_nb")
    with pytest.raises(InputError, match="--engine replicates is for mptool pdtp and mptool attack"):
        mptool.reduce_dtp(mixed_csv, spec, engine="replicates")


# rnd-6 (--trained refused for randomized training; --baseline compares decisions: tests/test_replicates_baseline.py)


def test_undecided_fails_closed_in_junit_and_noise_floor_is_deprecated(tmp_path: Path) -> None:
    """A budget that leaves records undecided: exit 1, JUnit case failed, "not established"; --noise-floor warns."""
    df, _ = known_frame(0, unique=2, copies=4, zeros=2)
    csv = tmp_path / "d.csv"
    df.to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", KA, model={"params": {"weight_feature": 1, "memorise": 0.0},
                                                      "preprocess": "none"})
    res = run_cli("pdtp", csv, "-m", spec, "--allow-import", ALLOW[0], "--out", tmp_path / "o", "--jobs", "1",
                  "--replicates", "4:4", "--budget", "20", "--noise-floor", "2", "--format", "csv,junit", "-q")
    assert res.code == 1 and "DTP-1 not established" in res.stdout and "holds" not in res.stdout
    assert "--noise-floor is deprecated for randomized training" in res.stderr
    junit = (tmp_path / "o" / "junit.xml").read_text()
    assert "<failure" in junit and "undecided" in junit


def test_known_answer_power_at_the_issues_theta_2_with_more_replicates() -> None:
    """The issue's "expected PDTP about 2": doubled seed noise, memorised shift 4 (θ ≈ 1.95). 16 replicates
    decide about a quarter of the large records (27.5 % over 5 draws, docs/randomness.md 5), the default 32
    half (50 %), 64 all (40 of 40). One draw at 4:64: every large record decided above, no null (the stated
    levels: power >= 90 %, nulls <= 5 %)."""
    df, kind = known_frame(0)
    res = mptool.pdtp(df, known_spec(0, noise=2.0, memorise=4.0), allow_import=ALLOW, replicates="4:64", jobs=1)
    k = kind[res.table["row"].to_numpy()]
    v = res.table["violation"].to_numpy()
    assert int(np.sum(k == "large")) == 8 and int(np.sum(k == "null")) == 18
    assert np.mean([x is True for x in v[k == "large"]]) >= 0.9
    assert np.mean([x is True for x in v[k == "null"]]) <= 0.05

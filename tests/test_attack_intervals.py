"""Confidence intervals on the attack metrics (issue 16 item 5) and the gates on their lower end.

The bootstrap's weighted statistics are checked against an independent reference built
another way: the attempts of each target repeated as often as the resample drew it, scored by
:func:`mptool.attacks.metrics.binary_metrics` (scikit-learn's ROC). A gate on 20 targets whose
interval contains the limit says it cannot decide, not "exceeded", and fails closed (exit 1).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xmlschema
from conftest import mixed_frame, run_cli, write_spec

from mptool.attacks.intervals import RESAMPLES, Attempts, bootstrap_intervals, resample_stats
from mptool.attacks.metrics import binary_metrics

XSD = Path(__file__).with_name("data") / "junit.xsd"
KEYS = ("accuracy", "precision", "recall", "f1", "advantage", "auc", "tpr_at_1pct_fpr", "tpr_at_0.1pct_fpr")


def attempts(iterations: int, targets: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Protocol-shaped attempts (iterations, 2 models, targets): each target a member of one model; tied scores."""
    rng = np.random.default_rng(seed)
    first = rng.random((iterations, targets)) < 0.5
    member = np.stack([first, ~first], axis=1)
    score = (member * 0.6 + rng.normal(size=member.shape)).round(1)  # rounding makes many ties
    return member, score > 0.3, score


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_weighted_statistics_equal_the_metrics_of_the_repeated_attempts(seed: int) -> None:
    member, decision, score = attempts(30, 25, seed)
    att = Attempts(member, decision, score)
    rng = np.random.default_rng(100 + seed)
    weights = rng.multinomial(25, np.full(25, 1 / 25), size=4)
    stats = resample_stats(att, weights)
    for b, w in enumerate(weights):
        take = np.repeat(np.arange(25), w)  # target t repeated w_t times, all of its attempts each time
        ref = binary_metrics(member[..., take], decision[..., take], score[..., take])
        for key in KEYS:
            assert stats[key][b] == pytest.approx(ref[key], abs=1e-12), (key, b)


def test_unit_weights_give_the_point_estimates() -> None:
    member, decision, score = attempts(40, 30, 5)
    stats = resample_stats(Attempts(member, decision, score), np.ones((1, 30)))
    ref = binary_metrics(member, decision, score)
    for key in KEYS:
        assert stats[key][0] == pytest.approx(ref[key], abs=1e-12), key


def test_intervals_are_seeded_contain_the_estimate_and_say_when_tpr_is_not_estimable() -> None:
    member, decision, score = attempts(30, 25, 7)  # 750 non-member attempts: 1% estimable, 0.1% not
    a = bootstrap_intervals(member, decision, score, np.random.default_rng(3))
    b = bootstrap_intervals(member, decision, score, np.random.default_rng(3))
    assert a == b and a["resamples"] == RESAMPLES and a["targets"] == 25
    point = binary_metrics(member, decision, score)
    for key in ("accuracy", "auc", "advantage"):
        assert a[key]["low"] <= point[key] <= a[key]["high"], key
        assert a[key]["high"] - a[key]["low"] > 0.01, key  # 25 targets: a real width
    assert a["tpr_at_1pct_fpr"]["estimable"] is True and a["tpr_at_1pct_fpr"]["low"] is not None
    assert a["tpr_at_0.1pct_fpr"] == {
        "low": None, "high": None, "estimable": False,
        "why": "750 non-member attempts; at least 1000 are needed to observe a 0.1% false-positive rate",
    }
    more = bootstrap_intervals(*attempts(40, 60, 7), np.random.default_rng(3))  # 2,400 non-members
    assert more["tpr_at_0.1pct_fpr"]["estimable"] is True


def attack_args(d: Path, *extra: str) -> list[str]:
    mixed_frame(60).to_csv(d / "d.csv", index=False)
    spec = write_spec(d / "s.yaml", "categorical_nb")
    return ["attack", d / "d.csv", "--model", spec, "--jobs", "1", "--attacks", "distance", "--candidates", "40",
            "--iterations", "2", "--targets", "20", "--pairs", "1", "--pdtp-iterations", "0", "-q",
            "--shadow-pool", "16",  # the distance attack's references: 16 shadows (default 64: 4x the fits per run)
            *extra]


def test_a_gate_on_20_targets_cannot_decide_and_fails_closed(tmp_path: Path) -> None:
    first = run_cli(*attack_args(tmp_path, "--out", tmp_path / "a"))
    assert first.code == 0, first.stderr
    doc = json.loads((tmp_path / "a" / "attack.json").read_text())
    m = doc["attacks"]["distance"]
    for key in ("accuracy", "precision", "recall", "f1", "advantage", "auc"):
        assert m["intervals"][key]["low"] <= m[key] <= m["intervals"][key]["high"], key
    assert m["intervals"]["tpr_at_1pct_fpr"]["estimable"] is False  # 40 non-member attempts
    low, point = m["intervals"]["auc"]["low"], m["auc"]
    assert point - low > 0.02
    limit = f"{(low + point) / 2:.4f}"  # above the lower end, below the estimate: noise cannot be ruled out
    res = run_cli(*attack_args(tmp_path, "--out", tmp_path / "b", "--max-auc", limit, "--format", "junit"))
    assert res.code == 1  # could not check: fails closed
    warn = [ln for ln in res.stderr.splitlines() if ln.startswith("mptool: warning: gate cannot decide:")]
    assert len(warn) == 1 and f"contains {float(limit):g}" in warn[0] and "--targets" in warn[0]
    gate = json.loads((tmp_path / "b" / "attack.json").read_text())["summary"]["gate"]
    assert gate["exceeded"] == [] and len(gate["undecided"]) == 1 and "lower end" in gate["rule"]
    suite = xmlschema.XMLSchema(XSD).to_dict(tmp_path / "b" / "junit.xml")["testsuite"][0]
    auc_case = next(c for c in suite["testcase"] if c["@name"].startswith("--max-auc"))
    failure = auc_case["failure"]
    failure = failure[0] if isinstance(failure, list) else failure
    assert "cannot decide" in failure["@message"]
    below = f"{low - 0.01:.4f}"  # below the lower end: exceeded beyond noise
    res = run_cli(*attack_args(tmp_path, "--out", tmp_path / "c", "--max-auc", below))
    assert res.code == 1 and "gate exceeded: distance AUC" in res.stdout and "95% interval" in res.stdout

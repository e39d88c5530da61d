"""Issue 29, items 3-4: the label-only membership attack (Choquette-Choo et al. 2021) and its label-free variant.

Known answers: a model that ignores its input gives chance (every score equal: AUC 0.5, advantage 0),
a memorising one (a fully grown tree) a high AUC; the scores under the ``label_only`` release
policy equal those under a full release exactly (the attack sees labels only); results do not
depend on --jobs; the pieces (copies, scores, threshold) against independent references.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import mixed_frame, run_cli, write_spec

from mptool.attacks import ATTACK_CHOICES
from mptool.attacks import label_only as lo
from mptool.attacks.protocol import parse_attacks

ARGS = ["--candidates", "60", "--iterations", "2", "--targets", "20", "--shadows", "4", "--pdtp-iterations", "0",
        "--jobs", "1", "-q", "--force"]


def _run(tmp: Path, csv: Path, spec: Path, name: str, *extra: str) -> tuple[dict, pd.DataFrame]:
    res = run_cli("attack", csv, "--model", spec, "--attacks", "threshold,label_only", *ARGS, *extra,
                  "--out", tmp / name)
    assert res.code in (0, 1), res.stderr
    return (json.loads((tmp / name / "attack.json").read_text()),
            pd.read_csv(tmp / name / "attempts.csv", dtype={"score": str}))


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    csv = tmp_path_factory.mktemp("lo") / "d.csv"
    mixed_frame(90, seed=5).to_csv(csv, index=False)
    return csv


def test_label_only_is_named_not_part_of_all() -> None:
    assert "label_only" not in parse_attacks("all") and "label_only" not in ATTACK_CHOICES
    assert parse_attacks("label_only,threshold") == ("threshold", "label_only")


def test_an_input_blind_model_gives_chance(data: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "sklearn.dummy.DummyClassifier",
                      model={"params": {"strategy": "most_frequent"}})
    doc, attempts = _run(tmp_path, data, spec, "o")
    for name in ("label_only", "label_free"):
        m = doc["attacks"][name]
        assert m["auc"] == 0.5 and m["advantage"] == 0.0, name  # a target's score is the same in and out
    assert attempts[attempts["attack"] == "label_free"]["score"].nunique() == 1  # every label the same: 1
    right = attempts[attempts["attack"] == "label_only"].groupby("row")["score"].nunique()
    assert (right == 1).all()  # 1 (its label is the majority class) or 0, whether member or not


def test_a_memorising_model_is_found(data: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "decision_tree")
    doc, _ = _run(tmp_path, data, spec, "o")
    m = doc["attacks"]["label_only"]
    assert m["auc"] > 0.6 and m["advantage"] > 0.1, (m["auc"], m["advantage"])  # members: always right on x
    assert m["threshold"] == pytest.approx(doc["attacks"]["label_only"]["threshold"], abs=0)
    assert m["copies"] == lo.COPIES and doc["summary"]["fits"]["label_only_target"] == 4
    assert set(m["intervals"]) >= {"auc", "tpr_at_1pct_fpr"}


def test_scores_are_the_same_under_a_label_only_release(data: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "decision_tree", model={"params": {"max_depth": 4}})
    full, a = _run(tmp_path, data, spec, "full")
    labels = write_spec(tmp_path / "l.yaml", "decision_tree", model={"params": {"max_depth": 4}},
                        output={"bin_size": 0.01, "release": {"label_only": True}})
    released, b = _run(tmp_path, data, labels, "labels")
    for name in ("label_only", "label_free"):
        pd.testing.assert_frame_equal(a[a["attack"] == name].reset_index(drop=True),
                                      b[b["attack"] == name].reset_index(drop=True))  # exactly: labels only
        assert full["attacks"][name]["auc"] == released["attacks"][name]["auc"]


def test_results_do_not_depend_on_jobs(data: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "gaussian_nb")
    _, one = _run(tmp_path, data, spec, "one")
    _, two = _run(tmp_path, data, spec, "two", "--jobs", "2")
    pd.testing.assert_frame_equal(one, two)


def test_copies_resample_at_least_one_feature_within_its_domain() -> None:
    X = mixed_frame(40, seed=1).drop(columns=["label"])
    tpos = np.array([0, 5, 9])
    copies = lo.noisy_copies(X, tpos, 7, 0.2, seed=3)
    assert len(copies) == 21
    base = X.iloc[np.repeat(tpos, 7)].reset_index(drop=True)
    changed = (copies != base).sum(axis=1).to_numpy()
    assert (changed <= 1).all()  # round(0.2 x 4 columns) = 1 column drawn per copy (it may draw the same value)
    for c in X.columns:
        assert set(copies[c]) <= set(X[c])
    pd.testing.assert_frame_equal(copies, lo.noisy_copies(X, tpos, 7, 0.2, seed=3))  # seeded


def test_scores_and_threshold_against_a_reference() -> None:
    rng = np.random.default_rng(0)
    models, t, c = 3, 4, 5
    labels = rng.integers(0, 2, size=(models, t + t * c))
    y = np.array([0, 1, 1, 0])
    s_lo, s_free = lo.scores(labels, t, c, y)
    for k in range(models):
        for j in range(t):
            noisy = labels[k, t + j * c: t + (j + 1) * c]
            expected = 0.0 if labels[k, j] != y[j] else (1 + (noisy == y[j]).sum() / c) / 2
            assert s_lo[k, j] == pytest.approx(expected, rel=1e-15)  # the same arithmetic in another order: last bit
            assert s_free[k, j] == (noisy == labels[k, j]).mean()
    score = rng.random(50).round(1)
    member = rng.random(50) < 0.5
    best = max((((score >= u) & member).sum() / member.sum() - ((score >= u) & ~member).sum() / (~member).sum(), -u)
               for u in np.unique(score))
    assert lo.best_threshold(score, member) == -best[1]  # the smallest tau of the largest advantage

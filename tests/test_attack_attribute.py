"""Attribute inference (Yeom et al., section 4): known answers and an independent brute force.

- A model that ignores its input (scikit-learn's DummyClassifier): every candidate value gives the
  same output, so the inversion adversary always guesses the prior's mode, exactly as the baseline;
  the attribute advantage (Definition 5) is 0 and its interval contains 0.
- A memoriser (1-NN) on data whose label is pure noise (10 classes, independent of every feature):
  a member queried with its true sensitive value finds itself (distance 0) and gets its own label
  with probability 1; under any other value, and for every non-member, the nearest record is
  another one whose label matches only by chance (1 in 10). So the adversary is right for most
  members and about 1 in 4 (the 4 candidates) for non-members: a large advantage that exists only
  through memorisation (the column says nothing about the label in the population).
- The adversary's guesses, posteriors and both advantages against a loop-by-loop brute force that
  computes the losses -log p(y | v, t_i) and minimises loss - log prior.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import mixed_frame, run_cli, write_spec

from mptool.attacks import attribute as attr
from mptool.attacks.protocol import parse_attacks
from mptool.inputs.data import Column, Records, Schema


def _run(tmp_path: Path, frame: pd.DataFrame, spec: Path, column: str, *extra: str) -> tuple[dict, str]:
    csv = tmp_path / "d.csv"
    frame.to_csv(csv, index=False)
    out = tmp_path / "out"
    res = run_cli(
        "attack", csv, "--model", spec, "--attacks", f"attribute:{column}", "--pdtp-iterations", "0",
        "--out", out, "-q", *extra,
    )
    assert res.code == 0, res.stderr
    return json.loads((out / "attack.json").read_text()), res.stdout


def memoriser_frame(n: int = 400, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "secret": rng.choice(["SECRETA", "SECRETB", "SECRETC", "SECRETD"], size=n),
        "v1": rng.normal(size=n).round(4), "v2": rng.normal(size=n).round(4), "v3": rng.normal(size=n).round(4),
        "label": rng.choice([f"c{i}" for i in range(10)], size=n),
    })


def test_model_that_ignores_its_input_has_no_advantage(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "sklearn.dummy.DummyClassifier", model={"params": {"strategy": "prior"}})
    doc, _ = _run(tmp_path, mixed_frame(200), spec, "color", "--iterations", "3", "--targets", "60")
    a = doc["attacks"]["attribute"]
    assert a["attribute_advantage"] == 0.0 and a["advantage"] == 0.0
    assert a["inference_accuracy_members"] == a["inference_accuracy_nonmembers"]
    assert a["inference_accuracy"] == a["baseline_accuracy"] and a["advantage_over_baseline"] == 0.0
    iv = a["attribute_intervals"]["attribute_advantage"]
    assert iv["low"] <= 0.0 <= iv["high"]
    assert a["auc"] == pytest.approx(0.5)


def test_memoriser_has_high_advantage(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "knn", model={"params": {"n_neighbors": 1}})
    doc, stdout = _run(tmp_path, memoriser_frame(), spec, "secret", "--iterations", "2", "--targets", "100")
    a = doc["attacks"]["attribute"]
    assert a["inference_accuracy_members"] > 0.8 and a["inference_accuracy_nonmembers"] < 0.45
    assert a["attribute_intervals"]["attribute_advantage"]["low"] > 0.4
    adv = a["inference_accuracy_members"] - a["inference_accuracy_nonmembers"]
    assert a["attribute_advantage"] == pytest.approx(adv)
    # the membership reduction (Theorem 6): TPR - FPR = 2 * accuracy - 1 = Definition 5's advantage
    assert a["advantage"] == pytest.approx(adv) and a["accuracy"] == pytest.approx((1 + adv) / 2)
    assert "advantage (Yeom Def. 5)" in stdout


def test_no_sensitive_value_is_written(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "knn", model={"params": {"n_neighbors": 1}})
    _, stdout = _run(tmp_path, memoriser_frame(), spec, "secret", "--iterations", "1", "--targets", "40")
    for name in ("attack.csv", "attempts.csv", "attack.json"):
        assert "SECRET" not in (tmp_path / "out" / name).read_text(), name
    assert "SECRET" not in stdout
    table = pd.read_csv(tmp_path / "out" / "attack.csv")
    assert {"attribute_right_member", "attribute_right_nonmember", "attribute_confidence"} <= set(table.columns)
    for fmt in ("md", "html"):
        report = tmp_path / f"report.{fmt}"
        res = run_cli("report", tmp_path / "out", "--format", fmt, "--out", report)
        assert res.code == 0, res.stderr
        text = report.read_text()
        assert "Attribute inference (Yeom et al., section 4)" in text and "attribute advantage" in text
        assert "SECRET" not in text


def test_results_do_not_depend_on_jobs(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "logistic_regression")
    docs = []
    for jobs in ("1", "2"):
        sub = tmp_path / jobs
        sub.mkdir()
        doc, _ = _run(sub, mixed_frame(120), spec, "size", "--iterations", "2", "--targets", "30", "--jobs", jobs)
        docs.append(doc["attacks"]["attribute"])
    assert docs[0] == docs[1]


# ---------------------------------------------------------------------------- the brute force


def brute_guess(p_y: list[float], prior: list[float]) -> tuple[int, list[float]]:
    """argmin_i loss_i - log prior_i by a loop (first index wins ties) and the posterior."""
    best, best_value = 0, math.inf
    for i, (p, q) in enumerate(zip(p_y, prior, strict=True)):
        loss = math.inf if p == 0 else -math.log(p)
        value = loss - math.log(q)
        if value < best_value - 1e-12:
            best, best_value = i, value
    total = sum(p * q for p, q in zip(p_y, prior, strict=True))
    post = [p * q / total for p, q in zip(p_y, prior, strict=True)] if total > 0 else list(prior)
    if total == 0:
        best = 0
    return best, post


def test_inversion_matches_brute_force() -> None:
    rng = np.random.default_rng(3)
    k, shape = 5, (3, 2, 40)
    prior = np.sort(rng.dirichlet(np.ones(k)))[::-1]
    p_y = np.round(rng.random((*shape, k)), 2)  # coarse values: ties occur
    p_y[0, 0, :5] = 0.0  # the model gives every candidate probability 0: the prior decides
    truth = rng.integers(0, k, size=shape[-1])
    member = np.zeros(shape, dtype=bool)
    member[:, 0, ::2] = member[:, 1, 1::2] = True
    inf = attr.infer(p_y, prior, truth)
    right = {True: [0, 0], False: [0, 0]}
    for idx in np.ndindex(*shape):
        g, post = brute_guess(p_y[idx].tolist(), prior.tolist())
        assert inf.guess[idx] == g
        assert inf.confidence[idx] == pytest.approx(post[g])
        assert inf.p_true[idx] == pytest.approx(post[truth[idx[-1]]])
        right[bool(member[idx])][0] += g == truth[idx[-1]]
        right[bool(member[idx])][1] += 1
    rates = attr.rates(member, inf)
    adv = right[True][0] / right[True][1] - right[False][0] / right[False][1]
    assert rates["attribute_advantage"][0] == pytest.approx(adv)
    base = np.mean([truth[t] == 0 for t in range(shape[-1])])
    assert rates["baseline_accuracy"][0] == pytest.approx(base)


def test_bootstrap_matches_the_membership_intervals() -> None:
    """Definition 5's advantage interval equals the membership reduction's (intervals.py), same draws."""
    from mptool.attacks.intervals import bootstrap_intervals

    rng = np.random.default_rng(5)
    shape, k = (4, 2, 50), 3
    p_y = rng.random((*shape, k))
    truth = rng.integers(0, k, size=shape[-1])
    member = np.zeros(shape, dtype=bool)
    member[:, 0, :25] = member[:, 1, 25:] = True
    inf = attr.infer(p_y, np.array([0.5, 0.3, 0.2]), truth)
    mine = attr.summarise(member, inf, np.random.default_rng(9))["intervals"]["attribute_advantage"]
    theirs = bootstrap_intervals(member, inf.right, inf.p_true, np.random.default_rng(9))["advantage"]
    assert mine["low"] == pytest.approx(theirs["low"]) and mine["high"] == pytest.approx(theirs["high"])


# ---------------------------------------------------------------------------- candidates


def _records(values: list, kind: str) -> Records:
    X = pd.DataFrame({"c": values, "z": np.zeros(len(values))})
    schema = Schema((Column("c", kind), Column("z", "numeric")), "label", ("a", "b"))
    return Records(X, np.array(["a"] * len(values)), np.arange(len(values)), schema)


def test_numeric_candidates() -> None:
    few = _records([1.0, 2.0, 2.0, 3.0], "numeric")
    s = attr.resolve(few, {}, "c")
    assert s.kind == "numeric values" and s.inputs == (2.0, 1.0, 3.0)
    assert s.codes(few.X).tolist() == [1, 0, 0, 2]
    many = _records([float(v) for v in range(100)], "numeric")
    q = attr.resolve(many, {}, "c")
    assert q.kind == "numeric bins (quantiles)" and q.k == attr.QUANTILE_BINS
    assert np.bincount(q.codes(many.X)).tolist() == [20] * 5
    spec_bins = attr.resolve(many, {"c": [10.0, 50.0]}, "c")
    assert spec_bins.kind == "numeric bins (spec)" and spec_bins.inputs == (74.5, 29.5, 4.5)
    assert spec_bins.prior.tolist() == [0.5, 0.4, 0.1]


def test_parse_attacks_keeps_the_column_case() -> None:
    assert parse_attacks("Threshold, attribute:Relationship") == ("threshold", "attribute:Relationship")
    assert parse_attacks("attribute:age") == ("attribute:age",)
    assert parse_attacks("all,attribute:x")[-1] == "attribute:x"


def test_attribute_values_only_on_opt_in(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "knn", model={"params": {"n_neighbors": 1}})
    frame = memoriser_frame()
    _run(tmp_path, frame, spec, "secret", "--iterations", "1", "--targets", "20", "--attribute-values")
    values = pd.read_csv(tmp_path / "out" / "attribute.csv")
    assert list(values.columns) == list(attr.VALUE_COLUMNS) and len(values) == 40
    truth = frame["secret"].to_numpy()[values["row"].to_numpy()]
    assert (values["true_value"].to_numpy() == truth).all()
    attempts = pd.read_csv(tmp_path / "out" / "attempts.csv")
    assert ((values["true_value"] == values["inferred_value"]).astype(int).to_numpy()
            == attempts["decision"].to_numpy()).all()


def test_beside_membership_attacks(tmp_path: Path) -> None:
    """attribute:COLUMN runs beside the membership attacks on the same target models and targets."""
    spec = write_spec(tmp_path / "s.yaml", "logistic_regression")
    csv = tmp_path / "d.csv"
    mixed_frame(120).to_csv(csv, index=False)
    res = run_cli("attack", csv, "--model", spec, "--attacks", "threshold,attribute:color", "--pdtp-iterations", "0",
                  "--iterations", "2", "--targets", "30", "--shadows", "4", "--out", tmp_path / "out", "-q")
    assert res.code == 0, res.stderr
    doc, stdout = json.loads((tmp_path / "out" / "attack.json").read_text()), res.stdout
    assert doc["summary"]["attacks"] == list(doc["attacks"]) == ["threshold", "attribute"]
    assert "attribute" in doc["attacks"] and "attribute inference of 'color'" in stdout

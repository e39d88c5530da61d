"""The attack protocol (Long et al. 5.4) end to end: sanity checks, PDTP, outputs, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import attack_spec, numeric_csv_file, quiet_progress

from mptool.attacks.protocol import TAG_CANDIDATES, TAG_SPLIT, TAG_TARGETS, AttackOptions, run_attack
from mptool.attacks.shadows import rng_for
from mptool.inputs.models import fit, proba_in
from mptool.inputs.prepare import prepare
from mptool.privacy.calibration import bin_probabilities

_quiet = quiet_progress
_spec = attack_spec


def _run(path: Path, spec, **kw):
    kw.setdefault("jobs", 1)
    return run_attack(prepare(path, spec), AttackOptions(**kw), _quiet)


@pytest.fixture(scope="module")
def numeric_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return numeric_csv_file(tmp_path_factory.mktemp("num") / "numeric.csv", 1200, 4)


def test_prior_only_model_gives_every_attack_baseline_accuracy(numeric_csv: Path) -> None:
    """A classifier that ignores its training records beyond the class prior leaks ~nothing."""
    spec = _spec("label", "sklearn.dummy.DummyClassifier", {"strategy": "prior"})
    pooled = _run(numeric_csv, spec, candidates=1000, targets=100, iterations=10, shadow_pool=12,
                  pdtp_iterations=1)
    per_target = _run(numeric_csv, spec, attacks=("distance", "frequency", "lira"), candidates=1000,
                      targets=40, iterations=5, pairs=2, pdtp_iterations=0)
    for outcome in (pooled, per_target):
        for name, m in outcome.attacks.items():
            assert abs(m["accuracy"] - 0.5) <= 0.05, (name, m["accuracy"])
    assert set(pooled.attacks) == {"untargeted", "distance", "frequency", "threshold", "lira", "lira_offline",
                                   "rmia", "rmia_offline"}
    assert pooled.attacks["untargeted"]["n_attacks"] == 2000


def test_nearest_neighbour_memoriser_is_caught_by_targeted_attacks(grants_csv: Path) -> None:
    """Distance-weighted k-NN returns the stored label of a training record (distance 0) and a
    mixture for a non-member: high-dimensional binary data make this a perfect memoriser."""
    spec = _spec("class", "knn", {"n_neighbors": 10, "weights": "distance"})
    pooled = _run(grants_csv, spec, attacks=("distance", "frequency", "lira"), candidates=300, targets=40,
                  iterations=3, shadow_pool=16, pdtp_iterations=1)
    pairs = _run(grants_csv, spec, attacks=("distance", "frequency"), candidates=300, targets=15,
                 iterations=2, pairs=2, pdtp_iterations=0)
    for outcome in (pooled, pairs):
        assert outcome.attacks["distance"]["accuracy"] > 0.9
        assert outcome.attacks["frequency"]["accuracy"] > 0.9
    assert pooled.attacks["lira"]["accuracy"] > 0.9
    assert pooled.summary["target_model"]["train_accuracy"] == 1.0
    assert pooled.summary["fits"]["shadow_pool"] == 16 and pairs.summary["fits"]["shadow_pairs"] == 2 * 2 * 15 * 2


def test_pdtp_mean_matches_a_naive_leave_one_out(mixed_csv: Path) -> None:
    spec = _spec("label", "logistic_regression", {"C": 1.0}, preprocess="auto", seed=3)
    out = _run(mixed_csv, spec, attacks=("threshold",), candidates=40, targets=8, iterations=1, shadows=3,
               pdtp_iterations=1)
    prep = prepare(mixed_csv, spec)
    pop = prep.population
    cand = np.sort(rng_for(3, TAG_CANDIDATES).choice(pop.n, size=40, replace=False))
    D = pop.take(cand)
    tpos = np.sort(rng_for(3, TAG_TARGETS).choice(40, size=8, replace=False))
    first = np.zeros(40, dtype=bool)
    first[rng_for(3, TAG_SPLIT, 0).permutation(40)[:20]] = True
    classes = np.array(sorted(set(D.y)), dtype=object)
    for r, t in enumerate(tpos):
        half = first if first[t] else ~first
        idx = np.flatnonzero(half)
        full = fit(prep.template, D.X.iloc[idx], D.y[idx])
        rest = idx[idx != t]
        loo = fit(prep.template, D.X.iloc[rest], D.y[rest])
        p = bin_probabilities(proba_in(full, D.X.iloc[[t]], classes), 0.01)[0]
        q = bin_probabilities(proba_in(loo, D.X.iloc[[t]], classes), 0.01)[0]
        expect = max(abs(np.log(a) - np.log(b)) for a, b in zip(p, q, strict=True))
        assert out.table["row"].iloc[r] == D.rows[t]
        assert out.table["pdtp_mean"].iloc[r] == pytest.approx(expect, abs=1e-9)


def test_per_target_accuracy_is_consistent_and_jobs_independent(numeric_csv: Path) -> None:
    spec = _spec("label", "gaussian_nb")
    kw = dict(candidates=40, targets=12, iterations=3, shadows=4, pairs=2, pdtp_iterations=1)
    one = _run(numeric_csv, spec, **kw)
    two = run_attack(prepare(numeric_csv, spec), AttackOptions(jobs=2, backend="threading", **kw), _quiet)
    pd.testing.assert_frame_equal(one.table, two.table)
    t = one.table
    assert (t["n_attacks"] == 6).all()
    for name, m in one.attacks.items():
        col = t[f"{name}_accuracy"].to_numpy()
        assert np.allclose(col * 6, np.round(col * 6))  # multiples of 1/(2 * iterations)
        assert m["accuracy"] == pytest.approx(col.mean())  # equal attacks per target
    assert np.allclose(t["max_accuracy"], t[[f"{n}_accuracy" for n in one.attacks]].max(axis=1))


def test_attack_cli_writes_documented_outputs_and_gates(cli, numeric_csv: Path, tmp_path: Path) -> None:
    spec = tmp_path / "nb.yaml"
    spec.write_text("data: {label: label}\nmodel: {estimator: gaussian_nb, preprocess: none}\n")
    out = tmp_path / "res"
    args = [numeric_csv, "--model", spec, "--candidates", 40, "--targets", 10, "--iterations", 2, "--pairs", 2,
            "--shadows", 3, "--pdtp-iterations", 1, "-j", 1, "-q"]
    r = cli("attack", *args, "--out", out)
    assert r.code == 0, r.stderr
    table = pd.read_csv(out / "attack.csv")
    names = ["untargeted", "distance", "frequency", "threshold", "lira", "lira_offline", "rmia", "rmia_offline"]
    assert list(table.columns) == ["row", "pdtp_mean", "pdtp_decision",  # label: --show-values
                                   *[f"{n}_accuracy" for n in names], "max_accuracy", "lira_score", "kl_leakage",
                                   "n_attacks", "pdtp_measurements"]
    doc = json.loads((out / "attack.json").read_text())
    assert list(doc["attacks"]) == names
    for m in doc["attacks"].values():
        for key in ("accuracy", "precision", "recall", "f1", "auc", "advantage", "tpr_at_1pct_fpr",
                    "tpr_at_0.1pct_fpr", "correlation_with_pdtp"):
            assert key in m
        assert len(m["roc"]["fpr"]) == len(m["roc"]["tpr"]) <= 200
    s = doc["summary"]
    assert {"train_accuracy", "test_accuracy"} <= set(s["target_model"]) and s["manifest"]["seed"] == 0
    assert len(doc["records"]) == 10
    assert cli("attack", *args, "--out", out).code == 2  # results exist, no --force
    gated = cli("attack", *args, "--out", tmp_path / "g", "--max-accuracy", 0.0)
    assert gated.code == 1 and "gate exceeded" in gated.stdout
    assert cli("attack", *args, "--out", tmp_path / "b", "--candidates", 41).code == 2
    assert cli("attack", *args, "--out", tmp_path / "c", "--attacks", "nope").code == 2
    synth = cli("attack", *args, "--out", tmp_path / "s", "--attacks", "untargeted", "--shadow-data", "noisy:0.3",
                "--per-class")
    assert synth.code == 0, synth.stderr
    assert cli("attack", *args, "--out", tmp_path / "m", "--attacks", "untargeted",
               "--shadow-data", "marginals").code == 0


def test_make_purchase_cli(cli, tmp_path: Path) -> None:
    out = tmp_path / "p.csv.gz"
    r = cli("datasets", "make-purchase", "--out", out, "--rows", 300, "--features", 40, "--seed", 1)
    assert r.code == 0, r.stderr
    df = pd.read_csv(out)
    assert df.shape == (300, 41) and set(df.columns[:-1]) == {f"c{j:02d}" for j in range(40)}
    assert set(np.unique(df.iloc[:, :-1])) <= {0, 1} and df["class"].nunique() == 10
    assert cli("datasets", "make-purchase", "--out", out).code == 2  # exists
    again = tmp_path / "q.csv.gz"
    cli("datasets", "make-purchase", "--out", again, "--rows", 300, "--features", 40, "--seed", 1)
    assert again.read_bytes() == out.read_bytes()

"""RMIA (Zarifzadeh et al., ICML 2024; mptool.attacks.rmia): the vectorised scores against explicit
loops over references and population records, the tuned offline a against a naive grid search,
known answers (a model that ignores its input: chance; a 1-NN memoriser: high AUC), and
determinism across --jobs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import attack_spec, numeric_csv_file, quiet_progress
from sklearn.metrics import roc_auc_score

from mptool.attacks import rmia
from mptool.attacks.protocol import AttackOptions, run_attack
from mptool.attacks.shadows import rng_for
from mptool.inputs.prepare import prepare

# ----------------------------------------------------------------- an independent implementation


def naive_marginal(p_ref: np.ndarray, inside: np.ndarray, v: int, offline: bool, a: float) -> float:
    """Pr(v) by explicit loops over the reference models (NaN offline when no model lacks v)."""
    ins = [float(p_ref[k, v]) for k in range(p_ref.shape[0]) if inside[k, v]]
    outs = [float(p_ref[k, v]) for k in range(p_ref.shape[0]) if not inside[k, v]]
    if offline:
        return float("nan") if not outs else ((1 + a) * sum(outs) / len(outs) + (1 - a)) / 2
    if not ins:
        return sum(outs) / len(outs)
    if not outs:
        return sum(ins) / len(ins)
    return (sum(ins) / len(ins) + sum(outs) / len(outs)) / 2


def naive_score(p: np.ndarray, marg: dict[int, float], x: int, zs: list[int], gamma: float) -> float:
    """Fraction of z != x (with a finite Pr(z)) whose pairwise ratio LR(x, z) exceeds gamma, one z at a time."""
    wins = total = 0
    for z in zs:
        if z == x or not np.isfinite(marg[z]):
            continue
        lr = (max(p[x], 1e-12) / max(marg[x], 1e-12)) / (max(p[z], 1e-12) / max(marg[z], 1e-12))
        total += 1
        wins += lr > gamma
    return wins / total if total else 0.5


def naive_rmia(p_target, in_target, tpos, p_ref, inside, seed, gamma, a):
    """Online and offline fractions (I, 2, T) with every quantity recomputed in loops, then the same with
    ties broken (the fraction plus 1e-7 r / (1 + r), r = x's own ratio)."""
    n = p_ref.shape[1]
    on = {v: naive_marginal(p_ref, inside, v, False, a) for v in range(n)}
    off = {v: naive_marginal(p_ref, inside, v, True, a) for v in range(n)}
    off_x = {v: (on[v] if not np.isfinite(off[v]) else off[v]) for v in range(n)}
    online = np.empty((p_target.shape[0], 2, len(tpos)))
    offline, on_tb, off_tb = np.empty_like(online), np.empty_like(online), np.empty_like(online)
    for i in range(p_target.shape[0]):
        for h in range(2):
            outside = np.flatnonzero(~in_target[i, h])
            zs = np.sort(rng_for(seed, rmia.TAG_RMIA, i, h).choice(
                outside, size=min(rmia.POPULATION, len(outside)), replace=False)).tolist()
            for t, x in enumerate(tpos):
                online[i, h, t] = naive_score(p_target[i, h], on, int(x), zs, gamma)
                mixed = {**off, int(x): off_x[int(x)]}
                offline[i, h, t] = naive_score(p_target[i, h], mixed, int(x), zs, gamma)
                for out, frac, marg in ((on_tb, online, on), (off_tb, offline, mixed)):
                    r = max(p_target[i, h, x], 1e-12) / max(marg[int(x)], 1e-12)
                    out[i, h, t] = frac[i, h, t] + 1e-7 * r / (1 + r)
    return online, offline, on_tb, off_tb


def random_case(seed: int, n: int = 40, k: int = 5, iterations: int = 2, binned: bool = True):
    rng = np.random.default_rng(seed)
    p_target = rng.random((iterations, 2, n))
    p_ref = rng.random((k, n))
    if binned:  # ties, as binned releases have them
        p_target, p_ref = np.round(p_target, 1) + 0.05, np.round(p_ref, 1) + 0.05
    inside = rng.random((k, n)) < 0.5
    inside[:, 0] = True  # record 0: no OUT model (offline falls back to the online marginal)
    inside[:, 1] = False  # record 1: no IN model
    in_target = np.zeros((iterations, 2, n), dtype=bool)
    for i in range(iterations):
        first = rng.permutation(n)[: n // 2]
        in_target[i, 0, first] = True
        in_target[i, 1] = ~in_target[i, 0]
    tpos = np.sort(np.r_[0, 1, rng.choice(np.arange(2, n), size=10, replace=False)])
    return p_target, in_target, tpos, p_ref, inside


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("gamma", [1.0, 2.0])
def test_scores_match_explicit_loops(seed: int, gamma: float, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rmia, "ROWS", 5)  # several blocks of x
    p_target, in_target, tpos, p_ref, inside = random_case(seed, binned=seed != 2)
    got = rmia.rmia(p_target, in_target, tpos, p_ref, inside, seed=7, gamma=gamma, a=0.4)
    online, offline, on_tb, off_tb = naive_rmia(p_target, in_target, tpos, p_ref, inside, 7, gamma, 0.4)
    assert np.array_equal(got.online_fraction, online)
    assert np.array_equal(got.offline_fraction, offline)
    assert np.allclose(got.online, on_tb, rtol=0, atol=1e-15) and np.allclose(got.offline, off_tb, rtol=0, atol=1e-15)
    for tb, frac in ((got.online, online), (got.offline, offline)):  # ties broken, no other order changed
        order = np.argsort(tb, axis=None, kind="stable")
        assert (np.diff(frac.ravel()[order]) >= 0).all()
    assert got.offline_fallback == 1 and got.population == 20 and not got.a_tuned
    assert np.array_equal(got.decisions[0], online > 0.5) and np.array_equal(got.decisions[1], offline > 0.5)


def test_population_is_capped_and_never_compares_x_with_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rmia, "POPULATION", 7)
    p_target, in_target, tpos, p_ref, inside = random_case(3)
    got = rmia.rmia(p_target, in_target, tpos, p_ref, inside, seed=1, a=0.3)
    online, offline, _, _ = naive_rmia(p_target, in_target, tpos, p_ref, inside, 1, 1.0, 0.3)
    assert got.population == 7
    assert np.array_equal(got.online_fraction, online) and np.array_equal(got.offline_fraction, offline)
    one = rmia.pairwise_score(np.array([2.0]), np.array([2.0, 1.0]), x_ids=np.array([5]), z_ids=np.array([5, 6]))
    assert one.tolist() == [1.0]  # the pair (x, x) is skipped, not counted as a loss


def test_tuned_offline_a_is_the_naive_grid_argmax() -> None:
    rng = np.random.default_rng(5)
    n, k = 50, 6
    inside = rng.random((k, n)) < 0.5
    p_ref = np.clip(0.5 + 0.3 * inside + 0.2 * rng.normal(size=(k, n)), 0.01, 0.99)
    a, tuned = rmia.tune_offline_a(p_ref, inside, rng_for(3, 9))
    z = np.flatnonzero(~inside[0])  # fewer than POPULATION: every record model 0 did not train on
    best, best_auc = None, -1.0
    for cand in rmia.A_GRID:
        marg = {v: naive_marginal(p_ref[1:], inside[1:], v, True, cand) for v in range(n)}
        xs = [v for v in range(n) if np.isfinite(marg[v])]
        scores = [naive_score(p_ref[0], marg, v, z.tolist(), 1.0) for v in xs]
        auc = roc_auc_score(inside[0, xs], scores)
        if auc > best_auc + 1e-12:
            best, best_auc = cand, auc
    assert tuned and a == best
    assert rmia.tune_offline_a(p_ref[:1], inside[:1], rng_for(3, 9)) == (rmia.OFFLINE_A, False)


def test_tuning_scores_a_seeded_sample_of_a_large_candidate_set(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(8)
    n, k = 300, 4
    inside = rng.random((k, n)) < 0.5
    p_ref = np.clip(0.5 + 0.3 * inside + 0.2 * rng.normal(size=(k, n)), 0.01, 0.99)
    monkeypatch.setattr(rmia, "TUNE_RECORDS", 40)
    first = rmia.tune_offline_a(p_ref, inside, rng_for(1, 2))
    assert first == rmia.tune_offline_a(p_ref, inside, rng_for(1, 2)) and first[1]


# ----------------------------------------------------------------- known answers through the protocol


_quiet = quiet_progress
_spec = attack_spec


def _run(path: Path, spec, **kw):
    kw.setdefault("jobs", 1)
    kw.setdefault("attacks", ("rmia",))
    kw.setdefault("pdtp_iterations", 0)
    return run_attack(prepare(path, spec), AttackOptions(**kw), _quiet)


@pytest.fixture(scope="module")
def numeric_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return numeric_csv_file(tmp_path_factory.mktemp("num") / "numeric.csv", 1200, 4)


def test_model_that_ignores_its_input_is_at_chance(numeric_csv: Path) -> None:
    """A prior-only classifier: every record of a class gets the same output, so membership cannot show."""
    spec = _spec("label", "sklearn.dummy.DummyClassifier", {"strategy": "prior"})
    out = _run(numeric_csv, spec, candidates=1000, targets=100, iterations=10, shadow_pool=12)
    assert set(out.attacks) == {"rmia", "rmia_offline"}
    for name, m in out.attacks.items():
        iv = m["intervals"]["auc"]
        assert iv["low"] <= 0.5 <= iv["high"], (name, m["auc"], iv)
        assert abs(m["auc"] - 0.5) < 0.05 and abs(m["accuracy"] - 0.5) <= 0.05, name
        assert m["reference_models"] == 12 and m["references"] == "shadow pool"


def test_nearest_neighbour_memoriser_is_caught(grants_csv: Path) -> None:
    """Distance-weighted k-NN returns a training record's stored label with certainty (distance 0) and a
    mixture for a non-member: a perfect memoriser, AUC near 1. Plain 1-NN also gives p_y = 1 to a
    non-member whose nearest neighbour shares its label, so no attack on p_y separates those: its AUC
    is bounded by the non-members' error rate (LiRA, run beside, meets the same bound)."""
    memo = _run(grants_csv, _spec("class", "knn", {"n_neighbors": 10, "weights": "distance"}),
                candidates=300, targets=40, iterations=3, shadow_pool=16)
    one = _run(grants_csv, _spec("class", "knn", {"n_neighbors": 1}), attacks=("lira", "rmia"),
               candidates=300, targets=40, iterations=3, shadow_pool=16)
    assert memo.summary["target_model"]["train_accuracy"] == one.summary["target_model"]["train_accuracy"] == 1.0
    for name in ("rmia", "rmia_offline"):
        assert memo.attacks[name]["auc"] > 0.95 and memo.attacks[name]["tpr_at_1pct_fpr"] > 0.5, name
        assert one.attacks[name]["intervals"]["auc"]["low"] > 0.55, (name, one.attacks[name]["auc"])
        assert one.attacks[name]["auc"] > one.attacks["lira"]["auc"] - 0.05


def test_without_a_pool_the_general_shadows_are_the_references(numeric_csv: Path) -> None:
    spec = _spec("label", "gaussian_nb")
    out = _run(numeric_csv, spec, candidates=200, targets=20, iterations=2, shadow_pool=0, shadows=6)
    assert out.summary["fits"] == {"target": 4, "shadow_general": 6, "total": 10}  # no per-target pairs
    assert out.attacks["rmia"]["references"] == "general shadows (--shadows)"
    assert out.attacks["rmia"]["reference_models"] == 6


def test_results_do_not_depend_on_jobs(numeric_csv: Path) -> None:
    spec = _spec("label", "logistic_regression", {"C": 1.0})
    kw = dict(attacks=("lira", "rmia"), candidates=120, targets=30, iterations=2, shadow_pool=10)
    one = _run(numeric_csv, spec, **kw)
    two = run_attack(prepare(numeric_csv, spec), AttackOptions(jobs=2, backend="threading", pdtp_iterations=0,
                                                               **kw), _quiet)
    pd.testing.assert_frame_equal(one.table, two.table)
    pd.testing.assert_frame_equal(one.attempts, two.attempts)
    for name in ("rmia", "rmia_offline"):
        assert one.attacks[name]["auc"] == two.attacks[name]["auc"]


def test_cli_writes_rmia_to_every_result_file(cli, numeric_csv: Path, tmp_path: Path) -> None:
    spec = tmp_path / "nb.yaml"
    spec.write_text("data: {label: label}\nmodel: {estimator: gaussian_nb, preprocess: none}\n")
    args = [numeric_csv, "--model", spec, "--candidates", 80, "--targets", 20, "--iterations", 2,
            "--shadow-pool", 12, "--pdtp-iterations", 0, "--attacks", "rmia", "-q"]
    outs = []
    for jobs in (1, 2):
        out = tmp_path / f"j{jobs}"
        r = cli("attack", *args, "-j", jobs, "--out", out)
        assert r.code == 0, r.stderr
        outs.append(out)
    for name in ("attack.csv", "attempts.csv"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes()
    table = pd.read_csv(outs[0] / "attack.csv")
    assert {"rmia_accuracy", "rmia_offline_accuracy"} <= set(table.columns)
    attempts = pd.read_csv(outs[0] / "attempts.csv")
    assert set(attempts["attack"]) == {"rmia", "rmia_offline"} and len(attempts) == 2 * 20 * 2 * 2
    doc = json.loads((outs[0] / "attack.json").read_text())
    for name in ("rmia", "rmia_offline"):
        m = doc["attacks"][name]
        sub = attempts[attempts["attack"] == name]
        assert m["auc"] == pytest.approx(roc_auc_score(sub["member"], sub["score"]))
        assert m["gamma"] == rmia.GAMMA and 0.0 <= m["offline_a"] <= 1.0

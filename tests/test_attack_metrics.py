"""Auditable attack metrics (issue 18 items 6, 7, 9; issue 21 items 1, 4): the protocol's phases
reproduce the pre-split code, every metric recomputes from attempts.csv, ROC curves are steps,
kl_leakage is a defined quantity, and LiRA models the binned observation."""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score, roc_curve

from mptool.attacks import metrics
from mptool.attacks.protocol import AttackOptions, run_attack, summary_lines
from mptool.inputs.prepare import prepare
from mptool.inputs.spec import parse_spec
from mptool.outputs.report import plots
from mptool.outputs.results import to_csv

GOLDEN = Path(__file__).parent / "data" / "attack_golden"

#: Columns whose values depend on the LiRA and kl_leakage statistics, which were replaced on purpose.
CHANGED_ON_PURPOSE = ("lira_accuracy", "lira_offline_accuracy", "max_accuracy", "lira_score", "kl_leakage")


@contextlib.contextmanager
def _quiet(total: int, label: str):
    yield lambda n: None


def _spec(estimator: str, params: dict | None = None, seed: int = 0, bin_size: float = 0.01):
    return parse_spec(
        {
            "data": {"label": "label", "train_size": None},
            "model": {"estimator": estimator, "params": params or {}, "preprocess": "none"},
            "output": {"bin_size": bin_size},
            "seed": seed,
        }
    )


@pytest.fixture(scope="module")
def numeric_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The numeric data set of tests/test_protocol.py (same generator and seed)."""
    rng = np.random.default_rng(11)
    n = 1200
    X = rng.normal(size=(n, 4)).round(3)
    label = np.where(X[:, 0] + rng.normal(size=n) > 0.4, "yes", "no")
    path = tmp_path_factory.mktemp("num") / "numeric.csv"
    pd.DataFrame({**{f"x{j}": X[:, j] for j in range(4)}, "label": label}).to_csv(path, index=False)
    return path


GOLDEN_RUNS = {
    "pairs_gnb": (
        ("gaussian_nb", None, 0),
        dict(candidates=40, targets=12, iterations=3, shadows=4, pairs=2, pdtp_iterations=1),
    ),
    "pool_lr": (
        ("logistic_regression", {"C": 1.0}, 5),
        dict(candidates=60, targets=20, iterations=2, shadow_pool=8, pdtp_iterations=1),
    ),
    "synth_gnb": (
        ("gaussian_nb", None, 2),
        dict(
            attacks=("untargeted",),
            candidates=40,
            targets=10,
            iterations=2,
            shadows=3,
            shadow_data="noisy:0.3",
            per_class=True,
            pdtp_iterations=0,
        ),
    ),
}


@pytest.mark.parametrize("name", list(GOLDEN_RUNS))
def test_phases_reproduce_the_pre_split_protocol(numeric_csv: Path, name: str) -> None:
    """attack.csv and every attempt's score/decision equal those of the one-function protocol
    (tests/data/attack_golden, computed before the split), except the LiRA and kl_leakage
    values, whose statistics were replaced on purpose."""
    (estimator, params, seed), kw = GOLDEN_RUNS[name]
    outcome = run_attack(prepare(numeric_csv, _spec(estimator, params, seed)), AttackOptions(jobs=1, **kw), _quiet)
    old_table = pd.read_csv(GOLDEN / f"{name}.attack.csv", dtype=str, keep_default_na=False)
    new_table = pd.read_csv(pd.io.common.StringIO(to_csv(outcome.table)), dtype=str, keep_default_na=False)
    assert list(new_table.columns) == list(old_table.columns)
    keep = [c for c in old_table.columns if c not in CHANGED_ON_PURPOSE]
    pd.testing.assert_frame_equal(new_table[keep], old_table[keep])
    old = pd.read_csv(GOLDEN / f"{name}.attempts.csv")
    new = outcome.attempts
    same = ~old["attack"].isin(["lira", "lira_offline"])
    assert (new["attack"].to_numpy() == old["attack"].to_numpy()).all()
    for col in ("row", "iteration", "member"):
        assert (new[col].to_numpy() == old[col].to_numpy()).all()
    assert (new["score"].to_numpy()[same] == old["score"].to_numpy()[same]).all()
    assert (new["decision"].to_numpy()[same] == old["decision"].to_numpy()[same]).all()


def _naive_tpr_at(member: np.ndarray, score: np.ndarray, limit: float) -> float:
    """Best TPR over thresholds 'score >= thr' that let at most limit * negatives through."""
    neg = score[~member]
    best = 0.0
    for thr in np.unique(score):
        if np.sum(neg >= thr) <= math.floor(limit * len(neg) + 1e-9):
            best = max(best, float(np.mean(score[member] >= thr)))
    return best


def test_every_metric_recomputes_from_attempts_csv(cli, numeric_csv: Path, tmp_path: Path) -> None:
    spec = tmp_path / "nb.yaml"
    spec.write_text("data: {label: label}\nmodel: {estimator: gaussian_nb, preprocess: none}\n")
    out = tmp_path / "res"
    r = cli(
        "attack",
        numeric_csv,
        "--model",
        spec,
        "--candidates",
        200,
        "--targets",
        60,
        "--iterations",
        3,
        "--shadow-pool",
        8,
        "--pdtp-iterations",
        0,
        "-j",
        1,
        "-q",
        "--out",
        out,
    )
    assert r.code == 0, r.stderr
    doc = json.loads((out / "attack.json").read_text())
    table = pd.read_csv(out / "attack.csv")
    attempts = pd.read_csv(out / "attempts.csv")
    assert list(attempts.columns) == list(metrics.ATTEMPT_COLUMNS)
    assert len(attempts) == 60 * 3 * 2 * len(doc["attacks"])
    for name, m in doc["attacks"].items():
        a = attempts[attempts["attack"] == name]
        member, score, decision = a["member"].to_numpy() == 1, a["score"].to_numpy(), a["decision"].to_numpy() == 1
        assert member.sum() == (~member).sum() == 60 * 3
        assert roc_auc_score(member, score) == m["auc"]  # exact: the scores round-trip through the CSV
        fpr, tpr, _ = roc_curve(member, score)
        assert metrics.tpr_at_fpr(fpr, tpr, 0.01) == m["tpr_at_1pct_fpr"]
        assert _naive_tpr_at(member, score, 0.01) == pytest.approx(m["tpr_at_1pct_fpr"])
        assert _naive_tpr_at(member, score, 0.001) == pytest.approx(m["tpr_at_0.1pct_fpr"])
        assert np.mean(member == decision) == pytest.approx(m["accuracy"], abs=1e-15)
        assert m["advantage"] == pytest.approx(2 * m["accuracy"] - 1, abs=1e-12)  # balanced protocol
        per_target = a.assign(ok=member == decision).groupby("row", sort=False)["ok"].mean()
        assert np.allclose(per_target.loc[table["row"]].to_numpy(), table[f"{name}_accuracy"].to_numpy())
    best = doc["summary"]["strongest_attack"]
    assert best["tpr_at_1pct_fpr"] == max(m["tpr_at_1pct_fpr"] for m in doc["attacks"].values())
    assert "2 * accuracy - 1" in doc["summary"]["metrics"]["advantage"]
    assert f"strongest attack: {best['name']}" in r.stdout


def test_attempts_csv_round_trips_scores_exactly() -> None:
    rng = np.random.default_rng(0)
    member = rng.random((2, 2, 5)) < 0.5
    sc = rng.normal(size=(2, 2, 5)) / 3.0
    sc[0, 0, 0] = np.inf
    frame = metrics.attempts_frame(np.arange(5) * 7, member, {"a": (sc, sc > 0), "b": (-sc, sc < 0)})
    back = pd.read_csv(pd.io.common.StringIO(metrics.attempts_csv(frame)))
    assert (back["score"].to_numpy() == frame["score"].to_numpy()).all()
    assert back["score"].iloc[0] == 1e300  # +inf is written as the finite value the ROC used
    assert back["row"].tolist()[:5] == [0, 7, 14, 21, 28] and back["iteration"].tolist()[10] == 1
    assert back["member"].tolist()[:20] == member.reshape(-1).astype(int).tolist()


def _step_value(fpr: np.ndarray, tpr: np.ndarray, x: np.ndarray) -> np.ndarray:
    """TPR of a ROC drawn as steps (steps-post) at FPR x: the TPR of the last point with fpr <= x."""
    return tpr[np.searchsorted(fpr, x, side="right") - 1]


def test_downsampled_roc_drawn_as_steps_never_lies_above_the_full_curve() -> None:
    rng = np.random.default_rng(4)
    member = rng.random(20000) < 0.5
    score = rng.normal(size=20000) + 0.4 * member
    fpr, tpr, _ = roc_curve(member, score)
    f, t = map(np.asarray, metrics.downsample_roc(fpr, tpr))
    assert len(f) <= metrics.ROC_POINTS and f[0] == 0 and f[-1] == 1 and t[-1] == 1
    xs = np.concatenate([np.logspace(-5, 0, 400), fpr])
    assert (_step_value(f, t, xs) <= _step_value(fpr, tpr, xs) + 1e-15).all()
    for limit in (0.01, 0.001):  # the plotted curve is exact at the reported operating points
        assert _step_value(f, t, np.array([limit]))[0] == metrics.tpr_at_fpr(fpr, tpr, limit)


def test_roc_plot_draws_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    monkeypatch.setattr(plots, "_to_svg", lambda fig: seen.append(fig) or "<svg/>")
    plots.roc_curves({"a": ([0.0, 0.001, 0.5, 1.0], [0.0, 0.3, 0.6, 1.0], 0.7)})
    line = seen[0].axes[0].lines[0]
    assert line.get_drawstyle() == "steps-post"
    assert seen[0].axes[0].get_xscale() == "log"


def test_strongest_attack_is_highest_tpr_at_one_percent() -> None:
    attacks = {
        "a": {"tpr_at_1pct_fpr": 0.05, "tpr_at_0.1pct_fpr": 0.0, "auc": 0.9, "accuracy": 0.8, "n_attacks": 400},
        "b": {"tpr_at_1pct_fpr": 0.10, "tpr_at_0.1pct_fpr": 0.01, "auc": 0.6, "accuracy": 0.55, "n_attacks": 400},
        "c": {"tpr_at_1pct_fpr": 0.10, "tpr_at_0.1pct_fpr": 0.02, "auc": 0.7, "accuracy": 0.5, "n_attacks": 400},
        "d": {"tpr_at_1pct_fpr": None, "auc": None, "accuracy": 0.5, "n_attacks": 400},
    }
    best = metrics.strongest_attack(attacks)
    assert best is not None and best["name"] == "c" and best["nonmember_attempts"] == 200
    assert metrics.strongest_attack({"d": attacks["d"]}) is None


def test_summary_line_names_the_strongest_attack(numeric_csv: Path) -> None:
    (estimator, params, seed), kw = GOLDEN_RUNS["pool_lr"]
    outcome = run_attack(prepare(numeric_csv, _spec(estimator, params, seed)), AttackOptions(jobs=1, **kw), _quiet)
    best = outcome.summary["strongest_attack"]
    line = [x for x in summary_lines(outcome) if x.startswith("strongest attack")]
    assert line == [
        f"strongest attack: {best['name']}, TPR {best['tpr_at_1pct_fpr']:.3f} at 1% FPR "
        f"(AUC {best['auc']:.3f}; {best['nonmember_attempts']} non-member attempts)"
    ]

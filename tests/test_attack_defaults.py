"""Fast attack defaults (issue 13 item 4): the shadow pool by default, the plan line before the
work, --budget, and data.train_size meaning the same in ``attack`` as in ``pdtp``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from conftest import numeric_csv_file

import mptool
from mptool.attacks import DEFAULT_SHADOW_POOL
from mptool.attacks import plan as plan_mod
from mptool.attacks.plan import Costs, Needs, count_fits, estimate_seconds, resolve_candidates, size_to_budget
from mptool.attacks.protocol import AttackOptions, plan_attack, run_attack
from mptool.inputs.prepare import prepare
from mptool.inputs.spec import parse_spec
from mptool.runtime.errors import InputError


def _spec(train_size: int | None = 100, seed: int = 0) -> dict:
    return {
        "data": {"label": "label", "train_size": train_size},
        "model": {"estimator": "gaussian_nb", "preprocess": "none"},
        "output": {"bin_size": 0.01},
        "seed": seed,
    }


@pytest.fixture(scope="module")
def numeric_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return numeric_csv_file(tmp_path_factory.mktemp("num") / "numeric.csv", 600, 3)


SMALL = dict(attacks="distance,threshold", iterations=2, targets=20, pdtp_iterations=1, jobs=1)


def test_default_run_uses_a_shadow_pool_and_train_size(numeric_csv: Path) -> None:
    """No shadow_pool, no candidates: a pool of DEFAULT_SHADOW_POOL models, |D| = 2 x train_size."""
    result = mptool.attack(numeric_csv, _spec(100), **SMALL)
    s = result.summary
    assert s["shadow_pool"] >= DEFAULT_SHADOW_POOL
    assert s["fits"]["shadow_pool"] == s["shadow_pool"] and "shadow_pairs" not in s["fits"]
    assert (s["candidates"], s["train_size"]) == (200, 100)
    assert "data.train_size" in s["candidates_from"]
    plan = s["plan"]
    assert sum(plan["fits"].values()) == s["fits"]["total"]  # the plan counted every fit the run made
    assert plan["estimated_s"] >= 0 and plan["costs"]["fit_s"] > 0 and plan["budget_s"] is None
    pairs = mptool.attack(numeric_csv, _spec(100), shadow_pool=0, pairs=1, **SMALL)
    assert pairs.summary["shadow_pool"] == 0 and pairs.summary["fits"]["shadow_pairs"] == 2 * 1 * 20 * 2
    assert sum(pairs.summary["plan"]["fits"].values()) == pairs.summary["fits"]["total"]


def test_without_targeted_attacks_the_default_trains_no_pool(numeric_csv: Path) -> None:
    """threshold and untargeted need no per-record shadows: --shadows general models, as before."""
    result = mptool.attack(numeric_csv, _spec(100), **{**SMALL, "attacks": "threshold"}, shadows=5)
    assert result.summary["shadow_pool"] == 0 and result.summary["fits"]["shadow_general"] == 5


def test_candidates_follow_train_size_capped_by_the_data() -> None:
    assert resolve_candidates(None, 1000, 45222) == (2000, "2 x data.train_size (1000)")
    assert resolve_candidates(300, 1000, 45222) == (300, "--candidates")
    n, why = resolve_candidates(None, None, 45222)
    assert n == 2000 and "null" in why
    n, why = resolve_candidates(None, 400, 601)
    assert n == 600 and "capped" in why and "train on 300" in why
    n, why = resolve_candidates(None, None, 1201)
    assert n == 1200 and "capped" in why


def test_train_size_is_the_target_models_training_size(numeric_csv: Path) -> None:
    prep = prepare(numeric_csv, parse_spec(_spec(150)))
    planned = plan_attack(prep, AttackOptions(candidates=None, shadow_pool=16, auto_pool=True, targets=10, jobs=1))
    assert planned.options.candidates == 300 and planned.options.shadow_pool >= 16
    explicit = plan_attack(prep, AttackOptions(candidates=100, shadow_pool=16, auto_pool=True, targets=10, jobs=1))
    assert explicit.options.candidates == 100 and explicit.plan["candidates_from"] == "--candidates"
    capped = plan_attack(
        prepare(numeric_csv, parse_spec(_spec(None))), AttackOptions(candidates=None, targets=10, jobs=1)
    )
    assert capped.options.candidates == 600 and "capped" in capped.plan["candidates_from"]


def test_a_default_pool_grows_until_every_target_is_in_and_out(numeric_csv: Path) -> None:
    prep = prepare(numeric_csv, parse_spec(_spec(100)))
    kw = dict(attacks=("distance",), candidates=200, targets=40, iterations=1, pdtp_iterations=0, jobs=1)
    grown = plan_attack(prep, AttackOptions(shadow_pool=2, auto_pool=True, **kw))
    assert grown.options.shadow_pool > 2 and "every target in and out" in grown.plan["changes"][-1]
    with pytest.raises(InputError, match="--shadow-pool 2: a target is in all or none"):
        plan_attack(prep, AttackOptions(shadow_pool=2, **kw))  # a size the user gave: refused before any fit


NEEDS = Needs(evidence=True, general=True, synthetic=False, untargeted=True, pdtp=True, refit_pdtp=True)
COSTS = Costs(fit_s=0.1, predict_s=0.0, predict_one_s=0.0, classifier_row_s=0.0, workers=1)
BIG = AttackOptions(candidates=2000, iterations=10, targets=100, shadow_pool=64, pdtp_iterations=10)


def test_budget_lowers_the_counts_in_the_documented_order() -> None:
    full = estimate_seconds(BIG, NEEDS, COSTS)  # 20 target + 20 full + 1000 refits + 64 pool fits
    assert full == pytest.approx(0.1 * (20 + 20 + 1000 + 64))
    assert size_to_budget(BIG, NEEDS, COSTS, full) == (BIG, [])
    # PDTP first: 2 iterations of refits fit in 40 s (20 + 4 + 200 + 64 = 288 fits = 28.8 s), 3 do not
    chosen, changes = size_to_budget(BIG, NEEDS, COSTS, 30.0)
    assert chosen == dataclasses.replace(BIG, pdtp_iterations=2) and changes == ["pdtp-iterations 10 -> 2"]
    # then the pool, down to the largest size that fits: 20 + 2 + 100 + K <= 15 s / 0.1 -> K = 28
    chosen, changes = size_to_budget(BIG, NEEDS, COSTS, 15.0)
    assert (chosen.pdtp_iterations, chosen.shadow_pool, chosen.iterations) == (1, 28, 10)
    assert estimate_seconds(chosen, NEEDS, COSTS) <= 15.0
    assert estimate_seconds(dataclasses.replace(chosen, shadow_pool=29), NEEDS, COSTS) > 15.0
    # then (pool at 16, shadows at 8) the iterations, then the targets (they set the refits)
    chosen, _ = size_to_budget(BIG, NEEDS, COSTS, 10.0)
    assert (chosen.pdtp_iterations, chosen.shadow_pool, chosen.shadows, chosen.targets) == (1, 16, 8, 78)
    assert chosen.iterations == 2
    with pytest.raises(InputError, match=r"--budget 5 s is too short: even the smallest plan .*shadow-pool 16"):
        size_to_budget(BIG, NEEDS, COSTS, 5.0)


def test_budget_in_pairs_mode_lowers_pairs_then_shadows() -> None:
    needs = dataclasses.replace(NEEDS, refit_pdtp=False)
    o = dataclasses.replace(BIG, shadow_pool=0, pairs=5)
    assert count_fits(o, needs)["shadow_pairs"] == 2 * 5 * 100 * 10
    # 300 s = 3,000 fits: PDTP 1, pairs 2 and shadows 8 still need 4,030; 402 fits per iteration -> 7
    chosen, changes = size_to_budget(o, needs, COSTS, 300.0)
    assert (chosen.pdtp_iterations, chosen.pairs, chosen.shadows, chosen.iterations) == (1, 2, 8, 7)
    assert [c.split()[0] for c in changes] == ["pdtp-iterations", "pairs", "shadows", "iterations"]


def test_a_small_plan_runs_in_this_process_when_starting_workers_costs_more() -> None:
    small = dataclasses.replace(BIG, pdtp_iterations=1, iterations=2)  # 4 + 2 + 100 refits + 64 = 170 fits
    quick = Costs(fit_s=0.01, predict_s=0.0, predict_one_s=0.0, classifier_row_s=0.0, workers=2, start_s=3.0)
    assert plan_mod.fewer_workers(small, NEEDS, quick).workers == 1  # 1.7 s alone < 0.85 + 3 s
    slow = dataclasses.replace(quick, fit_s=0.1)
    assert plan_mod.fewer_workers(small, NEEDS, slow) == slow  # 17 s alone > 8.5 + 3 s


@pytest.fixture
def fixed_costs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan's timing replaced by fixed costs, so the budget's choice does not depend on this machine."""

    def timed(*args, **kwargs) -> Costs:
        return Costs(fit_s=0.05, predict_s=0.0, predict_one_s=0.0, classifier_row_s=0.0, workers=1)

    monkeypatch.setattr(plan_mod, "time_costs", timed)


def _write_spec(path: Path, train_size: int = 100) -> Path:
    path.write_text(json.dumps(_spec(train_size)))  # JSON is YAML
    return path


def test_plan_line_is_printed_before_the_work_and_quiet_hides_it(cli, numeric_csv: Path, tmp_path: Path) -> None:
    spec = _write_spec(tmp_path / "s.yaml")
    args = ["attack", numeric_csv, "--model", spec, "--attacks", "distance", "--iterations", 1, "--targets", 10,
            "--pdtp-iterations", 0, "-j", 1]  # fmt: skip
    r = cli(*args, "--out", tmp_path / "a")
    assert r.code == 0, r.stderr
    lines = r.stderr.splitlines()
    plan = [ln for ln in lines if ln.startswith("plan: ")]
    assert len(plan) == 1 and "model fits" in plan[0] and "estimated" in plan[0] and "an estimate" in plan[0]
    assert lines.index(plan[0]) == 1 and lines[0].startswith("candidate set D: 200 of 600")  # before any progress
    q = cli(*args, "--out", tmp_path / "b", "-q")
    assert q.code == 0 and "plan: " not in q.stderr


def test_budget_picks_a_smaller_plan_that_reproduces_without_it(
    cli, numeric_csv: Path, tmp_path: Path, fixed_costs: None
) -> None:
    spec = _write_spec(tmp_path / "s.yaml")
    common = ["attack", numeric_csv, "--model", spec, "--attacks", "distance,threshold", "--targets", 20, "-j", 1]
    # 10 iterations: 20 target + 20 PDTP + 64 pool fits x 0.05 s = 5.2 s; 2.51 s leaves 50 fits:
    # PDTP 10 -> 1 (2 fits), pool 64 -> 28, iterations 10 -> 10. Budgets sit off the exact multiples
    # of 0.05 s: 30 fits' estimate is 1.5000000000000002 by math.fsum and 1.5 by Python 3.11's sum(),
    # a knife-edge this test must not rest on
    r = cli(*common, "--budget", 2.51, "--out", tmp_path / "b")
    assert r.code == 0, r.stderr
    plan = next(ln for ln in r.stderr.splitlines() if ln.startswith("plan: "))
    assert "--budget 2.51 s: pdtp-iterations 10 -> 1; shadow-pool 64 -> 28" in plan
    s = json.loads((tmp_path / "b" / "attack.json").read_text())["summary"]
    assert (s["pdtp_iterations"], s["shadow_pool"], s["iterations"]) == (1, 28, 10)
    assert s["plan"]["budget_s"] == 2.51 and s["plan"]["changes"][0] == "pdtp-iterations 10 -> 1"
    again = cli(*common, "--pdtp-iterations", 1, "--shadow-pool", 28, "--out", tmp_path / "c")
    assert again.code == 0, again.stderr
    assert (tmp_path / "b" / "attack.csv").read_bytes() == (tmp_path / "c" / "attack.csv").read_bytes()
    # lower still: iterations go after the pool reached its minimum of 16
    r = cli(*common, "--budget", 1.51, "--out", tmp_path / "d")
    assert r.code == 0, r.stderr
    s = json.loads((tmp_path / "d" / "attack.json").read_text())["summary"]
    assert (s["shadow_pool"], s["iterations"]) == (16, 6)  # 12 + 2 + 16 = 30 fits <= 30
    assert s["attacks"] == ["distance", "threshold"] and len(s["plan"]["changes"]) == 3


def test_impossible_budget_refuses_before_any_work(cli, numeric_csv: Path, tmp_path: Path, fixed_costs: None) -> None:
    spec = _write_spec(tmp_path / "s.yaml")
    out = tmp_path / "out"
    r = cli("attack", numeric_csv, "--model", spec, "--budget", 0.5, "-j", 1, "--out", out)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.code == 2 and len(lines) == 1, r.stderr
    assert lines[0].startswith("mptool: error: --budget 0.5 s is too short: even the smallest plan")
    assert not out.exists() or not any(out.iterdir())


def test_api_budget_and_plan_callback(numeric_csv: Path, fixed_costs: None) -> None:
    seen: list[str] = []
    result = mptool.attack(numeric_csv, _spec(100), budget=1000.0, on_plan=seen.append, **SMALL)
    assert len(seen) == 1 and seen[0].startswith("plan: ") and "the full plan fits" in seen[0]
    assert result.summary["plan"]["changes"] == []
    with pytest.raises(InputError, match="budget must be above 0"):
        mptool.attack(numeric_csv, _spec(100), budget=0.0, **SMALL)


def test_run_attack_without_a_plan_makes_one(numeric_csv: Path) -> None:
    """The protocol's own entry point plans too (the benchmarks and tests call it directly)."""
    seen: list[str] = []
    prep = prepare(numeric_csv, parse_spec(_spec(100)))
    opts = AttackOptions(attacks=("threshold",), candidates=100, targets=10, iterations=1, shadows=3, jobs=1)
    out = run_attack(prep, opts, lambda n, label: _null(), announce=seen.append)
    assert len(seen) == 1 and out.summary["plan"]["fits"] == {"target": 2, "pdtp_full": 2, "shadow_general": 3}


class _null:
    def __enter__(self):
        return lambda n: None

    def __exit__(self, *exc):
        return False

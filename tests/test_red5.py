"""Red-team review of 518e7a4 (issue 27 items 1 and 6): attack.csv's ``pdtp_decision`` and ``--engine replicates``.

- ``--budget`` bounds the estimate of a replicate attack at its most (MAX replicates a side), not at
  the first look only: the plan used to say "the full plan fits" while undecided targets took up to
  MAX/MIN times the planned replicate fits (docs/randomness.md section 8);
- ``--engine`` is checked before any work even where no engine runs (``--pdtp-iterations 0``,
  docs/bad-input.md red5-1);
- ``pdtp_decision`` is always a column of attack.csv (empty where PDTP was not measured), as documented;
- the report shows attack.json's decision counts only when they are counts.
"""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest
from conftest import run_cli, write_spec
from test_bad_input import assert_refused, snapshot

import mptool
from mptool.attacks.plan import Costs, Needs, count_fits, estimate_seconds, most_work, plan_line, size_to_budget
from mptool.attacks.protocol.state import AttackOptions
from mptool.inputs.known_answer import ESTIMATOR, MODULE, known_frame
from mptool.runtime.errors import InputError

#: A replicate attack's needs (MIN 4, MAX 32) and fixed costs: the estimate is plain arithmetic, no timing.
NEEDS = Needs(evidence=True, general=False, synthetic=False, untargeted=False, pdtp=True, refit_pdtp=True,
              replicates=4, replicates_max=32)
COSTS = Costs(fit_s=0.1, predict_s=0.0, predict_one_s=0.0, classifier_row_s=0.0, workers=1)
BIG = AttackOptions(candidates=2000, iterations=10, targets=100, shadow_pool=64, pdtp_iterations=10)


def test_budget_counts_the_replicates_at_their_most() -> None:
    first = estimate_seconds(BIG, NEEDS, COSTS)  # 20 target + 20 full + 4*100*10 + 2*4*10 + 64 pool = 4184 fits
    assert count_fits(BIG, NEEDS)["pdtp_replicates"] == 4 * 100 * 10 + 2 * 4 * 10  # the plan: the first look
    most = most_work(NEEDS)
    assert count_fits(BIG, most)["pdtp_replicates"] == 32 * 100 * 10 + 2 * 32 * 10  # every target to MAX
    # a budget the first look fits in: before, "the full plan fits" (up to 8x the replicate fits then ran)
    chosen, changes = size_to_budget(BIG, NEEDS, COSTS, first)
    assert changes and changes[0].startswith("pdtp-iterations 10 -> ")
    assert estimate_seconds(chosen, most, COSTS) <= first
    line = plan_line(chosen, NEEDS, COSTS, first, changes)
    assert "--budget" in line and "pdtp replicates counted at their most, 32 a side" in line
    # a budget the most fits in: nothing changes
    assert size_to_budget(BIG, NEEDS, COSTS, estimate_seconds(BIG, most, COSTS)) == (BIG, [])
    with pytest.raises(InputError, match="the pdtp replicates at their most"):
        size_to_budget(BIG, NEEDS, COSTS, 1.0)
    plain = dataclasses.replace(NEEDS, replicates=0, replicates_max=0)  # other engines: as before
    assert most_work(plain) == plain
    assert "at their most" not in plan_line(BIG, plain, COSTS, 1e9, [])


def _files(tmp_path):
    csv = tmp_path / "d.csv"
    known_frame(0)[0].to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", ESTIMATOR, model={"params": {"weight_feature": 1}, "preprocess": "none"})
    return csv, spec


def test_an_unknown_engine_is_refused_where_no_engine_runs(tmp_path) -> None:  # red5-1
    csv, spec = _files(tmp_path)
    before = snapshot(tmp_path)
    res = run_cli("attack", csv, "-m", spec, "--allow-import", MODULE, "--engine", "replicate", "--pdtp-iterations",
                  0, "--out", tmp_path / "out")
    assert_refused(res, ["--engine must be auto, exact, refit or replicates"], tmp_path, before)
    with pytest.raises(InputError, match="--engine must be auto, exact, refit or replicates"):
        mptool.attack(known_frame(0)[0], {"data": {"label": "label"}, "model": {"estimator": "categorical_nb"}},
                      engine="exakt", pdtp_iterations=0)


NB = {"data": {"label": "label"}, "model": {"estimator": "categorical_nb"}, "seed": 0}
TINY = {"attacks": "distance", "candidates": 26, "iterations": 2, "targets": 6, "shadows": 2, "pairs": 1, "jobs": 1}


def test_pdtp_decision_is_always_a_column() -> None:
    df = known_frame(0)[0].assign(x=lambda f: f["x"].astype(int).astype(str))
    none = mptool.attack(df, NB, pdtp_iterations=0, **TINY)
    assert list(none.table.columns[:4]) == ["row", "label", "pdtp_mean", "pdtp_decision"]  # the API keeps labels
    assert set(none.table["pdtp_decision"]) == {""} and "pdtp_decisions" not in none.summary
    some = mptool.attack(df, NB, pdtp_iterations=1, **TINY)
    assert list(some.table.columns) == list(none.table.columns)  # one layout whatever was measured
    assert set(some.table["pdtp_decision"]) <= {"violation", "below"}  # exact values, one measurement each
    # the terminal counts them too (undecided ones included), and says nothing where nothing was measured
    from mptool.outputs.attack_text import summary_lines

    n = some.summary["pdtp_decisions"]
    line = (f"PDTP decisions (DTP-1, attack.csv pdtp_decision): {n['violation']} violation, {n['below']} below, "
            "0 undecided")
    assert line in summary_lines(some)
    assert not any(x.startswith("PDTP decisions") for x in summary_lines(none))


def test_report_shows_decision_counts_only_when_they_are_counts(tmp_path) -> None:
    csv, spec = _files(tmp_path)
    out = tmp_path / "out"
    res = run_cli("attack", csv, "-m", spec, "--allow-import", MODULE, "--engine", "replicates", "--replicates", "4:8",
                  "--attacks", "distance", "--candidates", 26, "--targets", 6, "--iterations", 2, "--shadows", 2,
                  "--pdtp-iterations", 1, "-j", 1, "-q", "--out", out)
    assert res.code == 0, res.stderr
    doc = json.loads((out / "attack.json").read_text())
    counts = doc["summary"]["pdtp_decisions"]
    table = pd.read_csv(out / "attack.csv", keep_default_na=False)
    assert counts == {d: int((table["pdtp_decision"] == d).sum()) for d in ("violation", "below", "undecided")}

    def note() -> str:
        assert run_cli("report", out, "--format", "md", "--out", tmp_path / "r.md", "--force", "-q").code == 0
        return (tmp_path / "r.md").read_text(encoding="utf-8")

    want = f"({counts['violation']} violation, {counts['below']} below, {counts['undecided']} undecided)"
    assert want in note()
    for bad in ({"violation": -5, "below": 1e300, "undecided": "7"}, {"violation": True, "below": 0, "undecided": 0},
                {"violation": 1.5, "below": 0, "undecided": 0}, "many", None):
        doc["summary"]["pdtp_decisions"] = bad
        (out / "attack.json").write_text(json.dumps(doc))
        text = note()
        assert "attack.json's counts are not readable" in text
        assert "-5 violation" not in text and "1e+300" not in text and "1.5 violation" not in text
    out_text = res.stdout.splitlines()
    want = (f"{counts['violation']} violation, {counts['below']} below, {counts['undecided']} undecided "
            "(replicate engine")
    assert any(x.startswith("PDTP decisions") and want in x for x in out_text), res.stdout


@pytest.mark.parametrize("params", [{}, {"noise": 0.0}, {"noise": 0.0, "order_effect": 0.0}])
def test_the_randomness_bar_completes_for_an_estimator_of_unknown_order_dependence(params) -> None:
    """The known-answer classifier (a dotted path: its order dependence is not known, so two row orders are
    planned): a permutation that changes A(T) makes the reverse unneeded, and the bar is still complete."""
    from mptool.inputs.known_answer import known_spec
    from mptool.inputs.prepare import fit_checked, prepare
    from mptool.inputs.spec import parse_spec
    from mptool.loo.randomness import detect, detection_fits, planned_fits

    prep = prepare(known_frame(0)[0], parse_spec(known_spec(0, **params)), (MODULE,))
    T, steps = prep.train, []
    found = detect(prep.template, fit_checked(prep.template, T), T.X, T.y, prep.classes, 0, advance=steps.append)
    assert sum(steps) == planned_fits(prep.template) == 6  # as is, three seeds, two row orders
    assert found.order is (params.get("order_effect") != 0.0)
    assert detection_fits(prep.template, found) == {0: 3, 1: 5, 2: 6}[len(params)]  # the fits made

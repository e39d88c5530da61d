"""``mptool attack``'s PDTP columns say which targets are decided (issue 27 item 6).

The refit engine's ``pdtp_mean`` is one paired refit per iteration. For a target whose training
is randomized (detected on the first iteration's half) attack.json's ``summary.pdtp_basis`` says
it is a single-refit estimate with no record decided, a note says so, and ``pdtp_decision`` is
``undecided`` for every target; a deterministic training and exact engines decide from the exact
value. ``--engine replicates`` decides each target beyond the randomness (docs/randomness.md 8):
on the known-answer classifier no zero-influence target is decided a violation and the memorised
ones are.
"""

from __future__ import annotations

import mptool
from mptool.inputs.known_answer import MODULE, known_frame, known_spec

#: A tiny attack: 2 iterations, 6 targets, one PDTP iteration, the distance attack only.
SMALL = {"attacks": "distance", "candidates": 26, "iterations": 2, "targets": 6, "shadows": 2, "pairs": 1,
         "pdtp_iterations": 1, "jobs": 1}


def _attack(**params: float):
    df = known_frame(0)[0]
    return mptool.attack(df, known_spec(0, **params), allow_import=(MODULE,), **SMALL)


def test_randomized_target_pdtp_is_a_single_refit_estimate() -> None:
    r = _attack()
    basis = r.summary["pdtp_basis"]
    assert basis["randomized"] and basis["decided"] is False
    assert basis["basis"].startswith("single-refit estimate") and "seed and row order" in basis["basis"]
    assert any("pdtp_mean is a single-refit estimate" in n for n in r.notes)
    assert basis["fits"] >= 3 and "pdtp_randomness_check" not in r.summary["fits"]  # fits stays the plan's count
    # the refits are fits: the total counts them, as the plan did (it left them out before)
    assert r.summary["fits"]["pdtp_refits"] == r.summary["fits"]["pdtp_leave_one_out_records"] == SMALL["targets"]
    assert sum(r.summary["plan"]["fits"].values()) == r.summary["fits"]["total"]
    assert list(r.table.columns).count("pdtp_mean") == 1
    assert set(r.table["pdtp_decision"]) == {"undecided"}  # one paired refit decides nothing here
    assert r.summary["pdtp_decisions"] == {"violation": 0, "below": 0, "undecided": len(r.table)}
    assert "pdtp_replicates" not in r.summary


def test_deterministic_target_says_exact_and_exact_engines_say_nothing() -> None:
    r = _attack(noise=0.0, order_effect=0.0)
    assert r.summary["pdtp_basis"]["decided"] is True and not r.summary["pdtp_basis"]["randomized"]
    assert not any("single-refit" in n for n in r.notes)
    _decisions_follow_exact_values(r.table)
    nb = mptool.attack(known_frame(0)[0].assign(x=lambda f: f["x"].astype(int).astype(str)),
                       {"data": {"label": "label"}, "model": {"estimator": "categorical_nb"}, "seed": 0}, **SMALL)
    assert "pdtp_basis" not in nb.summary
    _decisions_follow_exact_values(nb.table)


def _decisions_follow_exact_values(table) -> None:
    """Exact values: one measurement decides by the threshold 1 (as pdtp's gate); several agree or say undecided."""
    assert set(table["pdtp_decision"]) <= {"violation", "below", "undecided"}
    one = table["pdtp_measurements"] == 1
    expect = (table["pdtp_mean"] > 1.0).map({True: "violation", False: "below"})
    assert (table.loc[one, "pdtp_decision"] == expect[one]).all()
    assert (table.loc[table["pdtp_decision"] == "violation", "pdtp_mean"] > 1.0).all()
    assert (table.loc[table["pdtp_decision"] == "below", "pdtp_mean"] <= 1.0).all()


def test_replicate_engine_decides_every_target_on_known_answers() -> None:
    """--engine replicates on all 26 known-answer records, 2 measurements each, three seeds: the 18
    zero-influence records (a record present 12 times, 6 of weight 0) are never decided violations (0 of 54;
    the stated control is 5 % per measurement), the 8 memorised ones (expected PDTP about 2) are decided
    violations at least 90 % of the time (measured: 24 of 24)."""
    import numpy as np

    df, kind = known_frame(0)
    params = {**SMALL, "targets": 26, "pdtp_iterations": 2, "iterations": 2}
    nulls = large = hits = 0
    for seed in (0, 1, 2):
        r = mptool.attack(df, known_spec(seed), allow_import=(MODULE,), engine="replicates", replicates="4:16",
                          **params)
        k = kind[r.table["row"].to_numpy()]
        d = r.table["pdtp_decision"].to_numpy()
        assert not np.any(d[k == "null"] == "violation"), seed
        nulls += int(np.sum(k == "null"))
        large += int(np.sum(k == "large"))
        hits += int(np.sum(d[k == "large"] == "violation"))
        rep = r.summary["pdtp_replicates"]
        assert rep["replicates_min"] == 4 and rep["replicates_max"] == 16
        assert rep["fits"] == r.summary["fits"]["pdtp_replicates"] > 0
        assert rep["decisions"] == r.summary["pdtp_decisions"]
        assert sum(rep["replicates_per_record"].values()) == int(r.table["pdtp_measurements"].sum())
        assert r.summary["engine"] == "replicates"
        # the plan counts the first look: MIN a side for each target, MIN of each half, per measurement
        assert r.summary["plan"]["fits"]["pdtp_replicates"] == 4 * 26 * 2 + 2 * 4 * 2
    assert nulls == 54 and large == 24
    assert hits >= 0.9 * large


def test_attack_replicates_flags_are_refused_before_work(tmp_path) -> None:  # rnd-7, rnd-8
    from conftest import run_cli, write_spec

    from mptool.inputs.known_answer import ESTIMATOR

    csv = tmp_path / "d.csv"
    known_frame(0)[0].to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", ESTIMATOR, model={"params": {"weight_feature": 1}, "preprocess": "none"})
    for extra, line in (
        (["--replicates", "4:8"], "--replicates sets the replicate engine's training replicates: add --engine "
         "replicates, or leave --replicates out"),
        (["--engine", "replicates", "--replicates", "8:4"], "--replicates must be MIN:MAX (or N) with whole numbers"),
    ):
        out = tmp_path / "out"
        res = run_cli("attack", csv, "-m", spec, "--allow-import", MODULE, "--out", out, *extra)
        assert res.code == 2 and line in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert not out.exists()


def test_estimators_and_check_say_which_engine_auto_picks_and_why(tmp_path) -> None:
    from conftest import run_cli, write_spec

    from mptool.inputs.known_answer import ESTIMATOR

    res = run_cli("estimators")
    assert res.code == 0 and "Randomness detection" in res.stdout and "-> the replicate engine" in res.stdout
    csv = tmp_path / "d.csv"
    known_frame(0)[0].to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", ESTIMATOR, model={"params": {"weight_feature": 1}, "preprocess": "none"})
    res = run_cli("check", csv, "-m", spec, "--allow-import", MODULE)
    assert res.code == 0 and "randomness: this dry run refits the largest timed subset of T" in res.stdout


def test_report_shows_each_targets_decision_and_only_what_mptool_writes(tmp_path) -> None:
    """The report's attack section: the replicate engine's counts, the pdtp_decision column; a value mptool
    never writes (an edited attack.csv) is shown empty, never echoed."""
    import pandas as pd
    from conftest import run_cli, write_spec

    from mptool.inputs.known_answer import ESTIMATOR

    csv = tmp_path / "d.csv"
    known_frame(0)[0].to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", ESTIMATOR, model={"params": {"weight_feature": 1, "noise": 1.0},
                                                            "preprocess": "none"})
    out = tmp_path / "out"
    res = run_cli("attack", csv, "-m", spec, "--allow-import", MODULE, "--engine", "replicates", "--attacks",
                  "distance", "--candidates", 26, "--targets", 10, "--iterations", 2, "--shadows", 2,
                  "--pdtp-iterations", 1, "-j", 1, "-q", "--out", out)
    assert res.code == 0, res.stderr
    table = pd.read_csv(out / "attack.csv", keep_default_na=False)
    assert set(table["pdtp_decision"]) <= {"violation", "below", "undecided"}
    table.loc[0, "pdtp_decision"] = "<b>forged</b>"
    table.to_csv(out / "attack.csv", index=False)
    assert run_cli("report", out, "--out", tmp_path / "r.html", "-q").code == 0
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "come from the replicate engine (--engine replicates)" in html and "pdtp_decision" in html
    assert "forged" not in html
    assert html.count(">violation<") + html.count(">below<") + html.count(">undecided<") >= 9

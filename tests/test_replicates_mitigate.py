"""``mptool mitigate`` on randomized training gates on decided violations (issue 27 item 6).

Ground truth: :class:`mptool.inputs.known_answer.KnownAnswerClassifier` (seed, n and row order
change every draw; a memorised label is the only real influence). Tiny data (20 records of T),
``--replicates 4:8``, the release family only (no retraining): each run takes about a second.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import run_cli, write_spec

import mptool
from mptool.api import mitigate_random
from mptool.inputs.known_answer import ESTIMATOR, MODULE, known_frame, known_spec

ALLOW = (MODULE,)


def _spec(**params: float) -> dict:
    spec = known_spec(0, **params)
    spec["data"]["train_size"] = 20  # 6 rows outside T: utility is measured
    return spec


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return known_frame(0)[0]


@pytest.fixture(scope="module")
def memorised(frame: pd.DataFrame):
    return mptool.mitigate(frame, _spec(), allow_import=ALLOW, replicates="4:8", jobs=1, defences="release")


def test_decided_violations_are_counted_and_reproduced_by_pdtp(frame: pd.DataFrame, memorised) -> None:
    """The baseline row is what mptool pdtp's replicate engine decides on the same spec (same replicates)."""
    t = memorised.table.set_index("setting")
    assert memorised.summary["randomness"]["engine"] == "replicates"
    assert {"decided_below", "undecided"} <= set(t.columns)
    base = t.loc["baseline"]
    audit = mptool.pdtp(frame, _spec(), allow_import=ALLOW, replicates="4:8", jobs=1)
    assert base["above_target"] == audit.summary["violations"] > 0  # decisions: exact
    assert base["undecided"] == audit.summary["undecided"]
    assert base["decided_below"] == audit.summary["decided_below"]
    assert base["max_pdtp"] == pytest.approx(audit.summary["max"], rel=1e-12)  # same floats, another summary path
    assert not base["passes"] and base["engine"] == "replicates"
    assert memorised.recommended is None and memorised.verdict == "fail"


def test_only_decided_below_passes_and_undecided_is_not_established(frame: pd.DataFrame) -> None:
    """memorise 0 (every record a null): decided below passes; label-only leaves them undecided: not passing."""
    r = mptool.mitigate(frame, _spec(memorise=0.0), allow_import=ALLOW, replicates="4:16", jobs=1,
                        defences="release")
    t = r.table.set_index("setting")
    assert t.loc["baseline", "passes"] and t.loc["baseline", "undecided"] == 0
    assert t.loc["baseline", "decided_below"] == t.loc["baseline", "n_audited"]
    open_ = t[(t["undecided"] > 0) & (t["above_target"] == 0)]
    assert len(open_) and not open_["passes"].any()  # never "passes" while records are undecided
    assert "not established" in r.summary["sentence"]


def test_release_settings_reuse_the_baseline_replicates(memorised) -> None:
    """No fit for a release policy; each is judged under its own policy (label-only changes the decisions)."""
    t = memorised.table.set_index("setting")
    assert (t.loc[t["family"] == "release", "fits"] == 0).all() and t.loc["baseline", "fits"] > 0
    assert (t.loc["temperature=2.0", ["above_target", "undecided"]] == t.loc["baseline", ["above_target",
                                                                                       "undecided"]]).all()
    assert t.loc["label_only", "undecided"] > t.loc["baseline", "undecided"]


def test_redecided_with_the_same_plan_reproduces_the_run(frame: pd.DataFrame) -> None:
    """Judging a run's replicates again under its own plan gives its decisions and estimates exactly."""
    from mptool.inputs.prepare import prepare
    from mptool.inputs.spec import parse_spec
    from mptool.loo import LooRequest
    from mptool.loo.replicates import ReplicateEngine, ReplicatePlan, redecided

    prep = prepare(frame, parse_spec(known_spec(0), "spec"), ALLOW)
    T = prep.train
    from mptool.inputs.models import fit

    full = fit(prep.template, T.X, T.y)
    request = LooRequest(prep.spec, prep.template, T, full, prep.classes, np.arange(T.n), 1, "loky")
    plan = ReplicatePlan(4, 16)
    run = ReplicateEngine(plan).run(request, lambda n: None)
    again = redecided(run, plan)
    assert list(again.decisions) == list(run.decisions)
    np.testing.assert_array_equal(again.stats.estimate, run.stats.estimate)  # same arrays, same arithmetic


def test_deterministic_training_keeps_todays_path_byte_identical(frame: pd.DataFrame, monkeypatch) -> None:
    """noise 0, no order effect: detected deterministic, so mitigate.csv equals the run without detection."""
    spec = _spec(noise=0.0, order_effect=0.0)
    now = mptool.mitigate(frame, spec, allow_import=ALLOW, jobs=1, defences="release")
    assert now.summary["randomness"]["randomized"] is False and "undecided" not in now.table
    monkeypatch.setattr(mitigate_random, "with_randomness", lambda prep, progress=None: prep)  # no detection
    before = mptool.mitigate(frame, spec, allow_import=ALLOW, jobs=1, defences="release")
    cols = [c for c in now.table.columns if c != "seconds"]
    assert now.table[cols].to_csv(index=False) == before.table[cols].to_csv(index=False)


def test_cli_says_not_established_and_refuses_bad_flags(tmp_path: Path, frame: pd.DataFrame) -> None:
    """The CLI's table line says "not established"; bad --replicates/--error-control stop before work (rand6-1, -2)."""
    csv = tmp_path / "d.csv"
    frame.to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", ESTIMATOR, model={"params": {"weight_feature": 1, "memorise": 0.0},
                                                             "preprocess": "none"}, data={"train_size": 20})
    res = run_cli("mitigate", csv, "-m", spec, "--allow-import", MODULE, "--out", tmp_path / "o", "--jobs", "1",
                  "--defences", "release", "--replicates", "4:4")
    assert res.code == 1 and "not established" in res.stdout
    assert "undecided" in (tmp_path / "o" / "mitigate.csv").read_text().splitlines()[0]
    for flags, fragment in ((["--replicates", "9:4"], "--replicates must be MIN:MAX"),
                            (["--error-control", "fdr"], "--error-control must be one of")):
        out = tmp_path / f"bad{flags[0]}"
        bad = run_cli("mitigate", csv, "-m", spec, "--allow-import", MODULE, "--out", out, *flags)
        assert bad.code == 2 and fragment in bad.stderr and not out.exists()

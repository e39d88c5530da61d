"""``--baseline`` of decisions with the replicate engine (issue 27; docs/randomness.md section 4).

A record decided above now and not decided above in the baseline is ``new``; a baseline violator
now decided below is ``fixed``; undecided records never pass. The gate line, pdtp.json's
``summary.baseline`` and the JUnit file name the baseline. A baseline of another engine kind
(refit against replicates, or the reverse) and a baseline with records a budget left unevaluated
are refused (exit 2, one line; docs/bad-input.md rep-1 .. rep-3). Known-answer data with an id
column (26 rows), ``--replicates 4:8``, in-process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli, write_spec
from test_bad_input import assert_refused, snapshot

from mptool.inputs.known_answer import ESTIMATOR, MODULE, known_frame


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPTOOL_FINGERPRINT_KEY", "rep-baseline")  # results are signed; a baseline must verify


def _frame(changed: bool = False) -> pd.DataFrame:
    """The known-answer data with ids; ``changed``: r0 (memorised) made weight 0, a weight-0 record made weight 1."""
    frame = known_frame(0)[0]
    frame.insert(0, "rid", [f"r{i}" for i in range(len(frame))])
    if changed:
        frame.loc[0, "w"] = 0.0  # no influence any more: a baseline violator decided below now (fixed)
        frame.loc[len(frame) - 1, "w"] = 1.0  # memorised now: decided above, not in the baseline (new)
    return frame


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("rep-base")
    _frame().to_csv(d / "d.csv", index=False)
    _frame(True).to_csv(d / "changed.csv", index=False)
    spec = write_spec(d / "s.yaml", ESTIMATOR, data={"id": "rid", "drop": []},
                      model={"params": {"weight_feature": 1, "noise": 1.0}, "preprocess": "none"})
    return d, spec


def _run(d: Path, spec: Path, out: Path, csv: str = "d.csv", *extra: str):
    res = run_cli("pdtp", d / csv, "-m", spec, "--allow-import", MODULE, "--out", out, "--jobs", "1",
                  "--replicates", "4:8", "--format", "csv,junit", "--force", *extra)
    doc = json.loads((out / "pdtp.json").read_text()) if (out / "pdtp.json").exists() else {}
    return res, doc


@pytest.fixture(scope="module")
def base(data, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The baseline: a replicate run of d.csv with every record decided."""
    d, spec = data
    out = tmp_path_factory.mktemp("rep-base-run") / "base"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MPTOOL_FINGERPRINT_KEY", "rep-baseline")
        res, doc = _run(d, spec, out)
    assert res.code == 1 and doc["summary"]["undecided"] == 0 and doc["summary"]["violations"] > 0
    return out


def _decisions(out: Path) -> pd.Series:
    t = pd.read_csv(out / "pdtp.csv", dtype={"violation": str, "id": str})
    return t.set_index("id")["violation"]


def test_same_decisions_pass_with_baseline(data, base, tmp_path) -> None:
    d, spec = data
    res, doc = _run(d, spec, tmp_path / "same", "d.csv", "--baseline", base)
    assert res.code == 0, res.stdout + res.stderr
    block = doc["summary"]["baseline"]
    n_above = int((_decisions(base) == "True").sum())
    assert block["compares"] == "decisions" and block["path"] == str(base / "pdtp.json")
    assert block["counts"] == {"violations": n_above, "waived": 0, "counted": 0, "new": 0, "worse": 0,
                               "unchanged": n_above, "fixed": 0, "absent": 0, "undecided": 0}
    assert block["baseline_violations"] == n_above and block["verdict_label"] == "pass-with-baseline"
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("gate "))
    assert line.startswith(f"gate passed (pass-with-baseline): {n_above} record(s) decided above the threshold excused")
    assert f"{n_above} unchanged, 0 fixed" in line
    assert "decisions compared" in res.stdout
    junit = (tmp_path / "same" / "junit.xml").read_text()
    assert "<failure" not in junit and "not decided above in the baseline" in junit
    assert f"compared with the baseline {base / 'pdtp.json'} (its decisions" in junit
    rep = run_cli("report", tmp_path / "same", "--format", "md", "--out", "-")  # the gate re-verified from the CSV
    assert rep.code == 0 and "pass-with-baseline" in rep.stdout


def test_new_and_fixed_by_decision(data, base, tmp_path) -> None:
    d, spec = data
    out = tmp_path / "changed"
    res, doc = _run(d, spec, out, "changed.csv", "--baseline", base)
    now, then = _decisions(out), _decisions(base)
    assert then["r0"] == "True" and now["r0"] == "False"
    last = f"r{len(now) - 1}"
    assert then[last] != "True" and now[last] == "True"
    assert doc["summary"]["undecided"] == 0  # else the counts below would also hold undecided records
    t = pd.read_csv(out / "pdtp.csv", dtype={"id": str}, keep_default_na=False).set_index("id")
    assert t.loc["r0", "baseline_status"] == "fixed" and t.loc[last, "baseline_status"] == "new"
    new = sorted(i for i in now.index if now[i] == "True" and then[i] != "True")
    fixed = sorted(i for i in now.index if now[i] == "False" and then[i] == "True")
    assert sorted(t.index[t["baseline_status"] == "new"]) == new
    assert sorted(t.index[t["baseline_status"] == "fixed"]) == fixed
    assert not (t["baseline_status"] == "worse").any()
    c = doc["summary"]["baseline"]["counts"]
    assert (c["new"], c["fixed"], c["counted"]) == (len(new), len(fixed), len(new))
    assert res.code == 1 and doc["summary"]["baseline"]["verdict"] == "fail"
    assert (f"gate FAILED: {len(new)} record(s) newly decided above the threshold (not decided above in the "
            "baseline) and not waived") in res.stdout
    assert "<failure" in (out / "junit.xml").read_text()


def test_undecided_records_never_pass_against_a_baseline(data, base, tmp_path) -> None:
    """A budget leaves records undecided: none new, yet the gate is not established (exit 1), none fixed."""
    d, spec = data
    res, doc = _run(d, spec, tmp_path / "open", "d.csv", "--baseline", base, "--budget", "60")
    block = doc["summary"]["baseline"]
    assert res.code == 1 and block["verdict"] == "undecided" and block["counts"]["undecided"] > 0
    assert block["counts"]["fixed"] == 0 and block["counts"]["counted"] == 0
    assert "gate not established" in res.stdout and "<failure" in (tmp_path / "open" / "junit.xml").read_text()


def test_refit_baseline_against_a_replicate_run_is_refused(data, tmp_path) -> None:  # rep-1
    d, spec = data
    old = run_cli("pdtp", d / "d.csv", "-m", spec, "--allow-import", MODULE, "--out", tmp_path / "refit", "--jobs",
                  "1", "--engine", "refit", "--noise-floor", "0", "-q")
    assert old.code == 1
    before = snapshot(tmp_path)
    res = run_cli("pdtp", d / "d.csv", "-m", spec, "--allow-import", MODULE, "--out", tmp_path / "x", "--jobs", "1",
                  "--baseline", tmp_path / "refit")
    assert_refused(res, ["--baseline is a run of PDTP above the threshold (refit or exact engine), this run is a "
                         "replicate-engine run (decided violations): the two cannot be compared"], tmp_path, before)


def test_replicate_baseline_against_a_refit_run_is_refused(data, base, tmp_path) -> None:  # rep-2
    d, spec = data
    before = snapshot(tmp_path)
    res = run_cli("pdtp", d / "d.csv", "-m", spec, "--allow-import", MODULE, "--out", tmp_path / "x", "--jobs", "1",
                  "--engine", "refit", "--baseline", base)
    assert_refused(res, ["--baseline is a replicate-engine run (decided violations), this run is a run of PDTP "
                         "above the threshold"], tmp_path, before)


def test_baseline_with_unevaluated_records_is_refused(data, tmp_path) -> None:  # rep-3
    d, spec = data
    res, doc = _run(d, spec, tmp_path / "spent", "d.csv", "--budget", "60")
    assert doc["summary"]["replicates"]["budget_exhausted"] and doc["summary"]["evaluated"] < doc["summary"]["n"]
    before = snapshot(tmp_path)
    res = run_cli("pdtp", d / "d.csv", "-m", spec, "--allow-import", MODULE, "--out", tmp_path / "x", "--jobs", "1",
                  "--baseline", tmp_path / "spent")
    assert_refused(res, ["was left unevaluated by a spent --budget", "rerun it with a larger --budget or none"],
                   tmp_path, before)

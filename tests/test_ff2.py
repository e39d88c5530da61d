"""How a replicate-engine ``--fail-fast`` run ended, in every output (issue 27; docs/randomness.md 4, 6.4, 8).

Ground truth: :class:`mptool.inputs.known_answer.KnownAnswerClassifier` on :func:`known_frame` (8
memorised records, PDTP of the expected prediction about 4; 18 nulls). The data are put in the order
"6 nulls, the 8 memorised records, the other nulls" and audited with ``--order row``: the depth-first
screen takes 4 nulls (each estimated below, one look), so the stop comes from the audit, in the
batches of its first look, after ``--budget 100`` planned a cut (the budget flag used to be set then,
and the verdict line said "budget spent" after 80 of the 100 fits). Fits are counted exactly: every
choice of the engine depends only on the seed and the data.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli, write_spec

from mptool.inputs.known_answer import ESTIMATOR, MODULE, known_frame

#: The three runs: (extra flags, memorise) -> how each ended.
RUNS = {
    "stop": (("--budget", "100"), 6.0),  # the audit decides the memorised records: stop after 80 fits
    "budget": (("--budget", "40"), 6.0),  # the screen (20 fits) and 5 records' first look: budget spent
    "complete": (("--records", "0,1,2,3,4,5"), 0.0),  # 6 nulls, no memorising: no stop, every record evaluated
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """pdtp runs (``--fail-fast --order row --replicates 4:8 --format junit``) that end each way."""
    d = tmp_path_factory.mktemp("ff2")
    df, kind = known_frame(0)
    nulls, large = np.nonzero(kind == "null")[0], np.nonzero(kind == "large")[0]
    df.iloc[[*nulls[:6], *large, *nulls[6:]]].reset_index(drop=True).to_csv(d / "d.csv", index=False)
    out = {}
    for name, (extra, memorise) in RUNS.items():
        params = {"weight_feature": 1, "noise": 1.0, "memorise": memorise}
        spec = write_spec(d / f"{name}.yaml", ESTIMATOR, model={"params": params, "preprocess": "none"})
        res = run_cli("pdtp", d / "d.csv", "-m", spec, "--allow-import", MODULE, "--out", d / name, "--jobs", "1",
                      "--replicates", "4:8", "--fail-fast", "--order", "row", "--format", "junit", "-q", *extra)
        assert res.code == (0 if name == "complete" else 1), res.stderr  # a violation, undecided records: exit 1
        (d / name / "verdict.txt").write_text(res.stdout)
        out[name] = d / name
    return out


def _summary(run: Path) -> dict:
    return json.loads((run / "pdtp.json").read_text())["summary"]


def _case(run: Path) -> ET.Element:
    return ET.parse(run / "junit.xml").getroot().find("testsuite/testcase")


def test_stop_within_the_budget_says_stop_not_budget_spent(runs: dict[str, Path]) -> None:
    s = _summary(runs["stop"])
    rep = s["replicates"]
    assert s["verdict"] == "fail" and s["complete"] is False and s["stopped"]["reason"] == "fail-fast"
    assert rep["fits"] == 80 and rep["budget_fits"] == 100  # the screen 4 + 4 x 4, then 15 records x 4
    assert rep["budget_exhausted"] is False  # the stop, not the budget, ended the run
    assert rep["fail_fast_spending"]["ended"] == "fail-fast stop"
    assert rep["fail_fast_spending"]["stopped_by"] == "audit"
    line = (runs["stop"] / "verdict.txt").read_text()
    assert "budget spent" not in line
    assert "stopped by the audit at level 0.025" in line
    assert "ended by the --fail-fast stop after 80 of the --budget's 100 fits" in line
    case = _case(runs["stop"])
    assert case.find("failure") is not None
    said = case.find("system-out").text
    assert "run ended by the --fail-fast stop after 80 of the --budget's 100 fits" in said
    assert "(stopped by the audit at level 0.025; ended by the --fail-fast stop" in said  # the evidence line
    assert "budget spent" not in (runs["stop"] / "junit.xml").read_text()


def test_budget_spent_says_budget(runs: dict[str, Path]) -> None:
    s = _summary(runs["budget"])
    rep = s["replicates"]
    assert s["verdict"] == "undecided" and s["complete"] is True and "stopped" not in s
    assert rep["fits"] == 40 and rep["budget_exhausted"] is True
    assert rep["fail_fast_spending"]["ended"] == "budget spent" and rep["fail_fast_spending"]["stopped_by"] is None
    line = (runs["budget"] / "verdict.txt").read_text()
    assert line.startswith("DTP-1 not established")
    assert "ended when the --budget of 40 fits was spent, before every record was decided" in line
    assert "stopped by" not in line
    case = _case(runs["budget"])
    assert "run ended when the --budget of 40 fits was spent" in case.find("failure").get("message")
    assert case.get("status") is None  # how it ended is a note, not an override
    assert "run ended when the --budget of 40 fits was spent" in case.find("system-out").text


def test_complete_says_complete(runs: dict[str, Path]) -> None:
    s = _summary(runs["complete"])
    rep = s["replicates"]
    assert s["complete"] is True and "stopped" not in s and s["verdict"] == "pass" and s["decided_below"] == 6
    assert rep["budget_exhausted"] is False and rep["fail_fast_spending"]["ended"] == "complete"
    line = (runs["complete"] / "verdict.txt").read_text()
    assert "ended complete: no stop, every record evaluated" in line and "budget" not in line
    case = _case(runs["complete"])
    assert case.find("failure") is None
    assert "run ended complete: no stop, every record evaluated" in case.find("system-out").text


def _report(run: Path) -> str:
    res = run_cli("report", run, "--format", "md", "--out", "-")
    assert res.code == 0, res.stderr
    return res.stdout


def test_report_shows_fail_fast_spending_stop_and_undecided(runs: dict[str, Path]) -> None:
    """The Markdown summary (CI step summary) names the split of the error level, the stop and the ending."""
    md = _report(runs["stop"])
    s = _summary(runs["stop"])
    assert ("The verdict rests on: --fail-fast stopped at row 6 after 19 of 26 (stopped by the audit at level 0.025; "
            "ended by the --fail-fast stop after 80 of the --budget's 100 fits).") in md
    assert "| fail-fast: error level of the violations | violations at 0.025 for a depth-first screen of the 4 " in md
    assert "| fail-fast: error level of the below-threshold decisions | 0.05 |" in md
    assert "| fail-fast: what stopped the run | stopped by the audit at level 0.025 |" in md
    assert "| run ended | ended by the --fail-fast stop after 80 of the --budget's 100 fits |" in md
    assert "| records not evaluated (the --fail-fast stop) | 7 |" in md  # 26 requested, 19 reported
    assert f"| records undecided (not established; violation = undecided in pdtp.csv) | {s['undecided']} |" in md
    assert "| replicates per record | 4-8; 80 fits |" in md and "budget spent" not in md


def test_report_of_a_spent_budget_and_of_a_complete_run(runs: dict[str, Path]) -> None:
    md = _report(runs["budget"])
    assert "| replicates per record | 4-8; 40 fits, budget spent |" in md
    assert "| fail-fast: what stopped the run | nothing (no record decided above) |" in md
    assert "--fail-fast: ended when the --budget of 40 fits was spent, before every record was decided." in md
    md = _report(runs["complete"])
    assert "| run ended | ended complete: no stop, every record evaluated |" in md
    assert "The verdict rests on: 6 records chosen with --records of 26 in T; --fail-fast: ended complete" in md

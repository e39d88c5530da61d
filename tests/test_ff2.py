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
import pandas as pd
import pytest
from conftest import run_cli, write_spec
from test_bad_input import assert_refused

from mptool.api.diff import diff_runs, summary_line
from mptool.inputs.baseline import PreviousRun
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


# ----------------------------------------------------------------------- mptool diff of decisions


def _run_of(name: str, rows: list[tuple[str, float, str]], threshold: float = 1.0) -> PreviousRun:
    """A replicate run as ``mptool diff`` reads it: (key, estimate, violation) per record, rows 0, 1, ..."""
    table = pd.DataFrame({"key": [k for k, _, _ in rows], "row": list(range(len(rows))),
                          "pdtp": [p for _, p, _ in rows], "fingerprint": [k for k, _, _ in rows],
                          "violation": [v for _, _, v in rows]})
    summary = {"threshold": threshold, "gate": "binned", "engine": "replicates",
               "replicates": {"error_control": "bh", "confidence": 0.95}}
    return PreviousRun(Path(name), summary, table, {"id": None})


def test_diff_of_decisions_counts_changes_and_ignores_estimate_moves() -> None:
    """Every decision change is counted and listed; an estimate that moves without its decision is no regression.

    Today's rule on estimates would call r1 "worse" (above in both, +1.5 nats) and r5 "new" (its estimate
    crossed the threshold while undecided); by decisions neither is.
    """
    a = _run_of("A", [("r0", 4.0, "True"), ("r1", 2.0, "True"), ("r2", 0.1, "False"), ("r3", 0.2, "undecided"),
                      ("r4", 3.0, "True"), ("r5", 0.9, "undecided"), ("r6", 2.5, "True")])
    b = _run_of("B", [("r0", 0.1, "False"), ("r1", 3.5, "True"), ("r2", 0.1, "undecided"), ("r3", 2.9, "True"),
                      ("r4", 1.4, "undecided"), ("r5", 1.6, "undecided"), ("r7", 3.0, "True")])
    out = diff_runs(a, b, 1.0, 0.05)
    s, c = out.summary, out.summary["counts"]
    assert s["compares"] == "decisions" and s["verdict"] == "worse" and out.worse
    assert {k: c[k] for k in ("new", "worse", "unchanged", "fixed", "absent", "only_in_a", "only_in_b")} == {
        "new": 2, "worse": 1, "unchanged": 1, "fixed": 1, "absent": 1, "only_in_a": 1, "only_in_b": 1}
    assert c["transitions"] == {"above -> below": 1, "above -> undecided": 1, "absent -> above": 1,
                                "below -> undecided": 1, "undecided -> above": 1}
    assert c["changed"] == 5 and c["estimate_changed"] == 5  # r0, r1, r3, r4, r5 moved by more than 0.05
    assert [r["key"] for r in out.records["new"]] == ["r3", "r7"]
    assert [(r["key"], r["note"]) for r in out.records["worse"]] == [("r2", "below -> undecided")]  # could not check
    assert [r["key"] for r in out.records["fixed"]] == ["r0"] and [r["key"] for r in out.records["absent"]] == ["r6"]
    assert [(r["key"], r["note"]) for r in out.records["changed"]] == [
        ("r7", "absent -> above"), ("r3", "undecided -> above"), ("r4", "above -> undecided"),
        ("r0", "above -> below"), ("r2", "below -> undecided")]  # largest estimate first, then row
    assert s["a"] == {"n": 7, "max": 4.0, "mean": pytest.approx(12.7 / 7, rel=1e-12), "violations": 4,
                      "decided_below": 1, "undecided": 2}  # rel: a float mean
    line = summary_line(out)
    assert line.startswith("mptool diff (decisions beyond training randomness): WORSE: decided above 4 -> 3 "
                           "(2 new, 1 fixed, 1 unchanged), 1 no longer decided below (undecided now), "
                           "decided below 1 -> 1, undecided 2 -> 3; 5 decision(s) "
                           "changed (above -> below 1, above -> undecided 1, absent -> above 1, below -> undecided 1, "
                           "undecided -> above 1)")
    assert "5 estimate(s) moved by more than 0.05 (not a regression on their own" in line


def test_diff_of_decisions_with_only_estimates_moved_is_not_worse() -> None:
    a = _run_of("A", [("r0", 2.0, "True"), ("r1", 0.5, "undecided"), ("r2", 0.1, "False")])
    b = _run_of("B", [("r0", 4.0, "True"), ("r1", 1.8, "undecided"), ("r2", 0.3, "False")])
    out = diff_runs(a, b, 1.0, 0.05)
    assert not out.worse and out.summary["verdict"] == "not worse"
    assert out.summary["counts"]["changed"] == 0 and out.summary["counts"]["estimate_changed"] == 3
    assert out.records["changed"] == [] and out.records["worse"] == []


@pytest.fixture(scope="module")
def decided(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Replicate runs (ids r0..r25, ``--replicates 4:8``): the data, the data with r0 made weight 0 (its
    influence gone: decided below) and r25 weight 1 (memorised: decided above), and the data at another
    error control."""
    d = tmp_path_factory.mktemp("ff2-diff")
    spec = write_spec(d / "s.yaml", ESTIMATOR, data={"id": "rid", "drop": []},
                      model={"params": {"weight_feature": 1, "noise": 1.0}, "preprocess": "none"})
    frame = known_frame(0)[0]
    frame.insert(0, "rid", [f"r{i}" for i in range(len(frame))])
    frame.to_csv(d / "d.csv", index=False)
    frame.loc[0, "w"], frame.loc[len(frame) - 1, "w"] = 0.0, 1.0
    frame.to_csv(d / "changed.csv", index=False)
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MPTOOL_FINGERPRINT_KEY", "ff2-diff")
        for name, csv, extra in (("a", "d.csv", ()), ("b", "changed.csv", ()),
                                 ("holm", "d.csv", ("--error-control", "holm"))):
            res = run_cli("pdtp", d / csv, "-m", spec, "--allow-import", MODULE, "--out", d / name, "--jobs", "1",
                          "--replicates", "4:8", "-q", *extra)
            assert res.code == 1, res.stderr
            out[name] = d / name
    return out


def test_cli_diff_of_two_replicate_runs_shows_decision_changes(decided: dict[str, Path],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPTOOL_FINGERPRINT_KEY", "ff2-diff")  # diff reads runs only when they verify
    def said(path: Path) -> dict[str, str]:
        t = pd.read_csv(path / "pdtp.csv", dtype={"id": str, "violation": str})
        return dict(zip(t["id"], t["violation"], strict=True))

    a, b = said(decided["a"]), said(decided["b"])
    assert a["r0"] == "True" and b["r0"] == "False" and a["r25"] != "True" and b["r25"] == "True"
    moved = sorted(k for k in a if a[k] != b[k])
    res = run_cli("diff", decided["a"], decided["b"])
    assert res.code == 1, res.stderr  # r25 newly decided above
    out = res.stdout
    assert "new violations (decided above now, not decided above in RUN_A) (1):" in out
    assert "fixed (decided below now, decided above in RUN_A) (1):" in out
    assert f"decision changed (RUN_A -> RUN_B) ({len(moved)}):" in out
    assert "  row 25  id r25  PDTP " in out and f"{DECISION[a['r25']]} -> above" in out
    assert "above -> below" in out and "changed by more than" not in out and "worse (" not in out
    line = out.strip().splitlines()[-1]
    assert line.startswith("mptool diff (decisions beyond training randomness): WORSE: ")
    assert f"{len(moved)} decision(s) changed (" in line
    back = run_cli("diff", decided["b"], decided["a"], "-q")  # r0 decided above again: new; r25 fixed
    assert back.code == 1 and back.stdout.count("\n") == 1
    same = run_cli("diff", decided["a"], decided["a"], "-q")
    assert same.code == 0 and "not worse: decided above" in same.stdout
    assert "0 decision(s) changed (none)" in same.stdout


DECISION = {"True": "above", "False": "below", "undecided": "undecided"}


def test_cli_diff_of_decisions_refuses_another_threshold_or_rule(decided: dict[str, Path],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPTOOL_FINGERPRINT_KEY", "ff2-diff")
    res = run_cli("diff", decided["a"], decided["b"], "--threshold", "0.5")
    assert_refused(res, ["--threshold 0.5: RUN_A and RUN_B are replicate-engine runs whose decisions were made "
                         "at the threshold 1", "cannot take another threshold"], stdout_empty=True)  # ff2-1
    res = run_cli("diff", decided["holm"], decided["b"])
    assert_refused(res, ["RUN_A decided its records under another rule (error_control holm then, bh now)"],
                   stdout_empty=True)  # ff2-2


# ------------------------------------------------------------- the report on attack's PDTP column


def test_report_says_attack_pdtp_is_not_decided_for_randomized_training(tmp_path: Path) -> None:
    """attack.json's ``pdtp_basis.decided`` false (randomized training, refit engine): the report says that
    pdtp_mean decides no record and points to mptool pdtp; a deterministic training or an exact engine: nothing."""
    from mptool.outputs.report.context import attack_pdtp_note
    from mptool.outputs.report.loader import ReportInputs

    known_frame(0)[0].to_csv(tmp_path / "d.csv", index=False)
    spec = write_spec(tmp_path / "s.yaml", ESTIMATOR, model={"params": {"weight_feature": 1}, "preprocess": "none"})
    res = run_cli("attack", tmp_path / "d.csv", "-m", spec, "--allow-import", MODULE, "--out", tmp_path / "random",
                  "--attacks", "distance", "--candidates", "26", "--iterations", "2", "--targets", "6",
                  "--shadows", "2", "--pdtp-iterations", "1", "--jobs", "1", "-q")
    assert res.code == 0, res.stderr
    doc = json.loads((tmp_path / "random" / "attack.json").read_text())
    assert doc["summary"]["pdtp_basis"]["decided"] is False
    md = _report(tmp_path / "random")
    assert ("pdtp\\_mean is a single-refit estimate per iteration (the training depends on seed and row order): it "
            "counts the training randomness as the record's influence, and no target record is decided") in md
    assert "mptool pdtp (replicate engine) decides which records violate DTP-1 beyond the randomness" in md
    html = run_cli("report", tmp_path / "random", "--out", tmp_path / "random" / "r.html")
    assert html.code == 0, html.stderr
    assert "pdtp_mean is a single-refit estimate per iteration" in (tmp_path / "random" / "r.html").read_text()
    for summary in ({"pdtp_basis": {"decided": True, "randomized": False}}, {}):  # deterministic; exact engine
        assert attack_pdtp_note(ReportInputs(tmp_path, attack_doc={"summary": summary})) is None


def test_report_mitigation_table_names_decided_counts() -> None:
    """mitigate.csv of a randomized training (decided_below, undecided columns): the report's settings table shows
    them and heads above_target "records decided above"; an exact run's table keeps its columns and headings."""
    from mptool.outputs.report.mitigation import mitigation_block

    rows = {"setting": ["baseline", "round=1"], "family": ["baseline", "release"], "max_pdtp": [2.5, 0.9],
            "accuracy": [0.9, 0.8], "passes": [False, False], "above_target": [3, 0]}
    decided = pd.DataFrame({**rows, "decided_below": [10, 12], "undecided": [7, 8]})
    block = mitigation_block(decided, {"target": 1.0})
    cols = block["table"]["columns"]
    assert cols[cols.index("records decided above"):][:3] == ["records decided above", "decided below", "undecided"]
    assert block["table"]["rows"][1][cols.index("undecided")] == "8"
    exact = mitigation_block(pd.DataFrame(rows), {"target": 1.0})["table"]["columns"]
    assert "records above" in exact and "undecided" not in exact and "decided below" not in exact


def test_junit_files_with_run_notes_follow_the_schema(runs: dict[str, Path]) -> None:
    """The ``run ended`` note sits in the test case's one ``<system-out>`` (with the evidence when there is some)."""
    xmlschema = pytest.importorskip("xmlschema")
    schema = xmlschema.XMLSchema(Path(__file__).with_name("data") / "junit.xsd")
    for run in runs.values():
        schema.validate(run / "junit.xml")
        assert len(_case(run).findall("system-out")) == 1


def test_diff_of_decisions_a_record_no_longer_decided_below_is_worse() -> None:
    """Below in A, undecided in B (a spent budget, fewer replicates): B cannot show it below the threshold any
    more, so the diff is WORSE (exit 1), as the baseline gate fails undecided records; a new record left
    undecided too. A record undecided in both, or above in A and undecided now, is not worse by itself."""
    a = _run_of("A", [("r0", 0.2, "False"), ("r1", 0.5, "undecided"), ("r2", 2.0, "True")])
    b = _run_of("B", [("r0", 0.6, "undecided"), ("r1", 0.7, "undecided"), ("r2", 1.5, "undecided")])
    out = diff_runs(a, b, 1.0, 0.05)
    assert out.worse and out.summary["counts"]["worse"] == 1 and out.summary["counts"]["new"] == 0
    assert [(r["key"], r["note"]) for r in out.records["worse"]] == [("r0", "below -> undecided")]
    fresh = _run_of("B", [("r0", 0.2, "False"), ("r1", 0.5, "undecided"), ("r2", 2.0, "True"),
                          ("r9", 0.4, "undecided")])
    assert diff_runs(a, fresh, 1.0, 0.05).summary["counts"]["worse"] == 1  # absent -> undecided
    same = _run_of("B", [("r0", 0.2, "False"), ("r1", 0.9, "undecided"), ("r2", 1.1, "undecided")])
    assert not diff_runs(a, same, 1.0, 0.05).worse

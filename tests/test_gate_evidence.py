"""Issue 26 (gate-a): release policies cannot open the gate; every verdict names its evidence; the report
recomputes its verdict. Cases gate-a-N of docs/bad-input.md ("Issue 26: release policies and evidence").

- a temperature (or top-k of all classes but one) is undone before PDTP: the same records, the same max,
  the same exit code as without it, on both scales, in pdtp, reduce-dtp and mitigate; a policy that
  discards information is measured as released and named in the verdict line, pdtp.json and junit.xml;
- a pass from a sample, from --records, or through waivers says so in junit.xml (status, system-out,
  properties) and in the gate line; mitigate's recommendation names its evidence and both scales, is
  confirmed on all of T where an exact engine makes that cheap, and is never made without rows outside T
  or within MAJORITY_MARGIN of the majority-class accuracy;
- report refuses a pdtp.json whose verdict, max or gate verdict disagrees with pdtp.csv; the history says
  pass-with-waivers; Markdown cells never become autolinks.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xmlschema
from conftest import mixed_frame, run_cli, write_spec
from test_bad_input import assert_refused

import mptool
from mptool.api.mitigate import MAJORITY_MARGIN, judge, scales_clause, sentence
from mptool.outputs.report.markdown import cell
from mptool.privacy.release import gate_policy, is_invertible, measured, release

XSD = Path(__file__).with_name("data") / "junit.xsd"
VIOLATING = {"estimator": "logistic_regression", "params": {"C": 100.0}}  # max PDTP 3.89 on mixed_frame(60, 3)


def learnable(n: int = 60, seed: int = 3) -> pd.DataFrame:
    """mixed_frame with a label the features predict well (a model beats the majority class)."""
    df = mixed_frame(n, seed=seed)
    noise = np.random.default_rng(seed + 1).normal(scale=0.4, size=n)
    df["label"] = np.where(2.0 * df["x1"] + (df["color"] == "red") + noise > 0.5, "yes", "no")
    return df


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("gate")
    mixed_frame(60, seed=3).to_csv(d / "d.csv", index=False)
    return d


def spec_with(d: Path, name: str, release_policy: dict | None, **data_keys) -> Path:
    output = {"bin_size": 0.01, **({"release": release_policy} if release_policy else {})}
    return write_spec(d / f"{name}.yaml", VIOLATING["estimator"], model={"params": VIOLATING["params"]},
                      output=output, **({"data": data_keys} if data_keys else {}))


def pdtp(d: Path, spec: Path, out: str, *extra: str):
    return run_cli("pdtp", d / "d.csv", "--model", spec, "--out", d / out, "--jobs", "1", "--force", "-q", *extra)


def summary(d: Path, out: str) -> dict:
    return json.loads((d / out / "pdtp.json").read_text())["summary"]


def junit_case(path: Path) -> tuple[ET.Element, dict[str, str]]:
    xmlschema.XMLSchema(XSD).validate(path)
    root = ET.parse(path).getroot()
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    return next(root.iter("testcase")), props


# ------------------------------------------------------------------------------- release policies (item 1)


@pytest.mark.parametrize("gate", ["binned", "raw"])
def test_gate_a_1_a_temperature_does_not_open_the_gate(data: Path, gate: str) -> None:
    """gate-a-1: temperature 50 on a violating model: still exit 1, the same max PDTP and the same records.

    Exact equality (no tolerance): the temperature is undone before PDTP, so both runs compare the
    same probability arrays."""
    plain = spec_with(data, "plain", None)
    hot = spec_with(data, "hot", {"temperature": 50})
    a = pdtp(data, plain, f"plain-{gate}", "--gate", gate, "--format", "junit")
    b = pdtp(data, hot, f"hot-{gate}", "--gate", gate, "--format", "junit")
    assert a.code == b.code == 1, b.stdout + b.stderr
    sa, sb = summary(data, f"plain-{gate}"), summary(data, f"hot-{gate}")
    assert sb["max"] == sa["max"] > 1 and sb["violations"] == sa["violations"] and sb["verdict"] == "fail"
    ta, tb = (pd.read_csv(data / f"{o}-{gate}" / "pdtp.csv") for o in ("plain", "hot"))
    np.testing.assert_array_equal(ta["pdtp_raw"], tb["pdtp_raw"])
    assert "DTP-1 VIOLATED" in b.stdout and "release policy temperature=50.0 is invertible" in b.stdout
    assert sb["release"] == {"temperature": 50.0} and sb["release_measured"] == {}
    assert "invertible" in sb["release_note"] and sb["dtp"]["upper_bound"]["kind"] != "none"
    case, props = junit_case(data / f"hot-{gate}" / "junit.xml")
    assert case.get("status") == "failed-with-overrides" and "temperature=50.0" in props["mptool.evidence.1"]
    assert "temperature=50.0 is invertible" in case.find("system-out").text


def test_gate_a_2_reduce_dtp_is_unaffected_by_a_temperature(data: Path) -> None:
    """gate-a-2: reduce-dtp with temperature 50 makes the same removals as without ("0 removals" before)."""
    plain = mptool.reduce_dtp(data / "d.csv", spec_with(data, "plain", None), max_removals=2, jobs=1)
    hot = mptool.reduce_dtp(data / "d.csv", spec_with(data, "hot", {"temperature": 50}), max_removals=2, jobs=1)
    assert hot.summary["initial_max"] == plain.summary["initial_max"] > 1
    assert hot.summary["best_prefix"] == plain.summary["best_prefix"] and hot.summary["best_step"] > 0
    assert hot.summary["release_measured"] == {} and "invertible" in hot.summary["release_note"]
    res = run_cli("reduce-dtp", data / "d.csv", "--model", data / "hot.yaml", "--out", data / "red", "--jobs", "1",
                  "--max-removals", "1", "--force", "-q", "--format", "junit")
    assert "temperature=50.0 is invertible" in res.stdout
    case, _ = junit_case(data / "red" / "junit.xml")
    assert "temperature=50.0 is invertible" in case.find("system-out").text


def test_gate_a_3_what_the_gate_measures_per_policy() -> None:
    """gate-a-3: temperature and top-k of all classes but one are undone; top-k below, rounding, label-only stay."""
    assert gate_policy({"temperature": 5.0}, 2) == {} and gate_policy({"top_k": 1}, 2) == {}
    assert gate_policy({"top_k": 2}, 3) == {} and gate_policy({"top_k": 1}, 3) == {"top_k": 1}
    assert gate_policy({"temperature": 2.0, "round": 2}, 3) == {"round": 2}
    assert gate_policy({"label_only": True}, 2) == {"label_only": True}
    assert is_invertible({"top_k": 1}, 2) and not is_invertible({"top_k": 1}, 3)
    assert not is_invertible(None, 2) and not is_invertible({"round": 2}, 2)
    p = np.random.default_rng(0).dirichlet(np.ones(3), size=50)
    # top-2 of 3 classes: the third is 1 minus the released two (exactly, up to float rounding: 1e-12)
    top2 = release(p, top_k=2)
    rebuilt = np.where(top2 == 0, 1 - top2.sum(axis=1, keepdims=True), top2)
    np.testing.assert_allclose(rebuilt, p, atol=1e-12)
    np.testing.assert_array_equal(measured(p, {"temperature": 7.0, "top_k": 2}), p)
    np.testing.assert_array_equal(measured(p, {"temperature": 7.0, "top_k": 1}), release(p, top_k=1))


def test_gate_a_4_a_lossy_policy_is_measured_as_released_and_named(data: Path) -> None:
    """gate-a-4: round=1 is measured as released; the verdict line, pdtp.json and junit.xml say so."""
    res = pdtp(data, spec_with(data, "round", {"round": 1}), "round", "--format", "junit")
    assert res.code == 1
    assert "release policy round=1: measured as released, not the full probability vector" in res.stdout
    s = summary(data, "round")
    assert s["release_measured"] == {"round": 1} and s["dtp"]["upper_bound"]["kind"] == "none"
    _, props = junit_case(data / "round" / "junit.xml")
    assert props["mptool.evidence.1"].startswith("release policy round=1: measured as released")


def test_gate_a_5_check_names_the_policy(data: Path) -> None:
    """gate-a-5: check says what the gate measures of output.release."""
    hot = run_cli("check", data / "d.csv", "--model", spec_with(data, "hot", {"temperature": 50}), "--jobs", "1")
    assert hot.code == 0 and "release policy: release policy temperature=50.0 is invertible" in hot.stdout
    assert "DTP upper bound: none" not in hot.stdout  # the bounds hold: the full vector is what is measured


# ------------------------------------------------------------------------------- evidence (item 2)


def test_gate_a_6_a_sampled_or_chosen_pass_says_so_in_junit(data: Path) -> None:
    """gate-a-6: --sample and --records passes carry their evidence in junit.xml (was a plain pass)."""
    spec = spec_with(data, "plain", None)
    assert pdtp(data, spec, "sampled", "--sample", "10", "--threshold", "100", "--format", "junit").code == 0
    case, props = junit_case(data / "sampled" / "junit.xml")
    assert case.get("status") == "passed-with-overrides" and case.find("failure") is None
    assert props["mptool.evidence.1"].startswith("a seeded sample of 10 of 60 records (with 95% confidence at most")
    rows = ",".join(str(r) for r in pd.read_csv(data / "sampled" / "pdtp.csv")["row"][:3])
    assert pdtp(data, spec, "chosen", "--records", rows, "--threshold", "100", "--format", "junit").code == 0
    _, props = junit_case(data / "chosen" / "junit.xml")
    assert props["mptool.evidence.1"] == "3 records chosen with --records of 60 in T"


def test_gate_a_7_a_pass_through_waivers_names_them(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gate-a-7: all violators waived: exit 0, but the gate line, junit.xml and the report say pass-with-waivers."""
    monkeypatch.setenv("MPTOOL_FINGERPRINT_KEY", "gate-a-7")  # waivers match records by keyed fingerprints (gate-b)
    spec = spec_with(data, "plain", None)
    assert pdtp(data, spec, "nightly/1-plain").code == 1
    bad = pd.read_csv(data / "nightly/1-plain" / "pdtp.csv", dtype={"fingerprint": str}).query("pdtp > 1")
    lines = ["waivers:"]
    for fp in bad["fingerprint"]:
        lines += [f"  - record: '{fp}'", "    reason: accepted", "    who: alice", "    expires: 2026-12-31"]
    (data / "w.yaml").write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("MPTOOL_TODAY", "2026-11-27")
    res = pdtp(data, spec, "nightly/2-waived", "--waivers", data / "w.yaml", "--format", "junit")
    assert res.code == 0, res.stdout + res.stderr
    assert f"gate passed (pass-with-waivers): {len(bad)} record(s) above the threshold excused" in res.stdout
    case, props = junit_case(data / "nightly/2-waived" / "junit.xml")
    assert case.get("status") == "passed-with-overrides"
    assert f"{len(bad)} record(s) waived (--waivers)" in props.values()
    assert summary(data, "nightly/2-waived")["baseline"]["verdict_label"] == "pass-with-waivers"
    rep = run_cli("report", data / "nightly/2-waived", "--format", "md", "--out", "-")
    assert rep.code == 0 and "the gate passed only through excused records (pass-with-waivers)" in rep.stdout
    hist = run_cli("report", "--history", data / "nightly", "--format", "md", "--out", "-")
    assert hist.code == 0, hist.stderr
    verdicts = [ln.split("|")[-2].strip() for ln in hist.stdout.splitlines() if ln.startswith("| 1-plain")
                or ln.startswith("| 2-waived")]
    assert verdicts == ["fail", "pass-with-waivers"]  # the history said "fail" for the waived run


def mitigate(d: Path, spec: Path, out: str, *extra: str):
    defences = () if "--defences" in extra else ("--defences", "release,regularise")
    res = run_cli("mitigate", d / "m.csv", "--model", spec, "--out", d / out, "--jobs", "1", "--force",
                  *defences, *extra)
    doc = json.loads((d / out / "mitigate.json").read_text()) if (d / out / "mitigate.json").exists() else {}
    return res, doc


@pytest.fixture(scope="module")
def learn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("mit")
    learnable(160).to_csv(d / "m.csv", index=False)
    return d


def test_gate_a_8_a_sampled_recommendation_names_the_sample_and_its_bound(learn: Path) -> None:
    """gate-a-8: mitigate --sample 5 on a decision tree (refit engine): the sentence names the sample, the
    Clopper-Pearson bound and "not established"; the spec file's command audits every record."""
    spec = write_spec(learn / "dt.yaml", "decision_tree", data={"train_size": 100})
    res, doc = mitigate(learn, spec, "dt", "--sample", "5", "--defences", "regularise", "--backend", "threading")
    assert res.code == 1, res.stderr  # written, but not established for all of T: never exit 0
    assert doc["recommended"] is not None
    said = doc["sentence"]
    assert "on a seeded sample of 5 of 100 records only" in said and "DTP-1 not established" in said
    assert "at most 45.1% of T is above the target" in said  # 1 - 0.05^(1/5) = 0.451
    bound = pytest.approx(1 - 0.05 ** (1 / 5), rel=1e-9)  # Clopper-Pearson with 0 of 5 (scipy's beta.ppf)
    assert doc["evidence"] == {"basis": "sample", "k": 5, "n": 100, "fraction_upper_95": bound}
    rec = doc["recommended"]
    assert "--sample" not in rec["command"] and "--sample 5" in rec["sample_command"]
    head = (learn / "dt" / "recommended-spec.yaml").read_text()
    assert "a seeded sample, not a full audit" in head and said in res.stdout


def test_gate_a_9_an_exact_engine_confirms_the_sampled_choice_on_all_of_t(learn: Path) -> None:
    """gate-a-9: with an exact engine the sampled choice is audited on all of T before it is recommended."""
    spec = write_spec(learn / "lr.yaml", "logistic_regression", data={"train_size": 100},
                      model={"params": {"C": 100.0}})
    res, doc = mitigate(learn, spec, "lr", "--sample", "15")
    assert res.code == 0 and doc["evidence"]["basis"] == "confirmed", res.stderr
    assert "confirmed by a full audit of all 100 records of T" in doc["sentence"]
    again = run_cli("pdtp", learn / "m.csv", "--model", learn / "lr" / "recommended-spec.yaml", "--out",
                    learn / "re", "--jobs", "1", "--force", "-q")
    audited = json.loads((learn / "re" / "pdtp.json").read_text())["summary"]
    assert again.code == 0 and audited["max"] == doc["recommended"]["max_pdtp"] and audited["n"] == 100


def test_gate_a_10_the_decision_shows_both_scales() -> None:
    """gate-a-10: binned max 0.20 passes, raw max 2.00 fails with 3 records: the sentence says so."""
    row = pd.Series({"max_pdtp": 0.2, "max_pdtp_binned": 0.2, "max_pdtp_raw": 2.0, "above_target_raw": 3,
                     "above_target_binned": 0})
    assert scales_clause(row, 1.0, "binned") == (
        "max PDTP 0.2000 (binned, the gate) and 2.0000 (raw; 3 record(s) above the target on the raw scale: "
        "mptool pdtp --gate raw would fail)")


def test_gate_a_11_no_recommendation_without_rows_outside_t(learn: Path) -> None:
    """gate-a-11: train_size null: nothing recommended (exit 1), never "accuracy nan on 0 rows outside T"."""
    spec = write_spec(learn / "null.yaml", "logistic_regression", model={"params": {"C": 100.0}})
    res, doc = mitigate(learn, spec, "null")
    assert res.code == 1 and doc["recommended"] is None and doc["holdout_rows"] == 0
    assert doc["sentence"].startswith("No recommendation: utility cannot be judged")
    assert not (learn / "null" / "recommended-spec.yaml").exists() and "no rows outside T" in res.stderr
    assert "nan on 0 rows" not in res.stdout


def test_gate_a_12_no_recommendation_within_the_margin_of_the_majority_class() -> None:
    """gate-a-12 (issue 30): accuracy 0.9395 where the majority class scores 0.9398 is not recommended."""
    table = pd.DataFrame({
        "setting": ["baseline", "alpha=100", "alpha=3"], "family": ["baseline", "regularise", "regularise"],
        "max_pdtp": [2.0, 0.5, 0.9], "accuracy": [0.95, 0.9395, 0.9398 + MAJORITY_MARGIN + 0.001],
        "log_loss": [0.2, 0.3, 0.25], "passes": [False, True, True], "recommendable": [True, True, True],
        "why_not": ["", "", ""], "n_audited": [100, 100, 100], "above_target": [3, 0, 0], "bin_edge_only": [0, 0, 0],
    })
    judged = judge(table, 0.9398, 500)
    assert judged["recommendable"].tolist() == [True, False, True]
    assert judged.loc[1, "why_not"] == "accuracy 0.9395 within 0.01 of always predicting the majority class (0.9398)"
    only_constant = judge(table.iloc[:2], 0.9398, 500)
    said = sentence(only_constant, None, 1.0, 500)
    assert said.startswith("No recommendable setting") and "majority class" in said


# ------------------------------------------------------------------------------- report (item 3)


@pytest.mark.parametrize("edit", ["verdict", "max", "gate"])
def test_gate_a_13_report_refuses_an_edited_verdict(data: Path, edit: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """gate-a-13: pdtp.json edited to pass (summary.verdict, summary.max, summary.baseline.verdict): exit 2."""
    out = data / f"edit-{edit}"
    extra = ("--waivers", data / "empty.yaml") if edit == "gate" else ()
    monkeypatch.setenv("MPTOOL_FINGERPRINT_KEY", "gate-a-13")  # waivers need a key or data.id (gate-b)
    (data / "empty.yaml").write_text("waivers: []\n")
    assert pdtp(data, spec_with(data, "plain", None), out.name, *extra).code == 1
    path = out / "pdtp.json"
    doc = json.loads(path.read_text())
    if edit == "verdict":
        doc["summary"].update(verdict="pass", violations=0)
    elif edit == "max":
        doc["summary"]["max"] = 0.5
    else:
        doc["summary"]["baseline"]["verdict"] = "pass"
    path.write_text(json.dumps(doc))
    res = run_cli("report", out, "--format", "md", "--out", "-")
    assert_refused(res, ["disagrees with", "pdtp.csv", "rerun mptool pdtp"])


def test_gate_a_14_a_url_label_is_never_a_link() -> None:
    """gate-a-14: a bare URL, www. name or e-mail address in a cell is escaped where GitHub would autolink it."""
    assert cell("https://evil.example/x") == "https\\://evil.example/x"
    assert cell("see www.evil.example") == "see www\\.evil.example"
    assert cell("bob@evil.example") == "bob\uff20evil.example"  # fullwidth at sign: GitHub links through escapes
    assert cell("mailto:x") == "mailto\\:x" and cell("ratio: 2") == "ratio: 2"


def test_gate_a_14_report_md_of_url_labels(tmp_path: Path) -> None:
    """gate-a-14: report.md of a run whose labels are URLs holds no bare URL; since label-3 it holds no label at
    all, even from a pdtp.csv written with --show-values (the escaping itself: the test above)."""
    df = mixed_frame(40, seed=3)
    df["label"] = df["label"].map({"yes": "https://yes.example", "no": "www.no.example"})
    df.to_csv(tmp_path / "u.csv", index=False)
    spec = write_spec(tmp_path / "u.yaml", "gaussian_nb")
    assert run_cli("pdtp", tmp_path / "u.csv", "--model", spec, "--out", tmp_path / "u", "-q",
                   "--jobs", "1", "--show-values").code in (0, 1)
    assert "https://yes.example" in (tmp_path / "u" / "pdtp.csv").read_text()
    rep = run_cli("report", tmp_path / "u", "--format", "md", "--out", "-")
    assert rep.code == 0 and "yes.example" not in rep.stdout and "no.example" not in rep.stdout


def test_gate_a_15_attack_measures_the_untempered_model(data: Path) -> None:
    """gate-a-15: attack under a temperature attacks what the attacker reconstructs: the same per-target
    results as without it (same seeds), and the run names the policy (stdout, attack.json, junit.xml)."""
    args = ("--jobs", "1", "--attacks", "threshold", "--candidates", "40", "--iterations", "1", "--targets", "4",
            "--shadows", "2", "--pdtp-iterations", "0", "--max-auc", "1", "--format", "junit", "--force", "-q")
    for name, policy in (("plain", None), ("hot", {"temperature": 50})):
        res = run_cli("attack", data / "d.csv", "--model", spec_with(data, name, policy), "--out",
                      data / f"att-{name}", *args)
        assert res.code == 0, res.stderr
    assert "temperature=50.0 is invertible" in res.stdout
    pd.testing.assert_frame_equal(pd.read_csv(data / "att-plain" / "attack.csv"),
                                  pd.read_csv(data / "att-hot" / "attack.csv"))
    said = json.loads((data / "att-hot" / "attack.json").read_text())["summary"]
    assert said["release_measured"] == {} and "invertible" in said["release_note"]
    _, props = junit_case(data / "att-hot" / "junit.xml")
    assert "temperature=50.0" in props["mptool.evidence.1"]

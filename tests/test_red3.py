"""Red-team pass over the replicate engine in the CI-gate use (red3; docs/bad-input.md section red3).

Each test is one finding: it failed before its fix. Known-answer data (26 rows with an id column,
mptool.inputs.known_answer), in-process runs.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
import yaml
from conftest import run_cli, write_spec
from test_bad_input import snapshot

from mptool.inputs.known_answer import MODULE, known_frame, known_spec

KEY = "red3-key"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPTOOL_FINGERPRINT_KEY", KEY)  # results signed, records matched by keyed fingerprint


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The known-answer data with an id column (d.csv) and its spec (s.yaml: noise 1, weight column w)."""
    d, spec = tmp_path_factory.mktemp("red3"), known_spec()
    spec["data"]["id"] = "rid"
    (d / "s.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    frame = known_frame(0)[0]
    frame.insert(0, "rid", [f"r{i}" for i in range(len(frame))])
    frame.to_csv(d / "d.csv", index=False)
    return d, d / "s.yaml"


def _pdtp(d: Path, spec: Path, out: Path, *extra: str):
    return run_cli("pdtp", d / "d.csv", "-m", spec, "--allow-import", MODULE, "--out", out, "--jobs", "1",
                   "--force", "--quiet", *extra)


# ---------------------------------------------- red3-1: --sample with decided violations and undecided records


def test_sample_with_violations_and_undecided_records_says_no_bound(data, tmp_path: Path) -> None:
    """--sample on the replicate engine, some records decided above and some undecided: pdtp.json has no
    Clopper-Pearson bound (null), and the verdict line formatted it as a number: exit 3 after the result files
    were written, no verdict line. Now exit 1 with the verdict line saying there is no bound."""
    d, spec = data
    res = _pdtp(d, spec, tmp_path / "o", "--replicates", "4:4", "--sample", "12", "--format", "junit")
    summary = json.loads((tmp_path / "o" / "pdtp.json").read_text())["summary"]
    assert summary["violations"] > 0 and summary["undecided"] > 0  # the case: VIOLATED with undecided records
    assert summary["sample"]["fraction_upper_95"] is None
    assert res.code == 1, res.stderr
    assert "internal error" not in res.stderr
    line = res.stdout.strip().splitlines()[-1]
    assert line.startswith("DTP-1 VIOLATED: ")
    assert line.endswith("; sample of 12 of 26 records (no bound while records are undecided)")
    assert "a seeded sample of 12 of 26 records (no bound)" in (tmp_path / "o" / "junit.xml").read_text()


# ---------------------------------------------- red3-2: MPTOOL_TODAY keeps expired waivers in force, unnamed


def test_injected_date_that_keeps_waivers_in_force_is_named(data, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """MPTOOL_TODAY set before the system date kept waivers that had expired by the system date in force: the
    gate passed (exit 0) and only pdtp.json's ``waivers.today`` showed the date, not that it was injected. Now
    the gate line, the JUnit evidence and pdtp.json name MPTOOL_TODAY and the system date."""
    d, spec = data
    base = _pdtp(d, spec, tmp_path / "plain", "--replicates", "4:8")
    assert base.code == 1
    table = (tmp_path / "plain" / "pdtp.csv").read_text().splitlines()
    head = table[0].split(",")
    above = [r.split(",")[head.index("id")] for r in table[1:] if r.split(",")[head.index("violation")] == "True"]
    system = dt.date.today()
    injected, expired = system - dt.timedelta(days=200), system - dt.timedelta(days=100)
    lines = ["waivers:"]
    for rid in above:
        lines += [f"  - record: '{rid}'", "    reason: accepted", "    who: eve", f"    expires: {expired}"]
    (tmp_path / "w.yaml").write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("MPTOOL_TODAY", injected.isoformat())
    res = _pdtp(d, spec, tmp_path / "w", "--replicates", "4:8", "--waivers", tmp_path / "w.yaml",
                "--format", "junit")
    assert res.code == 0, res.stdout + res.stderr  # the waivers are in force on the injected date: named below
    note = f"waiver expiry judged as of {injected} (MPTOOL_TODAY), not the system date {system}"
    gate = next(ln for ln in res.stdout.splitlines() if ln.startswith("gate "))
    assert gate.startswith("gate passed (pass-with-waivers)") and note in gate
    assert f'value="{note}"' in (tmp_path / "w" / "junit.xml").read_text()
    said = json.loads((tmp_path / "w" / "pdtp.json").read_text())["summary"]["baseline"]["waivers"]
    assert (said["today"], said["today_from"], said["clock"]) == (injected.isoformat(), "MPTOOL_TODAY",
                                                                  system.isoformat())
    monkeypatch.delenv("MPTOOL_TODAY")  # the system date: every waiver expired, every violation counts again
    late = _pdtp(d, spec, tmp_path / "late", "--replicates", "4:8", "--waivers", tmp_path / "w.yaml")
    assert late.code == 1 and "MPTOOL_TODAY" not in late.stdout
    said = json.loads((tmp_path / "late" / "pdtp.json").read_text())["summary"]["baseline"]["waivers"]
    assert said["today_from"] == "clock" and "clock" not in said


# ---------------------------------------------- red3-3: numbers beyond a float in a hostile pdtp.json (report)


@pytest.fixture(scope="module")
def stopped_run(data, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A replicate run stopped by --fail-fast (its pdtp.json has the fail-fast block the report reads)."""
    d, spec = data
    out = tmp_path_factory.mktemp("red3-ff") / "ff"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MPTOOL_FINGERPRINT_KEY", KEY)
        assert _pdtp(d, spec, out, "--replicates", "4:8", "--fail-fast").code == 1
    return out


def _edited(run: Path, folder: Path, edit) -> Path:
    folder.mkdir(parents=True)
    for name in ("pdtp.csv", "pdtp.json"):
        (folder / name).write_bytes((run / name).read_bytes())
    doc = json.loads((folder / "pdtp.json").read_text())
    edit(doc["summary"])
    (folder / "pdtp.json").write_text(json.dumps(doc))  # a whole number of 401 digits is valid JSON
    return folder


HUGE = 10**400


@pytest.mark.parametrize(("edit", "fragment"), [
    (lambda s: s.update(max=HUGE), "summary.max disagrees with the records in pdtp.csv"),
    (lambda s: s.update(threshold=HUGE), "summary.threshold is not a finite number"),
    (lambda s: s["replicates"]["fail_fast_spending"].update(level=HUGE),
     "summary.replicates.fail_fast_spending is not the --fail-fast block mptool writes"),
    (lambda s: s["replicates"].update(confidence=HUGE), "summary.replicates.confidence is not a confidence level"),
], ids=["max", "threshold", "fail-fast-level", "confidence"])
def test_report_refuses_a_number_beyond_a_float(stopped_run, tmp_path: Path, edit, fragment) -> None:
    """A whole number beyond a float's range where pdtp.json has a number: OverflowError, exit 3. Now the
    edit is refused as any other (exit 2, one line, nothing written)."""

    folder = _edited(stopped_run, tmp_path / "run", edit)
    before = snapshot(tmp_path)
    res = run_cli("report", folder, "--format", "md", "--out", folder / "r.md")
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("mptool: error:")]
    assert res.code == 2 and len(lines) == 1 and fragment in lines[0], res.stderr
    assert "internal error" not in res.stderr and snapshot(tmp_path) == before


def test_report_of_a_number_it_only_shows(stopped_run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A value the report only shows (not what the verdict rests on), a number beyond a float: it crashed the
    report (exit 3); now it is left out (the accuracy row empty) and the verdict still checked."""
    monkeypatch.delenv("MPTOOL_FINGERPRINT_KEY")  # under the key an edited signed result is refused (sig3-4)
    folder = _edited(stopped_run, tmp_path / "run", lambda s: s.update(train_accuracy=HUGE))
    res = run_cli("report", folder, "--format", "md", "--out", "-")
    assert res.code == 0, res.stderr
    assert "DTP-1 VIOLATED" in res.stdout


# ---------------------------------------------- red3-4: an unkeyed hash of task arguments in checkpoint names


def _count_yes(y, offset: int) -> int:
    return int((y == "yes").sum()) + offset


def test_checkpoint_task_names_are_keyed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run_tasks chunk (attack, reduce-dtp) was named by joblib's hash of the task's arguments, small arrays
    whole (an attack's labels of D): the same name under every checkpoint key, so whoever knows every label but
    one tried the candidates against the file name. Now the name holds an HMAC under the checkpoint key, and a
    resumed run still finds its chunks."""
    import numpy as np

    from mptool.runtime.checkpoint import Checkpoint, run_key
    from mptool.runtime.parallel import checkpointing, run_tasks, task_fingerprint

    labels = np.array(["yes", "no", "yes"])
    key = run_key("test", "s" * 64, "d" * 64, {})
    names = {}
    for secret in ("secret-1", "secret-2"):
        monkeypatch.setenv("MPTOOL_CHECKPOINT_KEY", secret)
        with checkpointing(Checkpoint.open(tmp_path / secret, key, resume=False)):
            assert run_tasks(_count_yes, [(labels, 0)], jobs=1) == [2]
        names[secret] = [p.name for p in (tmp_path / secret / ".checkpoint").glob("task-*.npz")]
        assert len(names[secret]) == 1
        assert task_fingerprint(_count_yes, (labels, 0)) not in names[secret][0]  # what anyone can compute
    assert names["secret-1"] != names["secret-2"]
    again = Checkpoint.open(tmp_path / "secret-2", key, resume=True)
    with checkpointing(again):
        assert run_tasks(_count_yes, [(labels, 0)], jobs=1) == [2]
    assert again.reused == {"task-00000": 1}


# ---------------------------------------------- red3-5: a number beyond a float in attack.json's ROC points


def test_report_leaves_out_a_roc_curve_beyond_a_float(stopped_run, tmp_path: Path) -> None:
    """attack.json's ROC points holding a whole number beyond a float's range crashed the report (exit 3);
    now the curve is left out as any ROC that cannot be read."""
    folder = _edited(stopped_run, tmp_path / "run", lambda s: None)
    roc = {"fpr": [0, HUGE, 1], "tpr": [0, 0.5, 1]}
    (folder / "attack.json").write_text(json.dumps({"summary": {"estimator": "E"}, "attacks": {
        "distance": {"accuracy": 0.55, "auc": 0.6, "roc": roc}}}))
    res = run_cli("report", folder, "--format", "md", "--out", "-")
    assert res.code == 0, res.stderr
    assert "DTP-1 VIOLATED" in res.stdout and "internal error" not in res.stderr


# ---------------------------------------------- red3-6: report --history of a run whose threshold is not a number


@pytest.mark.parametrize("value", [None, "1.5", HUGE, -1.0, True], ids=["null", "text", "huge", "negative", "bool"])
def test_history_leaves_out_a_run_whose_threshold_is_not_a_number(stopped_run, tmp_path: Path, value) -> None:
    """report --history read each run's summary.threshold with float(): null, a list or text crashed it (exit
    3), a quoted number was used. Now such a run is left out with a note, as any run that cannot be read."""
    runs = tmp_path / "runs"
    _edited(stopped_run, runs / "1-good", lambda s: None)
    _edited(stopped_run, runs / "2-edited", lambda s: s.update(threshold=value))
    res = run_cli("report", "--history", runs, "--format", "md", "--out", "-")
    assert res.code == 0, res.stderr
    assert "2-edited: left out (summary.threshold is not a finite number above 0)" in res.stderr
    assert "| 1-good |" in res.stdout and "| 2-edited |" not in res.stdout


# ---------------------------------------------- red3-7: a noncharacter in a data id made junit.xml unreadable


def test_junit_stays_well_formed_with_noncharacters_in_ids(data, tmp_path: Path) -> None:
    """U+FFFE and U+FFFF are not characters XML 1.0 can hold, and the escaping before ElementTree let them
    through: a data id holding one (the ids of violating records are listed in junit.xml) made the file not
    well-formed, so a CI test reporter could not read the gate. Now they are written as visible escapes."""
    import xml.etree.ElementTree as ET

    import pandas as pd

    d, spec = data
    frame = pd.read_csv(d / "d.csv")
    frame.loc[0, "rid"], frame.loc[1, "rid"] = "r0\ufffe", "r1\uffff"  # rows 0 and 1 are memorised (violations)
    (tmp_path / "d.csv").write_text(frame.to_csv(index=False), encoding="utf-8")
    res = run_cli("pdtp", tmp_path / "d.csv", "-m", spec, "--allow-import", MODULE, "--out", tmp_path / "o",
                  "--jobs", "1", "--quiet", "--replicates", "4:8", "--format", "junit")
    assert res.code == 1, res.stderr
    text = (tmp_path / "o" / "junit.xml").read_text(encoding="utf-8")
    assert "\ufffe" not in text and "\uffff" not in text
    assert "id r0\\ufffe" in text and "id r1\\uffff" in text
    ET.fromstring(text.encode("utf-8"))  # well-formed


# ---------------------------------------------- red3-8: mitigate.json's notes not a list (report)


def test_report_of_mitigate_notes_that_are_not_a_list(stopped_run, tmp_path: Path) -> None:
    """mitigate.json's ``notes`` as a number crashed the report ('int' object is not iterable, exit 3); now an
    entry that is not a list is read as no notes."""
    folder = _edited(stopped_run, tmp_path / "run", lambda s: None)
    (folder / "mitigate.csv").write_text("setting,family,change,max_pdtp,accuracy,passes,why_not\n"
                                         "baseline,baseline,none,0.5,0.8,True,\n")
    (folder / "mitigate.json").write_text(json.dumps({"target": 1.0, "sentence": "s", "notes": 5}))
    res = run_cli("report", folder, "--format", "md", "--out", "-")
    assert res.code == 0, res.stderr
    assert "internal error" not in res.stderr and "| baseline |" in res.stdout


# ---------------------------------------------- red3-9: LightGBM's own parameter errors at the first fit


@pytest.mark.parametrize("params", [{"num_leaves": 1}, {"boosting_type": "rf"}, {"objective": "multiclass"}],
                         ids=["num_leaves", "rf-without-bagging", "multiclass"])
def test_lightgbm_parameter_error_is_bad_input(tmp_path: Path, params) -> None:
    """LightGBM checks these parameters in its C library at fit and raises LightGBMError, which is neither a
    ValueError nor a TypeError: an internal error (exit 3). Now refused as any failed fit of A(T): exit 2, one
    line, nothing written."""
    pytest.importorskip("lightgbm")
    from conftest import mixed_frame
    from test_bad_input import assert_refused

    mixed_frame(30).to_csv(tmp_path / "d.csv", index=False)
    spec = write_spec(tmp_path / "s.yaml", "lightgbm.LGBMClassifier", model={"params": {"n_estimators": 3, **params}})
    before = snapshot(tmp_path)
    res = run_cli("pdtp", tmp_path / "d.csv", "-m", spec, "--allow-import", "lightgbm", "--out", tmp_path / "o",
                  "--jobs", "1", "--quiet")
    assert_refused(res, ["model: fitting the pipeline on the training set failed: "], tmp_path, before)


# ---------------------------------------------- red3-10: output.release round 0 dropped as if false


def test_release_round_zero_is_measured_and_named(tmp_path: Path) -> None:
    """``output.release: {round: 0}`` (hard 0/1 outputs, allowed: round 0 .. 15) was read as no policy, since
    0 == False: the gate measured the full vector, passed a model whose released outputs violate (exit 0,
    "DTP-1 holds") and named no policy. Now it is measured as released and named, as round 1 is."""
    from conftest import mixed_frame

    mixed_frame(40).to_csv(tmp_path / "d.csv", index=False)
    runs = {}
    for name, release in (("none", None), ("round0", {"round": 0}), ("label", {"label_only": True})):
        output = {"bin_size": 0.01, **({"release": release} if release else {})}
        spec = write_spec(tmp_path / f"{name}.yaml", "logistic_regression", model={"params": {"C": 0.05}},
                          output=output)
        runs[name] = run_cli("pdtp", tmp_path / "d.csv", "-m", spec, "--out", tmp_path / name, "--quiet",
                             "--threshold", "2", "--format", "junit")
    assert runs["none"].code == 0  # the full vector passes
    assert runs["label"].code == 1  # two classes: hard labels, as round 0 gives
    res = runs["round0"]
    assert res.code == 1, res.stdout + res.stderr
    assert "release policy round=0: measured as released" in res.stdout
    said = json.loads((tmp_path / "round0" / "pdtp.json").read_text())["summary"]
    assert said["release"] == {"round": 0} and said["release_measured"] == {"round": 0}
    assert 'value="release policy round=0: measured as released' in (tmp_path / "round0" / "junit.xml").read_text()

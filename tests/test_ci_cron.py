"""CI and cron (issue 16 items 1-4): baselines and waivers, diff and history, JUnit XML, the Action's script.

Every comparison is checked against a reference built another way: records of two runs are
joined on their feature and label values (pandas merge on the CSV columns), not on the
fingerprints under test; fingerprints are recomputed here with hmac from the CSV text.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xmlschema
import yaml
from conftest import mixed_frame, run_cli, write_spec

from mptool.inputs.fingerprint import FINGERPRINT_HEX, SCHEME

REPO = Path(__file__).resolve().parents[1]
XSD = Path(__file__).with_name("data") / "junit.xsd"
FEATURES = ["color", "size", "x1", "x2"]
KEY = "test-secret-key"


@pytest.fixture(autouse=True)
def secret(monkeypatch: pytest.MonkeyPatch) -> str:
    """Baselines, waivers and diff match records by keyed fingerprints: every test here runs under a key
    (issue 26: without MPTOOL_FINGERPRINT_KEY there are no fingerprints; tests that need none delete it)."""
    monkeypatch.setenv("MPTOOL_FINGERPRINT_KEY", KEY)
    return KEY


def frame(n: int = 60, seed: int = 0) -> pd.DataFrame:
    """mixed_frame without repeated records (the reference join on values needs distinct records)."""
    return mixed_frame(n, seed).drop_duplicates().reset_index(drop=True)


def pdtp(d: Path, csv: Path, spec: Path, out: str, *extra: str):
    return run_cli("pdtp", csv, "--model", spec, "--out", d / out, "--jobs", "1", *extra)


def table(d: Path, out: str) -> pd.DataFrame:
    return pd.read_csv(d / out / "pdtp.csv", keep_default_na=False, na_values=[""])


def summary(d: Path, out: str) -> dict:
    return json.loads((d / out / "pdtp.json").read_text())["summary"]


def with_values(d: Path, out: str, csv: Path) -> pd.DataFrame:
    """pdtp.csv joined with the audited CSV's values (features and label) by row number (the reference's way to
    know a record; pdtp.csv holds no label without --show-values)."""
    data = pd.read_csv(csv)
    t = table(d, out)
    return t.join(data[[*FEATURES, "label"]], on="row")


# ----------------------------------------------------------------------------------------- fingerprints


def reference_fingerprint(row: pd.Series, label: str, key: bytes) -> str:
    """HMAC-SHA-256 of the canonical form, built by hand from one CSV row (module docstring of fingerprint.py)."""
    def cell(v) -> str:
        if isinstance(v, int | float | np.integer | np.floating):
            return "n" + repr(float(v) + 0.0)
        return f"s{len(str(v))}:{v}"

    names = sorted(FEATURES)
    header = "\x1f".join(["features", *names, "label", "label"]).encode()
    body = "|".join([cell(row[n]) for n in names] + [cell(label)]).encode()
    mac = hmac.new(key, SCHEME.encode() + b"\0" + header + b"\0" + body, hashlib.sha256)
    return mac.hexdigest()[:FINGERPRINT_HEX]


def test_fingerprint_is_the_keyed_hash_of_the_values_and_survives_reordering(tmp_path: Path, secret: str) -> None:
    df = frame()
    csv = tmp_path / "d.csv"
    df.to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", "categorical_nb")
    assert pdtp(tmp_path, csv, spec, "a").code in (0, 1)
    t = table(tmp_path, "a")
    for _, r in t.iterrows():
        assert r["fingerprint"] == reference_fingerprint(df.loc[r["row"]], df.loc[r["row"], "label"], KEY.encode())
    assert summary(tmp_path, "a")["identity"]["fingerprint"]["key"] == "env"
    # no raw value is in the column: 16 hex digits
    assert t["fingerprint"].str.fullmatch(r"[0-9a-f]{16}").all()


def test_without_a_key_no_fingerprint_and_nothing_made_from_the_data(tmp_path: Path, monkeypatch) -> None:
    """Issue 26: no key derived from the data; without MPTOOL_FINGERPRINT_KEY no fingerprint at all, the
    identity says so and is the same for reordered and changed data (it is computed from no record)."""
    monkeypatch.delenv("MPTOOL_FINGERPRINT_KEY")
    df = frame()
    spec = write_spec(tmp_path / "s.yaml", "categorical_nb")
    df.to_csv(tmp_path / "a.csv", index=False)
    df.sample(frac=1.0, random_state=3).to_csv(tmp_path / "b.csv", index=False)
    changed = df.copy()
    changed.loc[0, "x1"] += 1.0
    changed.to_csv(tmp_path / "c.csv", index=False)
    for name in "abc":
        pdtp(tmp_path, tmp_path / f"{name}.csv", spec, name)
    ids = {n: summary(tmp_path, n)["identity"]["fingerprint"] for n in "abc"}
    assert ids["a"]["key"] == "none" and ids["a"]["key_id"] is None and "MPTOOL_FINGERPRINT_KEY" in ids["a"]["note"]
    assert ids["a"] == ids["b"] == ids["c"]
    assert all(table(tmp_path, n)["fingerprint"].isna().all() for n in "abc")
    assert {summary(tmp_path, n)["manifest"]["data_hmac"] for n in "abc"} == {None}


def test_keyed_fingerprints_survive_reordering(tmp_path: Path) -> None:
    df = frame()
    spec = write_spec(tmp_path / "s.yaml", "categorical_nb")
    df.to_csv(tmp_path / "a.csv", index=False)
    df.sample(frac=1.0, random_state=3).to_csv(tmp_path / "b.csv", index=False)
    for name in "ab":
        pdtp(tmp_path, tmp_path / f"{name}.csv", spec, name)
    a, b = with_values(tmp_path, "a", tmp_path / "a.csv"), with_values(tmp_path, "b", tmp_path / "b.csv")
    joined = a.merge(b, on=[*FEATURES, "label"], suffixes=("_a", "_b"))
    assert len(joined) == len(df) and (joined["fingerprint_a"] == joined["fingerprint_b"]).all()
    assert (joined["row_a"] != joined["row_b"]).any()  # rows moved, fingerprints did not


# ----------------------------------------------------------------------------------------- baseline


def expected_status(a: pd.DataFrame, b: pd.DataFrame, threshold: float, tol: float) -> pd.Series:
    """baseline_status of B's records, from a join on the records' values."""
    m = b.merge(a[[*FEATURES, "label", "pdtp"]], on=[*FEATURES, "label"], how="left", suffixes=("", "_a"))
    now, was = m["pdtp"] > threshold, m["pdtp_a"] > threshold
    out = pd.Series("", index=m.index, dtype=object)
    out[now & ~was] = "new"
    out[now & was & (m["pdtp"] > m["pdtp_a"] + tol)] = "worse"
    out[now & was & (m["pdtp"] <= m["pdtp_a"] + tol)] = "unchanged"
    out[~now & was] = "fixed"
    return pd.Series(out.to_numpy(), index=m["row"].to_numpy())


def test_two_runs_with_a_baseline_show_new_worse_unchanged_and_fixed(tmp_path: Path, secret: str) -> None:
    df = frame(80, seed=2)
    df.to_csv(tmp_path / "a.csv", index=False)
    b_data = df.drop(df.sample(10, random_state=1).index).sample(frac=1.0, random_state=7)  # 10 gone, reordered
    b_data.to_csv(tmp_path / "b.csv", index=False)
    spec = write_spec(tmp_path / "s.yaml", "categorical_nb")
    threshold, tol = "0.6", 0.05
    assert pdtp(tmp_path, tmp_path / "a.csv", spec, "a", "--threshold", threshold).code == 1
    res = pdtp(tmp_path, tmp_path / "b.csv", spec, "b", "--threshold", threshold, "--baseline", tmp_path / "a")
    a, b = with_values(tmp_path, "a", tmp_path / "a.csv"), with_values(tmp_path, "b", tmp_path / "b.csv")
    want = expected_status(a, b, float(threshold), tol)
    got = pd.Series(b["baseline_status"].fillna("").to_numpy(), index=b["row"].to_numpy())
    assert (got.sort_index() == want.sort_index()).all()
    counts = summary(tmp_path, "b")["baseline"]["counts"]
    for status in ("new", "worse", "unchanged", "fixed"):
        assert counts[status] == int((want == status).sum()) > 0, status  # every status occurs
    gone = a.merge(b[[*FEATURES, "label"]], on=[*FEATURES, "label"], how="left", indicator=True)
    assert counts["absent"] == int(((gone["_merge"] == "left_only") & (gone["pdtp"] > 0.6)).sum()) > 0
    assert res.code == 1 and "gate FAILED" in res.stdout
    assert f"{counts['new']} new, {counts['worse']} worse, {counts['unchanged']} unchanged" in res.stdout
    # the same run compared with itself: every violation unchanged, exit 0 though DTP-1 is violated
    same = pdtp(tmp_path, tmp_path / "b.csv", spec, "c", "--threshold", threshold, "--baseline",
                tmp_path / "b" / "pdtp.json")
    block = summary(tmp_path, "c")["baseline"]
    assert same.code == 0 and block["counts"]["new"] == block["counts"]["worse"] == 0
    assert block["counts"]["unchanged"] == block["counts"]["violations"] > 0
    assert "DTP-1 VIOLATED" in same.stdout and "gate passed" in same.stdout


def shrunk(d: Path, n: int, seed: int, keep: int) -> tuple[Path, Path, Path]:
    """d/a.csv (``n`` records), d/b.csv (its first ``keep``: the next day's data, each record's PDTP moved) and
    one spec: a baseline is bound to its spec (issue 26), so runs differ by their data, rows lining up."""
    df = frame(n, seed=seed)
    df.to_csv(d / "a.csv", index=False)
    df.iloc[:keep].to_csv(d / "b.csv", index=False)
    return d / "a.csv", d / "b.csv", write_spec(d / "s.yaml", "categorical_nb")


def test_tolerance_decides_worse_or_unchanged(tmp_path: Path, secret: str) -> None:
    csv_a, csv_b, spec = shrunk(tmp_path, 60, 0, 40)
    pdtp(tmp_path, csv_a, spec, "a", "--threshold", "0.5")
    loose = pdtp(tmp_path, csv_b, spec, "b", "--threshold", "0.5", "--baseline", tmp_path / "a",
                 "--baseline-tolerance", "5")
    assert summary(tmp_path, "b")["baseline"]["counts"]["worse"] == 0
    strict = pdtp(tmp_path, csv_b, spec, "c", "--threshold", "0.5", "--baseline", tmp_path / "a",
                  "--baseline-tolerance", "0")
    c = summary(tmp_path, "c")["baseline"]["counts"]
    b = table(tmp_path, "c")
    a = table(tmp_path, "a").iloc[: len(b)]
    rose = (b["pdtp"].to_numpy() > a["pdtp"].to_numpy()) & (a["pdtp"].to_numpy() > 0.5) & (b["pdtp"].to_numpy() > 0.5)
    assert c["worse"] == int(rose.sum()) > 0  # same file, same order: rows line up
    assert strict.code == 1 and (loose.code == 0) == (summary(tmp_path, "b")["baseline"]["counts"]["new"] == 0)


def test_records_match_by_data_id_when_set(tmp_path: Path) -> None:
    df = frame()
    df.insert(0, "rid", [f"r{i:03d}" for i in range(len(df))])
    df.to_csv(tmp_path / "a.csv", index=False)
    moved = df.sample(frac=1.0, random_state=1)
    moved["x1"] = moved["x1"] + 0.5  # every value changes: fingerprints would not match, ids do
    moved.to_csv(tmp_path / "b.csv", index=False)
    spec = write_spec(tmp_path / "s.yaml", "gaussian_nb", data={"id": "rid"})
    pdtp(tmp_path, tmp_path / "a.csv", spec, "a", "--threshold", "0.3")
    pdtp(tmp_path, tmp_path / "b.csv", spec, "b", "--threshold", "0.3", "--baseline", tmp_path / "a")
    s = summary(tmp_path, "b")
    assert s["baseline"]["matched_by"] == "id" and s["baseline"]["counts"]["absent"] == 0
    a, b = table(tmp_path, "a"), table(tmp_path, "b")
    m = b.merge(a[["id", "pdtp"]], on="id", suffixes=("", "_a"))
    assert np.allclose(m["baseline_pdtp"], m["pdtp_a"])


# ----------------------------------------------------------------------------------------- waivers


def waiver_file(path: Path, entries: list[dict]) -> Path:
    """A waiver file as people write it: fingerprints and reasons quoted, dates plain."""
    lines = ["waivers:"]
    for e in entries:
        lines += [f"  - record: '{e['record']}'", f"    reason: '{e['reason']}'", f"    who: {e['who']}",
                  f"    expires: {e['expires']}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_waived_record_passes_until_its_waiver_expires(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    frame().to_csv(tmp_path / "d.csv", index=False)
    spec = write_spec(tmp_path / "s.yaml", "categorical_nb")
    assert pdtp(tmp_path, tmp_path / "d.csv", spec, "plain", "--threshold", "0.9").code == 1
    bad = table(tmp_path, "plain").query("pdtp > 0.9")
    assert 0 < len(bad) < 10
    entries = [{"record": str(fp), "reason": "accepted in review #12", "who": "alice", "expires": "2026-06-30"}
               for fp in bad["fingerprint"]]
    entries.append({"record": "0000000000000000", "reason": "stale", "who": "bob", "expires": "2026-01-01"})
    waivers = waiver_file(tmp_path / "w.yaml", entries)
    text = waivers.read_text()
    assert "expires: 2026-06-30" in text  # an unquoted date, as people write it
    monkeypatch.setenv("MPTOOL_TODAY", "2026-06-30")  # the last day a waiver holds
    ok = pdtp(tmp_path, tmp_path / "d.csv", spec, "in-force", "--threshold", "0.9", "--waivers", waivers)
    assert ok.code == 0, ok.stdout + ok.stderr
    t = table(tmp_path, "in-force")
    assert t.loc[t["pdtp"] > 0.9, "waived"].all() and not t.loc[t["pdtp"] <= 0.9, "waived"].any()
    block = summary(tmp_path, "in-force")["baseline"]
    assert block["counts"] == {"violations": len(bad), "waived": len(bad), "counted": 0}
    assert len(block["waivers"]["in_force"]) == len(bad) and len(block["waivers"]["expired"]) == 1
    assert "waiver for 0000000000000000 (bob: stale) expired on 2026-01-01" in ok.stderr
    monkeypatch.setenv("MPTOOL_TODAY", "2026-07-01")  # the day after: every waived record counts again
    late = pdtp(tmp_path, tmp_path / "d.csv", spec, "expired", "--threshold", "0.9", "--waivers", waivers)
    assert late.code == 1
    warnings = [ln for ln in late.stderr.splitlines() if "expired on 2026-06-30" in ln]
    assert len(warnings) == len(bad) and all("counts again" in w for w in warnings)
    assert summary(tmp_path, "expired")["baseline"]["counts"]["counted"] == len(bad)


def test_waivers_and_baseline_together(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, secret: str) -> None:
    csv_a, csv_b, spec = shrunk(tmp_path, 80, 2, 55)
    pdtp(tmp_path, csv_a, spec, "a", "--threshold", "0.7")
    pdtp(tmp_path, csv_b, spec, "b", "--threshold", "0.7", "--baseline", tmp_path / "a")
    counted = table(tmp_path, "b").query("baseline_status in ['new', 'worse']")
    assert len(counted)
    waivers = waiver_file(tmp_path / "w.yaml", [
        {"record": fp, "reason": "r", "who": "w", "expires": "2026-12-30"} for fp in counted["fingerprint"]
    ])
    monkeypatch.setenv("MPTOOL_TODAY", "2026-01-01")
    res = pdtp(tmp_path, csv_b, spec, "c", "--threshold", "0.7", "--baseline", tmp_path / "a", "--waivers", waivers)
    assert res.code == 0 and summary(tmp_path, "c")["baseline"]["counts"]["waived"] == len(counted)


# ----------------------------------------------------------------------------------------- diff


def test_diff_names_changed_records_and_exits_1_when_worse(tmp_path: Path, secret: str) -> None:
    csv_a, csv_b, spec = shrunk(tmp_path, 80, 2, 55)
    pdtp(tmp_path, csv_a, spec, "a", "--threshold", "0.7")
    pdtp(tmp_path, csv_b, spec, "b", "--threshold", "0.7", "--baseline", tmp_path / "a")
    res = run_cli("diff", tmp_path / "a", tmp_path / "b")
    counts = summary(tmp_path, "b")["baseline"]["counts"]
    assert res.code == (1 if counts["new"] + counts["worse"] else 0) == 1
    line = res.stdout.strip().splitlines()[-1]
    full_a, b = table(tmp_path, "a"), table(tmp_path, "b")
    assert line.startswith("mptool diff: WORSE: ")
    assert f"violations {int((full_a['pdtp'] > 0.7).sum())} -> " in line
    a = full_a.iloc[: len(b)]  # the records of both runs: the first ones, rows lining up
    assert (f" -> {int((b['pdtp'] > 0.7).sum())} ({counts['new']} new, {counts['worse']} worse, "
            f"{counts['fixed']} fixed") in line
    assert f"max PDTP {full_a['pdtp'].max():.4f} -> {b['pdtp'].max():.4f}" in line
    changed = int(((b["pdtp"] - a["pdtp"]).abs() > 0.05).sum())  # one file, rows line up
    assert f"{changed} record(s) changed by more than 0.05" in line
    top = b.assign(d=(b["pdtp"] - a["pdtp"]).abs()).sort_values(["d", "row"], ascending=[False, True]).iloc[0]
    assert f"row {top['row']}  fingerprint {top['fingerprint']}" in res.stdout
    back = run_cli("diff", tmp_path / "b", tmp_path / "a", "--threshold", "0.7", "--quiet")
    assert back.stdout.count("\n") == 1 and back.code == (1 if "0 new, 0 worse" not in back.stdout else 0)
    itself = run_cli("diff", tmp_path / "b", tmp_path / "b" / "pdtp.json", "-q")
    assert itself.code == 0 and "not worse" in itself.stdout and "0 record(s) changed" in itself.stdout


# ----------------------------------------------------------------------------------------- history


def test_history_report_over_five_nightly_runs(tmp_path: Path, secret: str) -> None:
    df = frame(70, seed=4)
    df.insert(0, "rid", [f"SECRET-ID-{i}" for i in range(len(df))])
    df.to_csv(tmp_path / "d.csv", index=False)
    nights = tmp_path / "nightly"
    for i, alpha in enumerate([1.0, 0.9, 0.8, 0.7, 0.6]):
        spec = write_spec(tmp_path / f"s{i}.yaml", "categorical_nb", data={"id": "rid"},
                          model={"params": {"alpha": alpha}})
        assert pdtp(nights, tmp_path / "d.csv", spec, f"pdtp-2026110{i + 1}", "--threshold", "0.8").code in (0, 1)
    res = run_cli("report", "--history", nights, "--format", "both")
    assert res.code == 0, res.stderr
    html, md = (nights / "history.html").read_text(), (nights / "history.md").read_text()
    runs = [summary(nights, f"pdtp-2026110{i + 1}") for i in range(5)]
    rows = [ln for ln in md.splitlines() if ln.startswith("| pdtp-2026110")]
    assert [r.split(" | ")[0] for r in rows] == [f"| pdtp-2026110{i + 1}" for i in range(5)]
    for row, s in zip(rows, runs, strict=True):
        assert f"| {s['max']:.4f} | {s['mean']:.4f} | {s['violations']} |" in row
    svg = re.search(r'id="plot-trend".*?src="data:image/svg\+xml;base64,([^"]+)"', html, re.S)
    assert svg and "<svg" in base64.b64decode(svg.group(1)).decode()
    first, last = table(nights, "pdtp-20261101"), table(nights, "pdtp-20261105")
    ref = last.merge(first[["id", "pdtp"]], on="id", suffixes=("", "_first"))  # matched by id, here by pandas
    ref["size"] = (ref["pdtp"] - ref["pdtp_first"]).abs().round(9)
    ref = ref.sort_values(["size", "row"], ascending=[False, True])
    listed = [ln for ln in md.split("Records that changed most")[1].splitlines() if re.match(r"\| \d", ln)]
    assert [int(ln.split(" | ")[0][2:]) for ln in listed] == ref["row"].head(len(listed)).tolist()
    assert listed[0].split(" | ")[1] == ref["fingerprint"].iloc[0]
    assert "SECRET-ID" not in html and "SECRET-ID" not in md  # ids never reach a report
    auto = run_cli("report", nights, "--format", "md", "--out", "-")  # a folder of runs is read the same way
    assert auto.code == 0 and "PDTP trend" in auto.stdout


# ----------------------------------------------------------------------------------------- JUnit


def test_junit_from_a_failing_run_validates_and_names_the_violating_records(tmp_path: Path) -> None:
    df = frame()
    df.insert(0, "rid", [f"id<&>\x1b[31m{i}" for i in range(len(df))])  # hostile ids: escaped, still valid XML
    df.loc[:, "size"] = df["size"].replace({"XL": "FEATURE-MARKER"})
    df.to_csv(tmp_path / "d.csv", index=False)
    spec = write_spec(tmp_path / "s.yaml", "categorical_nb", data={"id": "rid"})
    res = pdtp(tmp_path, tmp_path / "d.csv", spec, "a", "--threshold", "0.9", "--format", "junit")
    assert res.code == 1
    xml = (tmp_path / "a" / "junit.xml").read_text()
    schema = xmlschema.XMLSchema(XSD)
    schema.validate(tmp_path / "a" / "junit.xml")
    doc = schema.to_dict(tmp_path / "a" / "junit.xml")
    suite = doc["testsuite"][0]
    assert suite["@tests"] == 1 and suite["@failures"] == 1
    failure = suite["testcase"][0]["failure"][0]
    text = failure["$"]
    bad = table(tmp_path, "a").query("pdtp > 0.9")
    for _, r in bad.iterrows():
        assert re.search(rf"row {r['row']}  id id&lt;&amp;&gt;\\x1b\[31m\d+  PDTP {r['pdtp']:.4f}", xml)
    assert len(re.findall(r"^row \d+ ", text, re.M)) == len(bad)
    assert "FEATURE-MARKER" not in xml and "\x1b" not in xml
    # the schema is not a rubber stamp: a test case without its name is refused
    broken = tmp_path / "broken.xml"
    broken.write_text(xml.replace('<testcase name="', '<testcase nome="', 1))
    assert not schema.is_valid(broken)


def test_junit_of_a_passing_run_attack_and_reduce_dtp_validate(tmp_path: Path) -> None:
    frame().to_csv(tmp_path / "d.csv", index=False)
    spec = write_spec(tmp_path / "s.yaml", "categorical_nb")
    schema = xmlschema.XMLSchema(XSD)
    assert pdtp(tmp_path, tmp_path / "d.csv", spec, "p", "--threshold", "5", "--format", "csv,junit").code == 0
    schema.validate(tmp_path / "p" / "junit.xml")
    assert "<failure" not in (tmp_path / "p" / "junit.xml").read_text()
    res = run_cli("attack", tmp_path / "d.csv", "--model", spec, "--out", tmp_path / "att", "--jobs", "1",
                  "--attacks", "threshold", "--candidates", "40", "--iterations", "1", "--targets", "4",
                  "--shadows", "2", "--pdtp-iterations", "0", "--max-auc", "0", "--format", "junit", "-q")
    assert res.code == 1, res.stderr
    schema.validate(tmp_path / "att" / "junit.xml")
    suite = schema.to_dict(tmp_path / "att" / "junit.xml")["testsuite"][0]
    assert suite["@tests"] == 2 and suite["@failures"] == 1 and suite["@skipped"] == 1
    red = run_cli("reduce-dtp", tmp_path / "d.csv", "--model", spec, "--out", tmp_path / "red", "--jobs", "1",
                  "--threshold", "0.9", "--max-removals", "1", "--format", "junit", "-q")
    assert red.code == 1
    schema.validate(tmp_path / "red" / "junit.xml")
    assert "step 1: removed row" in (tmp_path / "red" / "junit.xml").read_text()


# ----------------------------------------------------------------------------------------- Action and hook


def run_gate(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "MPTOOL_BIN": f"{shlex.quote(sys.executable)} -m mptool", **env}
    full["PYTHONPATH"] = os.pathsep.join([str(REPO), full.get("PYTHONPATH", "")])
    return subprocess.run(["bash", str(REPO / "scripts" / "ci-gate.sh")], cwd=tmp_path, env=full,
                          capture_output=True, text=True, timeout=900)


def test_ci_gate_script_writes_the_step_summary_outputs_and_junit(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("MPTOOL_FINGERPRINT_KEY")  # the runs' key comes from MPTOOL_KEY_INPUT alone
    frame().to_csv(tmp_path / "d.csv", index=False)
    write_spec(tmp_path / "s.yaml", "categorical_nb")
    step, outputs = tmp_path / "summary.md", tmp_path / "outputs.txt"
    env = {"MPTOOL_DATA": "d.csv", "MPTOOL_SPEC": "s.yaml", "MPTOOL_THRESHOLD": "0.9",
           "GITHUB_STEP_SUMMARY": str(step), "GITHUB_OUTPUT": str(outputs), "MPTOOL_OUT": "first",
           "MPTOOL_KEY_INPUT": "s3cret"}  # the script passes it on as MPTOOL_FINGERPRINT_KEY (checked below)
    first = run_gate(tmp_path, **env)
    assert first.returncode == 1, first.stderr
    assert step.read_text().startswith("## :red_circle: DTP-1 VIOLATED")
    assert outputs.read_text().splitlines() == ["exit-code=1", "verdict=fail", "report=first"]
    for name in ("pdtp.csv", "pdtp.json", "junit.xml", "report.html", "report.md"):
        assert (tmp_path / "first" / name).is_file(), name
    xmlschema.XMLSchema(XSD).validate(tmp_path / "first" / "junit.xml")
    # the next run against the first as baseline: nothing new, the gate passes
    outputs.write_text("")
    second = run_gate(tmp_path, **{**env, "MPTOOL_OUT": "second", "MPTOOL_BASELINE": "first"})
    assert second.returncode == 0, second.stderr
    assert "Against the baseline: 0 new, 0 worse" in step.read_text().split("## :")[-1]  # the second report
    assert "exit-code=0" in outputs.read_text()
    missing = run_gate(tmp_path, **{**env, "MPTOOL_DATA": ""})
    assert missing.returncode == 2 and "MPTOOL_DATA" in missing.stderr
    bad = run_gate(tmp_path, **{**env, "MPTOOL_OUT": "third", "MPTOOL_SPEC": "nope.yaml"})
    assert bad.returncode == 2 and "did not finish (exit code 2)" in step.read_text()
    ident = json.loads((tmp_path / "first" / "pdtp.json").read_text())["summary"]["identity"]["fingerprint"]
    assert ident["key"] == "env"


def test_action_yml_runs_the_script_with_inputs_as_environment_only() -> None:
    action = yaml.safe_load((REPO / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    assert {"data", "spec", "threshold", "baseline", "out"} <= set(action["inputs"])
    steps = action["runs"]["steps"]
    runs = [s["run"] for s in steps if "run" in s]
    assert any("scripts/ci-gate.sh" in r for r in runs)
    assert not any("${{" in r for r in runs), "inputs reach the shell as env variables only (no injection)"
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()" and upload["with"]["path"] == "${{ inputs.out }}"
    gate = next(s for s in steps if s.get("id") == "gate")
    assert {"MPTOOL_DATA", "MPTOOL_SPEC", "MPTOOL_THRESHOLD", "MPTOOL_BASELINE", "MPTOOL_OUT"} <= set(gate["env"])


def test_pre_commit_hook_entry_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    hook = next(h for h in hooks if h["id"] == "mptool-pdtp")
    assert hook["language"] == "python" and hook["pass_filenames"] is False
    words = shlex.split(hook["entry"])
    assert words[0] == "mptool"
    frame().to_csv(tmp_path / "d.csv", index=False)
    write_spec(tmp_path / "s.yaml", "categorical_nb")
    monkeypatch.chdir(tmp_path)
    for _ in range(2):  # a second commit reruns into the same folder
        res = run_cli(*words[1:], "d.csv", "--model", "s.yaml", "--threshold", "5", "--jobs", "1")
        assert res.code == 0 and res.stdout.startswith("DTP-1 holds"), res.stderr
    assert (tmp_path / ".mptool-out" / "pre-commit" / "pdtp.json").is_file()


def test_identical_records_share_a_fingerprint_a_status_and_a_waiver(tmp_path: Path, monkeypatch) -> None:
    df = frame(50, seed=6)
    df = pd.concat([df, df.iloc[[7]]], ignore_index=True)  # row 50 repeats row 7
    df.to_csv(tmp_path / "d.csv", index=False)
    spec = write_spec(tmp_path / "s.yaml", "categorical_nb")
    pdtp(tmp_path, tmp_path / "d.csv", spec, "a")
    t = table(tmp_path, "a").set_index("row")
    assert t.loc[7, "fingerprint"] == t.loc[50, "fingerprint"] and t.loc[7, "pdtp"] == t.loc[50, "pdtp"]
    limit = f"{t.loc[7, 'pdtp'] - 1e-6:.9f}"
    waivers = waiver_file(tmp_path / "w.yaml", [{"record": t.loc[7, "fingerprint"], "reason": "twin", "who": "x",
                                                 "expires": "2026-12-30"}])
    monkeypatch.setenv("MPTOOL_TODAY", "2026-01-01")
    pdtp(tmp_path, tmp_path / "d.csv", spec, "b", "--threshold", limit, "--baseline", tmp_path / "a",
         "--waivers", waivers)
    b = table(tmp_path, "b").set_index("row")
    assert b.loc[[7, 50], "waived"].all() and (b.loc[[7, 50], "baseline_status"] == "unchanged").all()

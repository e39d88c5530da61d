"""Bad input of baselines, waivers, diff, history and JUnit (docs/bad-input.md, "Baselines and waivers").

Each case builds its files (a previous run where it needs one) in a fresh folder and returns
the arguments, the environment and the fragments the one error line must contain: exit 2,
one ``mptool: error:`` line, no traceback, nothing written or changed. An expired waiver is
not bad input but a finding: it is tested last (exit 1 with a warning line).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest
from conftest import mixed_frame, run_cli
from test_bad_input import good_csv, good_spec, pdtp_args, snapshot

Case = Callable[[Path], tuple[list[str], dict[str, str], list[str]]]
KEY_ENV = "MPTOOL_FINGERPRINT_KEY"
TEST_KEY = "bad-input-ci-secret"
WAIVER = "waivers:\n  - record: '0123456789abcdef'\n    reason: accepted\n    who: alice\n    expires: 2026-06-30\n"


def previous_run(d: Path, *extra: str, name: str = "prev", spec: Path | None = None, csv: Path | None = None) -> Path:
    """A pdtp run in d/name to use as a baseline (written before the case's snapshot)."""
    csv = csv or good_csv(d)
    spec = spec or good_spec(d)
    res = run_cli("pdtp", csv, "--model", spec, "--out", d / name, "--jobs", "1", *extra)
    assert res.code in (0, 1), res.stderr
    return d / name


def waivers(d: Path, text: str) -> Path:
    path = d / "w.yaml"
    path.write_text(text)
    return path


def with_waivers(d: Path, text: str, frags: list[str], env: dict[str, str] | None = None):
    return pdtp_args(d, good_csv(d), good_spec(d), "--waivers", str(waivers(d, text))), env or {}, frags


# --- waiver files


def waiver_yaml_syntax(d: Path):
    return with_waivers(d, "waivers:\n  - record: [unclosed\n", ["w.yaml", "YAML syntax error"])


def waiver_duplicate_key(d: Path):
    text = WAIVER + "    who: mallory\n"
    return with_waivers(d, text, ["w.yaml", "key 'who' appears twice"])


def waiver_missing_expiry(d: Path):
    text = "waivers:\n  - record: '0123456789abcdef'\n    reason: r\n    who: w\n"
    return with_waivers(d, text, ["waivers[0]", "required key 'expires' is missing"])


def waiver_bad_date(d: Path):
    return with_waivers(d, WAIVER.replace("2026-06-30", "2026-02-30"), ["waivers[0]", "'expires'", "YYYY-MM-DD"])


def waiver_date_words(d: Path):
    return with_waivers(d, WAIVER.replace("2026-06-30", "next week"), ["'expires'", "'next week'"])


def waiver_unknown_key(d: Path):
    return with_waivers(d, WAIVER + "    expiry: 2027-01-01\n", ["unknown key 'expiry'", "valid keys"])


def waiver_empty_reason(d: Path):
    return with_waivers(d, WAIVER.replace("reason: accepted", "reason: ''"), ["'reason' must be non-empty text"])


def waiver_not_a_list(d: Path):
    return with_waivers(d, "- record: x\n", ["w.yaml", "one key, 'waivers'"])


def waiver_twice(d: Path):
    return with_waivers(d, WAIVER + WAIVER.removeprefix("waivers:\n"), ["waivers[1]", "already waived by waivers[0]"])


def waiver_float_looking_fingerprint(d: Path):
    text = WAIVER.replace("'0123456789abcdef'", "1234e56789012345")
    return with_waivers(d, text, ["waivers[0].record", "1234e56789012345", "not a finite number"])


def waiver_file_missing(d: Path):
    args = pdtp_args(d, good_csv(d), good_spec(d), "--waivers", str(d / "nope.yaml"))
    return args, {}, ["nope.yaml", "waiver file not found"]


def today_malformed(d: Path):
    return with_waivers(d, WAIVER, ["MPTOOL_TODAY", "YYYY-MM-DD", "'30/06/2026'"], {"MPTOOL_TODAY": "30/06/2026"})


# --- baselines


def baseline_missing(d: Path):
    args = pdtp_args(d, good_csv(d), good_spec(d), "--baseline", str(d / "nope"))
    return args, {}, ["nope", "--baseline not found"]


def baseline_folder_without_results(d: Path):
    (d / "empty").mkdir()
    args = pdtp_args(d, good_csv(d), good_spec(d), "--baseline", str(d / "empty"))
    return args, {}, ["empty", "holds no pdtp.json"]


def baseline_not_json(d: Path):
    (d / "b.json").write_text("{not json")
    args = pdtp_args(d, good_csv(d), good_spec(d), "--baseline", str(d / "b.json"))
    return args, {}, ["b.json", "not valid JSON"]


def baseline_nan(d: Path):
    prev = previous_run(d, "--json-records")  # records in the JSON (by default they are only in pdtp.csv)
    text = (prev / "pdtp.json").read_text().replace('"pdtp": ', '"pdtp": NaN, "x": ', 1)
    (prev / "pdtp.json").write_text(text)
    args = pdtp_args(d, good_csv(d), good_spec(d), "--baseline", str(prev))
    return args, {}, ["pdtp.json", "NaN is not a number JSON allows"]


def baseline_duplicate_json_key(d: Path):
    prev = previous_run(d)
    text = (prev / "pdtp.json").read_text().replace('"summary": {', '"summary": {"n": 1, "n": 2, ', 1)
    (prev / "pdtp.json").write_text(text)
    args = pdtp_args(d, good_csv(d), good_spec(d), "--baseline", str(prev))
    return args, {}, ["pdtp.json", "key 'n' appears twice"]


def baseline_negative_pdtp(d: Path):
    prev = previous_run(d, "--json-records")
    doc = json.loads((prev / "pdtp.json").read_text())
    doc["records"][3]["pdtp"] = -0.5
    (prev / "pdtp.json").write_text(json.dumps(doc))
    args = pdtp_args(d, good_csv(d), good_spec(d), "--baseline", str(prev))
    return args, {}, ["record 3", "finite, non-negative 'pdtp'"]


def baseline_before_fingerprints(d: Path):
    prev = previous_run(d)
    doc = json.loads((prev / "pdtp.json").read_text())
    del doc["summary"]["identity"]
    (prev / "pdtp.json").write_text(json.dumps(doc))
    args = pdtp_args(d, good_csv(d), good_spec(d), "--baseline", str(prev))
    return args, {}, ["no record identity", "rerun it with this mptool"]


def baseline_other_spec(d: Path):
    prev = previous_run(d, spec=good_spec(d, data={"drop": ["x2"]}))
    args = pdtp_args(d, good_csv(d), good_spec(d), "--baseline", str(prev))
    return args, {}, ["--baseline comes from other data or another spec", "feature columns differ"]


def baseline_other_label(d: Path):
    frame = mixed_frame(30, seed=5).rename(columns={"label": "target"})
    frame.to_csv(d / "other.csv", index=False)
    spec = good_spec(d, data={"label": "target"})
    prev = previous_run(d, spec=spec, csv=d / "other.csv")
    args = pdtp_args(d, good_csv(d), good_spec(d), "--baseline", str(prev))
    return args, {}, ["--baseline comes from other data or another spec", "label column differs"]


@contextlib.contextmanager
def fingerprint_key(value: str | None) -> Iterator[None]:
    """MPTOOL_FINGERPRINT_KEY set to ``value`` (deleted when None) for a previous run, then restored."""
    saved = os.environ.get(KEY_ENV)
    os.environ.pop(KEY_ENV, None)
    if value is not None:
        os.environ[KEY_ENV] = value
    try:
        yield
    finally:
        os.environ.pop(KEY_ENV, None)
        if saved is not None:
            os.environ[KEY_ENV] = saved


def baseline_other_data(d: Path):
    """A baseline made under another fingerprint key (issue 26: no key is ever derived from the data)."""
    with fingerprint_key("another secret"):
        prev = previous_run(d)
    args = pdtp_args(d, good_csv(d), good_spec(d), "--baseline", str(prev))
    return args, {}, ["--baseline was signed under another MPTOOL_FINGERPRINT_KEY", "remake the baseline"]


def baseline_other_bin_size(d: Path):
    prev = previous_run(d, "--bin-size", "0.05")
    args = pdtp_args(d, good_csv(d), good_spec(d), "--baseline", str(prev))
    return args, {}, ["output.bin_size 0.05", "different scales"]


def baseline_is_the_output(d: Path):
    prev = previous_run(d, name="out")
    args = pdtp_args(d, good_csv(d), good_spec(d), "--baseline", str(prev), "--force")
    return args, {}, ["--out would overwrite the --baseline", "even with --force"]


def duplicate_ids(d: Path):
    frame = mixed_frame(30, seed=5)
    frame.insert(0, "rid", [f"r{i}" for i in range(29)] + ["r3"])
    csv = good_csv(d, frame)
    args = pdtp_args(d, csv, good_spec(d, data={"id": "rid"}), "--waivers", str(waivers(d, WAIVER)))
    return args, {}, ["data.id column 'rid' has one value at rows 3 and 29", "unique"]


def tolerance_nan(d: Path):
    args = pdtp_args(d, good_csv(d), good_spec(d), "--baseline-tolerance", "nan")
    return args, {}, ["--baseline-tolerance must be a number from 0 to 10"]


def tolerance_negative(d: Path):
    args = pdtp_args(d, good_csv(d), good_spec(d), "--baseline-tolerance", "-0.1")
    return args, {}, ["--baseline-tolerance must be a number from 0 to 10", "(got -0.1)"]


def format_unknown(d: Path):
    return pdtp_args(d, good_csv(d), good_spec(d), "--format", "xml"), {}, ["--format takes csv, json, junit", "'xml'"]


def fingerprint_key_empty(d: Path):
    return pdtp_args(d, good_csv(d), good_spec(d)), {"MPTOOL_FINGERPRINT_KEY": " "}, ["MPTOOL_FINGERPRINT_KEY", "empty"]


# --- diff and history


def diff_other_data(d: Path):
    with fingerprint_key("another secret"):
        a = previous_run(d, name="a")
    b = previous_run(d, name="b")
    return ["diff", str(a), str(b)], {}, ["RUN_A was signed under another MPTOOL_FINGERPRINT_KEY"]


def diff_not_a_run(d: Path):
    a = previous_run(d, name="a")
    (d / "x.json").write_text("[1, 2]")
    return ["diff", str(a), str(d / "x.json")], {}, ["x.json", "RUN_B is not a pdtp.json"]


def diff_bad_tolerance(d: Path):
    a = previous_run(d, name="a")
    return ["diff", str(a), str(a), "--tolerance", "inf"], {}, ["--tolerance must be a number from 0 to 10"]


def history_without_runs(d: Path):
    (d / "runs" / "empty").mkdir(parents=True)
    return ["report", "--history", str(d / "runs")], {}, ["no readable pdtp run", "--history"]


def history_and_results_dir(d: Path):
    a = previous_run(d, name="a")
    return ["report", str(a), "--history", str(d)], {}, ["give RESULTS_DIR or --history DIR, not both"]


def junit_format_on_attack(d: Path):
    args = ["attack", str(good_csv(d)), "--model", str(good_spec(d)), "--out", str(d / "o"), "--format", "junit,xml"]
    return args, {}, ["--format takes csv, json, junit", "'xml'"]


CASES: list[Case] = [
    waiver_yaml_syntax,
    waiver_duplicate_key,
    waiver_missing_expiry,
    waiver_bad_date,
    waiver_date_words,
    waiver_unknown_key,
    waiver_empty_reason,
    waiver_not_a_list,
    waiver_twice,
    waiver_float_looking_fingerprint,
    waiver_file_missing,
    today_malformed,
    baseline_missing,
    baseline_folder_without_results,
    baseline_not_json,
    baseline_nan,
    baseline_duplicate_json_key,
    baseline_negative_pdtp,
    baseline_before_fingerprints,
    baseline_other_spec,
    baseline_other_label,
    baseline_other_data,
    baseline_other_bin_size,
    baseline_is_the_output,
    duplicate_ids,
    tolerance_nan,
    tolerance_negative,
    format_unknown,
    fingerprint_key_empty,
    diff_other_data,
    diff_not_a_run,
    diff_bad_tolerance,
    history_without_runs,
    history_and_results_dir,
    junit_format_on_attack,
]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_bad_ci_input_exits_2_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: Case) -> None:
    monkeypatch.setenv(KEY_ENV, TEST_KEY)  # records match by keyed fingerprints (issue 26)
    monkeypatch.delenv("MPTOOL_TODAY", raising=False)
    args, env, fragments = case(tmp_path)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    before = snapshot(tmp_path)
    res = run_cli(*args)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.code == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr and len(lines) == 1, res.stderr
    assert lines[0].startswith("mptool: error:"), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert snapshot(tmp_path) == before, "a failed run wrote or changed files"


def test_expired_waiver_is_a_finding_not_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An expired waiver: exit 1 (the record counts again) with a warning naming the waiver; not exit 2."""
    monkeypatch.setenv(KEY_ENV, TEST_KEY)
    prev = previous_run(tmp_path, "--threshold", "0.9")
    top = pd.read_csv(prev / "pdtp.csv", dtype={"fingerprint": str}).to_dict(orient="records")
    worst = max(top, key=lambda r: r["pdtp"])
    assert worst["pdtp"] > 0.9
    text = WAIVER.replace("0123456789abcdef", worst["fingerprint"]).replace("2026-06-30", "2026-01-31")
    monkeypatch.setenv("MPTOOL_TODAY", "2026-02-01")
    others = [r for r in top if r["pdtp"] > 0.9 and r is not worst]
    for r in others:  # waive every other violation, in force: only the expired one counts
        text += f"  - record: '{r['fingerprint']}'\n    reason: ok\n    who: bob\n    expires: 2026-12-31\n"
    args = pdtp_args(tmp_path, good_csv(tmp_path), good_spec(tmp_path), "--threshold", "0.9",
                     "--waivers", str(waivers(tmp_path, text)), "--quiet")
    res = run_cli(*args)
    assert res.code == 1
    warn = [ln for ln in res.stderr.splitlines() if ln.startswith("mptool: warning:")]
    assert warn == [
        f"mptool: warning: waiver for {worst['fingerprint']} (alice: accepted) expired on 2026-01-31: "
        "the record counts again (PDTP above the threshold)"
    ]
    assert "gate FAILED: 1 record(s) above the threshold and not waived" in res.stdout

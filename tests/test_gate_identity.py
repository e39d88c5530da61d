"""Issue 26: identity, baselines and waivers (docs/bad-input.md, "Issue 26: identity, baselines and waivers").

1. Nothing in a result identifies a record. The adversary DTP is defined against knows every
   record but one and tries each candidate for the last one; whatever in pdtp.json, pdtp.csv,
   junit.xml, report.md (the CI summary) and the terminal line differs between candidates
   tells them the true one. Without MPTOOL_FINGERPRINT_KEY nothing that is not the model's own
   output may differ; with it, only what is keyed.
2. A baseline is used only when it verifies (HMAC under the key) and comes from the same
   spec, estimator and engine; the checkpoint key file must be private.
3. Waivers end within MAX_WAIVER_DAYS and keep what YAML would cut as a comment.
4. ``mptool diff RUN RUN`` reports nothing changed.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import mixed_frame, run_cli, write_spec
from test_bad_input import assert_refused, snapshot

from mptool.inputs.baseline import MAX_WAIVER_DAYS
from mptool.inputs.fingerprint import canonical_rows, distinct_rows, fingerprints

KEY_ENV = "MPTOOL_FINGERPRINT_KEY"
KEY = "gate-identity-secret"
#: Candidate values of the last record's unknown column (the issue's adversary tried 24; four show the same).
CANDIDATES = [f"v{i:02d}" for i in range(0, 24, 6)]
#: A digest: 16 or more hex digits, not the decimals of a number (after a point).
HEX = re.compile(r"(?<![.\w])[0-9a-f]{16,}(?!\w)")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv("MPTOOL_TODAY", raising=False)


def base_frame(n: int = 40) -> pd.DataFrame:
    """mixed_frame with a sensitive column ``secret`` (24 possible values) and a feature ``grade`` (24 values)."""
    df = mixed_frame(n, seed=3)
    rng = np.random.default_rng(9)
    df.insert(0, "secret", rng.choice([f"v{i:02d}" for i in range(24)], size=n))
    df.insert(1, "grade", rng.choice([f"g{i:02d}" for i in range(24)], size=n))
    return df


def normalised(folder: Path, stdout: str) -> dict[str, str]:
    """The run's outputs with what differs between any two runs (times, dates, its own folder) blanked."""
    def clean(text: str) -> str:
        for shown in (str(folder), str(folder).replace("_", "\\_")):  # as written, and Markdown-escaped
            text = text.replace(shown, "<DIR>")
        text = re.sub(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2})?(\+\d{4}| UTC)?", "<DATE>", text)
        text = re.sub(r'(time|timestamp)="[^"]*"', r'\1=""', text)
        return re.sub(r"\d+\.\d+ ?s\b", "<T>", text)

    doc = json.loads((folder / "out" / "pdtp.json").read_text())
    doc["summary"].pop("timings")
    doc["summary"]["signature"].pop("sign_s", None)  # the time the signature took: a time
    doc["summary"].get("workers", {}).pop("fit_s", None)  # the timed fit of A(T) that sizes the workers: a time
    out = {"pdtp.json": clean(json.dumps(doc, sort_keys=True, indent=1)), "stdout": clean(stdout)}
    for name in ("pdtp.csv", "junit.xml", "report.md"):
        out[name] = clean((folder / "out" / name).read_text())
    return out


def audit(d: Path, frame: pd.DataFrame, spec: Path) -> dict[str, str]:
    """pdtp (with JUnit) and report (report.md is what CI appends to the job summary) on ``frame``."""
    d.mkdir(parents=True, exist_ok=True)
    frame.to_csv(d / "data.csv", index=False)
    res = run_cli("pdtp", d / "data.csv", "--model", spec, "--out", d / "out", "--jobs", "1", "--format", "junit")
    assert res.code in (0, 1), res.stderr
    rep = run_cli("report", d / "out", "--format", "md", "--quiet")
    assert rep.code == 0, rep.stderr
    return normalised(d, res.stdout)


def candidates_audited(tmp: Path, column: str, spec: Path) -> dict[str, dict[str, str]]:
    """Each candidate value of the last record's ``column``: the normalised outputs of its audit."""
    out = {}
    for value in CANDIDATES:
        frame = base_frame()
        frame.loc[len(frame) - 1, column] = value if column == "secret" else "g" + value[1:]
        out[value] = audit(tmp / value, frame, spec)
    return out


# --------------------------------------------------------------------------------- 1. the adversary


def test_adversary_learns_nothing_from_the_outputs_without_a_key(tmp_path: Path) -> None:
    """The sensitive column is in the file but not a feature: every output is the same for every candidate.

    Before issue 26 the manifest's data_sha256 (a hash of the file) told the true candidate."""
    spec = write_spec(tmp_path / "s.yaml", "categorical_nb", data={"drop": ["secret"]})
    outs = candidates_audited(tmp_path, "secret", spec)
    first = outs[CANDIDATES[0]]
    for value in CANDIDATES[1:]:
        assert outs[value] == first, value
    doc = json.loads(first["pdtp.json"])["summary"]
    assert doc["identity"]["fingerprint"]["key"] == "none" and doc["manifest"]["data_hmac"] is None
    assert doc["signature"]["mac"] is None and KEY_ENV in doc["signature"]["note"]


def test_adversary_on_a_feature_column_finds_no_digest(tmp_path: Path) -> None:
    """The unknown value is a feature: PDTP itself changes with it (that is what DTP bounds), but no digest
    does -- before issue 26, identity.fingerprint.key_id (a hash of the whole data) matched one candidate.
    Every hex string of 16 or more digits in every output is the spec's own hash."""
    spec = write_spec(tmp_path / "s.yaml", "categorical_nb", data={"drop": ["secret"]})
    outs = candidates_audited(tmp_path, "grade", spec)
    blocks = set()
    for out in outs.values():
        s = json.loads(out["pdtp.json"])["summary"]
        blocks.add(json.dumps([s["identity"], s["signature"], s["manifest"]["data_hmac"]], sort_keys=True))
        hexes = {h for text in out.values() for h in HEX.findall(text)}
        assert hexes <= {s["manifest"]["spec_sha256"]}, hexes
        assert pd.read_csv(pd.io.common.StringIO(out["pdtp.csv"]))["fingerprint"].isna().all()
    assert len(blocks) == 1


def test_with_a_key_only_what_is_keyed_differs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under MPTOOL_FINGERPRINT_KEY the outputs differ between candidates only in the keyed data digest and the
    signature over it; the fingerprints (of the audited columns) are the same and keyed."""
    monkeypatch.setenv(KEY_ENV, KEY)
    spec = write_spec(tmp_path / "s.yaml", "categorical_nb", data={"drop": ["secret"]})
    outs = candidates_audited(tmp_path, "secret", spec)

    def unkeyed(out: dict[str, str]) -> dict[str, str]:
        doc = json.loads(out["pdtp.json"])
        keyed = (doc["summary"]["manifest"].pop("data_hmac"), doc["summary"]["signature"].pop("mac"))
        assert all(isinstance(k, str) and len(k) == 64 for k in keyed)
        return {**out, "pdtp.json": json.dumps(doc, sort_keys=True)}

    first = unkeyed(outs[CANDIDATES[0]])
    assert all(unkeyed(outs[v]) == first for v in CANDIDATES[1:])
    digests = {json.loads(o["pdtp.json"])["summary"]["manifest"]["data_hmac"] for o in outs.values()}
    assert len(digests) == len(CANDIDATES)  # keyed: only the key's holder can test a candidate
    assert pd.read_csv(pd.io.common.StringIO(first["pdtp.csv"]))["fingerprint"].str.fullmatch("[0-9a-f]{16}").all()


def test_fingerprints_once_per_distinct_row_equal_the_per_record_form(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28: one MAC per distinct record; the result equals MAC-ing every record's canonical form."""
    import hashlib
    import hmac
    from types import SimpleNamespace

    from mptool.inputs.fingerprint import FINGERPRINT_HEX, SCHEME, key_from_env

    monkeypatch.setenv(KEY_ENV, KEY)
    df = pd.concat([mixed_frame(30, seed=1)] * 5, ignore_index=True)  # 150 rows, 30 distinct at most
    records = SimpleNamespace(X=df.drop(columns="label"), y=df["label"].to_numpy(),
                              schema=SimpleNamespace(label="label"))
    header, inverse, distinct = distinct_rows(records)
    assert len(distinct) <= 30 and len(inverse) == 150
    key = key_from_env()

    def cell(v: object) -> str:  # the canonical form of fingerprint.py's docstring, written out independently
        return "n" + repr(float(v)) if isinstance(v, int | float) else f"s{len(str(v))}:{v}"

    per_record = ["|".join(cell(r[c]) for c in ("color", "size", "x1", "x2", "label")).encode()
                  for r in df.to_dict(orient="records")]
    assert canonical_rows(records)[1] == per_record
    expected = [hmac.new(key.key, SCHEME.encode() + b"\0" + header + b"\0" + r, hashlib.sha256).hexdigest()
                [:FINGERPRINT_HEX] for r in per_record]
    assert fingerprints(records, key).tolist() == expected
    assert fingerprints(records, None).tolist() == [None] * 150


# --------------------------------------------------------------------------------- 4. diff RUN RUN


def test_diff_of_a_run_with_itself_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    mixed_frame(60, seed=2).to_csv(tmp_path / "d.csv", index=False)
    spec = write_spec(tmp_path / "s.yaml", "gaussian_nb")
    assert run_cli("pdtp", tmp_path / "d.csv", "--model", spec, "--out", tmp_path / "r", "-q").code in (0, 1)
    res = run_cli("diff", tmp_path / "r", tmp_path / "r")
    assert res.code == 0, res.stderr
    assert res.stdout.strip().splitlines() == [res.stdout.strip()]  # the summary line only: nothing listed
    assert "0 new, 0 worse, 0 fixed" in res.stdout and "0 record(s) changed by more than 0.05" in res.stdout
    assert "None" not in res.stdout and "nan" not in res.stdout


# --------------------------------------------------------------------------------- refused cases


def data_and_spec(d: Path, estimator: str = "gaussian_nb", **sections) -> tuple[Path, Path]:
    csv = d / "d.csv"
    if not csv.exists():
        frame = mixed_frame(40, seed=5)
        frame.insert(0, "rid", [f"r{i}" for i in range(len(frame))])
        frame.to_csv(csv, index=False)
    return csv, write_spec(d / f"{estimator}-{len(sections)}.yaml", estimator, **sections)


def run_pdtp(d: Path, out: str, *extra: str, key: str | None = KEY, estimator: str = "gaussian_nb",
             **sections) -> Path:
    """A pdtp run into d/out under ``key`` (None: no MPTOOL_FINGERPRINT_KEY), written before a case's snapshot."""
    csv, spec = data_and_spec(d, estimator, **sections)
    saved = os.environ.pop(KEY_ENV, None)
    if key is not None:
        os.environ[KEY_ENV] = key
    try:
        res = run_cli("pdtp", csv, "--model", spec, "--out", d / out, "--jobs", "1", "-q", *extra)
    finally:
        os.environ.pop(KEY_ENV, None)
        if saved is not None:
            os.environ[KEY_ENV] = saved
    assert res.code in (0, 1), res.stderr
    return d / out


def gate_args(d: Path, *extra: str, estimator: str = "gaussian_nb", **sections) -> list[str]:
    csv, spec = data_and_spec(d, estimator, **sections)
    return ["pdtp", str(csv), "--model", str(spec), "--out", str(d / "now"), "--jobs", "1", *map(str, extra)]


def waiver_text(reason: str = "'accepted in review #12'", expires: str = "2026-12-31",
                record: str = "'0123456789abcdef'") -> str:
    return f"waivers:\n  - record: {record}\n    reason: {reason}\n    who: alice\n    expires: {expires}\n"


def case_baseline_without_key_or_id(d: Path):
    prev = run_pdtp(d, "prev", key=None)
    return gate_args(d, "--baseline", prev), None, ["neither data.id nor record fingerprints", KEY_ENV]


def case_waivers_without_key_or_id(d: Path):
    (d / "w.yaml").write_text(waiver_text())
    return gate_args(d, "--waivers", d / "w.yaml"), None, ["--waivers: records are matched by data.id", KEY_ENV]


def case_diff_without_key_or_id(d: Path):
    prev = run_pdtp(d, "prev", key=None)
    return ["diff", str(prev), str(prev)], None, ["RUN_A has neither data.id nor record fingerprints"]


def case_baseline_unsigned(d: Path):
    prev = run_pdtp(d, "prev", key=None, data={"id": "rid"})  # matchable by id, but made without the key
    return gate_args(d, "--baseline", prev, data={"id": "rid"}), KEY, ["--baseline is not signed", KEY_ENV]


def case_baseline_key_unset(d: Path):
    prev = run_pdtp(d, "prev", data={"id": "rid"})
    return gate_args(d, "--baseline", prev, data={"id": "rid"}), None, ["--baseline cannot be verified", KEY_ENV]


def case_baseline_csv_edited(d: Path):
    prev = run_pdtp(d, "prev")
    table = pd.read_csv(prev / "pdtp.csv", dtype={"fingerprint": str})
    table["pdtp"] = 50.0  # every record "was" a violation: all excused as unchanged
    table.to_csv(prev / "pdtp.csv", index=False)
    return gate_args(d, "--baseline", prev), KEY, ["--baseline does not verify", "changed after mptool wrote them"]


def case_baseline_json_edited(d: Path):
    prev = run_pdtp(d, "prev")
    doc = json.loads((prev / "pdtp.json").read_text())
    doc["summary"]["max"] = 0.0
    (prev / "pdtp.json").write_text(json.dumps(doc))
    return gate_args(d, "--baseline", prev), KEY, ["--baseline does not verify"]


def case_baseline_records_in_json_edited(d: Path):
    prev = run_pdtp(d, "prev", "--json-records")
    doc = json.loads((prev / "pdtp.json").read_text())
    doc["records"][0]["pdtp"] = 9.0
    (prev / "pdtp.json").write_text(json.dumps(doc))
    return gate_args(d, "--baseline", prev), KEY, ["--baseline does not verify"]


def case_baseline_other_key(d: Path):
    prev = run_pdtp(d, "prev", key="another secret", data={"id": "rid"})
    return gate_args(d, "--baseline", prev, data={"id": "rid"}), KEY, [f"signed under another {KEY_ENV}"]


def case_baseline_other_estimator(d: Path):
    prev = run_pdtp(d, "prev", estimator="categorical_nb")
    return gate_args(d, "--baseline", prev), KEY, ["--baseline comes from another estimator",
                                                    "categorical_nb then, gaussian_nb now"]


def case_baseline_other_engine(d: Path):
    prev = run_pdtp(d, "prev", "--engine", "refit")
    return gate_args(d, "--baseline", prev), KEY, ["--baseline comes from another engine", "refit then"]


def case_baseline_other_spec(d: Path):
    prev = run_pdtp(d, "prev", "--seed", "7")
    return gate_args(d, "--baseline", prev), KEY, ["--baseline comes from another spec"]


def case_diff_other_estimator(d: Path):
    a = run_pdtp(d, "a", estimator="categorical_nb")
    b = run_pdtp(d, "b")
    return ["diff", str(a), str(b)], KEY, ["RUN_A comes from another estimator"]


def case_waiver_forever(d: Path):
    (d / "w.yaml").write_text(waiver_text(expires="9999-12-31"))
    return gate_args(d, "--waivers", d / "w.yaml"), KEY, [
        "'expires' 9999-12-31 is more than 365 days after today (2026-11-27)", "must end by 2027-11-27"]


def case_waiver_reason_cut_by_comment(d: Path):
    (d / "w.yaml").write_text(waiver_text(reason="reviewed in review #1234"))
    return gate_args(d, "--waivers", d / "w.yaml"), KEY, ["w.yaml line 3: 'reason'", "YAML comment", "quote"]


def case_waiver_record_cut_by_comment(d: Path):
    (d / "w.yaml").write_text(waiver_text(record="r1 #2"))
    return gate_args(d, "--waivers", d / "w.yaml", data={"id": "rid"}), KEY, ["line 2: 'record'", "YAML comment"]


def case_waiver_reason_only_comment(d: Path):
    (d / "w.yaml").write_text(waiver_text(reason="#1234"))
    return gate_args(d, "--waivers", d / "w.yaml"), KEY, ["'reason' must be non-empty text"]


CASES = [
    case_baseline_without_key_or_id, case_waivers_without_key_or_id, case_diff_without_key_or_id,
    case_baseline_unsigned, case_baseline_key_unset, case_baseline_csv_edited, case_baseline_json_edited,
    case_baseline_records_in_json_edited, case_baseline_other_key, case_baseline_other_estimator,
    case_baseline_other_engine, case_baseline_other_spec, case_diff_other_estimator, case_waiver_forever,
    case_waiver_reason_cut_by_comment, case_waiver_record_cut_by_comment, case_waiver_reason_only_comment,
]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__.removeprefix("case_") for c in CASES])
def test_refused_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case) -> None:
    monkeypatch.setenv("MPTOOL_TODAY", "2026-11-27")
    args, key, fragments = case(tmp_path)
    if key is not None:
        monkeypatch.setenv(KEY_ENV, key)
    before = snapshot(tmp_path)
    assert_refused(run_cli(*args), fragments, tmp_path, before)


def test_waiver_quoted_with_hash_and_bounded_expiry_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The docs' example, quoted, keeps '#1234'; an expiry exactly MAX_WAIVER_DAYS ahead is accepted."""
    monkeypatch.setenv("MPTOOL_TODAY", "2026-11-27")
    monkeypatch.setenv(KEY_ENV, KEY)
    prev = run_pdtp(tmp_path, "prev", "--threshold", "0.3", data={"id": "rid"})
    table = pd.read_csv(prev / "pdtp.csv", dtype={"id": str})
    worst = table.sort_values("pdtp").iloc[-1]
    assert worst["pdtp"] > 0.3
    last = (pd.Timestamp("2026-11-27") + pd.Timedelta(days=MAX_WAIVER_DAYS)).date().isoformat()
    (tmp_path / "w.yaml").write_text(waiver_text("'accepted in review #1234'", last, f"'{worst['id']}'"))
    res = run_cli(*gate_args(tmp_path, "--waivers", tmp_path / "w.yaml", "--threshold", "0.3", data={"id": "rid"}))
    assert res.code in (0, 1), res.stderr
    block = json.loads((tmp_path / "now" / "pdtp.json").read_text())["summary"]["baseline"]["waivers"]
    assert block["in_force"][0]["reason"] == "accepted in review #1234" and block["in_force"][0]["expires"] == last


# --------------------------------------------------------------------------------- checkpoint key file


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX file owners and modes")
@pytest.mark.parametrize("problem", ["group-readable", "world-writable", "other-owner", "symlink"])
def test_unsafe_checkpoint_key_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, problem: str) -> None:
    state = tmp_path / "state"
    (state / "mptool").mkdir(parents=True)
    key = state / "mptool" / "checkpoint.key"
    real = tmp_path / "real.key"
    real.write_text("0" * 64 + "\n")
    real.chmod(0o600)
    if problem == "symlink":
        key.symlink_to(real)
    else:
        key.write_text("1" * 64 + "\n")
        key.chmod({"group-readable": 0o640, "world-writable": 0o602, "other-owner": 0o600}[problem])
    if problem == "other-owner":
        if os.getuid() != 0:
            pytest.skip("changing a file's owner needs root")
        os.chown(key, 12345, 12345)
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    monkeypatch.delenv("MPTOOL_CHECKPOINT_KEY", raising=False)
    args = gate_args(tmp_path)
    before = snapshot(tmp_path)
    why = {"group-readable": "may be read or written by others (mode 0640)",
           "world-writable": "may be read or written by others (mode 0602)",
           "other-owner": "belongs to another user", "symlink": "not a regular file"}[problem]
    assert_refused(run_cli(*args), ["checkpoint.key", why, "MPTOOL_CHECKPOINT_KEY"], tmp_path, before)


# --------------------------------------------------------------------------------- 5. the documented workflow


def test_documented_baseline_workflow_downloads_what_a_step_uploads_from_an_earlier_run() -> None:
    """docs/ci-and-cron.md's workflow: download-artifact gets run-id and github-token (an earlier run, not the
    current one), the artifact it names is the one the action uploads, and the key secret is passed."""
    import yaml

    repo = Path(__file__).resolve().parents[1]
    text = (repo / "docs" / "ci-and-cron.md").read_text()
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "download-artifact" in b)
    workflow = yaml.safe_load(block)
    assert workflow["permissions"]["actions"] == "read"
    steps = workflow["jobs"]["privacy"]["steps"]
    download = next(s for s in steps if str(s.get("uses", "")).startswith("actions/download-artifact"))
    assert {"name", "path", "run-id", "github-token"} <= set(download["with"])
    finder = next(s for s in steps if s.get("id") == download["with"]["run-id"].split(".")[1])
    assert "gh run list" in finder["run"] and "--status success" in finder["run"]
    action = yaml.safe_load((repo / "action.yml").read_text())
    upload = next(s for s in action["runs"]["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    assert upload["with"]["name"] == "${{ inputs.artifact-name }}"
    assert download["with"]["name"] == action["inputs"]["artifact-name"]["default"]
    gate = next(s for s in steps if "mptool" in str(s.get("uses", "")))
    assert gate["with"]["fingerprint-key"] == "${{ secrets.MPTOOL_FINGERPRINT_KEY }}"
    assert "MPTOOL_FINGERPRINT_KEY" in (repo / "README.md").read_text().split("## In CI (GitHub Actions)")[1]

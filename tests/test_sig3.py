"""A gate publishes only a verdict it computed (red-team finding, helper sig3; docs/bad-input.md "sig3-").

A pull request that commits its own results folder (a forged pdtp.json/pdtp.csv/report.md saying
"DTP-1 holds") must not reach the job's step summary: scripts/ci-gate.sh refuses an output folder
that already holds files (exit 2, before pdtp starts), and reports the folder only when pdtp exited
0 or 1 (the only codes after which pdtp has written its results). Both cases run the script once
each; neither starts Python (the refusal comes first; the second case's mptool is a stub).

Defence in depth (sig3-4): ``mptool report`` under ``MPTOOL_FINGERPRINT_KEY`` refuses a signed
pdtp.json that does not verify over pdtp.json and pdtp.csv (exit 2, nothing written); a result
whose ``signature.mac`` is null, or any result without a key, is reported as before.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_cli
from test_bad_input import assert_refused, good_csv, good_spec, snapshot
from test_ci_cron import run_gate

FORGED = "## :white_check_mark: DTP-1 holds (forged)\n"


def forge(folder: Path) -> None:
    """The files a pull request could commit as its own results folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pdtp.json").write_text(json.dumps({"summary": {"verdict": "pass", "violations": 0}}))
    (folder / "pdtp.csv").write_text("row,pdtp\n0,0.0\n")
    (folder / "report.md").write_text(FORGED)


def gate_env(tmp_path: Path, out: str) -> tuple[dict[str, str], Path, Path]:
    step, outputs = tmp_path / "summary.md", tmp_path / "outputs.txt"
    env = {"MPTOOL_DATA": "d.csv", "MPTOOL_SPEC": "s.yaml", "MPTOOL_OUT": out,
           "GITHUB_STEP_SUMMARY": str(step), "GITHUB_OUTPUT": str(outputs)}
    return env, step, outputs


def test_gate_refuses_an_output_folder_that_already_holds_results(tmp_path: Path) -> None:
    forge(tmp_path / "privacy-audit")
    before = snapshot(tmp_path / "privacy-audit")
    env, step, outputs = gate_env(tmp_path, "privacy-audit")
    res = run_gate(tmp_path, **env)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mptool: error:") and "new or empty folder" in lines[0]
    summary = step.read_text()
    assert "DTP-1 holds" not in summary and "did not finish (exit code 2)" in summary
    assert outputs.read_text().splitlines() == ["exit-code=2", "verdict=error", "report=privacy-audit"]
    assert snapshot(tmp_path / "privacy-audit") == before  # nothing rendered, nothing replaced


def test_gate_refuses_an_output_folder_name_with_a_newline(tmp_path: Path) -> None:
    """MPTOOL_OUT went into $GITHUB_OUTPUT as report=$out: a newline in it added lines of its own, such as
    verdict=pass after the gate's verdict=error. Now exit 2 before pdtp, and only the gate's own lines (sig3-5)."""
    env, step, outputs = gate_env(tmp_path, "audit\nverdict=pass")
    res = run_gate(tmp_path, **env)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mptool: error:") and "control character" in lines[0]
    assert "verdict=pass" not in res.stderr  # the value is not echoed
    assert outputs.read_text().splitlines() == ["exit-code=2", "verdict=error"]
    assert "did not finish (exit code 2)" in step.read_text()
    assert not (tmp_path / "audit").exists() and not (tmp_path / "audit\nverdict=pass").exists()


def test_gate_refuses_an_output_folder_that_reads_as_an_option(tmp_path: Path) -> None:
    """MPTOOL_OUT=--help: pdtp wrote into a folder named --help, `mptool report --help` printed its help and
    exited 0, and the gate passed with no report (red7). Now exit 2 before pdtp (sig3-6)."""
    env, step, outputs = gate_env(tmp_path, "--help")
    res = run_gate(tmp_path, **env)
    assert res.returncode == 2, res.stderr
    assert "starts with '-'" in res.stderr and outputs.read_text().splitlines() == ["exit-code=2", "verdict=error"]
    assert not (tmp_path / "--help").exists()


def test_a_report_that_exits_0_without_its_file_never_passes(tmp_path: Path) -> None:
    """A report command that exits 0 and writes no report.md: the gate exits 3 (internal error), not 0 (sig3-6)."""
    stub = tmp_path / "mptool-stub"
    stub.write_text(
        "#!/usr/bin/env bash\n"
        'if [ "$1" = report ]; then exit 0; fi\n'
        'out=""; while [ $# -gt 0 ]; do if [ "$1" = --out ]; then out="$2"; fi; shift; done\n'
        'mkdir -p "$out"; echo "{}" > "$out/pdtp.json"; exit 0\n'
    )
    stub.chmod(0o755)
    env, step, outputs = gate_env(tmp_path, "fresh")
    res = run_gate(tmp_path, MPTOOL_BIN=str(stub), **env)
    assert res.returncode == 3, res.stderr
    assert "verdict=error" in outputs.read_text() and "report failed (exit code 3)" in step.read_text()


def test_gate_reports_nothing_when_pdtp_exits_other_than_0_or_1(tmp_path: Path) -> None:
    """Even if the folder holds results when pdtp ends (a stub that leaves forged files and exits 2), the
    step summary says the gate did not finish and `mptool report` is never run."""
    stub = tmp_path / "mptool-stub"
    stub.write_text(
        "#!/usr/bin/env bash\n"
        'if [ "$1" = report ]; then echo reported >> "$STUB_LOG"; cat "$2/report.md"; exit 0; fi\n'
        'out=""; while [ $# -gt 0 ]; do if [ "$1" = --out ]; then out="$2"; fi; shift; done\n'
        f'mkdir -p "$out"; printf %s {json.dumps(FORGED)} > "$out/report.md"; echo "{{}}" > "$out/pdtp.json"\n'
        "exit 2\n"
    )
    stub.chmod(0o755)
    env, step, outputs = gate_env(tmp_path, "fresh")
    log = tmp_path / "stub.log"
    res = run_gate(tmp_path, **env, MPTOOL_BIN=str(stub), STUB_LOG=str(log))
    assert res.returncode == 2, res.stderr
    summary = step.read_text()
    assert "DTP-1 holds" not in summary and "did not finish (exit code 2)" in summary
    assert not log.exists(), "mptool report ran on results pdtp did not finish"
    assert outputs.read_text().splitlines() == ["exit-code=2", "verdict=error", "report=fresh"]


# ------------------------------------------------ mptool report of a signed result that does not verify (sig3-4)

KEY_ENV = "MPTOOL_FINGERPRINT_KEY"
KEY = "sig3-report-key"
NOT_OURS = "its signature does not verify under MPTOOL_FINGERPRINT_KEY: not results this key's runs wrote"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two pdtp runs of the same tiny data: one signed under KEY, one made without a key (mac null)."""
    d = tmp_path_factory.mktemp("sig3runs")
    csv, spec = good_csv(d), good_spec(d)
    folders = {}
    for name, key in (("signed", KEY), ("unsigned", None)):
        with pytest.MonkeyPatch.context() as mp:
            if key is None:
                mp.delenv(KEY_ENV, raising=False)
            else:
                mp.setenv(KEY_ENV, key)
            res = run_cli("pdtp", csv, "--model", spec, "--out", d / name, "--jobs", "1", "-q")
        assert res.code in (0, 1), res.stderr
        folders[name] = d / name
    assert json.loads((folders["signed"] / "pdtp.json").read_text())["summary"]["signature"]["mac"]
    assert json.loads((folders["unsigned"] / "pdtp.json").read_text())["summary"]["signature"]["mac"] is None
    return folders


def edited(runs: dict[str, Path], tmp_path: Path, name: str = "signed") -> Path:
    """A copy of a run whose pdtp.json says another output folder: a field no consistency check reads."""
    run = shutil.copytree(runs[name], tmp_path / name)
    doc = json.loads((run / "pdtp.json").read_text())
    doc["summary"]["out"] = "elsewhere"
    (run / "pdtp.json").write_text(json.dumps(doc))
    return run


def report(run: Path):
    return run_cli("report", str(run), "--format", "both", "-q")


def test_report_of_a_signed_run_that_verifies_is_written(runs, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    run = shutil.copytree(runs["signed"], tmp_path / "run")
    res = report(run)
    assert res.code == 0, res.stderr
    assert (run / "report.md").is_file() and (run / "report.html").is_file()


@pytest.mark.parametrize("how", ["edited json", "edited csv", "other key", "csv removed"])
def test_report_refuses_a_signed_result_that_does_not_verify(runs, tmp_path: Path, monkeypatch, how: str) -> None:
    monkeypatch.setenv(KEY_ENV, "another-key" if how == "other key" else KEY)
    if how == "edited json":
        run = edited(runs, tmp_path)
    else:
        run = shutil.copytree(runs["signed"], tmp_path / "run")
    if how == "edited csv":  # the same records, one more byte (a trailing newline the CSV reader skips)
        (run / "pdtp.csv").write_bytes((run / "pdtp.csv").read_bytes() + b"\n")
    if how == "csv removed":
        (run / "pdtp.csv").unlink()
    before = snapshot(run)
    line = assert_refused(report(run), [str(run / "pdtp.json"), NOT_OURS], run, before)
    assert line == f"mptool: error: {run / 'pdtp.json'}: {NOT_OURS}"


def test_report_without_a_signature_or_without_a_key_reads_as_before(runs, tmp_path: Path, monkeypatch) -> None:
    """mac null (made without a key): reported under a key; a signed result edited: reported without one."""
    monkeypatch.setenv(KEY_ENV, KEY)
    unsigned = edited(runs, tmp_path, "unsigned")
    assert report(unsigned).code == 0
    monkeypatch.delenv(KEY_ENV)
    signed = edited(runs, tmp_path)
    res = report(signed)
    assert res.code == 0, res.stderr
    assert (signed / "report.md").is_file()


def test_gate_says_so_when_the_report_fails_after_pdtp(tmp_path: Path) -> None:
    """pdtp passes (a stub exiting 0), `mptool report` fails (exit 2): the gate exits 2 and the step summary
    says the report failed, with both codes, instead of saying nothing (noticed in the last round)."""
    stub = tmp_path / "mptool-stub"
    stub.write_text(
        "#!/usr/bin/env bash\n"
        'if [ "$1" = report ]; then echo "mptool: error: report failed" >&2; exit 2; fi\n'
        'out=""; while [ $# -gt 0 ]; do if [ "$1" = --out ]; then out="$2"; fi; shift; done\n'
        'mkdir -p "$out"; echo "{}" > "$out/pdtp.json"; exit 0\n'
    )
    stub.chmod(0o755)
    env, step, outputs = gate_env(tmp_path, "fresh")
    res = run_gate(tmp_path, **env, MPTOOL_BIN=str(stub))
    assert res.returncode == 2, res.stderr
    summary = step.read_text()
    assert "mptool report failed (exit code 2) after mptool pdtp exited 0" in summary and "The gate exits 2" in summary
    assert outputs.read_text().splitlines() == ["exit-code=2", "verdict=error", "report=fresh"]

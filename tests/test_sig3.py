"""A gate publishes only a verdict it computed (red-team finding, helper sig3; docs/bad-input.md "sig3-").

A pull request that commits its own results folder (a forged pdtp.json/pdtp.csv/report.md saying
"DTP-1 holds") must not reach the job's step summary: scripts/ci-gate.sh refuses an output folder
that already holds files (exit 2, before pdtp starts), and reports the folder only when pdtp exited
0 or 1 (the only codes after which pdtp has written its results). Both cases run the script once
each; neither starts Python (the refusal comes first; the second case's mptool is a stub).
"""

from __future__ import annotations

import json
from pathlib import Path

from test_bad_input import snapshot
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

"""``mptool report`` on a replicate-engine run: undecided records shown, verdict from the decisions (issue 27 item 6).

Tiny known-answer data (:mod:`mptool.inputs.known_answer`), ``--replicates 4:4`` and a
``--budget`` that leaves records unevaluated (their estimate empty, violation undecided).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli, write_spec

from mptool.inputs.known_answer import ESTIMATOR, MODULE, known_frame


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two pdtp runs: decided violations and a spent budget; nothing decided (no memorising, seed noise 2)."""
    d = tmp_path_factory.mktemp("rep")
    csv = d / "d.csv"
    known_frame(0)[0].to_csv(csv, index=False)
    out = {}
    for name, noise, memorise, budget in (("violated", 1.0, 6.0, "40"), ("open", 2.0, 0.0, "200")):
        params = {"weight_feature": 1, "noise": noise, "memorise": memorise}
        spec = write_spec(d / f"{name}.yaml", ESTIMATOR, model={"params": params, "preprocess": "none"})
        res = run_cli("pdtp", csv, "-m", spec, "--allow-import", MODULE, "--out", d / "runs" / name, "--jobs", "1",
                      "--replicates", "4:4", "--budget", budget, "-q")
        assert res.code == 1, res.stderr
        out[name] = d / "runs" / name
    return out


def test_report_counts_undecided_and_lists_decisions(runs: dict[str, Path]) -> None:
    res = run_cli("report", runs["violated"], "--format", "md", "--out", "-")
    assert res.code == 0, res.stderr
    table = pd.read_csv(runs["violated"] / "pdtp.csv")
    undecided = int((table["violation"].astype(str) == "undecided").sum())
    assert undecided and table["pdtp"].isna().any()  # the budget left records unevaluated
    assert "DTP-1 VIOLATED" in res.stdout and f"{undecided} undecided" in res.stdout
    assert f"| records undecided (not established; violation = undecided in pdtp.csv) | {undecided} |" in res.stdout
    assert "| violation | pdtp\\_low | pdtp\\_high | replicates |" in res.stdout


def test_every_undecided_record_is_listed(runs: dict[str, Path], tmp_path: Path, monkeypatch) -> None:
    """The report lists every undecided record (not only those among the riskiest 20), highest estimate
    first, unevaluated ones (no estimate) included; the HTML caps the table and counts the rest."""
    import mptool.outputs.report.context as context

    table = pd.read_csv(runs["violated"] / "pdtp.csv")
    undecided = table[table["violation"].astype(str) == "undecided"]
    res = run_cli("report", runs["violated"], "--format", "md", "--out", "-")
    assert res.code == 0, res.stderr
    assert f"### The {len(undecided)} undecided records" in res.stdout
    section = res.stdout.split(f"### The {len(undecided)} undecided records", 1)[1].split("###", 1)[0]
    cells = [line.split("|")[1].strip() for line in section.splitlines() if line.startswith("| ")]
    listed = [c for c in cells if c.isdigit()]  # the header (row) and the alignment line (---:) are not rows
    assert sorted(int(r) for r in listed) == sorted(undecided["row"].tolist())
    monkeypatch.setattr(context, "UNDECIDED_ROWS", 2)
    assert run_cli("report", runs["violated"], "--out", tmp_path / "r.html", "-q").code == 0
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert f"The {len(undecided)} undecided records" in html
    assert f"the other\n  {len(undecided) - 2} are in pdtp.csv" in html
    decided = run_cli("report", runs["open"], "--format", "md", "--out", "-")
    assert "undecided records" in decided.stdout  # nothing decided there: all listed


def test_undecided_run_reads_not_established_never_holds(runs: dict[str, Path]) -> None:
    res = run_cli("report", runs["open"], "--format", "md", "--out", "-")
    assert res.code == 0, res.stderr
    head = res.stdout.splitlines()[0]
    assert "DTP-1 not established" in head and "holds" not in head
    assert "exited with code 1" in res.stdout


def test_edited_decision_is_refused(runs: dict[str, Path], tmp_path: Path) -> None:  # rand6-3
    copy = tmp_path / "edited"
    shutil.copytree(runs["violated"], copy)
    text = (copy / "pdtp.csv").read_text()
    (copy / "pdtp.csv").write_text(text.replace(",True,", ",False,", 1))
    res = run_cli("report", copy, "--format", "md", "--out", "-")
    assert res.code == 2 and "summary.violations" in res.stderr and "a result file was edited" in res.stderr


def test_unknown_decision_is_refused(runs: dict[str, Path], tmp_path: Path) -> None:  # rand6-4
    copy = tmp_path / "odd"
    shutil.copytree(runs["open"], copy)
    text = (copy / "pdtp.csv").read_text()
    (copy / "pdtp.csv").write_text(text.replace(",undecided,", ",maybe,", 1))
    res = run_cli("report", copy, "--format", "md", "--out", "-")
    assert res.code == 2 and "a 'violation' cell that is not true, false or undecided" in res.stderr


def test_history_takes_the_verdict_from_the_decisions(runs: dict[str, Path]) -> None:
    res = run_cli("report", "--history", runs["violated"].parent, "--format", "md", "--out", "-")
    assert res.code == 0, res.stderr
    assert "violated: left out" in res.stderr  # its unevaluated records have no PDTP to trend
    rows = [line for line in res.stdout.splitlines() if line.startswith("| open")]
    assert len(rows) == 1 and "undecided" in rows[0] and "pass" not in rows[0]

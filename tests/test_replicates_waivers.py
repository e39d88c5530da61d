"""``--waivers`` with the replicate engine (issue 27 item 6, loose end 4; ``--baseline``: test_replicates_baseline.py).

A waiver excuses a record *decided* above the threshold beyond the training randomness; an
undecided record is never waived, so it keeps the verdict "not established" (exit 1). The
waived records are named in the gate line, pdtp.json (``summary.baseline``), the JUnit file and
the ``waived`` column, as for the exact engines. Known-answer data with an id column (26 rows).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli, write_spec

from mptool.inputs.known_answer import ESTIMATOR, MODULE, known_frame


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("waive")
    frame = known_frame(0)[0]
    frame.insert(0, "rid", [f"r{i}" for i in range(len(frame))])
    frame.to_csv(d / "d.csv", index=False)
    spec = write_spec(d / "s.yaml", ESTIMATOR, data={"id": "rid", "drop": []},
                      model={"params": {"weight_feature": 1, "noise": 1.0}, "preprocess": "none"})
    return d, spec


def _waivers(path: Path, records: list[str]) -> Path:
    lines = ["waivers:"]
    for r in records:
        lines += [f"  - record: '{r}'", "    reason: 'memorised on purpose'", "    who: alice",
                  "    expires: 2026-12-31"]
    path.write_text("\n".join(lines) + "\n")
    return path


def _run(d: Path, spec: Path, out: str, *extra: str):
    res = run_cli("pdtp", d / "d.csv", "-m", spec, "--allow-import", MODULE, "--out", d / out, "--jobs", "1",
                  "--replicates", "4:8", "--format", "csv,junit", "--force", *extra)
    doc = json.loads((d / out / "pdtp.json").read_text()) if (d / out / "pdtp.json").exists() else {}
    return res, doc


@pytest.fixture(scope="module")
def decided(data: tuple[Path, Path]) -> list[str]:
    d, spec = data
    res, doc = _run(d, spec, "plain")
    assert res.code == 1 and doc["summary"]["undecided"] == 0
    t = pd.read_csv(d / "plain" / "pdtp.csv", dtype={"violation": str})
    return t.loc[t["violation"] == "True", "id"].tolist()


def test_waiving_every_decided_violation_passes_with_waivers(data, decided, monkeypatch) -> None:
    monkeypatch.setenv("MPTOOL_TODAY", "2026-11-27")
    d, spec = data
    res, doc = _run(d, spec, "waived", "--waivers", _waivers(d / "all.yaml", decided))
    assert res.code == 0, res.stdout + res.stderr
    block = doc["summary"]["baseline"]
    assert block["counts"] == {"violations": len(decided), "waived": len(decided), "counted": 0, "undecided": 0}
    assert block["verdict_label"] == "pass-with-waivers" and "gate passed (pass-with-waivers)" in res.stdout
    junit = (d / "waived" / "junit.xml").read_text()
    assert "<failure" not in junit and "waived (--waivers)" in junit
    t = pd.read_csv(d / "waived" / "pdtp.csv", dtype={"violation": str})
    assert t.loc[t["violation"] == "True", "waived"].all() and not t.loc[t["violation"] != "True", "waived"].any()
    rep = run_cli("report", d / "waived", "--format", "md", "--out", "-")
    assert rep.code == 0 and "pass-with-waivers" in rep.stdout


def test_one_decided_violation_left_fails(data, decided, monkeypatch) -> None:
    monkeypatch.setenv("MPTOOL_TODAY", "2026-11-27")
    d, spec = data
    res, doc = _run(d, spec, "partly", "--waivers", _waivers(d / "some.yaml", decided[1:]))
    assert res.code == 1 and doc["summary"]["baseline"]["counts"]["counted"] == 1
    assert "gate FAILED: 1 record(s) decided above the threshold and not waived" in res.stdout


def test_undecided_records_are_never_waived(data, decided, monkeypatch) -> None:
    """A budget leaves records undecided: every decided violation waived still reads "not established"."""
    monkeypatch.setenv("MPTOOL_TODAY", "2026-11-27")
    d, spec = data
    res, doc = _run(d, spec, "open", "--waivers", _waivers(d / "all2.yaml", decided), "--budget", "60")
    block = doc["summary"]["baseline"]
    assert res.code == 1 and block["verdict"] == "undecided" and block["counts"]["undecided"] > 0
    assert "gate not established" in res.stdout and "<failure" in (d / "open" / "junit.xml").read_text()

"""Red-team pass over issue 27's ff2 work (how a replicate run ended; diff of decisions; the report's rows).

Each test is one finding: it failed before its fix. Runs are written in-process: a pdtp.json with its
records inline, signed under a test key (:func:`mptool.inputs.signature.signature_block`), so
``mptool diff`` reads it as a run mptool wrote; report tests edit a copy of a real replicate run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from test_bad_input import assert_refused

from mptool.inputs.signature import signature_block

KEY = "red2-key"


def _signed(folder: Path, rows: list[tuple[str, float, Any]], *, engine: str = "replicates",
            **extra: Any) -> Path:
    """A signed pdtp.json in ``folder``: (id, pdtp, violation) per record (violation None: a refit run)."""
    folder.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {
        "threshold": 1.0, "gate": "binned", "engine": engine, "estimator": "E", "max": max(p for _, p, _ in rows),
        "manifest": {"spec_sha256": "0" * 64},
        "identity": {"label": "label", "id": "rid", "features": ["x"], "bin_size": 0.01,
                     "fingerprint": {"scheme": "hmac-sha256-v1", "key_id": None}},
        **extra,
    }
    if engine == "replicates":
        summary["replicates"] = {"error_control": "bh", "confidence": 0.95, **summary.get("replicates", {})}
    records = [{"row": i, "id": k, "pdtp": p, "fingerprint": f"{i:016x}",
                **({} if v is None else {"violation": v})} for i, (k, p, v) in enumerate(rows)]
    doc = {"summary": summary, "records": records}
    summary["signature"] = signature_block(doc, None)
    (folder / "pdtp.json").write_text(json.dumps(doc))
    return folder


# ------------------------------------------------------------------ red2-1: diff of a --fail-fast-stopped RUN_B

STOP = {"reason": "fail-fast", "row": 0, "after": 3, "of": 3, "refits_run": 12}


def test_diff_refuses_a_run_b_stopped_by_fail_fast(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """RUN_B stopped at a violation RUN_A already had: its other records were never decided (replicate
    engine: left undecided by the stop, r1's estimate far above the threshold; refit engine: not in B at
    all), so "not worse" (exit 0) would be a pass nobody checked: the reason ``--fail-fast`` excludes
    ``--baseline``. Before the fix both diffs exited 0."""
    monkeypatch.setenv("MPTOOL_FINGERPRINT_KEY", KEY)
    a = _signed(tmp_path / "a", [("r0", 4.6, "True"), ("r1", 0.05, "False"), ("r2", 0.4, "False")])
    b = _signed(tmp_path / "b", [("r0", 4.6, "True"), ("r1", 4.5, "undecided"), ("r2", 0.4, "undecided")],
                stopped=STOP, replicates={"fail_fast_spending": {"stopped_by": "audit", "ended": "fail-fast stop"}})
    line = assert_refused(run_cli("diff", a, b), ["RUN_B was stopped by --fail-fast (summary.stopped)"],
                          stdout_empty=True)
    assert "4.5" not in line and "r1" not in line
    ra = _signed(tmp_path / "ra", [("r0", 2.0, None), ("r1", 0.1, None), ("r2", 0.2, None)], engine="refit")
    rb = _signed(tmp_path / "rb", [("r0", 2.0, None)], engine="refit", stopped={**STOP, "after": 1})
    assert_refused(run_cli("diff", ra, rb), ["RUN_B was stopped by --fail-fast (summary.stopped)"], stdout_empty=True)
    # RUN_A stopped: RUN_B's violations among A's unevaluated records are new (worse): fail closed, still compared
    assert run_cli("diff", b, a, "-q").code == 0  # r0 decided above in both; A's decisions are B's or better
    assert run_cli("diff", rb, ra, "-q").code == 0
    full = _signed(tmp_path / "full", [("r0", 4.6, "True"), ("r1", 4.5, "True"), ("r2", 0.4, "False")])
    assert run_cli("diff", b, full, "-q").code == 1  # r1: undecided -> above is new


# --------------------------------------------- red2-2: the report of a pdtp.json whose stop or ending is damaged


@pytest.fixture(scope="module")
def ended(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two replicate ``--fail-fast`` runs as tests/test_ff2.py makes them: a stop (``--budget 100``) and a
    spent budget that leaves records unevaluated (``--budget 40``: empty estimates, violation undecided)."""
    import numpy as np
    from conftest import write_spec

    from mptool.inputs.known_answer import ESTIMATOR, MODULE, known_frame

    d = tmp_path_factory.mktemp("red2")
    df, kind = known_frame(0)
    nulls, large = np.nonzero(kind == "null")[0], np.nonzero(kind == "large")[0]
    df.iloc[[*nulls[:6], *large, *nulls[6:]]].reset_index(drop=True).to_csv(d / "d.csv", index=False)
    spec = write_spec(d / "s.yaml", ESTIMATOR, model={"params": {"weight_feature": 1, "noise": 1.0, "memorise": 6.0},
                                                      "preprocess": "none"})
    out = {}
    for name, budget in (("stop", "100"), ("budget", "40")):
        res = run_cli("pdtp", d / "d.csv", "-m", spec, "--allow-import", MODULE, "--out", d / name, "--jobs", "1",
                      "--replicates", "4:8", "--fail-fast", "--order", "row", "--budget", budget, "-q")
        assert res.code == 1, res.stderr
        out[name] = d / name
    return out


def _edited(run: Path, to: Path, change: Any) -> Path:
    """A copy of ``run`` whose pdtp.json summary ``change`` edits (pdtp.csv unchanged)."""
    import shutil

    shutil.copytree(run, to)
    doc = json.loads((to / "pdtp.json").read_text())
    change(doc["summary"])
    (to / "pdtp.json").write_text(json.dumps(doc))
    return to


def _spend(s: dict[str, Any]) -> dict[str, Any]:
    return s["replicates"]["fail_fast_spending"]


def _hide_stop(s: dict[str, Any]) -> None:
    del s["stopped"]
    _spend(s)["stopped_by"] = None
    s["complete"] = True


EDITS = {  # name: (run, edit, the field the refusal names)
    "stop hidden, ended says stop": ("stop", _hide_stop, "summary.replicates.fail_fast_spending.ended"),
    "ended not a string": ("stop", lambda s: _spend(s).update(ended=42), "summary.replicates.fail_fast_spending.ended"),
    "ended complete after a stop": ("stop", lambda s: _spend(s).update(ended="complete"),
                                    "summary.replicates.fail_fast_spending.ended"),
    "ended unknown": ("stop", lambda s: _spend(s).update(ended="<b>done</b>"),
                      "summary.replicates.fail_fast_spending.ended"),
    "stopped without its row": ("stop", lambda s: s.update(stopped={"reason": "fail-fast"}), "summary.stopped"),
    "stopped not an object": ("stop", lambda s: s.update(stopped="yes"), "summary.stopped"),
    "stopped after more records than reported": ("stop", lambda s: s["stopped"].update(after=26), "summary.stopped"),
    "stopped after more records than requested": ("stop", lambda s: s["stopped"].update(of=18), "summary.stopped"),
    "spending not an object": ("stop", lambda s: s["replicates"].update(fail_fast_spending=[1]),
                               "summary.replicates.fail_fast_spending"),
    "spending without its split": ("stop", lambda s: _spend(s).pop("screen_alpha"),
                                   "summary.replicates.fail_fast_spending"),
    "stopped_by unknown": ("stop", lambda s: _spend(s).update(stopped_by="me"),
                           "summary.replicates.fail_fast_spending"),
    "unevaluated records, ended complete": (
        "budget", lambda s: (s["replicates"].update(budget_exhausted=False), _spend(s).update(ended="complete")),
        "summary.replicates.budget_exhausted"),
    "unevaluated records, no ended (older run), budget not spent": (
        "budget", lambda s: (s["replicates"].update(budget_exhausted=False), _spend(s).pop("ended")),
        "summary.replicates.budget_exhausted"),
}


@pytest.mark.parametrize("case", list(EDITS))
def test_report_refuses_a_damaged_stop_or_ending(ended: dict[str, Path], tmp_path: Path, case: str) -> None:
    """Before the fix each report exited 0 and said "ended complete: no stop, every record evaluated" (a stop or
    unevaluated records in pdtp.csv notwithstanding), or dropped the stop from "The verdict rests on" and the
    summary rows (a damaged block was skipped without a word)."""
    run, change, field = EDITS[case]
    copy = _edited(ended[run], tmp_path / "run", change)
    line = assert_refused(run_cli("report", copy, "--format", "md", "--out", "-"),
                          [f"{copy / 'pdtp.json'}: {field}", "rerun mptool pdtp"], stdout_empty=True)
    said = line.replace(str(copy), "")  # the folder's path may hold any digits (pytest-942 held "42")
    assert "<b>" not in said and "me " not in said and "42" not in said  # no raw value echoed


def test_report_of_runs_as_written_and_of_an_older_run(ended: dict[str, Path], tmp_path: Path) -> None:
    """The runs as mptool wrote them report as before; a run from before ``ended`` existed (no ``ended``, its
    budget flag also set by the stop) still says the stop; a stop without ``fail_fast_spending`` (a replicate run
    from before it existed) is named as a stop."""
    for run in ended.values():
        assert run_cli("report", run, "--format", "md", "--out", "-").code == 0
    old = _edited(ended["stop"], tmp_path / "old", lambda s: (_spend(s).pop("ended"),
                                                             s["replicates"].update(budget_exhausted=True)))
    res = run_cli("report", old, "--format", "md", "--out", "-")
    assert res.code == 0, res.stderr
    assert "| run ended | ended by the --fail-fast stop after 80 of the --budget's 100 fits |" in res.stdout
    assert "budget spent" not in res.stdout
    bare = _edited(ended["stop"], tmp_path / "bare", lambda s: s["replicates"].pop("fail_fast_spending"))
    res = run_cli("report", bare, "--format", "md", "--out", "-")
    assert res.code == 0, res.stderr
    assert "The verdict rests on: --fail-fast stopped at row 6 after 19 of 26." in res.stdout


# ------------------------------------------- red2-4: the report's headline of a pass over part of T


def test_report_of_a_pass_over_part_of_t_is_not_established_as_the_verdict_line_says(tmp_path: Path) -> None:
    """A pass of records chosen with ``--records`` or of a ``--sample``: mptool pdtp's verdict line reads "DTP-1
    not established (no violation among the 6 ...; audit every record for a verdict)"; the report (the CI step
    summary) headlined ":green_circle: DTP-1 holds" and "run ended complete: every record evaluated" (replicate
    engine and exact engine alike). Now it says what the verdict line says, with the white circle."""
    from mptool.outputs.report.context import replicate_verdict, verdict_block
    from mptool.outputs.report.loader import ReportInputs

    base = {"verdict": "pass", "threshold": 1.0, "max": 0.07, "violations": 0, "n": 6, "n_train": 26}
    rep = {**base, "undecided": 0, "decided_below": 6, "replicates": {"error_control": "bh", "confidence": 0.95,
                                                                     "fits": 56}}
    cases = {
        "--records": ({}, "DTP-1 not established (no violation among the 6 records given with --records, of 26 in T; "
                          "audit every record for a verdict)"),
        "--sample": ({"sample": {"k": 6, "n_train": 26, "fraction_upper_95": 0.393}},
                     "DTP-1 not established (no violation among 6 sampled records of 26; with 95% confidence at most "
                     "39.3% of T is above the threshold; audit every record for a verdict)"),
    }
    for extra, head in cases.values():
        for block in (replicate_verdict({**rep, **extra}), verdict_block(ReportInputs(tmp_path,
                                                                                      pdtp_summary={**base, **extra}))):
            assert block["headline"] == head and block["status"] == "unknown"
            assert block["exit_code"] == 0 and "holds" not in block["headline"]
    for full in (replicate_verdict({**rep, "n": 26}), verdict_block(ReportInputs(tmp_path, pdtp_summary={
            **base, "n": 26}))):  # every record of T: as before
        assert full["headline"] == "DTP-1 holds" and full["status"] == "pass"


# ------------------------------------------- red2-5: the verdict line's count after a replicate run's stop


def test_verdict_line_after_a_replicate_stop_counts_records_not_refits() -> None:
    """A replicate run's ``stopped.after``/``of`` count records (each takes several fits: 19 of 26 records after 80
    fits); the verdict line said "after 19 of 26 refits" beside "80 fits", where the report and the JUnit evidence
    say "after 19 of 26". The refit engine (one refit per record) keeps its words."""
    from mptool.cli.pdtp import qualified_verdict

    stopped = {"reason": "fail-fast", "row": 6, "after": 19, "of": 26}
    line = "DTP-1 VIOLATED: 1 of 19 records decided above 1 beyond training randomness (...80 fits...)"
    said = qualified_verdict({"verdict": "fail", "stopped": stopped, "replicates": {"fits": 80}}, line)
    assert said.startswith("DTP-1 VIOLATED (stopped at the first confirmed violator, row 6, after 19 of 26 records; "
                           "--fail-fast): 1 of 19") and "refits" not in said
    refit = qualified_verdict({"verdict": "fail", "stopped": stopped}, "DTP-1 VIOLATED: max PDTP 2.6")
    assert refit.startswith("DTP-1 VIOLATED (stopped at the first confirmed violator, row 6, after 19 of 26 refits; ")

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

"""Bad input for the exact Newton engine (docs/bad-input.md, section "newton"): ``--engine exact``
on a logistic regression the engine can only approximate exits 2 with one line naming why and
the fix (``--engine refit``), before any work and without writing anything."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli
from test_bad_input import good_csv, good_spec, pdtp_args, snapshot

CASES = [
    ("newton-1", {"l1_ratio": 1.0, "solver": "saga"}, "exact-newton-logistic: l1_ratio 1.0: the L1 part is not smooth"),
    ("newton-2", {"l1_ratio": 0.5, "solver": "saga"}, "exact-newton-logistic: l1_ratio 0.5"),
    ("newton-3", {"solver": "liblinear"}, "exact-newton-logistic: solver 'liblinear' penalises the intercept"),
    ("newton-4", {"class_weight": "balanced"}, "exact-newton-logistic: class_weight"),
    ("newton-6", {"penalty": None}, "exact-newton-logistic: no L2 penalty"),
]


@pytest.mark.parametrize("case,params,fragment", CASES, ids=[c[0] for c in CASES])
def test_engine_exact_refuses_an_inexact_logistic_regression(
    tmp_path: Path, case: str, params: dict, fragment: str
) -> None:
    args = pdtp_args(
        tmp_path,
        good_csv(tmp_path),
        good_spec(tmp_path, "logistic_regression", model={"params": params}),
        "--engine",
        "exact",
    )
    before = snapshot(tmp_path)
    res = run_cli(*args)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.code == 2 and len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert lines[0].startswith("mptool: error: --engine exact:") and fragment in lines[0], lines[0]
    assert lines[0].endswith("use --engine refit"), lines[0]
    assert "exact-knn" not in lines[0], "only the reasons of the engine written for this estimator"
    assert snapshot(tmp_path) == before

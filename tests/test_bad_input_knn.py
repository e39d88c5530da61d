"""k-NN parameters the tie rule cannot make deterministic: exit 2, one line with the fix, nothing written.

Rows knn-1 .. knn-5 of docs/bad-input.md. They are refused when the spec is resolved, before
the data is read (mptool.models.resolve_estimator -> TieStableKNeighborsClassifier.unsupported).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli, write_spec
from test_bad_input import assert_refused, good_csv, pdtp_args, snapshot

CASES = {
    "knn-1 metric without a tie rule": ({"metric": "cosine"}, ["metric 'cosine'", "use metric euclidean"]),
    "knn-2 minkowski p other than 1, 2, inf": ({"p": 3}, ["minkowski p=3", "minkowski with p 1 or 2"]),
    "knn-3 metric_params": ({"metric_params": [1, 2]}, ["metric_params", "no metric_params"]),
    "knn-4 n_neighbors not a whole number >= 1": ({"n_neighbors": 0}, ["n_neighbors must be a whole number"]),
    "knn-5 unknown weights": ({"weights": "gaussian"}, ["weights must be 'uniform' or 'distance'"]),
}


@pytest.mark.parametrize("case", list(CASES), ids=[c.split()[0] for c in CASES])
def test_knn_parameters_without_a_deterministic_tie_rule_exit_2(tmp_path: Path, case: str) -> None:
    params, fragments = CASES[case]
    args = pdtp_args(tmp_path, good_csv(tmp_path), write_spec(tmp_path / "s.yaml", "knn", model={"params": params}))
    before = snapshot(tmp_path)
    assert_refused(run_cli(*args), fragments, tmp_path, before, prefix="mptool: error: model.params: knn: ")


def test_sklearn_path_is_refused_the_same_way(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "s.yaml", "sklearn.neighbors.KNeighborsClassifier", model={"params": {"p": 0.5}})
    res = run_cli(*pdtp_args(tmp_path, good_csv(tmp_path), spec))
    assert res.code == 2 and "minkowski p=0.5 is not supported" in res.stderr, res.stderr

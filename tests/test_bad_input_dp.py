"""Bad parameters of mptool's epsilon-DP categorical naive Bayes: exit 2, one line, nothing written.

Rows dp-1 .. dp-10 of docs/bad-input.md. ``model.params`` are checked when the estimator is
resolved (mptool.inputs.dp_nb.DPCategoricalNB._validate_params via
mptool.inputs.models._check_params), before any data is read; non-finite numbers are refused
by the strict spec reader; an ``n_categories`` that does not cover the schema's domain is
refused when the pipeline is built, before T is fitted; a T lacking a class of the CSV's label
(the DP model's public class set) is refused when T is drawn (dp-10).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import mixed_frame, run_cli
from test_bad_input import assert_refused, good_csv, pdtp_args, snapshot

from mptool.inputs.prepare import prepare
from mptool.inputs.spec import parse_spec

HEAD = "data: {label: label, train_size: null, drop: [x1], categorical: [x2]}\nmodel:\n  estimator: dp_categorical_nb\n"
PARAMS = "model.params of 'dp_categorical_nb': "

CASES = {
    "dp-1 epsilon 0": ("{epsilon: 0}", PARAMS + "epsilon must be a finite number > 0 (got 0)"),
    "dp-2 epsilon negative": ("{epsilon: -1.5}", PARAMS + "epsilon must be a finite number > 0 (got -1.5)"),
    "dp-3 epsilon .nan": ("{epsilon: .nan}", "s.yaml line 4: model.params.epsilon: .nan is not a finite number; "
                          "every number in a spec must be finite"),
    "dp-4 epsilon .inf": ("{epsilon: .inf}", "s.yaml line 4: model.params.epsilon: .inf is not a finite number; "
                          "every number in a spec must be finite"),
    "dp-5 epsilon as text": ("{epsilon: 'one'}", PARAMS + "epsilon must be a finite number > 0 (got 'one')"),
    "dp-6 epsilon a boolean": ("{epsilon: true}", PARAMS + "epsilon must be a finite number > 0 (got True)"),
    "dp-7 alpha 0": ("{epsilon: 1, alpha: 0}", PARAMS + "alpha must be a finite number > 0 (got 0)"),
    "dp-8 alpha negative": ("{epsilon: 1, alpha: -1}", PARAMS + "alpha must be a finite number > 0 (got -1)"),
    "dp-9 n_categories not covering the domain than the data's codes": (
        "{epsilon: 1, n_categories: [1, 1, 1]}",
        "model.params.n_categories must give one size per feature column (3), each at least the column's domain "
        "(3, 3, 5); leave it out to use the domain",
    ),
}


@pytest.mark.parametrize("case", list(CASES), ids=[c.split()[0] for c in CASES])
def test_bad_dp_param_exits_2(tmp_path: Path, case: str) -> None:
    params, message = CASES[case]
    spec = tmp_path / "s.yaml"
    spec.write_text(HEAD + f"  params: {params}\n")
    args = pdtp_args(tmp_path, good_csv(tmp_path), spec)
    before = snapshot(tmp_path)
    line = assert_refused(run_cli(*args), [message], tmp_path, before, stdout_empty=True)
    assert line.endswith(message), line


LACKS_HEAD = "data: {label: label, train_size: 40, drop: [x1], categorical: [x2]}\nseed: 0\n"


def lacking_csv(d: Path) -> Path:
    """A CSV whose label has a third class on one row only, a row outside T (40 rows, seed 0)."""
    frame = mixed_frame(60, seed=5)
    raw = {"data": {"label": "label", "train_size": 40, "drop": ["x1"], "categorical": ["x2"]},
           "model": {"estimator": "categorical_nb"}, "seed": 0}
    prep = prepare(frame, parse_spec(raw, "probe"))
    outside = int(next(i for i, r in enumerate(prep.population.rows) if r not in set(prep.train.rows.tolist())))
    frame["label"] = frame["label"].astype(object)
    frame.loc[outside, "label"] = "maybe"
    path = d / "d.csv"
    frame.to_csv(path, index=False)
    return path


def test_dp10_a_class_t_lacks_exits_2(tmp_path: Path) -> None:
    """dp-10: the DP model's class set is the CSV's label values (public); T lacking one is refused."""
    csv = lacking_csv(tmp_path)
    spec = tmp_path / "s.yaml"
    spec.write_text(LACKS_HEAD + "model: {estimator: dp_categorical_nb, params: {epsilon: 1}}\n")
    before = snapshot(tmp_path)
    res = run_cli(*pdtp_args(tmp_path, csv, spec))
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.code == 2, res.stderr
    assert lines == ["mptool: error: dp_categorical_nb: 1 class(es) of its public class set (model.params.classes, "
                     "else every label value of the data file) are not in T, and mptool reports T's classes: draw a "
                     "larger T (data.train_size), drop those rows or leave them out of model.params.classes"], (
        res.stderr)
    assert "Traceback" not in res.stderr and res.stdout == ""
    assert snapshot(tmp_path) == before, "a failed run wrote or changed files"

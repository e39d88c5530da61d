"""Issue 30 item 1: ``mptool init`` says every choice it makes and asks for the risky ones.

A sample-weight column (by name or by its values) is dropped with a note; ``--drop`` and
``--weights`` name columns; the share of rows ``missing: drop`` would leave out is said, with
the ``impute`` alternative when it is over 10 %; the ``next:`` line repeats every flag given.
Bad input: rows first-30 .. first-34 of docs/bad-input.md. In-process, files of a few hundred rows.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import run_cli
from test_bad_input import assert_refused, snapshot

from mptool.inputs.sniff import weight_reason
from mptool.inputs.spec import parse_spec, read_yaml


def census_like(path: Path, n: int = 300, missing: float = 0.5, header: bool = True) -> Path:
    """A census-like file whose header is the column numbers 0..5: age, a category, an instance weight
    (lognormal, 2 decimals), a measurement, a category with ``missing`` of its cells empty, the label."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({
        "0": rng.integers(18, 90, n),
        "1": rng.choice(["a", "b", "c"], n),
        "2": np.round(rng.lognormal(7.3, 0.8, n), 2),
        "3": rng.normal(size=n).round(3),
        "4": np.where(rng.random(n) < missing, None, rng.choice(["x", "y"], n)),
        "5": rng.choice(["lo", "hi"], n),
    })
    frame.to_csv(path, index=False, header=header)
    return path


def init(*args: object):
    res = run_cli("init", *args)
    assert res.code == 0, res.stderr
    spec = parse_spec(read_yaml(res.stdout, "init"), "init")  # what init prints loads
    return res, spec


def test_a_weight_column_by_its_values_is_dropped_with_a_note(tmp_path: Path) -> None:
    res, spec = init(census_like(tmp_path / "c.csv"), "--label", "5")
    assert spec.data.drop == ["2"]
    assert "column '2' looks like a sample weight (by its values" in res.stderr
    assert "#   2: dropped: looks like a sample weight" in res.stdout


def test_a_weight_column_by_its_name_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "w.csv"
    rng = np.random.default_rng(1)
    pd.DataFrame({"age": rng.integers(18, 90, 100), "fnlwgt": rng.integers(10_000, 500_000, 100),
                  "label": rng.choice(["a", "b"], 100)}).to_csv(path, index=False)
    res, spec = init(path)
    assert spec.data.drop == ["fnlwgt"]
    assert "'fnlwgt' looks like a sample weight (by its name)" in res.stderr


@pytest.mark.parametrize(("name", "values", "weight"), [
    ("instance_weight", [1.0] * 30, True),
    ("Sample-Weight", [1.0] * 30, True),
    ("PWGTP", [1.0] * 30, True),
    ("income", list(np.linspace(1.5, 90.5, 30)), False),  # positive decimals, no heavy tail
    ("x", list(np.random.default_rng(2).normal(size=30)), False),  # negative values
    ("x", list(np.random.default_rng(2).lognormal(0, 1.5, 300).round(0) + 1), False),  # whole numbers
])
def test_weight_reason(name: str, values: list[float], weight: bool) -> None:
    assert (weight_reason(name, pd.Series(values)) is not None) is weight


def test_weights_flag_keeps_the_column_dropped_and_says_why(tmp_path: Path) -> None:
    res, spec = init(census_like(tmp_path / "c.csv"), "--label", "5", "--weights", "2")
    assert spec.data.drop == ["2"]
    assert "--weights '2': the spec has no sample-weight field" in res.stderr
    assert "looks like a sample weight" not in res.stderr  # named, not guessed


def test_drop_flag_takes_names_and_comma_lists(tmp_path: Path) -> None:
    path = census_like(tmp_path / "c.csv")
    _, spec = init(path, "--label", "5", "--drop", "3,1", "--drop", "0")
    assert spec.data.drop == ["0", "1", "2", "3"]  # in the file's order; '2' the detected weight


def test_many_empty_category_cells_choose_impute_with_a_note(tmp_path: Path) -> None:
    path = census_like(tmp_path / "c.csv")
    res, spec = init(path, "--label", "5")
    lost = int(pd.read_csv(path)["4"].isna().sum())
    assert spec.data.missing == "impute"  # every empty cell is in a category column: impute costs nothing
    assert f"as {lost} of 300 rows" in res.stderr and "set missing: drop" in res.stderr
    assert f"drop would leave out {lost} of 300 rows" in res.stdout
    checked = run_cli("check", path, "--model", write(tmp_path, res.stdout), "--jobs", "1")
    assert checked.code == 0 and "0 dropped for a missing cell" in checked.stdout, checked.stderr


def test_many_empty_numbers_keep_drop_and_say_the_share(tmp_path: Path) -> None:
    path = census_like(tmp_path / "c.csv", missing=0.0)
    frame = pd.read_csv(path)
    frame.loc[frame.index % 3 == 0, "3"] = np.nan  # a third of a numeric column empty
    frame.to_csv(path, index=False)
    res, spec = init(path, "--label", "5")
    assert spec.data.missing == "drop"
    assert "missing: drop leaves out 100 of 300 rows (33%)" in res.stderr and "data.missing: impute" in res.stderr
    assert "here 100 of 300 rows" in res.stdout


def test_few_empty_cells_or_their_column_dropped_say_nothing(tmp_path: Path) -> None:
    res, spec = init(census_like(tmp_path / "d.csv", missing=0.05), "--label", "5")
    assert "leaves out" not in res.stderr and spec.data.missing == "drop"  # 5 %: said in the spec's comment only
    res, spec = init(census_like(tmp_path / "c.csv"), "--label", "5", "--drop", "4")
    assert "leaves out" not in res.stderr and "rows (" not in res.stdout and spec.data.missing == "drop"


def write(d: Path, text: str) -> Path:
    path = d / "spec.yaml"
    path.write_text(text)
    return path


def test_next_line_repeats_every_flag(tmp_path: Path) -> None:
    path = census_like(tmp_path / "c.csv")
    res, _ = init(path, "--label", "5", "--header", "true", "--drop", "3", "--weights", "2")
    nxt = next(ln for ln in res.stderr.splitlines() if ln.startswith("next:"))
    assert f"mptool init {path} --label 5 --header true --drop 3 --weights 2 > spec.yaml" in nxt


# --- bad input: first-30 .. first-34 ---

@pytest.mark.parametrize(("args", "fragments"), [
    (("--drop", "nope"), ["--drop 'nope' is not a column of the file"]),  # first-30
    (("--drop", "5"), ["--drop '5' is the label column"]),  # first-31
    (("--weights", "nope"), ["--weights 'nope' is not a column of the file"]),  # first-32
    (("--weights", "5"), ["--weights '5' is the label column"]),  # first-33
    (("--drop", "1,,3"), ["--drop '1,,3': give column names separated by commas"]),  # first-34
])
def test_init_refuses_bad_drop_and_weights(tmp_path: Path, args: tuple[str, ...], fragments: list[str]) -> None:
    path = census_like(tmp_path / "c.csv")
    before = snapshot(tmp_path)
    res = run_cli("init", path, "--label", "5", *args)
    assert_refused(res, fragments, tmp_path, before, stdout_empty=True)

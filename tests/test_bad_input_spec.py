"""Specs and flags (issue 12 items 1, 8, 9): exit 2, one line, nothing written; and what still runs.

Each case returns the CLI arguments and the fragments its one error line must contain, as in
tests/test_bad_input.py. docs/bad-input.md, section "Specs and flags", lists the same cases
with the line each one prints.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import mixed_frame, run_cli
from test_bad_input import assert_refused, good_csv, good_spec, pdtp_args, snapshot, text_file

from mptool.inputs import options
from mptool.inputs.spec import MAX_SPEC_BYTES, dump_yaml, load_spec, read_yaml
from mptool.runtime.errors import InputError

Case = Callable[[Path], tuple[list[str], list[str]]]

SPEC_HEAD = "data:\n  label: label\nmodel:\n  estimator: gaussian_nb\n"


def yaml_spec(d: Path, text: str) -> Path:
    return text_file(d, text, "s.yaml")


def attack_args(d: Path, *extra: str) -> list[str]:
    return ["attack", str(good_csv(d)), "--model", str(good_spec(d)), "--out", str(d / "out"), "--jobs", "1", *extra]


def reduce_args(d: Path, *extra: str) -> list[str]:
    return [
        "reduce-dtp",
        str(good_csv(d)),
        "--model",
        str(good_spec(d)),
        "--out",
        str(d / "out"),
        "--jobs",
        "1",
        *extra,
    ]


def flag(d: Path, *extra: str) -> list[str]:
    return pdtp_args(d, good_csv(d), good_spec(d), *extra)


# --- the spec file (YAML reading) ---


def duplicate_key(d: Path):
    text = "data:\n  label: label\nmodel:\n  estimator: categorical_nb\n  params:\n    alpha: 1.0\n    alpha: 0.0\n"
    return pdtp_args(d, good_csv(d), yaml_spec(d, text)), ["s.yaml line 7", "'alpha' appears twice", "line 6"]


def alias_bomb(d: Path):
    # 'billion laughs': 9 levels of 9 aliases; PyYAML + a JSON round trip expanded it to 3.5 GB.
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    return pdtp_args(d, good_csv(d), yaml_spec(d, "\n".join(lines) + "\n")), ["s.yaml line 1", "anchor &a0"]


def alias_in_spec(d: Path):
    text = "data:\n  label: &l label\n  id: *l\nmodel:\n  estimator: gaussian_nb\n"
    return pdtp_args(d, good_csv(d), yaml_spec(d, text)), ["s.yaml line 2", "anchor &l", "write values out"]


def spec_too_large(d: Path):
    text = SPEC_HEAD + "# " + "x" * MAX_SPEC_BYTES + "\n"
    return pdtp_args(d, good_csv(d), yaml_spec(d, text)), ["s.yaml", "at most 1,000,000"]


def spec_is_endless_device(d: Path):
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero here")
    return pdtp_args(d, good_csv(d), Path("/dev/zero")), ["/dev/zero", "larger than 1,000,000"]


def nesting_too_deep(d: Path):
    text = SPEC_HEAD + "  params: {x: " + "[" * 40 + "]" * 40 + "}\n"
    return pdtp_args(d, good_csv(d), yaml_spec(d, text)), ["s.yaml line 5", "nesting deeper than 32"]


def python_tag(d: Path):
    text = "data:\n  label: !!python/object/apply:os.system [echo hi]\nmodel:\n  estimator: gaussian_nb\n"
    return pdtp_args(d, good_csv(d), yaml_spec(d, text)), ["s.yaml line 2", "tag", "python/object/apply"]


def yes_as_label(d: Path):
    text = "data:\n  label: yes\nmodel:\n  estimator: gaussian_nb\n"
    return pdtp_args(d, good_csv(d), yaml_spec(d, text)), [
        "s.yaml line 2",
        "data.label: yes is read as the boolean true by YAML 1.1",
        "quote it: 'yes'",
    ]


def off_in_a_list(d: Path):
    text = "data:\n  label: label\n  drop: [size, off]\nmodel:\n  estimator: gaussian_nb\n"
    return pdtp_args(d, good_csv(d), yaml_spec(d, text)), ["s.yaml line 3", "data.drop[1]: off", "'off'"]


def octal_looking_seed(d: Path):
    text = SPEC_HEAD + "seed: 010\n"
    return pdtp_args(d, good_csv(d), yaml_spec(d, text)), [
        "s.yaml line 5",
        "seed: 010",
        "8 by YAML 1.1",
        "10 by YAML 1.2",
    ]


def underscore_number(d: Path):
    text = "data:\n  label: label\n  train_size: 1_000\nmodel:\n  estimator: gaussian_nb\n"
    return pdtp_args(d, good_csv(d), yaml_spec(d, text)), ["s.yaml line 3", "data.train_size: 1_000", "YAML 1.2"]


def date_like_key(d: Path):
    text = "data:\n  label: label\n  2024-01-01: x\nmodel:\n  estimator: gaussian_nb\n"
    return pdtp_args(d, good_csv(d), yaml_spec(d, text)), ["s.yaml", "unknown key 'data.2024-01-01'"]


def number_as_key(d: Path):
    # a plain whole number (41) is a column name since issue 15; a decimal number stays refused
    text = SPEC_HEAD + "  bins:\n    4.5: [1.0, 2.0]\n"
    return pdtp_args(d, good_csv(d), yaml_spec(d, text)), ["s.yaml line 6", "key 4.5 is not text", "'4.5'"]


def nan_in_spec(d: Path):
    text = SPEC_HEAD + "  params: {var_smoothing: .nan}\n"
    return pdtp_args(d, good_csv(d), yaml_spec(d, text)), ["s.yaml line 5", "model.params.var_smoothing", "finite"]


def overflowing_number(d: Path):
    text = SPEC_HEAD + "  params: {var_smoothing: 1e999}\n"
    return pdtp_args(d, good_csv(d), yaml_spec(d, text)), ["s.yaml line 5", "1e999", "too large"]


def inf_bin_edge(d: Path):
    text = SPEC_HEAD + "  bins: {x1: [-.inf, 0.0]}\n"
    return pdtp_args(d, good_csv(d), yaml_spec(d, text)), ["s.yaml line 5", "model.bins.x1[0]", "finite"]


# --- the spec's values (schema) ---


def non_numeric_alpha(d: Path):
    spec = good_spec(d, "categorical_nb", model={"params": {"alpha": "abc"}})
    return pdtp_args(d, good_csv(d), spec), ["model.params", "'alpha'", "CategoricalNB", "'abc'"]


def params_mapping(d: Path):
    spec = good_spec(d, "logistic_regression", model={"params": {"class_weight": {"yes": 2}}})
    return pdtp_args(d, good_csv(d), spec), ["s.yaml", "model.params", "'class_weight'", "got dict"]


def boolean_seed(d: Path):
    return pdtp_args(d, good_csv(d), yaml_spec(d, SPEC_HEAD + "seed: true\n")), ["s.yaml", "'seed'", "boolean true"]


def seed_out_of_range(d: Path):
    spec = yaml_spec(d, SPEC_HEAD + "seed: 4294967296\n")
    return pdtp_args(d, good_csv(d), spec), ["s.yaml", "'seed'", "a seed must be a whole number", "4294967296"]


def quoted_number(d: Path):
    spec = yaml_spec(d, "data:\n  label: label\n  train_size: '20'\nmodel:\n  estimator: gaussian_nb\n")
    return pdtp_args(d, good_csv(d), spec), ["s.yaml", "data.train_size", "not text", "'20'"]


def spec_bin_size_near_one(d: Path):
    spec = good_spec(d, output={"bin_size": 0.9999})
    return pdtp_args(d, good_csv(d), spec), ["s.yaml", "output.bin_size", "between 0.0001 and 0.5", "0.9999"]


def spec_bin_size_tiny(d: Path):
    spec = good_spec(d, output={"bin_size": 1e-300})
    return pdtp_args(d, good_csv(d), spec), ["s.yaml", "output.bin_size", "1e-300"]


def bin_edges_not_increasing(d: Path):
    spec = good_spec(d, model={"bins": {"x1": [0.0, 0.0, 1.0]}})
    return pdtp_args(d, good_csv(d), spec), ["s.yaml", "model.bins", "strictly increasing"]


def missing_marker_null(d: Path):
    spec = yaml_spec(d, "data:\n  label: label\n  missing_values: ['', null]\nmodel:\n  estimator: gaussian_nb\n")
    return pdtp_args(d, good_csv(d), spec), ["s.yaml", "data.missing_values.1", "quote it", "''"]


# --- the flags ---


def threshold_nan(d: Path):
    return flag(d, "--threshold", "nan"), ["--threshold", "finite number above 0", "nan"]


def threshold_inf(d: Path):
    return flag(d, "--threshold", "inf"), ["--threshold", "inf"]


def threshold_zero(d: Path):
    return flag(d, "--threshold", "0"), ["--threshold", "above 0"]


def flag_bin_size_tiny(d: Path):
    return flag(d, "--bin-size", "1e-300"), ["--bin-size", "between 0.0001 and 0.5", "1e-300"]


def flag_bin_size_near_one(d: Path):
    return flag(d, "--bin-size", "0.9999"), ["--bin-size", "0.9999"]


def flag_bin_size_nan(d: Path):
    return flag(d, "--bin-size", "nan"), ["--bin-size", "finite"]


def jobs_far_beyond_cores(d: Path):
    return flag(d, "--jobs", "10000"), ["--jobs 10000", "per core", "--scheduler"]


def jobs_negative(d: Path):
    return flag(d, "--jobs", "-3"), ["--jobs", "(got -3)"]


def seed_flag_negative(d: Path):
    return flag(d, "--seed", "-1"), ["--seed", "a seed must be a whole number from 0 to 4294967295", "-1"]


def seed_flag_too_large(d: Path):
    return flag(d, "--seed", str(2**32)), ["--seed", str(2**32)]


def train_size_one(d: Path):
    return flag(d, "--train-size", "1"), ["--train-size", "at least 2"]


def sample_zero(d: Path):
    return flag(d, "--sample", "0"), ["--sample", "at least 1"]


def allow_import_empty(d: Path):
    return flag(d, "--allow-import", ""), ["--allow-import ''", "not a module name"]


def allow_import_not_a_module(d: Path):
    return flag(d, "--allow-import", "os;rm -rf"), ["--allow-import 'os;rm -rf'", "module"]


def scheduler_malformed(d: Path):
    return flag(d, "--scheduler", "not an address"), ["--scheduler 'not an address'", "tcp://HOST:PORT"]


def scheduler_without_port(d: Path):
    return flag(d, "--scheduler", "tcp://10.0.0.5"), ["--scheduler 'tcp://10.0.0.5'"]


def scheduler_port_out_of_range(d: Path):
    return flag(d, "--scheduler", "tcp://10.0.0.5:99999"), ["--scheduler", "99999"]


def queries_file_with_inf(d: Path):
    q = mixed_frame(5, seed=1).drop(columns="label")
    q.loc[2, "x1"] = np.inf
    q.to_csv(d / "q.csv", index=False)
    return flag(d, "--queries", str(d / "q.csv")), ["q.csv", "--queries column 'x1'", "infinite", "row 2"]


def queries_file_with_missing_cell(d: Path):
    q = mixed_frame(5, seed=1).drop(columns="label")
    q.loc[1, "x2"] = np.nan
    q.to_csv(d / "q.csv", index=False)
    return flag(d, "--queries", str(d / "q.csv")), ["q.csv", "'x2'", "missing cell at row 1"]


def reduce_max_removals_negative(d: Path):
    return reduce_args(d, "--max-removals", "-1"), ["--max-removals", "at least 0"]


def reduce_threshold_nan(d: Path):
    return reduce_args(d, "--threshold", "nan"), ["--threshold", "nan"]


def attack_max_auc_above_one(d: Path):
    return attack_args(d, "--max-auc", "1.5"), ["--max-auc", "between 0 and 1"]


def attack_max_accuracy_nan(d: Path):
    return attack_args(d, "--max-accuracy", "nan"), ["--max-accuracy", "nan"]


def attack_candidates_zero(d: Path):
    return attack_args(d, "--candidates", "0"), ["--candidates", "at least 1"]


def attack_iterations_huge(d: Path):
    return attack_args(d, "--iterations", "100000000"), ["--iterations", "at most 10,000"]


def attack_matrix_too_large(d: Path):
    return attack_args(d, "--iterations", "10000", "--candidates", "1000000"), ["--iterations x --candidates"]


def attack_pairs_negative(d: Path):
    return attack_args(d, "--pairs", "-1"), ["--pairs", "at least 1"]


def attack_shadow_pool_negative(d: Path):
    return attack_args(d, "--shadow-pool", "-2"), ["--shadow-pool", "at least 0"]


def purchase_seed_negative(d: Path):
    return ["datasets", "make-purchase", "--out", str(d / "p.csv"), "--seed", "-1"], ["--seed", "a seed", "-1"]


def purchase_too_large(d: Path):
    args = ["datasets", "make-purchase", "--out", str(d / "p.csv"), "--rows", "1000000", "--features", "1000"]
    return args, ["--rows x --features", "1,000,000,000"]


CASES: list[Case] = [
    duplicate_key,
    alias_bomb,
    alias_in_spec,
    spec_too_large,
    spec_is_endless_device,
    nesting_too_deep,
    python_tag,
    yes_as_label,
    off_in_a_list,
    octal_looking_seed,
    underscore_number,
    date_like_key,
    number_as_key,
    nan_in_spec,
    overflowing_number,
    inf_bin_edge,
    non_numeric_alpha,
    params_mapping,
    boolean_seed,
    seed_out_of_range,
    quoted_number,
    spec_bin_size_near_one,
    spec_bin_size_tiny,
    bin_edges_not_increasing,
    missing_marker_null,
    threshold_nan,
    threshold_inf,
    threshold_zero,
    flag_bin_size_tiny,
    flag_bin_size_near_one,
    flag_bin_size_nan,
    jobs_far_beyond_cores,
    jobs_negative,
    seed_flag_negative,
    seed_flag_too_large,
    train_size_one,
    sample_zero,
    allow_import_empty,
    allow_import_not_a_module,
    scheduler_malformed,
    scheduler_without_port,
    scheduler_port_out_of_range,
    queries_file_with_inf,
    queries_file_with_missing_cell,
    reduce_max_removals_negative,
    reduce_threshold_nan,
    attack_max_auc_above_one,
    attack_max_accuracy_nan,
    attack_candidates_zero,
    attack_iterations_huge,
    attack_matrix_too_large,
    attack_pairs_negative,
    attack_shadow_pool_negative,
    purchase_seed_negative,
    purchase_too_large,
]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_bad_spec_or_flag_exits_2_with_one_clear_line(tmp_path: Path, case: Case) -> None:
    args, fragments = case(tmp_path)
    before = snapshot(tmp_path)
    assert_refused(run_cli(*args), fragments, tmp_path, before, max_len=400)


# --- what is read, and what still runs ---


def test_yaml_12_numbers_dates_and_booleans() -> None:
    raw = read_yaml(
        "a: 1e-9\nb: 1E5\nc: .5\nd: 0x10\ne: 2024-01-01\nf: true\ng: FALSE\nh: null\ni: ~\nj: 'yes'\n"
        "k: !!str 010\nl: [1, -2.5, +3]\nm: 1.0e-09\no: '1e-9'\np: 0\n",
        "t.yaml",
    )
    assert raw == {
        "a": 1e-9,
        "b": 100000.0,
        "c": 0.5,
        "d": 16,
        "e": "2024-01-01",
        "f": True,
        "g": False,
        "h": None,
        "i": None,
        "j": "yes",
        "k": "010",
        "l": [1, -2.5, 3],
        "m": 1e-9,
        "o": "1e-9",
        "p": 0,
    }
    assert isinstance(raw["a"], float) and isinstance(raw["b"], float) and isinstance(raw["d"], int)


@pytest.mark.parametrize("word", ["yes", "No", "ON", "off", "y", "N"])
def test_yaml_11_booleans_are_refused_with_the_quoted_form(word: str) -> None:
    with pytest.raises(InputError, match=f"x.v: {word} is read as the boolean .* by YAML 1.1; quote it: '{word}'"):
        read_yaml(f"x:\n  v: {word}\n", "t.yaml")
    assert read_yaml(f"x:\n  v: '{word}'\n", "t.yaml") == {"x": {"v": word}}


def test_tricky_strings_written_by_mptool_read_back_the_same() -> None:
    """Spec.to_yaml and reduce-dtp's clean-spec.yaml quote what the strict reader would retype."""
    texts = [
        "yes",
        "y",
        "off",
        "1e-9",
        "1E5",
        ".5",
        "010",
        "09",
        "1_000",
        "1:30",
        "0x1F",
        "2024-01-01",
        "null",
        "",
        "true",
        "a: b",
        "- x",
        "#c",
        "plain",
        "multi\nline",
        ".inf",
        "NaN",
    ]
    raw = {"data": {"label": "yes", "drop": texts}, "model": {"params": {"tol": 1e-9, "C": 1, "flag": True}}}
    assert read_yaml(dump_yaml(raw), "t.yaml") == raw


def test_spec_to_yaml_reads_back(tmp_path: Path) -> None:
    path = yaml_spec(
        tmp_path,
        "data:\n  label: 'yes'\n  missing_values: ['', 'NA', '?']\nmodel:\n"
        "  estimator: gaussian_nb\n  params: {var_smoothing: 1e-9}\nseed: 7\n",
    )
    spec = load_spec(path)
    again = yaml_spec(tmp_path, spec.to_yaml())
    assert load_spec(again) == spec and spec.sha256() == load_spec(again).sha256()


def test_float_written_1e_minus_9_is_a_float_and_runs(tmp_path: Path) -> None:
    spec = yaml_spec(tmp_path, SPEC_HEAD + "  params: {var_smoothing: 1e-9}\noutput:\n  bin_size: 1E-2\n")
    assert load_spec(spec).model.params["var_smoothing"] == 1e-9
    res = run_cli(*pdtp_args(tmp_path, good_csv(tmp_path), spec, "-q"))
    assert res.code in (0, 1), res.stderr
    summary = json.loads((tmp_path / "out" / "pdtp.json").read_text())["summary"]
    assert summary["spec"]["model"]["params"]["var_smoothing"] == 1e-9 and summary["bin_size"] == 0.01


def test_date_like_label_is_text(tmp_path: Path) -> None:
    frame = mixed_frame(30, seed=5).rename(columns={"label": "2024-01-01"})
    spec = yaml_spec(tmp_path, "data:\n  label: 2024-01-01\nmodel:\n  estimator: gaussian_nb\n")
    res = run_cli(*pdtp_args(tmp_path, good_csv(tmp_path, frame), spec, "-q"))
    assert res.code in (0, 1), res.stderr


def na_frame() -> pd.DataFrame:
    """60 rows; 40 of them have the cell 'NA' in column color (and a few 'None', 'null')."""
    frame = mixed_frame(60, seed=3)
    frame.loc[:39, "color"] = "NA"
    frame.loc[40:41, "color"] = "None"
    frame.loc[42, "color"] = "null"
    return frame


def test_na_none_null_are_categories_unless_listed(tmp_path: Path) -> None:
    csv = good_csv(tmp_path, na_frame())
    res = run_cli(*pdtp_args(tmp_path, csv, good_spec(tmp_path), "-q"))
    assert res.code in (0, 1), res.stderr
    summary = json.loads((tmp_path / "out" / "pdtp.json").read_text())["summary"]
    assert summary["n_train"] == 60 and summary["rows_dropped_missing"] == 0
    assert "dropped" not in res.stderr

    spec = good_spec(tmp_path, data={"missing_values": ["", "NA", "None", "null"]})
    res = run_cli(*pdtp_args(tmp_path, csv, spec, "-q", "--force"))
    assert res.code in (0, 1), res.stderr
    summary = json.loads((tmp_path / "out" / "pdtp.json").read_text())["summary"]
    assert summary["n_train"] == 17 and summary["rows_dropped_missing"] == 43
    warning = [ln for ln in res.stderr.splitlines() if "dropped" in ln]
    assert len(warning) == 1 and "dropped 43 of 60 rows" in warning[0] and "'NA'" in warning[0]


def test_default_missing_marker_is_the_empty_cell(tmp_path: Path) -> None:
    frame = mixed_frame(30, seed=5)
    frame.loc[[3, 8], "x1"] = np.nan  # written as empty cells
    res = run_cli(*pdtp_args(tmp_path, good_csv(tmp_path, frame), good_spec(tmp_path), "-q"))
    assert res.code in (0, 1), res.stderr
    summary = json.loads((tmp_path / "out" / "pdtp.json").read_text())["summary"]
    assert summary["rows_dropped_missing"] == 2 and summary["n_train"] == 28
    assert "dropped 2 of 30 rows" in res.stderr


def test_numbers_with_a_na_cell_are_reported(tmp_path: Path) -> None:
    frame = mixed_frame(30, seed=5).astype({"x2": object})
    frame.loc[4, "x2"] = "NA"
    res = run_cli(*pdtp_args(tmp_path, good_csv(tmp_path, frame), good_spec(tmp_path), "-q"))
    assert res.code in (0, 1), res.stderr
    hint = [ln for ln in res.stderr.splitlines() if "'x2'" in ln]
    assert len(hint) == 1 and "'NA'" in hint[0] and "data.missing_values" in hint[0]


def test_queries_file_uses_the_specs_missing_markers(tmp_path: Path) -> None:
    frame = mixed_frame(30, seed=5)
    frame.loc[3, "x1"] = np.nan
    q = mixed_frame(4, seed=1).drop(columns="label").astype({"x1": object})
    q.loc[0, "x1"] = "?"
    q.to_csv(tmp_path / "q.csv", index=False)
    spec = good_spec(tmp_path, data={"missing": "impute", "missing_values": ["", "?"]})
    res = run_cli(*pdtp_args(tmp_path, good_csv(tmp_path, frame), spec, "-q", "--queries", tmp_path / "q.csv"))
    assert res.code in (0, 1), res.stderr
    table = pd.read_csv(tmp_path / "out" / "pdtp.csv")
    assert table["dtp_queries"].notna().all()


def test_many_columns_categorical_nb_runs(tmp_path: Path) -> None:
    """>= 2,467 features: (4/3)^(m+1) overflowed a float (exit 3); the bound is now computed as a logarithm."""
    rng = np.random.default_rng(0)
    m = 2600
    frame = pd.DataFrame(rng.integers(0, 2, size=(24, m)), columns=[f"c{j}" for j in range(m)])
    frame["label"] = ["a", "b"] * 12
    spec = good_spec(tmp_path, "categorical_nb")
    res = run_cli(*pdtp_args(tmp_path, good_csv(tmp_path, frame), spec, "-q"))
    assert res.code in (0, 1), res.stderr
    bound = json.loads((tmp_path / "out" / "pdtp.json").read_text())["summary"]["dtp"]["upper_bound"]
    assert bound["details"]["m"] == m
    assert bound["kind"] == "stability" and math.isfinite(bound["ln_delta"]) and bound["ln_delta"] > 0


def test_log_deltas_match_the_propositions() -> None:
    from mptool.loo.naive_bayes import log_lsq_delta, log_nb_delta, lsq_delta, nb_delta

    assert log_nb_delta(6, 2, 2, 3) == pytest.approx(math.log(3.0))
    assert log_nb_delta(6, 2, 2) == pytest.approx(math.log(2.4))
    assert log_lsq_delta(2) == pytest.approx(3 * math.log(4 / 3))
    assert lsq_delta(5000) == math.inf and math.isfinite(log_lsq_delta(5000))
    assert nb_delta(100, 10, 5000, 2) == math.inf and math.isfinite(log_nb_delta(100, 10, 5000, 2))


@pytest.mark.parametrize(
    "address",
    [
        "tcp://10.0.0.5:8786",
        "10.0.0.5:8786",
        "tls://sched.example.org:8786",
        "tcp://[::1]:8786",
        None,
    ],
)
def test_scheduler_addresses_of_the_right_form_pass(address: str | None) -> None:
    options.check_scheduler(address)


def test_jobs_bounds_follow_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(options.os, "cpu_count", lambda: 8)
    options.check_jobs(0)
    options.check_jobs(32)
    with pytest.raises(InputError, match="--jobs 33"):
        options.check_jobs(33)
    options.check_jobs(500, scheduler="tcp://10.0.0.5:8786")  # a cluster may have more workers


API_SPEC = {"data": {"label": "label"}, "model": {"estimator": "gaussian_nb"}}


@pytest.mark.parametrize(
    ("call", "kwargs", "fragment"),
    [
        ("pdtp", {"threshold": float("nan")}, "threshold must be a finite number above 0"),
        ("pdtp", {"jobs": 100_000}, "jobs 100000 is more than"),
        ("pdtp", {"scheduler": "not an address"}, "scheduler 'not an address'"),
        ("pdtp", {"allow_import": ("",)}, "allow_import '' is not a module name"),
        ("pdtp", {"sample": 0}, "sample must be at least 1"),
        ("attack", {"iterations": 10**6}, "iterations must be at least 1 and at most 10,000"),
        ("attack", {"max_auc": 2.0}, "max_auc must be a number between 0 and 1"),
        ("reduce_dtp", {"max_removals": -1}, "max_removals must be at least 0"),
        ("reduce_dtp", {"threshold": math.inf}, "threshold"),
    ],
)
def test_python_api_checks_parameters_like_the_flags(call: str, kwargs: dict, fragment: str) -> None:
    import mptool

    with pytest.raises(InputError, match=fragment):
        getattr(mptool, call)(mixed_frame(20), API_SPEC, **kwargs)


def test_dataframe_input_uses_the_missing_markers() -> None:
    import mptool

    frame = mixed_frame(30, seed=5).astype({"x1": object, "color": object})
    frame.loc[3, "x1"] = "?"
    frame.loc[4, "color"] = "NA"
    result = mptool.pdtp(frame, API_SPEC, jobs=1)  # '?' makes x1 categorical; 'NA' is a colour
    assert result.summary["rows_dropped_missing"] == 0
    spec = {**API_SPEC, "data": {"label": "label", "missing_values": ["", "?", "NA"]}}
    result = mptool.pdtp(frame, spec, jobs=1)
    assert result.summary["rows_dropped_missing"] == 2 and result.summary["n_train"] == 28


YAML_TEXTS = [
    "a: 1e-9\nb: 1E5\nc: .5\nd: 0x10\ne: 2024-01-01\nf: true\ng: ~\nh: 'yes'\ni: !!str 010\nj: [1, -2.5, +3]\n",
    "data:\n  label: label\n  label: other\n",
    "a: &x 1\nb: *x\n",
    "a: !!binary aGk=\n",
    "a: " + "[" * 40 + "]" * 40 + "\n",
    "x:\n  v: yes\n",
    "seed: 010\n",
    "41: a\n",
    "a: .nan\n",
    "data:\n  label: [unclosed\n",
    "a: 1\n---\nb: 2\n",
]


@pytest.mark.parametrize("text", YAML_TEXTS)
def test_pure_python_and_libyaml_readers_agree(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    """The libyaml parser is used when present (fast); PyYAML's own parser is the fallback: same results."""
    from mptool.inputs import spec as spec_module

    def outcome() -> object:
        try:
            return read_yaml(text, "t.yaml")
        except InputError as exc:
            return str(exc).split(" YAML syntax error")[0] if "syntax" in str(exc) else str(exc)

    fast = outcome()
    monkeypatch.setattr(spec_module, "_Loader", spec_module._PyLoader)
    assert outcome() == fast

"""Bad input of issue 15 (reading data, init, check, --trained): exit 2, one clear line, nothing written.

Rows first-1 .. of docs/bad-input.md, section "Reading data". Each case builds its files in
a fresh directory and returns the arguments and the fragments the one error line must hold.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import mixed_frame, run_cli
from test_bad_input import assert_refused, good_csv, good_spec, pdtp_args, snapshot, text_file


def yaml_spec(d: Path, text: str) -> Path:
    path = d / "s.yaml"
    path.write_text(text)
    return path


HEAD = "data:\n  label: label\n"
MODEL = "model:\n  estimator: gaussian_nb\n"


def tab_separated(d: Path):
    csv = text_file(d, "color\tx1\tlabel\nred\t1.0\tyes\nblue\t2.0\tno\n")
    return pdtp_args(d, csv, good_spec(d)), ["tabs", 'data.read.separator: "\\t"']


def header_looks_like_data(d: Path):
    csv = text_file(d, "red,1.5,yes\nblue,2.0,no\nred,0.5,no\n")
    return pdtp_args(d, csv, good_spec(d)), ["first line looks like data", "data.read.header: false"]


def header_list_wrong_length(d: Path):
    csv = text_file(d, "red,1.5,yes\nblue,2.0,no\n")
    spec = yaml_spec(d, HEAD + "  read: {header: [color, label]}\n" + MODEL)
    return pdtp_args(d, csv, spec), ["data.read.header names 2 columns but the first line has 3"]


def unknown_encoding(d: Path):
    spec = yaml_spec(d, HEAD + "  read: {encoding: klingon-8}\n" + MODEL)
    return pdtp_args(d, good_csv(d), spec), ["data.read.encoding", "unknown text encoding 'klingon-8'"]


def separator_two_characters(d: Path):
    spec = yaml_spec(d, HEAD + "  read: {separator: ';;'}\n" + MODEL)
    return pdtp_args(d, good_csv(d), spec), ["data.read.separator", "one character"]


def decimal_comma_with_comma_separator(d: Path):
    spec = yaml_spec(d, HEAD + "  read: {decimal: ','}\n" + MODEL)
    return pdtp_args(d, good_csv(d), spec), ["data.read.decimal", "also the separator"]


def latin1_file_read_as_utf8(d: Path):
    path = d / "d.csv"
    path.write_bytes("color,x1,label\nrouge \xe9,1.0,yes\nblue,2.0,no\n".encode("latin-1"))
    return pdtp_args(d, path, good_spec(d)), ["d.csv", "utf-8", "data.read.encoding"]


def continuous_label(d: Path):
    frame = mixed_frame(60, seed=1)
    frame["label"] = np.round(np.random.default_rng(0).normal(size=60), 3)
    return pdtp_args(d, good_csv(d, frame), good_spec(d)), [
        "label 'label' looks continuous (60 distinct numeric values)", "data.label_bins"]


def label_bins_on_text(d: Path):
    spec = good_spec(d, data={"label_bins": [1.0]})
    return pdtp_args(d, good_csv(d), spec), ["data.label_bins cuts a numeric label", "holds text"]


def label_bins_not_increasing(d: Path):
    spec = good_spec(d, data={"label_bins": [2.0, 1.0]})
    return pdtp_args(d, good_csv(d), spec), ["data.label_bins", "strictly increasing"]


def categorical_unknown_column(d: Path):
    spec = good_spec(d, data={"categorical": ["colour"]})
    return pdtp_args(d, good_csv(d), spec), ["data.categorical names column 'colour', which is not in the file"]


def categorical_names_the_label(d: Path):
    spec = good_spec(d, data={"categorical": ["label"]})
    return pdtp_args(d, good_csv(d), spec), ["data.categorical names column 'label', which is the label"]


def column_both_kinds(d: Path):
    spec = good_spec(d, data={"categorical": ["x2"], "numeric": ["x2"]})
    return pdtp_args(d, good_csv(d), spec), ["'x2' is listed in both data.categorical and data.numeric"]


def numeric_column_holds_text(d: Path):
    spec = good_spec(d, data={"numeric": ["color"]})
    return pdtp_args(d, good_csv(d), spec), ["data.numeric lists column 'color', but row 0 holds text"]


def numeric_under_categorical_nb(d: Path):
    spec = good_spec(d, "categorical_nb", data={"numeric": ["x2"]}, model={"bins": {"x1": [0.0]}})
    return pdtp_args(d, good_csv(d), spec), ["data.numeric lists column 'x2'", "categorical_nb needs categories"]


def bins_on_a_categorical_column(d: Path):
    spec = good_spec(d, data={"categorical": ["x2"]}, model={"bins": {"x2": [1.0]}})
    return pdtp_args(d, good_csv(d), spec), ["'x2' has model.bins edges but is listed in data.categorical"]


def damaged_parquet(d: Path):
    path = d / "d.parquet"
    path.write_bytes(b"PAR1 this is not a parquet file")
    return pdtp_args(d, path, good_spec(d)), ["d.parquet", "cannot read it as Parquet"]


def decimal_column_name(d: Path):
    spec = yaml_spec(d, "data:\n  label: 4.5\n" + MODEL)
    return pdtp_args(d, good_csv(d), spec), ["data.label", "must be quoted: '4.5'"]


def init_unknown_label(d: Path):
    return ["init", str(good_csv(d)), "--label", "income"], ["--label 'income' is not a column"]


def init_missing_file(d: Path):
    return ["init", str(d / "nope.csv")], ["nope.csv", "not found"]


def init_one_class_label(d: Path):
    path = d / "one.csv"
    path.write_text("a,b\n1,x\n2,x\n3,x\n")
    return ["init", str(path), "--label", "b"], ["label 'b' has 1 distinct value(s)", "pass --label with a class"]


def init_no_feature_column(d: Path):
    path = d / "onecol.csv"
    path.write_text("a\n1\n2\n")
    return ["init", str(path)], ["no feature column besides the label 'a'", "nothing to train on"]


def check_bad_spec(d: Path):
    spec = good_spec(d, data={"train_size": 1000})
    return ["check", str(good_csv(d)), "--model", str(spec)], ["data.train_size is 1000 but only 30 usable rows"]


def check_engine_exact_refused(d: Path):
    spec = good_spec(d, "random_forest")
    return ["check", str(good_csv(d)), "--model", str(spec), "--engine", "exact"], [
        "--engine exact: no exact engine accepts this spec"]


def trained_missing(d: Path):
    return pdtp_args(d, good_csv(d), good_spec(d), "--trained", str(d / "model.skops")), [
        "--trained", "not found", "skops.io.dump"]


def trained_pickle(d: Path):
    import pickle

    path = d / "model.pkl"
    path.write_bytes(pickle.dumps({"not": "loaded"}))
    return pdtp_args(d, good_csv(d), good_spec(d), "--trained", str(path)), ["model.pkl", "never loads pickle"]


def trained_untrusted_type(d: Path):
    import skops.io as sio

    path = d / "model.skops"
    sio.dump({"f": Path("x")}, path)
    return pdtp_args(d, good_csv(d), good_spec(d), "--trained", str(path)), ["does not trust", "pathlib"]


def trained_not_the_spec(d: Path):
    import skops.io as sio

    from mptool.inputs.prepare import fit_checked, prepare
    from mptool.inputs.spec import load_spec

    csv, spec = good_csv(d), good_spec(d, "logistic_regression")
    prep = prepare(csv, load_spec(spec, {"model.params.C": 0.01}))
    sio.dump(fit_checked(prep.template, prep.train), d / "model.skops")
    return pdtp_args(d, csv, spec, "--trained", str(d / "model.skops")), [
        "does not predict like A(T) of the spec", "largest probability difference"]


def baseline_json_without_its_csv(d: Path):
    csv, spec = good_csv(d), good_spec(d)
    assert run_cli("pdtp", str(csv), "--model", str(spec), "--out", str(d / "prev"), "--jobs", "1", "-q").code in (0, 1)
    (d / "only").mkdir()
    (d / "only" / "pdtp.json").write_bytes((d / "prev" / "pdtp.json").read_bytes())  # copied without pdtp.csv
    return pdtp_args(d, csv, spec, "--baseline", str(d / "only" / "pdtp.json")), [
        "its records are in pdtp.csv, which is not beside it", "copy the whole results folder"]


CASES = [
    tab_separated, header_looks_like_data, header_list_wrong_length, unknown_encoding, separator_two_characters,
    decimal_comma_with_comma_separator, latin1_file_read_as_utf8, continuous_label, label_bins_on_text,
    label_bins_not_increasing, categorical_unknown_column, categorical_names_the_label, column_both_kinds,
    numeric_column_holds_text, numeric_under_categorical_nb, bins_on_a_categorical_column, damaged_parquet,
    decimal_column_name, init_unknown_label, init_missing_file, init_one_class_label, init_no_feature_column,
    check_bad_spec, check_engine_exact_refused,
    trained_missing, trained_pickle, trained_untrusted_type, trained_not_the_spec, baseline_json_without_its_csv,
]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_bad_input_exits_2_with_one_clear_line(tmp_path: Path, case) -> None:
    args, fragments = case(tmp_path)
    before = snapshot(tmp_path)
    assert_refused(run_cli(*args), fragments, tmp_path, before, stdout_empty=True)



"""Red-team pass over the issue 15 inputs (data.read, init, check, --trained): exit 2, one line, nothing written.

Rows red2-1 .. of docs/bad-input.md, section "red2". Each case builds its files in a fresh
directory and returns the arguments and the fragments the one error line must hold.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import mixed_frame, run_cli, write_spec
from test_bad_input import good_csv, good_spec, pdtp_args, snapshot


def _fifo(d: Path, name: str) -> Path:
    path = d / name
    os.mkfifo(path)
    return path


def data_is_a_fifo(d: Path):
    return pdtp_args(d, _fifo(d, "d.csv"), good_spec(d)), ["d.csv", "not a regular file"]


def init_on_a_fifo(d: Path):
    return ["init", str(_fifo(d, "d.csv"))], ["d.csv", "not a regular file"]


def data_is_dev_zero(d: Path):
    return ["init", "/dev/zero"], ["/dev/zero", "not a regular file"]


def spec_is_a_fifo(d: Path):
    return ["check", str(good_csv(d)), "--model", str(_fifo(d, "s.yaml"))], ["s.yaml", "not a regular file"]


def baseline_is_dev_zero(d: Path):
    return pdtp_args(d, good_csv(d), good_spec(d), "--baseline", "/dev/zero"), ["--baseline", "not a regular file"]


def waivers_is_a_fifo(d: Path):
    fifo = _fifo(d, "w.yaml")
    return pdtp_args(d, good_csv(d), good_spec(d), "--waivers", str(fifo)), ["w.yaml", "not a regular file"]


def trained_is_a_fifo(d: Path):
    fifo = _fifo(d, "m.skops")
    return pdtp_args(d, good_csv(d), good_spec(d), "--trained", str(fifo)), ["--trained", "not a regular file"]


def init_first_line_longer_than_a_csv_field(d: Path):
    path = d / "d.csv"
    path.write_text("a" * 200_000 + "\n")
    return ["init", str(path)], ["d.csv", "cannot read the first", "as CSV", "field limit"]


def _forged_function_model(d: Path, module: str, name: str) -> Path:
    """A skops pipeline whose FunctionTransformer names ``module.name`` (schema.json edited, as an attacker would)."""
    import skops.io as sio
    from sklearn.dummy import DummyClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import FunctionTransformer
    from sklearn.utils.validation import check_array

    (d / "pwn").mkdir()
    step = FunctionTransformer(check_array, kw_args={"executable": "/usr/bin/touch", "cwd": str(d / "pwn")})
    pipe = Pipeline([("ft", step), ("clf", DummyClassifier().fit(np.zeros((4, 1)), ["no", "yes"] * 2))])
    plain = d / "plain.skops"
    sio.dump(pipe, plain)
    with zipfile.ZipFile(plain) as z:
        members = {n: z.read(n) for n in z.namelist()}
    plain.unlink()
    schema = members["schema.json"].decode()
    forged = schema.replace('"check_array"', f'"{name}"').replace('"sklearn.utils.validation"', f'"{module}"')
    assert forged != schema
    path = d / "model.skops"
    with zipfile.ZipFile(path, "w") as z:
        for n, blob in members.items():
            z.writestr(n, forged.encode() if n == "schema.json" else blob)
    return path


def trained_function_reexported_by_sklearn(d: Path):
    # subprocess.check_output, reachable as sklearn.utils._testing.check_output: a name with the sklearn prefix
    model = _forged_function_model(d, "sklearn.utils._testing", "check_output")
    return pdtp_args(d, good_csv(d), good_spec(d, "logistic_regression"), "--trained", str(model)), [
        "does not trust", "sklearn.utils._testing.check_output"]


def trained_zip_bomb(d: Path):
    path = d / "model.skops"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z, z.open("schema.json", "w") as fh:
        block = b" " * (1 << 20)
        for _ in range(300):  # 300 MiB of spaces, about 300 KiB on disk
            fh.write(block)
    return pdtp_args(d, good_csv(d), good_spec(d), "--trained", str(path)), ["model.skops", "zip bomb"]


def trained_model_fitted_without_names(d: Path):
    import skops.io as sio
    from sklearn.linear_model import LogisticRegression

    frame = __import__("pandas").read_csv(good_csv(d))
    sio.dump(LogisticRegression().fit(frame[["x1", "x2"]].to_numpy(), frame["label"]), d / "model.skops")
    return pdtp_args(d, good_csv(d), good_spec(d, "logistic_regression"), "--trained", str(d / "model.skops")), [
        "cannot predict T's records", "spec's feature columns"]


def _parquet_with(d: Path, **columns) -> Path:
    frame = __import__("pandas").read_csv(good_csv(d)).assign(**columns)
    path = d / "d.parquet"
    frame.to_parquet(path)
    (d / "d.csv").unlink()
    return path


def parquet_list_column(d: Path):
    path = _parquet_with(d, lst=[[1, 2]] * 30)
    return pdtp_args(d, path, good_spec(d)), ["d.parquet", "column 'lst' has Parquet type list"]


def init_parquet_struct_column(d: Path):
    path = _parquet_with(d, nested=[{"a": 1, "b": "x"}] * 30)
    return ["init", str(path)], ["d.parquet", "column 'nested' has Parquet type struct"]


def parquet_binary_column(d: Path):
    path = _parquet_with(d, raw=[b"\x00\xff"] * 30)
    return pdtp_args(d, path, good_spec(d)), ["d.parquet", "column 'raw' has Parquet type binary"]


def value_too_large(d: Path):
    frame = __import__("pandas").read_csv(good_csv(d))
    frame.loc[4, "x1"] = 1e308
    return pdtp_args(d, good_csv(d, frame), good_spec(d, "logistic_regression")), [
        "d.csv", "column 'x1'", "magnitude above 1e+100 at row 4"]


def no_line_break(d: Path):
    path = d / "d.csv"
    with open(path, "wb") as fh:
        fh.truncate(20 << 20)  # 20 MiB of zero bytes (sparse): read whole, it filled the memory
    return pdtp_args(d, path, good_spec(d)), ["d.csv", "no line break in the first 16,777,216 bytes"]


def xz_compressed(d: Path):
    import lzma

    path = d / "d.csv.xz"
    path.write_bytes(lzma.compress(b"\0" * (8 << 20)))  # pandas unpacked it whole, unchecked
    return pdtp_args(d, path, good_spec(d)), ["d.csv.xz", "compressed as .xz", "gzip"]


def header_list_with_control_character(d: Path):
    csv = d / "d.csv"
    csv.write_text("red,1.5,yes\nblue,2.0,no\nred,0.5,no\nblue,1.0,yes\n")
    spec = d / "s.yaml"
    spec.write_text('data:\n  label: label\n  read: {header: ["\\e[31mcolor", x1, label]}\n'
                    'model:\n  estimator: gaussian_nb\n')
    return pdtp_args(d, csv, spec), ["data.read.header names column '\\x1b[31mcolor'", "no control characters"]


CASES = [
    header_list_with_control_character,
    xz_compressed,
    parquet_list_column, init_parquet_struct_column, parquet_binary_column, value_too_large, no_line_break,
    data_is_a_fifo, init_on_a_fifo, data_is_dev_zero, spec_is_a_fifo, baseline_is_dev_zero,
    waivers_is_a_fifo, trained_is_a_fifo, init_first_line_longer_than_a_csv_field,
    trained_function_reexported_by_sklearn, trained_zip_bomb, trained_model_fitted_without_names,
]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_bad_input_exits_2_with_one_clear_line(tmp_path: Path, case) -> None:
    args, fragments = case(tmp_path)
    before = snapshot(tmp_path)
    res = run_cli(*args)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.code == 2, res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""
    assert len(lines) == 1 and lines[0].startswith("mptool: error:"), res.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert snapshot(tmp_path) == before, "a failed run wrote or changed files"
    assert not list((tmp_path / "pwn").glob("*")) if (tmp_path / "pwn").exists() else True


def test_trusted_names_are_classes_defined_in_sklearn() -> None:
    """The types real pipelines hold load; functions and objects a sklearn module imports do not."""
    from mptool.inputs.trained import _trusted

    for name in ("sklearn.tree._tree.Tree", "sklearn.neural_network._stochastic_optimizers.AdamOptimizer",
                 "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor",
                 "mptool.inputs.models.DomainEncoder"):
        assert _trusted(name, ()), name
    for name in ("sklearn.utils._testing.check_output", "sklearn.datasets._base.os", "sklearn.datasets._lfw.remove",
                 "sklearn.utils.validation.check_array", "sklearn.pipeline.Pipeline.predict", "sklearn.nope.X",
                 "sklearn.tests.test_base.T", "sklearn.conftest.X"):
        assert not _trusted(name, ()), name
    # --allow-import trusts the classes a module defines, never its functions (issue 26: gate-c-1)
    assert not _trusted("sklearn.utils.validation.check_array", ("sklearn.utils.validation",))


def test_trained_model_of_wrong_probability_shape_is_input_error() -> None:
    """predict_proba of another shape than (|T|, classes) is refused (exit 2), not an internal error."""
    from mptool.inputs.trained import TrainedModel, compare_to_spec
    from mptool.runtime.errors import InputError

    class Odd:
        classes_ = np.array(["no", "yes"])

        def predict_proba(self, X):
            return np.zeros((0, 2))

    with pytest.raises(InputError, match="cannot predict T's records"):
        compare_to_spec(TrainedModel(Odd(), "m.skops", ""), np.zeros((3, 1)), np.array(["no", "yes"]),
                        np.full((3, 2), 0.5), np.arange(3))


@pytest.mark.parametrize("kind", ["timestamp", "decimal"])
def test_parquet_timestamp_or_decimal_id_in_json_records(tmp_path: Path, kind: str) -> None:
    """A Parquet id of dates or decimals is written to pdtp.json as text (it was exit 3: not JSON serializable)."""
    import decimal
    import json

    import pandas as pd

    frame = pd.read_csv(good_csv(tmp_path))
    frame["rid"] = (pd.date_range("2020-01-01", periods=30) if kind == "timestamp"
                    else [decimal.Decimal(i) / 4 for i in range(30)])
    frame.to_parquet(tmp_path / "d.parquet")
    spec = good_spec(tmp_path, data={"id": "rid"})
    res = run_cli(*pdtp_args(tmp_path, tmp_path / "d.parquet", spec, "--json-records", "--quiet"))
    assert res.code in (0, 1), res.stderr
    ids = [r["id"] for r in json.loads((tmp_path / "out" / "pdtp.json").read_text())["records"]]
    assert len(set(ids)) == 30 and all(isinstance(i, str) for i in ids)
    assert ids[0] in ("2020-01-01T00:00:00", "0.00")


def test_json_of_dates_decimals_and_missing() -> None:
    """Dates, decimals, NaT and NA become JSON text or null, never a TypeError."""
    import datetime as dt
    import decimal
    import json

    import pandas as pd

    from mptool.outputs.formats import to_json

    doc = json.loads(to_json({"a": pd.Timestamp("2020-01-02"), "b": dt.date(2020, 1, 3), "c": decimal.Decimal("1.5"),
                              "d": pd.NaT, "e": pd.NA, "f": np.datetime64("2020-01-04"), "g": np.datetime64("NaT")}))
    assert doc == {"a": "2020-01-02T00:00:00", "b": "2020-01-03", "c": "1.5", "d": None, "e": None,
                   "f": "2020-01-04", "g": None}


def test_numpy_warnings_do_not_add_lines_in_a_real_process(tmp_path: Path) -> None:
    """In a real process (not pytest's warning capture) a refused run still prints one stderr line."""
    import subprocess
    import sys

    csv = tmp_path / "d.csv"
    csv.write_text("f0,label\n" + "0,p\n0,q\n" * 3)  # GaussianNB: zero variance, numpy divides by zero
    args = pdtp_args(tmp_path, csv, good_spec(tmp_path), "--quiet")
    res = subprocess.run([sys.executable, "-m", "mptool", *args], capture_output=True, text=True, timeout=900)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith("mptool: error:"), res.stderr
    assert "non-finite probabilities" in lines[0]


def test_init_next_commands_quote_the_path(tmp_path: Path) -> None:
    """The 'next:' commands are pasted into a shell: a file name with ';' stays one quoted word."""
    import shlex

    csv = good_csv(tmp_path, name="x.csv; touch PWNED #.csv")
    res = run_cli("init", str(csv))
    assert res.code == 0, res.stderr
    line = next(ln for ln in res.stderr.splitlines() if ln.startswith("next:"))
    assert f"mptool check {shlex.quote(str(csv))} --model spec.yaml" in line
    words = shlex.split(line.split("then mptool pdtp ", 1)[1])
    assert words == [str(csv), "--model", "spec.yaml"]


def test_records_that_pass_never_print_a_bare_dtp1_holds(tmp_path: Path) -> None:
    """--records 29 checks one record of T: passing it does not establish DTP-1 for T."""
    res = run_cli(*pdtp_args(tmp_path, good_csv(tmp_path), good_spec(tmp_path), "--records", "29",
                             "--threshold", "100", "--quiet"))
    assert res.code == 0, res.stderr
    assert "DTP-1 holds" not in res.stdout
    assert res.stdout.startswith("DTP-1 not established (no violation among the 1 records given with --records, "
                                 "of 30 in T; audit every record for a verdict)")


def test_trained_model_of_another_sklearn_version_is_one_warning_line(tmp_path: Path) -> None:
    """scikit-learn's InconsistentVersionWarning (three lines per estimator) becomes one mptool warning."""
    import sklearn
    import skops.io as sio

    from mptool.inputs.prepare import fit_checked, prepare
    from mptool.inputs.spec import load_spec

    csv, spec = good_csv(tmp_path), good_spec(tmp_path, "logistic_regression")
    prep = prepare(csv, load_spec(spec))
    sio.dump(fit_checked(prep.template, prep.train), tmp_path / "plain.skops")
    with zipfile.ZipFile(tmp_path / "plain.skops") as z:
        members = {n: z.read(n) for n in z.namelist()}
    schema = members["schema.json"].decode().replace(f'\\"{sklearn.__version__}\\"', '\\"0.24.0\\"')
    with zipfile.ZipFile(tmp_path / "model.skops", "w") as z:
        for n, blob in members.items():
            z.writestr(n, schema.encode() if n == "schema.json" else blob)
    res = run_cli(*pdtp_args(tmp_path, csv, spec, "--trained", str(tmp_path / "model.skops"), "--quiet"))
    assert res.code == 0, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("mptool: warning:") and "scikit-learn 0.24.0" in lines[0], lines


def test_gzip_bomb_is_refused_before_pandas_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A .gz unpacking to over BOMB_BYTES at over BOMB_RATIO times its size is refused (limit lowered here)."""
    import gzip

    import mptool.inputs.data as data

    monkeypatch.setattr(data, "BOMB_BYTES", 1 << 20)
    path = tmp_path / "d.csv.gz"
    with gzip.open(path, "wb", compresslevel=9) as fh:
        fh.write(b"x1,x2,label\n" + b"0,0,a\n" * (1 << 19))  # 3 MiB of one repeated row
    args = pdtp_args(tmp_path, path, good_spec(tmp_path))
    before = snapshot(tmp_path)
    res = run_cli(*args)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.code == 2 and len(lines) == 1, res.stderr
    assert "refused as a decompression bomb" in lines[0] and "over 500 times its size" in lines[0]
    assert snapshot(tmp_path) == before


def test_trained_model_error_hides_quoted_cell_values() -> None:
    """scikit-learn's messages quote cell values ("unknown categories ['blue']"): the error line masks them."""
    from mptool.inputs.trained import TrainedModel, compare_to_spec
    from mptool.runtime.errors import InputError

    class Leaky:
        classes_ = np.array(["no", "yes"])

        def predict_proba(self, X):
            raise ValueError("Found unknown categories ['blue-secret'] in column 2 during transform; got 'x-secret'")

    with pytest.raises(InputError) as info:
        compare_to_spec(TrainedModel(Leaky(), "m.skops", ""), np.zeros((3, 1)), np.array(["no", "yes"]),
                        np.full((3, 2), 0.5), np.arange(3))
    text = str(info.value)
    assert "secret" not in text and "unknown categories [...]" in text and "got '...'" in text


def test_default_targets_above_a_small_candidate_set_says_it_is_the_default(tmp_path: Path) -> None:
    """30 rows and no --targets: the line says the 100 targets are the default and what to give instead."""
    csv = tmp_path / "d.csv"
    mixed_frame(30, seed=1).to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", "categorical_nb")
    res = run_cli("attack", csv, "--model", spec, "--out", tmp_path / "o", "--attacks", "threshold")
    assert res.code == 2 and "--targets 100 (the default) is more than the candidate set D's" in res.stderr
    assert "give --targets 30 or fewer" in res.stderr, res.stderr

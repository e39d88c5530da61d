"""Issue 26, readers, model files and signals: rows gate-c-1 .. of docs/bad-input.md.

Exact trust under --allow-import (skops files and dotted estimator paths), a bounded Parquet
reader, a header of numbers, column names equal after Unicode normalisation, a numeric column
with a typo, a full disk, and SIGHUP. Every case runs in-process on tiny data.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import mixed_frame, run_cli
from test_bad_input import assert_refused, good_csv, good_spec, pdtp_args, snapshot
from test_bad_input_red2 import _forged_function_model

from mptool.inputs.spec import read_yaml

# ------------------------------------------------------------------ 1. trust is exact for --allow-import


def test_allow_import_trusts_classes_defined_at_their_path_only() -> None:
    """gate-c-1: a module's own classes load; its functions and the names it imports do not."""
    pytest.importorskip("lightgbm")
    from mptool.inputs.trained import _trusted

    allowed = ("lightgbm",)
    assert _trusted("lightgbm.sklearn.LGBMClassifier", allowed)
    assert _trusted("lightgbm.basic.Booster", allowed)
    for name in ("lightgbm.basic.getsize",  # os.path.getsize, imported there
                 "lightgbm.LGBMClassifier",  # a real class, but not at the path where it is defined
                 "lightgbm.compat.BaseEstimator",  # scikit-learn's class, imported there
                 "lightgbm.basic._safe_call",  # a function defined there: functions are never trusted
                 "lightgbm.sklearn.LGBMClassifier.fit", "lightgbm.nope.X"):
        assert not _trusted(name, allowed), name
    assert not _trusted("lightgbm.sklearn.LGBMClassifier", ())  # nothing outside sklearn without the flag
    assert not _trusted("collections.OrderedDict", allowed)
    assert _trusted("collections.OrderedDict", ("collections",))


def test_forged_skops_function_under_allow_import_is_refused(tmp_path: Path) -> None:
    """gate-c-2: the issue's attack: FunctionTransformer naming lightgbm.basic.getsize, --allow-import lightgbm."""
    pytest.importorskip("lightgbm")
    model = _forged_function_model(tmp_path, "lightgbm.basic", "getsize")
    args = pdtp_args(tmp_path, good_csv(tmp_path), good_spec(tmp_path, "logistic_regression"),
                     "--trained", str(model), "--allow-import", "lightgbm")
    before = snapshot(tmp_path)
    assert_refused(run_cli(*args), ["model.skops", "does not trust", "lightgbm.basic.getsize",
                                    "only classes defined there"], tmp_path, before)


@pytest.fixture
def reexporting_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A package ``gatec_pkg`` defining one classifier and importing another from ``gatec_other``."""
    (tmp_path / "gatec_other.py").write_text(textwrap.dedent("""
        from sklearn.naive_bayes import GaussianNB

        class Elsewhere(GaussianNB):
            pass
    """))
    (tmp_path / "gatec_pkg").mkdir()
    (tmp_path / "gatec_pkg" / "__init__.py").write_text(textwrap.dedent("""
        from os.path import getsize
        from sklearn.naive_bayes import GaussianNB
        from gatec_other import Elsewhere

        class Own(GaussianNB):
            pass
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in ("gatec_pkg", "gatec_other"):
        sys.modules.pop(name, None)


@pytest.mark.parametrize("name, fragments", [
    ("gatec_pkg.Elsewhere", ["'gatec_pkg.Elsewhere'", "imports from elsewhere", "where it is defined"]),
    ("gatec_pkg.getsize", ["'gatec_pkg.getsize'", "not a scikit-learn estimator class"]),
])
def test_spec_estimator_reexported_by_an_allowed_module_is_refused(reexporting_package: Path, name: str,
                                                                   fragments: list[str]) -> None:
    """gate-c-3: model.estimator naming a class or function the allowed module imports: exit 2 before a fit."""
    d = reexporting_package
    csv, spec = good_csv(d), good_spec(d, name)
    before = snapshot(d)
    assert_refused(run_cli("check", csv, "--model", spec, "--allow-import", "gatec_pkg"), fragments, d, before)
    # the same class named where it is defined, with its own module allowed, is accepted
    assert run_cli("check", csv, "--model", good_spec(d, "gatec_other.Elsewhere"),
                   "--allow-import", "gatec_other").code == 0


def test_spec_estimator_defined_in_the_allowed_package_is_accepted(reexporting_package: Path) -> None:
    from mptool.inputs.models import resolve_estimator
    from mptool.inputs.spec import ModelSpec

    choice = resolve_estimator(ModelSpec(estimator="gatec_pkg.Own"), 0, ("gatec_pkg",))
    assert choice.cls.__module__ == "gatec_pkg"


def test_spec_lightgbm_function_is_refused() -> None:
    pytest.importorskip("lightgbm")
    from mptool.inputs.models import resolve_estimator
    from mptool.inputs.spec import ModelSpec
    from mptool.runtime.errors import InputError

    with pytest.raises(InputError, match="not a scikit-learn estimator class"):
        resolve_estimator(ModelSpec(estimator="lightgbm.basic.getsize"), 0, ("lightgbm",))
    assert resolve_estimator(ModelSpec(estimator="lightgbm.LGBMClassifier"), 0, ("lightgbm",)).name


# ------------------------------------------------------------------ 2. Parquet is bounded


def _parquet_bomb(d: Path, rows: int = 300_000) -> Path:
    """A few KB of Parquet that decode to rows x 2 cells (one repeated number, a repeated label)."""
    path = d / "d.parquet"
    pd.DataFrame({"x": np.zeros(rows, dtype=np.int8), "label": np.tile(["a", "b"], rows // 2)}).to_parquet(path)
    return path


@pytest.mark.parametrize("command", ["check", "init", "pdtp"])
def test_parquet_bomb_is_refused_from_its_footer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 command: str) -> None:
    """gate-c-4: 300,000 rows in about 5 KB (the issue's 60 M rows in 836 KB, scaled by a 1 MiB limit)."""
    import mptool.inputs.data as data

    monkeypatch.setattr(data, "BOMB_BYTES", 1 << 20)
    path = _parquet_bomb(tmp_path)
    assert path.stat().st_size * data.BOMB_RATIO < 300_000 * 2 * 8  # over the ratio, as in the issue
    args = {"init": ["init", path], "check": ["check", path, "--model", good_spec(tmp_path)],
            "pdtp": pdtp_args(tmp_path, path, good_spec(tmp_path))}[command]
    before = snapshot(tmp_path)
    assert_refused(run_cli(*args), ["d.parquet", "300,000 rows x 2 columns", "decompression bomb"], tmp_path,
                   before)


def test_parquet_under_the_limit_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same file passes when its decoded size is within the limit (the rule is size and ratio together)."""
    import mptool.inputs.data as data

    path = _parquet_bomb(tmp_path, 20_000)
    monkeypatch.setattr(data, "BOMB_BYTES", 1 << 20)
    assert len(data.read_parquet(path)) == 20_000


# ------------------------------------------------------------------ 3. a header of numbers


def _init_read(path: Path, *extra: str) -> tuple[dict, str]:
    res = run_cli("init", path, *extra)
    assert res.code == 0, res.stderr
    return read_yaml(res.stdout, "init")["data"]["read"], res.stderr


def test_year_like_header_is_read_as_header(tmp_path: Path) -> None:
    """gate-c-5: ``2019,2020,2021,label`` over measurements: a header (with a note), not a record of a third class."""
    frame = mixed_frame(30, seed=2)[["x1", "x2", "label"]].assign(x3=np.arange(30) % 7)[["x1", "x2", "x3", "label"]]
    frame.columns = ["2019", "2020", "2021", "label"]
    csv = tmp_path / "d.csv"
    frame.to_csv(csv, index=False)
    read, err = _init_read(csv)
    assert read["header"] is True
    assert "read as the header" in err and "--header false" in err
    spec = tmp_path / "s.yaml"
    spec.write_text(run_cli("init", csv).stdout)
    res = run_cli("check", csv, "--model", spec)
    assert res.code == 0, res.stderr
    assert "30 rows" in res.stdout or "30" in res.stdout
    # --header false keeps the line as a record, and the next command repeats the flag
    read, err = _init_read(csv, "--header", "false")
    assert read["header"] is False and "--header false" in err.splitlines()[-1]


def test_column_numbers_header_is_read_as_header(tmp_path: Path) -> None:
    """gate-c-6: issue 30's header ``0,1,...,N-1`` over integer data (values within 0..N-1 too)."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.integers(0, 5, size=(40, 5)), columns=[str(i) for i in range(5)])
    csv = tmp_path / "d.csv"
    frame.to_csv(csv, index=False)
    read, err = _init_read(csv)
    assert read["header"] is True and "column numbers" in err
    # without a header the same integers are data: distinct numbers within their columns' values stay a record
    frame.iloc[0] = [4, 0, 1, 2, 3]
    csv.write_text(frame.to_csv(index=False, header=False))
    read, _ = _init_read(csv)
    assert read["header"] is False
    read, err = _init_read(csv, "--header", "true")
    assert read["header"] is True and "as --header says" in err


def test_header_row_rule() -> None:
    """The rule on its own: distinct whole numbers that stand out from their columns, or the column numbers."""
    from mptool.inputs.sniff import header_row

    body = [["3.5", "2", "yes"], ["1.5", "4", "no"], ["2.0", "3", "no"]]
    assert header_row(["a", "b", "label"], body) == (True, None)
    assert header_row(["2019", "2020", "label"], body)[0]  # 2019 over decimals, 2020 out of 2..4
    assert not header_row(["2.5", "3", "yes"], body)[0]  # a decimal: data
    assert not header_row(["2019", "3", "label"], body)[0]  # 3 lies within its column: data
    assert not header_row(["7", "7", "label"], body)[0]  # repeated numbers: data
    assert header_row(["0", "1", "2"], [["1", "2", "0"], ["2", "0", "1"]])[0]  # the column numbers
    assert not header_row(["0", "1"], [["1", "0"], ["0", "1"]])[0]  # two columns: only if they stand out


def test_init_header_flag_must_be_true_or_false(tmp_path: Path) -> None:
    """gate-c-7."""
    csv = good_csv(tmp_path)
    assert_refused(run_cli("init", csv, "--header", "maybe"), ["--header 'maybe'", "true or false"],
                   stdout_empty=True)


# ------------------------------------------------------------------ 4. names equal after NFKC


@pytest.mark.parametrize("names", [("ﬁle", "file"), ("caf\u00e9", "cafe\u0301")], ids=["ligature", "accent"])
def test_column_names_equal_after_nfkc_are_refused(tmp_path: Path, names: tuple[str, str]) -> None:
    """gate-c-8: the CSV header, data.read.header and Parquet/DataFrame names."""
    frame = mixed_frame(20, seed=1)[["x1", "x2", "label"]]
    frame.columns = [*names, "label"]
    csv, spec = good_csv(tmp_path, frame), good_spec(tmp_path)
    before = snapshot(tmp_path)
    assert_refused(run_cli(*pdtp_args(tmp_path, csv, spec)),
                   ["d.csv", "same text after Unicode normalisation", "rename one"], tmp_path, before)
    parquet = tmp_path / "d.parquet"
    frame.to_parquet(parquet)
    assert_refused(run_cli("init", parquet), ["d.parquet", "Unicode normalisation"])
    headerless = tmp_path / "h.csv"
    headerless.write_text(frame.to_csv(index=False, header=False))
    spec = good_spec(tmp_path, data={"read": {"header": [*names, "label"]}})
    assert_refused(run_cli("check", headerless, "--model", spec), ["data.read.header", "Unicode normalisation"])


# ------------------------------------------------------------------ 5. a typo in a numeric column


def test_numeric_column_with_a_typo_is_refused(tmp_path: Path) -> None:
    """gate-c-9: one text cell in 30 numbers: refused, naming the column and the count, never the cell."""
    frame = mixed_frame(30, seed=5).astype({"x1": object})
    frame.loc[7, "x1"] = "0.4O7"
    csv, spec = good_csv(tmp_path, frame), good_spec(tmp_path)
    before = snapshot(tmp_path)
    line = assert_refused(run_cli(*pdtp_args(tmp_path, csv, spec)),
                          ["column 'x1'", "except 1 of its 30", "data.missing_values", "data.categorical"],
                          tmp_path, before)
    assert "0.4O7" not in line
    # declared as categories, it is what the user asked for
    spec = good_spec(tmp_path, "categorical_nb", data={"categorical": ["x1"]}, model={"bins": {}})
    assert run_cli("check", csv, "--model", spec).code == 0
    # listed in data.numeric, the error names the row
    spec = good_spec(tmp_path, data={"numeric": ["x1"]})
    assert_refused(run_cli("check", csv, "--model", spec), ["data.numeric lists column 'x1'", "row 7"])
    # init says it in a note
    res = run_cli("init", csv)
    assert res.code == 0 and "column 'x1' holds numbers except 1 text cell(s)" in res.stderr


def test_missing_markers_and_real_text_columns_are_not_typos() -> None:
    from mptool.inputs.data import stray_text

    assert stray_text(pd.Series(["1", "2", "?", "4"] * 10)) is None  # a marker: the existing note speaks
    assert stray_text(pd.Series(["a", "b", "c"] * 10)) is None  # categories
    assert stray_text(pd.Series(["1", "2", "x", "y"] * 10)) is None  # half text: categories
    assert stray_text(pd.Series([str(i) for i in range(200)] + ["x"] * 2 + [None])) == (2, 202)


# ------------------------------------------------------------------ 6. a full disk


_FSYNC = os.fsync


def _no_space(fd: int) -> None:
    """os.fsync on a full disk: ENOSPC for mptool's temporary files (the lock file is written as usual)."""
    try:
        name = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        name = ".tmp"  # no /proc: every file
    if name.endswith(".tmp"):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    _FSYNC(fd)


def test_full_disk_while_writing_results_is_one_line_and_replaces_nothing(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """gate-c-10: ENOSPC on a result file: exit 2 naming the folder, the earlier results untouched, no temp file."""
    csv = good_csv(tmp_path)
    spec = good_spec(tmp_path)
    out = tmp_path / "out"
    assert run_cli(*pdtp_args(tmp_path, csv, spec, "--quiet")).code in (0, 1)
    before = snapshot(tmp_path)
    monkeypatch.setattr(os, "fsync", _no_space)
    assert_refused(run_cli(*pdtp_args(tmp_path, csv, spec, "--quiet", "--force")),
                   [f"{out}: no space left on the device", "free space"], tmp_path, before)
    monkeypatch.undo()
    # a disk too full for all the results together: refused before any file is replaced
    import mptool.outputs.results as results

    monkeypatch.setattr(results.shutil, "disk_usage", lambda folder: SimpleNamespace(total=100, used=90, free=10))
    assert_refused(run_cli(*pdtp_args(tmp_path, csv, spec, "--quiet", "--force")),
                   [f"{out}: no space left", "pdtp.csv"], tmp_path, before)


def test_full_disk_in_the_checkpoint_keeps_it_for_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gate-c-11: ENOSPC on a checkpoint chunk: exit 2, the finished chunks kept, --resume completes the run."""
    import mptool.runtime.checkpoint as checkpoint

    csv = good_csv(tmp_path, mixed_frame(12, seed=0))  # 12 refits a run: 3 runs stay cheap
    spec = good_spec(tmp_path, "decision_tree", model={"params": {"max_depth": 2}})
    clean = tmp_path / "clean"
    args = ["pdtp", csv, "--model", spec, "--engine", "refit", "--jobs", "1", "--quiet"]
    assert run_cli(*args, "--out", clean).code in (0, 1)
    real, calls = checkpoint.write_atomic, []

    def fills_up(path, data):
        calls.append(path)
        if len(calls) == 3:  # the metadata and one chunk fit; the next write meets a full disk
            monkeypatch.setattr(os, "fsync", _no_space)
        return real(path, data)

    monkeypatch.setattr(checkpoint, "write_atomic", fills_up)
    out = tmp_path / "out"
    line = assert_refused(run_cli(*args, "--out", out), ["no space left", "finished item(s) are kept",
                                                         f"--resume --out {out}"])
    assert not (out / "pdtp.csv").exists() and not (out / ".mptool.lock").exists()
    monkeypatch.undo()
    assert re.search(r"; [1-9][0-9]* finished item\(s\) are kept", line), line
    assert not [p for p in (out / ".checkpoint").iterdir() if p.name.endswith(".tmp")]
    res = run_cli(*args, "--out", out, "--resume")
    assert res.code in (0, 1), res.stderr
    assert (out / "pdtp.csv").read_bytes() == (clean / "pdtp.csv").read_bytes()


def test_full_disk_elsewhere_is_exit_2_not_a_bug(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Any other write meeting ENOSPC (outside write_atomic) is one line, exit 2, never 'please report it'."""
    import mptool.api.operations as operations

    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "x" / "f.bin"))

    monkeypatch.setattr(operations, "prepare_pdtp", full)
    line = assert_refused(run_cli(*pdtp_args(tmp_path, good_csv(tmp_path), good_spec(tmp_path))),
                          ["no space left on the device", "free space"])
    assert "please report" not in line and str(tmp_path / "x") in line


# ------------------------------------------------------------------ 7. SIGHUP


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX only")
def test_sighup_is_handled_like_sigterm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gate-c-12: SIGHUP (a closed terminal) mid-run: exit 129, chunks saved, lock released, --resume exact."""
    from mptool.runtime import signals

    assert signal.SIGHUP in signals.SIGNALS
    # Under nohup (or a parent that ignores SIGHUP) mptool rightly leaves an ignored SIGHUP ignored; this test
    # is about a terminal that closes, so it runs with SIGHUP's default disposition (restored after).
    previous = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        _sighup_mid_run(tmp_path, monkeypatch)
    finally:
        signal.signal(signal.SIGHUP, previous)


def _sighup_mid_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The body of :func:`test_sighup_is_handled_like_sigterm`, with SIGHUP not ignored."""
    import mptool.runtime.checkpoint as checkpoint
    from mptool.runtime import signals

    csv = good_csv(tmp_path, mixed_frame(12, seed=0))  # 12 refits a run: 3 runs stay cheap
    spec = good_spec(tmp_path, "decision_tree", model={"params": {"max_depth": 2}})
    clean = tmp_path / "clean"
    args = ["pdtp", csv, "--model", spec, "--engine", "refit", "--jobs", "1", "--quiet"]
    assert run_cli(*args, "--out", clean).code in (0, 1)
    real, calls = checkpoint.write_atomic, []

    def hang_up(path, data):
        calls.append(path)
        real(path, data)
        if len(calls) == 2:
            signal.raise_signal(signal.SIGHUP)

    monkeypatch.setattr(checkpoint, "write_atomic", hang_up)
    out = tmp_path / "out"
    res = run_cli(*args, "--out", out)
    assert res.code == 129, res.stderr
    assert re.search(r"mptool: interrupted by SIGHUP; [1-9][0-9]* finished item\(s\) are saved in "
                     + re.escape(str(out / ".checkpoint")), res.stderr), res.stderr
    assert not (out / ".mptool.lock").exists() and not (out / "pdtp.csv").exists()
    assert signal.getsignal(signal.SIGHUP) is not signals._handler  # handlers restored after the command
    monkeypatch.undo()
    res = run_cli(*args, "--out", out, "--resume")
    assert res.code in (0, 1), res.stderr
    assert (out / "pdtp.csv").read_bytes() == (clean / "pdtp.csv").read_bytes()

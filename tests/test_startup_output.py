"""Issue 28: a light start-up (no scikit-learn, scipy or pandas for --help), the same help text
from the lazily built commands, and the columnar CSV writer byte-identical to pandas' renderer."""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer.main

from mptool.cli.app import app, click_group

HEAVY = ("sklearn", "scipy", "pandas", "pyarrow", "numpy")

_PROBE = """
import sys
from mptool.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print("LOADED", ",".join(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)
"""


def _loaded(*args: str) -> set[str]:
    """The heavy libraries a fresh interpreter has imported after ``mptool ARGS``."""
    done = subprocess.run([sys.executable, "-c", _PROBE.format(heavy=HEAVY), *args], capture_output=True,
                          text=True, check=False)
    line = [x for x in done.stderr.splitlines() if x.startswith("LOADED")][-1]
    return set(filter(None, line.split(" ", 1)[1].split(",")))


def test_help_imports_no_heavy_library() -> None:
    assert _loaded("--help") == set()


@pytest.mark.parametrize("args", [("check", "--jobs", "x"), ("init",), ("pdtp", "--bogus")])
def test_argument_errors_import_no_heavy_library(args: tuple[str, ...]) -> None:
    assert _loaded(*args) == set()


def test_report_and_diff_import_no_model_library(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`report` and `diff` read result files: scikit-learn and scipy stay out (pandas reads the CSVs)."""
    from conftest import run_cli

    monkeypatch.setenv("MPTOOL_FINGERPRINT_KEY", "startup-test-key")  # diff matches records by fingerprint
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    for out in (a, b):
        res = run_cli("pdtp", "--out", out, "--train-size", "200", "-q")
        assert res.code in (0, 1), res.stderr
    assert run_cli("diff", a, b).code in (0, 1)  # the command the probe runs works
    assert _loaded("report", a, "--out", str(tmp_path / "r.html")) & {"sklearn", "scipy"} == set()
    assert (tmp_path / "r.html").is_file()  # the probe's report was written
    assert _loaded("diff", a, b) & {"sklearn", "scipy"} == set()


def _help(command: object, path: list[str]) -> str:
    """The help text of ``mptool PATH`` rendered from the click command ``command``."""
    ctx = typer.main._click.Context(command, info_name="mptool", terminal_width=100)  # type: ignore[attr-defined]
    for name in path:
        sub = command.get_command(ctx, name)  # type: ignore[attr-defined]
        ctx = typer.main._click.Context(sub, info_name=name, parent=ctx, terminal_width=100)  # type: ignore[attr-defined]
        command = sub
    return command.get_help(ctx)  # type: ignore[attr-defined]


def test_lazy_commands_give_the_same_help_as_typer() -> None:
    import mptool.cli.main  # noqa: F401 - registers every subcommand (alone, this file imports only some)

    eager = typer.main.get_command(app)
    # typer lists subcommands in registration order, i.e. whichever cli module this process imported first;
    # the lazy group lists them by name, sub-groups last (the console script's order): compare in that order
    groups = [n for n, c in eager.commands.items() if hasattr(c, "commands")]  # type: ignore[attr-defined]
    order = [*sorted(set(eager.commands) - set(groups)), *groups]  # type: ignore[attr-defined]
    eager.commands = {n: eager.commands[n] for n in order}  # type: ignore[attr-defined]
    lazy = click_group()
    names = list(eager.commands)  # type: ignore[attr-defined]
    assert list(lazy.commands) == names
    assert _help(lazy, []) == _help(eager, [])
    assert not lazy.commands.built  # type: ignore[attr-defined]  # the listing built no command
    for name in names:
        assert _help(lazy, [name]) == _help(eager, [name]), name
    assert _help(lazy, ["datasets", "make-purchase"]) == _help(eager, ["datasets", "make-purchase"])


# --- the columnar CSV writer (mptool.outputs.csvtext) against pandas' renderer, byte for byte ---

import decimal  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from mptool.outputs import csvtext  # noqa: E402
from mptool.outputs.formats import CSV_FLOAT_FORMAT, to_csv, to_csv_exact  # noqa: E402


def old_csv(frame: pd.DataFrame, float_format: str | None) -> str:
    """The renderer mptool used before issue 28: pandas' to_csv (the reference)."""
    return frame.to_csv(index=False, float_format=float_format, lineterminator="\n")


def awkward_frame() -> pd.DataFrame:
    """Every kind of value a per-record file holds, and the edge cases of its text."""
    floats = [0.1, np.nan, -0.0, 0.0, 1e-300, 5e-324, 1e16, 123456789012345.0, np.inf, -np.inf, 2 / 3, -1.5]
    n = len(floats)
    texts = ["a,b", 'say "hi"', "two\nlines", "cr\rhere", "", " lead", "trail ", "é ü 中", "x", None, "'q'", "a\tb"]
    mixed = [np.float64(0.5), 0.1, None, np.nan, True, 1, 1.0, -0.0, decimal.Decimal("NaN"), pd.NA, 'a"b', "c,d"]
    return pd.DataFrame({
        "row": np.arange(n, dtype=np.int64) * 7919,
        "big": np.array([2**63 - 1, -(2**63), 0, -1, 1, 10**18, 5, 6, 7, 8, 9, 10], dtype=np.int64),
        "ubig": np.array([2**64 - 1] + [3] * (n - 1), dtype=np.uint64),
        "small": np.arange(n, dtype=np.int8),
        "label": pd.array(texts, dtype="str"),
        "pdtp": floats,
        "f32": np.array(floats, dtype=np.float32),
        "flag": [True, False] * (n // 2),
        "vacuous": np.array([False, None, True] * (n // 3), dtype=object),
        "obj_text": np.array(texts, dtype=object),
        "mixed": np.array(mixed, dtype=object),
        'name, "quoted"': np.full(n, 0.25),
    })


@pytest.mark.parametrize("chunk", [csvtext.CHUNK_ROWS, 5])
@pytest.mark.parametrize("float_format", [CSV_FLOAT_FORMAT, None])
def test_columnar_csv_is_byte_identical(monkeypatch: pytest.MonkeyPatch, chunk: int, float_format: str | None) -> None:
    monkeypatch.setattr(csvtext, "CHUNK_ROWS", chunk)  # several pieces: the joins between them are exact too
    frame = awkward_frame()
    assert csvtext._column_kinds(frame) is not None  # the columnar path, not the fallback
    assert csvtext.to_csv_text(frame, float_format) == old_csv(frame, float_format)


def test_formats_use_it_with_their_float_format() -> None:
    frame = awkward_frame()
    assert to_csv(frame) == old_csv(frame, CSV_FLOAT_FORMAT)
    assert to_csv_exact(frame) == old_csv(frame, None)


@pytest.mark.parametrize("frame", [
    pd.DataFrame({"only": [1.5, np.nan, -0.0]}),  # one column: csv quotes an empty single field
    pd.DataFrame({"a": pd.Series([], dtype=float), "b": pd.Series([], dtype=object)}),
    pd.DataFrame({"t": pd.to_datetime(["2024-01-01", None]), "x": [1, 2]}),
    pd.DataFrame({"c": pd.Categorical(["a", "b"]), "x": [0.5, 1.0]}),
    pd.DataFrame({"n": pd.array([1, None], dtype="Int64"), "x": [0.5, 1.0]}),
    pd.DataFrame({0: [1.0, 2.0], 1: ["a", "b"]}),  # column names that are not text
], ids=["one-column", "no-rows", "dates", "categorical", "nullable-int", "int-names"])
def test_other_frames_fall_back_to_pandas(frame: pd.DataFrame) -> None:
    assert csvtext.to_csv_text(frame, CSV_FLOAT_FORMAT) == old_csv(frame, CSV_FLOAT_FORMAT)


_cells = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
                   st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=1, max_size=30), st.data())
def test_random_columns_are_byte_identical(floats: list[float], data: st.DataObject) -> None:
    n = len(floats)
    frame = pd.DataFrame({
        "f": floats,
        "i": data.draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=n, max_size=n)),
        "s": pd.array(data.draw(st.lists(st.one_of(st.none(), st.text(max_size=8)), min_size=n, max_size=n)),
                      dtype="str"),
        "o": np.array(data.draw(st.lists(_cells, min_size=n, max_size=n)) + [None], dtype=object)[:n],
    })
    for float_format in (CSV_FLOAT_FORMAT, None):
        assert csvtext.to_csv_text(frame, float_format) == old_csv(frame, float_format)


# --- every phase in pdtp.json's timings; workers only when they pay (mptool.runtime.parallel) ---

import json  # noqa: E402
from pathlib import Path  # noqa: E402

from conftest import mixed_frame, write_spec  # noqa: E402

from mptool.inputs.models import _category_codes  # noqa: E402
from mptool.runtime import parallel  # noqa: E402


def test_pdtp_json_times_every_phase(cli, tmp_path: Path) -> None:
    data = tmp_path / "d.csv"
    mixed_frame(40).to_csv(data, index=False)
    spec = write_spec(tmp_path / "s.yaml", "categorical_nb", model={"bins": {"x1": [0.0], "x2": [2.0]}})
    res = cli("pdtp", data, "--model", spec, "--out", tmp_path / "out", "-q", "--jobs", "1")
    assert res.code in (0, 1), res.stderr
    summary = json.loads((tmp_path / "out" / "pdtp.json").read_text())["summary"]
    phases = {"read_prepare_s", "fit_full_s", "fingerprint_key_s", "leave_one_out_s", "table_s", "noise_floor_s",
              "fingerprints_s", "write_csv_s", "total_s"}
    assert phases <= set(summary["timings"]), summary["timings"]
    assert all(v >= 0 for v in summary["timings"].values())
    assert summary["workers"]["workers"] == 1 and summary["workers"]["fits"] == 0  # exact engine: --jobs as given


@pytest.fixture
def two_idle_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(parallel.os, "getloadavg", lambda: (0.0, 0.0, 0.0))


def test_short_refits_run_in_this_process(two_idle_cores: None) -> None:
    # 16 refits of 0.05 s: 0.8 s alone, against 3 s to start two workers
    choice = parallel.choose_workers(None, "loky", 16, 0.05)
    assert (choice["requested"], choice["workers"]) == (2, 1)
    assert "in this process" in parallel.workers_line(choice, "the refits")


def test_long_refits_use_every_worker(two_idle_cores: None) -> None:
    assert parallel.choose_workers(None, "loky", 300, 0.5)["workers"] == 2  # 150 s alone, 78 s on two


def test_given_jobs_and_other_backends_are_kept(two_idle_cores: None) -> None:
    assert parallel.choose_workers(2, "loky", 16, 0.05)["workers"] == 2  # --jobs N is taken as given
    assert parallel.choose_workers(None, "threading", 16, 0.05)["workers"] == 2


def test_a_loaded_machine_needs_longer_work_for_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(parallel.os, "getloadavg", lambda: (8.0, 8.0, 8.0))  # 4 per core: no speed-up
    assert parallel.choose_workers(None, "loky", 300, 0.5)["workers"] == 1


@pytest.mark.parametrize("col", [
    pd.Series(["b", "a", None, "c", "a"], dtype="str"),
    pd.Series(["b", "a", None, np.nan, "c"], dtype=object),
    pd.Series([1, 2, 3, 1], dtype=np.int64),
    pd.Series([True, False, True]),
    pd.Series([1, 1.0, True, "1"], dtype=object),  # pandas' own equality decides, as before
])
def test_category_codes_match_pandas(col: pd.Series) -> None:
    categories = ["a", "b", "c", 1, 2, "1", 0, 3]
    want = pd.Categorical(col, categories=categories).codes.astype(np.int64)
    for _ in range(2):  # the second call of a pyarrow column is answered from the memo
        codes, missing = _category_codes(col, tuple(categories))
        assert np.array_equal(codes, want)
        assert np.array_equal(missing, col.isna().to_numpy())

"""Random small CSVs and specs, hostile ones included: mptool succeeds (0/1) or exits 2 with one line, never 3.

Examples are bounded (few rows, fast estimators, a fixed number of examples, no deadline),
so the whole module runs in well under half a minute.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from conftest import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FAST_ESTIMATORS = [
    "gaussian_nb",
    "categorical_nb",
    "bernoulli_nb",
    "multinomial_nb",
    "logistic_regression",
    "decision_tree",
    "knn",
]
BAD_ESTIMATORS = ["nosuch", "sklearn.svm.SVC", "builtins.eval", "sklearn.linear_model.LinearRegression"]

names = st.one_of(
    st.sampled_from(["a", "b", "label", "x", "x.1", "Unnamed: 0", " ", "é", "1", "nan", "a,b", 'q"t']),
    st.text(min_size=0, max_size=4),
)
numbers = st.one_of(
    st.integers(-5, 5),
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.sampled_from([1e308, -1e308, 0.0, -0.0]),
)
words = st.one_of(
    st.sampled_from(["red", "blue", "", "NA", "nan", "None", "1", "1.5", "inf", "true", "a,b", 'say "hi"', "é"]),
    st.text(max_size=3),
)
cells = st.one_of(numbers, words, st.none())


@st.composite
def frames(draw: Any) -> pd.DataFrame:
    """A small frame: a few columns of one kind each (numbers, words, or a mixture) and a label."""
    n = draw(st.integers(0, 14) if draw(st.integers(0, 9)) == 9 else st.integers(6, 14))
    n_cols = draw(st.integers(1, 3))
    cols: dict[str, list[Any]] = {}
    for j in range(n_cols):
        kind = draw(st.sampled_from([st.integers(0, 3), st.sampled_from(["u", "v", "w"]), numbers, words, cells]))
        cols[f"f{j}"] = draw(st.lists(kind, min_size=n, max_size=n))
    label_kind = draw(st.sampled_from(["two", "three", "one", "messy"]))
    if label_kind == "messy":
        cols["label"] = draw(st.lists(cells, min_size=n, max_size=n))
    else:
        k = {"one": 1, "two": 2, "three": 3}[label_kind]
        cols["label"] = draw(st.lists(st.sampled_from(["p", "q", "r"][:k]), min_size=n, max_size=n))
    frame = pd.DataFrame(cols)
    if draw(st.integers(0, 4)) == 4:  # hostile header: renamed, possibly duplicated or empty names
        frame.columns = [draw(names) for _ in frame.columns]
    return frame


raw_text = st.text(alphabet=st.sampled_from(list('ab1.5,;\t|"\n -eE\\x')), max_size=80)


@st.composite
def specs(draw: Any, columns: list[str]) -> Any:
    """A spec dict (sometimes with hostile keys or values), or non-mapping YAML."""
    hostile = draw(st.integers(0, 9)) == 7  # about one spec in ten gets a bad value somewhere
    if hostile and draw(st.integers(0, 3)) == 3:
        return draw(st.sampled_from([[], "just text", 3, None, {"data": None}, {"data": [], "model": "x"}]))
    label = draw(st.sampled_from([*columns, "missing_col"])) if hostile and columns else "label"
    if "label" not in columns and columns:
        label = columns[-1]
    data: dict[str, Any] = {"label": label, "missing": draw(st.sampled_from(["drop", "drop", "impute", "error"]))}
    if draw(st.booleans()):
        data["train_size"] = draw(st.one_of(st.integers(-1, 40), st.just("ten")) if hostile else st.integers(4, 12))
    if columns and draw(st.integers(0, 3)) == 3:
        data["drop"] = draw(st.lists(st.sampled_from([*columns, "zz"]), max_size=2))
    if columns and draw(st.integers(0, 4)) == 4:
        data["id"] = draw(st.sampled_from([*columns, "zz"]))
    model: dict[str, Any] = {
        "estimator": draw(st.sampled_from([*FAST_ESTIMATORS, *BAD_ESTIMATORS] if hostile else FAST_ESTIMATORS)),
        "preprocess": draw(st.sampled_from(["auto", "auto", "auto", "none"])),
    }
    if hostile:
        model["params"] = draw(
            st.sampled_from([{"alpha": -1}, {"n_neighbors": 50}, {"max_depth": 0}, {"C": "big"}, {"bogus": 1}, {}])
        )
    spec: dict[str, Any] = {"data": data, "model": model, "seed": draw(st.integers(0, 3))}
    if draw(st.booleans()):
        bin_sizes = [0.0, 0.01, 0.25, 0.999] + ([-0.1, 1.0] if hostile else [])
        spec["output"] = {"bin_size": draw(st.sampled_from(bin_sizes))}
    if hostile and draw(st.booleans()):
        spec[draw(st.sampled_from(["sed", "outputs", "data_"]))] = 1
    return spec


@st.composite
def cases(draw: Any) -> tuple[str | pd.DataFrame, Any, list[str]]:
    if draw(st.integers(0, 9)) == 9:
        csv: str | pd.DataFrame = draw(raw_text)
        columns: list[str] = []
    else:
        csv = draw(frames())
        columns = [str(c) for c in csv.columns]
    spec = draw(specs(columns))
    extra = draw(
        st.sampled_from([[], [], ["--engine", "refit"], ["--sample", "3"], ["--records", "0,2"], ["--bin-size", "0"]])
    )
    return csv, spec, extra


def finite_pdtp(value: Any) -> bool:
    """A PDTP is a finite log-ratio: at most ln(0.995/0.005) with bins, ln(1/1e-12) without."""
    return isinstance(value, float | int) and math.isfinite(value) and 0 <= value <= -math.log(1e-12)


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(cases())
def test_random_inputs_never_crash(case: tuple[str | pd.DataFrame, Any, list[str]]) -> None:
    csv, spec, extra = case
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        data = d / "d.csv"
        if isinstance(csv, str):
            data.write_text(csv)
        else:
            csv.to_csv(data, index=False)
        model = d / "s.yaml"
        model.write_text(yaml.safe_dump(spec, allow_unicode=True))
        res = run_cli("pdtp", data, "--model", model, "--out", d / "out", "--jobs", "1", "--quiet", *extra)
        assert res.code in (0, 1, 2), (res.code, res.stderr)
        assert "Traceback" not in res.stderr
        if res.code == 2:
            errors = [ln for ln in res.stderr.splitlines() if ln.startswith("mptool: error:")]
            assert len(errors) == 1, res.stderr
            assert not (d / "out" / "pdtp.csv").exists()
        else:
            table = pd.read_csv(d / "out" / "pdtp.csv")
            assert len(table) > 0 and table["pdtp"].map(finite_pdtp).all()

"""reduce-dtp (Long et al., section 8): traces checked step by step against a naive recompute.

The naive reference below fits scikit-learn's CategoricalNB directly on every reduced set
and on every leave-one-out set (one refit per record), bins the probabilities to the
centres of 0.01-wide bins and takes max_y |ln p - ln p'| — independent of mptool's
pipeline, engines and reduce module.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import mixed_frame, run_cli, write_spec
from sklearn.naive_bayes import CategoricalNB

from mptool.api.reduce import REDUCE_COLUMNS, State, Strategy, parse_strategy, removable_order
from mptool.runtime.errors import InputError

# A constructed set of 13 records (two categorical features, binary label) on which the
# greedy trace is a sawtooth: max PDTP 1.358 -> 0.733 (DTP-1 holds) -> 3.611 (broken again).
# Row 12 is the only record with f1 = "d"; records 5, 6 and 9 are the "yes" records.
F1 = ["a", "b", "b", "a", "b", "c", "a", "c", "c", "a", "c", "a", "d"]
F2 = ["u", "u", "u", "v", "v", "v", "u", "v", "u", "u", "v", "v", "v"]
LABEL = ["no", "no", "no", "no", "no", "yes", "yes", "no", "no", "yes", "no", "no", "no"]
DOMAINS = {"f1": ["a", "b", "c", "d"], "f2": ["u", "v"]}


def sawtooth_frame() -> pd.DataFrame:
    return pd.DataFrame({"f1": F1, "f2": F2, "label": LABEL})


@pytest.fixture
def sawtooth(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "saw.csv"
    sawtooth_frame().to_csv(data, index=False)
    spec = write_spec(tmp_path / "nb.yaml", "categorical_nb", model={"params": {"alpha": 1.0}})
    return data, spec


# ---------------------------------------------------------------- naive reference
def _bin(p: np.ndarray) -> np.ndarray:
    k = np.clip(np.floor(np.round(p / 0.01, 9)), 0, 99)
    return k * 0.01 + 0.005


def _encode(frame: pd.DataFrame) -> np.ndarray:
    return np.stack([frame[c].map({v: i for i, v in enumerate(d)}).to_numpy() for c, d in DOMAINS.items()], 1)


def naive_pdtp(frame: pd.DataFrame) -> np.ndarray:
    """PDTP of every record of ``frame``: fit on all, refit without each record."""
    X, y = _encode(frame), frame["label"].to_numpy()
    mc = [len(d) for d in DOMAINS.values()]

    def proba(keep: np.ndarray, q: np.ndarray) -> np.ndarray:
        m = CategoricalNB(alpha=1.0, min_categories=mc).fit(X[keep], y[keep])
        p = np.zeros((len(q), 2))  # a class absent from the fit gets probability 0
        p[:, [["no", "yes"].index(c) for c in m.classes_]] = m.predict_proba(X[q])
        return _bin(p)

    every = np.ones(len(y), dtype=bool)
    full = proba(every, np.arange(len(y)))
    out = np.empty(len(y))
    for t in range(len(y)):
        keep = every.copy()
        keep[t] = False
        out[t] = np.max(np.abs(np.log(full[t]) - np.log(proba(keep, np.array([t]))[0])))
    return out


def naive_greedy(frame: pd.DataFrame, steps: int, threshold: float = 1.0) -> list[tuple]:
    """(removed row, pdtp_before, max_after, violations_after, left) per step; step 0 first."""
    rows = np.arange(len(frame))
    v = naive_pdtp(frame)
    trace = [(None, None, v.max(), int(np.sum(v > threshold)), len(rows))]
    for _ in range(steps):
        labels = frame["label"].to_numpy()[rows]
        ok = np.array([np.sum(labels == lab) > 1 for lab in labels])
        # riskiest removable record; ties to the lower row
        i = max(np.flatnonzero(ok), key=lambda j: (v[j], -rows[j]))
        removed, before = int(rows[i]), float(v[i])
        rows = np.delete(rows, i)
        v = naive_pdtp(frame.iloc[rows].reset_index(drop=True))
        trace.append((removed, before, v.max(), int(np.sum(v > threshold)), len(rows)))
    return trace


# ---------------------------------------------------------------- tests
def test_parse_strategy() -> None:
    assert parse_strategy("greedy") == Strategy("greedy", 1)
    assert parse_strategy("lookahead:4") == Strategy("lookahead", 4)
    assert parse_strategy("lookahead:4").label == "lookahead:4"
    for bad in ("lookahead", "lookahead:0", "lookahead:x", "best", "greedy:2"):
        with pytest.raises(InputError):
            parse_strategy(bad)


def test_removable_order_keeps_last_of_class() -> None:
    state = State(np.array([0, 1, 2, 3, 5]), np.array([0.5, 3.0, 0.5, 2.0, 0.5]))
    y_idx = np.array([0, 1, 0, 0, 9, 0])  # class of every record of T (position 4 already removed)
    # position 1 is the only record of class 1: never removable; ties (0, 2, 5) go to the lower position
    assert removable_order(state, y_idx).tolist() == [3, 0, 2, 4]
    assert removable_order(state, y_idx, 2).tolist() == [3, 0]
    assert removable_order(state, y_idx, 3).tolist() == [3, 0, 2]


@pytest.mark.parametrize("engine", ["auto", "refit"])
def test_greedy_sawtooth_matches_naive(sawtooth: tuple[Path, Path], tmp_path: Path, engine: str) -> None:
    data, spec = sawtooth
    out = tmp_path / "out"
    r = run_cli("reduce-dtp", data, "--model", spec, "--max-removals", "4", "--jobs", "1", "--out", out, "-q",
                "--engine", engine)
    assert r.code == 0, r.stderr  # a prefix (one removal) reaches DTP-1
    table = pd.read_csv(out / "reduce.csv")
    assert list(table.columns) == list(REDUCE_COLUMNS)
    expected = naive_greedy(sawtooth_frame(), 4)
    assert len(table) == len(expected) == 5
    for (_, got), (row, before, mx, viol, left) in zip(table.iterrows(), expected, strict=True):
        if row is None:
            assert pd.isna(got["row"]) and pd.isna(got["pdtp_before"]) and pd.isna(got["id"])
        else:
            assert int(got["row"]) == row
            assert got["pdtp_before"] == pytest.approx(before, abs=1e-9)
        assert got["max_pdtp_after"] == pytest.approx(mx, abs=1e-9)
        assert got["violations_after"] == viol
        assert got["records_left"] == left
    maxima = table["max_pdtp_after"].tolist()
    assert maxima[0] > 1.0 >= maxima[1] and maxima[2] > 1.0  # the sawtooth of Figure 6
    doc = json.loads((out / "reduce.json").read_text())
    assert doc["reached"] is True and doc["best_step"] == 1
    assert doc["best_prefix"] == [expected[1][0]]
    assert doc["best_max"] == pytest.approx(expected[1][2], abs=1e-9)
    assert doc["strategy"] == "greedy" and doc["threshold"] == 1.0 and doc["stop_reason"] == "budget"
    assert {"engine", "timings", "manifest"} <= set(doc)
    if engine == "refit":
        assert doc["engine"] == "refit" and doc["incremental"] is False
    assert [s["max_pdtp_after"] for s in doc["trace"]] == pytest.approx(maxima, abs=1e-9)


def test_lookahead_never_worse_than_greedy(sawtooth: tuple[Path, Path], tmp_path: Path) -> None:
    data, spec = sawtooth
    args = ["--model", spec, "--max-removals", "5", "--jobs", "1", "-q"]
    g = run_cli("reduce-dtp", data, *args, "--out", tmp_path / "g")
    la = run_cli("reduce-dtp", data, *args, "--strategy", "lookahead:3", "--out", tmp_path / "la")
    assert g.code == 0 and la.code == 0, g.stderr + la.stderr
    gmax = pd.read_csv(tmp_path / "g" / "reduce.csv")["max_pdtp_after"].to_numpy()
    lmax = pd.read_csv(tmp_path / "la" / "reduce.csv")["max_pdtp_after"].to_numpy()
    assert len(gmax) == len(lmax) == 6
    assert np.all(lmax <= gmax + 1e-12)
    assert lmax[2] <= 1.0 < gmax[2]  # lookahead avoids the greedy tooth at step 2
    doc = json.loads((tmp_path / "la" / "reduce.json").read_text())
    cmp = doc["greedy_comparison"]
    assert cmp["greedy_max_pdtp_after"] == pytest.approx(gmax.tolist(), abs=1e-9)  # CSV: 12 digits
    assert cmp["not_worse_at_every_step"] is True
    assert len(doc["trace"][1]["candidates"]) == 3
    # lookahead:1 is greedy
    one = run_cli("reduce-dtp", data, *args, "--strategy", "lookahead:1", "--out", tmp_path / "one")
    assert one.code == 0
    assert pd.read_csv(tmp_path / "one" / "reduce.csv")["max_pdtp_after"].to_numpy() == pytest.approx(gmax)


def test_exit_1_when_no_prefix_reaches(sawtooth: tuple[Path, Path], tmp_path: Path) -> None:
    data, spec = sawtooth
    out = tmp_path / "o"
    r = run_cli("reduce-dtp", data, "--model", spec, "--threshold", "0.5", "--max-removals", "2", "--jobs", "1",
                "--out", out, "-q")
    assert r.code == 1, r.stderr
    doc = json.loads((out / "reduce.json").read_text())
    assert doc["reached"] is False
    maxima = [s["max_pdtp_after"] for s in doc["trace"]]
    assert doc["best_step"] == int(np.argmin(maxima)) and len(doc["best_prefix"]) == doc["best_step"]


def test_nothing_to_do_when_dtp1_holds(sawtooth: tuple[Path, Path], tmp_path: Path) -> None:
    data, spec = sawtooth
    out = tmp_path / "o"
    r = run_cli("reduce-dtp", data, "--model", spec, "--threshold", "6", "--jobs", "1", "--out", out, "-q")
    assert r.code == 0, r.stderr
    doc = json.loads((out / "reduce.json").read_text())
    assert doc["best_prefix"] == [] and doc["steps"] == 0 and doc["stop_reason"] == "no violation at the start"


def test_write_clean_round_trip(tmp_path: Path) -> None:
    """T drawn by train_size from a larger CSV; the clean CSV + clean spec reproduce best_max exactly."""
    data = tmp_path / "mixed.csv"
    frame = mixed_frame(n=70, seed=3)
    frame.insert(0, "pid", [f"p{i:03d}" for i in range(len(frame))])
    frame.to_csv(data, index=False)
    spec = write_spec(
        tmp_path / "nb.yaml", "categorical_nb", data={"train_size": 30, "id": "pid"},
        model={"params": {"alpha": 1.0}},  # x1: 70 distinct values, each a category of the domain
    )
    out, clean = tmp_path / "out", tmp_path / "clean.csv"
    r = run_cli("reduce-dtp", data, "--model", spec, "--max-removals", "3", "--jobs", "1", "--out", out,
                "--write-clean", clean, "-q")
    assert r.code in (0, 1), r.stderr
    doc = json.loads((out / "reduce.json").read_text())
    assert doc["steps"] >= 1
    # the clean file: the input's own lines for T minus the best prefix, in CSV order
    lines = data.read_text().splitlines()
    kept = clean.read_text().splitlines()
    assert kept[0] == lines[0]
    assert doc["clean"]["records"] == 30 - len(doc["best_prefix"]) == len(kept) - 1
    assert set(kept[1:]) <= set(lines[1:]) and not {lines[1 + r] for r in doc["best_prefix"]} & set(kept)
    assert doc["clean"]["domain_changed_columns"]  # T lacks values of the 70-row CSV: pinned for NB
    assert doc["trace"][doc["best_step"]]["records_left"] == len(kept) - 1
    ids = pd.read_csv(out / "reduce.csv")["id"].dropna().tolist()
    assert ids and all(str(i).startswith("p") for i in ids)
    check = run_cli("pdtp", clean, "--model", out / "clean-spec.yaml", "--jobs", "1", "--out", tmp_path / "chk",
                    "-q")
    assert check.code in (0, 1), check.stderr
    summary = json.loads((tmp_path / "chk" / "pdtp.json").read_text())["summary"]
    assert summary["n"] == len(kept) - 1
    assert summary["max"] == doc["best_max"]


def test_bad_input(sawtooth: tuple[Path, Path], tmp_path: Path) -> None:
    data, spec = sawtooth
    r = run_cli("reduce-dtp", data, "--model", spec, "--strategy", "lookahead:0", "--out", tmp_path / "a")
    assert r.code == 2 and "lookahead:K" in r.stderr
    r = run_cli("reduce-dtp", data, "--model", spec, "--write-clean", data, "--out", tmp_path / "b")
    assert r.code == 2 and "--write-clean" in r.stderr
    r = run_cli("reduce-dtp", data, "--model", spec, "--max-removals", "-1", "--out", tmp_path / "c")
    assert r.code == 2


def test_incremental_counts_match_generic_path(tmp_path: Path) -> None:
    """The counts-based categorical NB recompute gives the generic (fit + engine) trace."""
    from contextlib import nullcontext

    from mptool.api.reduce import ReduceOptions, run_reduce
    from mptool.inputs.prepare import prepare
    from mptool.inputs.spec import load_spec

    data = tmp_path / "mixed.csv"
    mixed_frame(n=80, seed=5).to_csv(data, index=False)
    spec = load_spec(write_spec(tmp_path / "nb.yaml", "categorical_nb", data={"train_size": 50}))
    prep = prepare(data, spec)
    quiet = lambda n, label: nullcontext(lambda k: None)  # noqa: E731
    docs = []
    for incremental in (True, False):
        opts = ReduceOptions(threshold=0.3, max_removals=4, strategy=parse_strategy("lookahead:2"), jobs=1,
                             incremental=incremental)
        docs.append(run_reduce(prep, opts, quiet).summary)
    fast, generic = docs
    if fast["engine"] == "exact-naive-bayes":
        assert fast["incremental"] is True
    assert generic["incremental"] is False
    assert [s["row"] for s in fast["trace"]] == [s["row"] for s in generic["trace"]]
    for a, b in zip(fast["trace"], generic["trace"], strict=True):
        assert a["max_pdtp_after"] == pytest.approx(b["max_pdtp_after"], abs=1e-9)
        assert a["violations_after"] == b["violations_after"]


def test_write_clean_round_trip_gaussian_gz(tmp_path: Path) -> None:
    """Another estimator (nothing pinned) and a gzip clean file: the pdtp run still gives best_max."""
    data = tmp_path / "mixed.csv"
    mixed_frame(n=70, seed=3).to_csv(data, index=False)
    spec = write_spec(tmp_path / "g.yaml", "gaussian_nb", data={"train_size": 30},
                      model={"bins": {"x1": [-1.0, 0.0, 1.0]}})
    out, clean = tmp_path / "out", tmp_path / "clean.csv.gz"
    r = run_cli("reduce-dtp", data, "--model", spec, "--max-removals", "2", "--jobs", "1", "--out", out,
                "--write-clean", clean, "-q")
    assert r.code in (0, 1), r.stderr
    doc = json.loads((out / "reduce.json").read_text())
    assert doc["clean"]["domain_pinned"] is False
    assert pd.read_csv(clean).shape == (30 - len(doc["best_prefix"]), 5)
    check = run_cli("pdtp", clean, "--model", out / "clean-spec.yaml", "--jobs", "1", "--out", tmp_path / "chk",
                    "-q")
    assert check.code in (0, 1), check.stderr
    assert json.loads((tmp_path / "chk" / "pdtp.json").read_text())["summary"]["max"] == doc["best_max"]

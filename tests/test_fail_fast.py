"""Risk-ordered refits, ``--fail-fast`` and the sampled verdict (issue 13 item 2).

- A stop at the first confirmed violator exits 1 at once, says so on the verdict line, writes
  only the records refitted (up to the violator, in risk order) and marks pdtp.json
  ``complete: false``; the violator is one by an independent refit.
- A model that passes still refits every record; risk order changes nothing computed
  (pdtp.csv byte-identical to row order) and the reported records do not depend on --jobs.
- ``--sample``: never a bare "DTP-1 holds"; the 95% Clopper-Pearson bound in terminal and JSON.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import mixed_frame, run_cli, write_spec
from scipy.stats import beta, hypergeom
from sklearn.base import clone

import mptool
from mptool.inputs.prepare import prepare
from mptool.inputs.spec import load_spec
from mptool.loo import screen
from mptool.privacy.sampling import clopper_pearson_upper, sample_summary
from mptool.runtime.parallel import StopTasks, run_tasks

N = 60  # records in T: every test here refits at most this many small trees


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "d.csv"
    mixed_frame(N, seed=3).to_csv(path, index=False)
    return path


@pytest.fixture
def deep_tree(tmp_path: Path) -> Path:
    """A deep tree on tiny data: many records above DTP-1."""
    return write_spec(tmp_path / "dt.yaml", "decision_tree", model={"params": {"max_depth": 8}})


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame, dict]:
    """The deep tree's complete audit (risk order, --jobs 1) on the same data, run once for the module:
    its folder, table and summary (the reference the --fail-fast and --order runs are compared with)."""
    d = tmp_path_factory.mktemp("fail-fast-full")
    path = d / "d.csv"
    mixed_frame(N, seed=3).to_csv(path, index=False)
    spec = write_spec(d / "dt.yaml", "decision_tree", model={"params": {"max_depth": 8}})
    res, table, summary = pdtp(path, spec, d / "all")
    assert res.code == 1, res.stderr
    return d / "all", table, summary


@pytest.fixture(scope="module")
def ff_run(full_run) -> tuple[Path, tuple]:
    """The deep tree's --fail-fast audit (risk order, --jobs 1), run once for the module: its folder and
    ``pdtp()``'s (result, table, summary). Read by the tests of the stop and of --jobs independence."""
    d = full_run[0].parent
    out = d / "ff"
    return out, pdtp(d / "d.csv", d / "dt.yaml", out, "--fail-fast")


#: The stump's records stay below this threshold (its max PDTP on the data is about 1.1).
PASS = "2"


@pytest.fixture
def stump(tmp_path: Path) -> Path:
    """A stump with big leaves: every record below the threshold ``PASS``."""
    params = {"max_depth": 1, "min_samples_leaf": 20}
    return write_spec(tmp_path / "stump.yaml", "decision_tree", model={"params": params})


def pdtp(data: Path, spec: Path, out: Path, *extra: str):
    res = run_cli("pdtp", data, "-m", spec, "--out", out, "--engine", "refit", "--jobs", "1", "-q", *extra)
    table = pd.read_csv(out / "pdtp.csv") if (out / "pdtp.csv").exists() else None
    summary = json.loads((out / "pdtp.json").read_text())["summary"] if (out / "pdtp.json").exists() else None
    return res, table, summary


def binned(p: np.ndarray, b: float = 0.01) -> np.ndarray:
    """Bin centres of width b, written out here (not mptool's binning): 0 -> b/2, 1 -> 1 - b/2."""
    k = np.minimum(np.floor(np.round(p / b, 9)), round(1 / b) - 1)
    return k * b + b / 2


def independent_pdtp(data: Path, spec: Path, row: int) -> float:
    """PDTP of CSV row ``row`` by fitting the pipeline on T and on T without the row here, not by an engine."""
    prep = prepare(data, load_spec(spec))
    T = prep.train
    keep = T.rows != row
    full = clone(prep.template).fit(T.X, T.y)
    loo = clone(prep.template).fit(T.X[keep], T.y[keep])
    x = T.X[~keep]
    return float(np.max(np.abs(np.log(binned(full.predict_proba(x))) - np.log(binned(loo.predict_proba(x))))))


# --------------------------------------------------------------------------- --fail-fast


def test_fail_fast_stops_at_a_true_violator_and_says_the_result_is_incomplete(
    data: Path, deep_tree: Path, full_run, ff_run
) -> None:
    res, table, summary = ff_run[1]
    assert res.code == 1, res.stderr
    stopped = summary["stopped"]
    line = res.stdout.strip().splitlines()[-1]
    assert line.startswith(
        f"DTP-1 VIOLATED (stopped at the first confirmed violator, row {stopped['row']}, "
        f"after {stopped['after']} of {N} refits; --fail-fast)"
    ), line
    assert summary["complete"] is False and summary["verdict"] == "fail"
    assert stopped["after"] < N and stopped["of"] == N and stopped["refits_run"] >= stopped["after"]
    assert len(table) == stopped["after"] == summary["n"], "pdtp.csv holds exactly the records refitted up to it"
    assert list(table["row"]) == sorted(table["row"]), "written in row order"
    # the row reported is the only violator reported, and a violator by an independent refit
    assert table.loc[table["violation"], "row"].tolist() == [stopped["row"]]
    assert independent_pdtp(data, deep_tree, stopped["row"]) > 1.0
    # the other records reported are exactly those the screen put before it, all confirmed non-violators
    _, full, _ = full_run
    merged = table.merge(full, on="row", suffixes=("", "_full"))
    assert np.array_equal(merged["pdtp"], merged["pdtp_full"]), "a stopped run's values are the full run's"


def test_fail_fast_in_row_order_stops_at_the_first_violator_in_t(
    tmp_path: Path, data: Path, deep_tree: Path, full_run
) -> None:
    _, full, _ = full_run
    res, table, summary = pdtp(data, deep_tree, tmp_path / "ff", "--fail-fast", "--order", "row")
    assert res.code == 1 and summary["order"] == "row"
    prep = prepare(data, load_spec(deep_tree))
    by_position = full.set_index("row").loc[prep.train.rows]  # T's order
    first = int(np.argmax(by_position["violation"].to_numpy()))
    assert summary["stopped"]["row"] == int(prep.train.rows[first])
    assert sorted(table["row"]) == sorted(prep.train.rows[: first + 1].tolist())


def test_fail_fast_reports_the_same_records_for_any_jobs(tmp_path: Path, data: Path, deep_tree: Path, ff_run) -> None:
    j1, (_, _, s1) = ff_run
    res = run_cli("pdtp", data, "-m", deep_tree, "--out", tmp_path / "j2", "--engine", "refit", "--jobs", "2", "-q",
                  "--fail-fast")
    assert res.code == 1, res.stderr
    assert (j1 / "pdtp.csv").read_bytes() == (tmp_path / "j2" / "pdtp.csv").read_bytes()
    s2 = json.loads((tmp_path / "j2" / "pdtp.json").read_text())["summary"]
    assert {k: v for k, v in s1["stopped"].items() if k != "refits_run"} == {
        k: v for k, v in s2["stopped"].items() if k != "refits_run"
    }


def test_fail_fast_stops_on_the_gate_scale(tmp_path: Path, data: Path, deep_tree: Path) -> None:
    """With --gate raw the run stops at a record whose raw PDTP is above the threshold."""
    res, table, summary = pdtp(data, deep_tree, tmp_path / "raw", "--fail-fast", "--gate", "raw")
    assert res.code == 1 and summary["complete"] is False
    hit = table[table["row"] == summary["stopped"]["row"]]
    assert hit["pdtp_raw"].iloc[0] > 1.0 and table["violation"].sum() == 1
    assert (table.loc[~table["violation"], "pdtp_raw"] <= 1.0).all()


def test_fail_fast_measures_the_noise_floor_on_the_records_it_reports(
    tmp_path: Path, data: Path, deep_tree: Path
) -> None:
    res, table, summary = pdtp(data, deep_tree, tmp_path / "nf", "--fail-fast", "--noise-floor", str(N))
    assert res.code == 1, res.stderr
    assert summary["noise_floor"]["records"] == len(table) < N


def test_fail_fast_on_a_passing_model_refits_every_record(tmp_path: Path, data: Path, stump: Path) -> None:
    res, table, summary = pdtp(data, stump, tmp_path / "ff", "--fail-fast", "--threshold", PASS)
    assert res.code == 0, res.stdout + res.stderr
    assert res.stdout.strip().splitlines()[-1].startswith("DTP-1 holds:")
    assert len(table) == N and summary["complete"] is True and "stopped" not in summary
    assert summary["max"] <= float(PASS)


def test_risk_order_is_byte_identical_to_row_order(tmp_path: Path, data: Path, deep_tree: Path, full_run) -> None:
    risk_out, _, risk = full_run
    _, _, row = pdtp(data, deep_tree, tmp_path / "row", "--order", "row")
    assert (risk_out / "pdtp.csv").read_bytes() == (tmp_path / "row" / "pdtp.csv").read_bytes()
    assert risk["order"] == "loss" and row["order"] == "row" and risk["complete"] is True


def test_exact_engine_with_fail_fast_reports_every_record(tmp_path: Path, data: Path) -> None:
    spec = write_spec(tmp_path / "nb.yaml", "categorical_nb")
    res = run_cli("pdtp", data, "-m", spec, "--out", tmp_path / "o", "-q", "--fail-fast")
    summary = json.loads((tmp_path / "o" / "pdtp.json").read_text())["summary"]
    assert res.code in (0, 1) and summary["complete"] is True and summary["n"] == N
    assert "order" not in summary and "stopped" not in summary


def test_api_fail_fast(data: Path, deep_tree: Path) -> None:
    result = mptool.pdtp(data, deep_tree, engine="refit", jobs=1, fail_fast=True)
    assert result.verdict == "fail" and result.summary["complete"] is False
    assert len(result.table) == result.summary["stopped"]["after"]


def test_run_tasks_stops_when_a_callback_raises_stoptasks() -> None:
    seen: list[int] = []

    def done(i: int, r: int) -> None:
        seen.append(i)
        if r == 9:
            raise StopTasks

    out = run_tasks(pow, [(3, k) for k in range(6)], jobs=1, on_done=done)
    assert out == [1, 3, 9, None, None, None] and seen == [0, 1, 2]


# --------------------------------------------------------------------------- the screen


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_screen_names_per_family(tmp_path: Path, data: Path) -> None:
    cases = {
        "mlp": ({"hidden_layer_sizes": [4], "max_iter": 30}, "influence"),
        "random_forest": ({"n_estimators": 5, "max_depth": 3}, "confidence"),
        "decision_tree": ({"max_depth": 3}, "loss"),
    }
    for est, (params, name) in cases.items():
        spec = write_spec(tmp_path / f"{est}.yaml", est, model={"params": params})
        prep = prepare(data, load_spec(spec))
        model = clone(prep.template).fit(prep.train.X, prep.train.y)
        p = model.predict_proba(prep.train.X)
        scores, got = screen.screen_scores(model, prep.train.X, prep.train.y, p, prep.classes, 0.005)
        assert got == name and scores.shape == (N,) and not np.isnan(scores).any()


def test_influence_step_is_the_newton_step_without_the_record() -> None:
    """M_t (I - W_t M_t)^{-1} equals Phi_t (H - W_t (x) phi_t phi_t^T)^{-1} Phi_t^T, inverted directly."""
    rng = np.random.default_rng(0)
    phi = np.column_stack([rng.normal(size=(12, 3)), np.ones(12)])
    p = rng.dirichlet(np.ones(3), size=12)
    w = p[:, :, None] * (np.eye(3)[None] - p[:, None, :])
    M = screen._leverage(phi, w, alpha=0.1)
    H = sum(np.kron(w[t], np.outer(phi[t], phi[t])) for t in range(12))
    H = H + (0.1 + 1e-9 * np.trace(H) / len(H)) * np.eye(len(H))
    for t in (0, 5, 11):
        Phi = np.kron(np.eye(3), phi[t][None, :])
        direct = Phi @ np.linalg.inv(H - np.kron(w[t], np.outer(phi[t], phi[t]))) @ Phi.T
        assert np.allclose(M[t] @ np.linalg.inv(np.eye(3) - w[t] @ M[t]), direct, rtol=1e-8, atol=1e-10)


def test_risk_order_highest_first_ties_by_position_nan_last() -> None:
    order = screen.risk_order(np.array([0.5, np.nan, 2.0, 0.5, np.inf, 0.5 + 1e-12]))
    assert order.tolist() == [4, 2, 0, 3, 5, 1]


# --------------------------------------------------------------------------- --sample


def test_clopper_pearson_against_scipy_and_a_hand_value() -> None:
    assert clopper_pearson_upper(0, 50) == pytest.approx(1 - 0.05 ** (1 / 50), rel=1e-12)
    assert round(clopper_pearson_upper(0, 50), 4) == 0.0582
    for k in (1, 7, 50, 300):
        for v in range(k):
            assert clopper_pearson_upper(v, k) == pytest.approx(beta.ppf(0.95, v + 1, k - v), rel=1e-12)
        assert clopper_pearson_upper(k, k) == 1.0
    with pytest.raises(ValueError):
        clopper_pearson_upper(3, 2)


def test_clopper_pearson_is_conservative_for_draws_without_replacement() -> None:
    """With more than the bound's share of T above the threshold, seeing so few in the sample has P <= 5%."""
    for n_train in (20, 100, 1000):
        for k in sorted({1, 5, 20, n_train // 2}):
            for v in range(min(k, 6)):
                above = int(np.floor(clopper_pearson_upper(v, k) * n_train)) + 1
                if above <= n_train:
                    assert hypergeom.cdf(v, n_train, above, k) <= 0.05 + 1e-12, (n_train, k, v)


def test_passing_sample_never_says_holds(tmp_path: Path, data: Path, stump: Path) -> None:
    res, table, summary = pdtp(data, stump, tmp_path / "s", "--sample", "20", "--threshold", PASS)
    line = res.stdout.strip().splitlines()[-1]
    assert res.code == 0
    assert "DTP-1 holds" not in res.stdout
    assert line.startswith(
        f"DTP-1 not established (no violation among 20 sampled records of {N}; with 95% confidence at most "
        "13.9% of T is above the threshold; audit every record for a verdict)"
    ), line
    assert summary["sample"]["k"] == 20 and summary["sample"]["n_train"] == N
    assert summary["sample"]["violations"] == 0
    assert summary["sample"]["fraction_upper_95"] == pytest.approx(1 - 0.05 ** (1 / 20))
    assert len(table) == 20


def test_violating_sample_gives_the_bound_too(tmp_path: Path, data: Path, deep_tree: Path) -> None:
    res, table, summary = pdtp(data, deep_tree, tmp_path / "s", "--sample", "20")
    v = int(table["violation"].sum())
    assert res.code == 1 and v > 0
    upper = beta.ppf(0.95, v + 1, 20 - v)
    assert summary["sample"]["fraction_upper_95"] == pytest.approx(upper)
    assert f"sample of 20 of {N} records: with 95% confidence at most {100 * upper:.1f}% of T" in res.stdout


def test_sample_of_all_of_t_is_a_full_audit(tmp_path: Path, data: Path, stump: Path) -> None:
    res, _, summary = pdtp(data, stump, tmp_path / "s", "--sample", str(N), "--threshold", PASS)
    assert res.stdout.strip().splitlines()[-1].startswith("DTP-1 holds:")
    assert summary["sample"]["fraction_upper_95"] == 0.0


def test_sample_stopped_by_fail_fast_gives_no_bound() -> None:
    assert sample_summary(20, 60, 1, complete=False)["fraction_upper_95"] is None

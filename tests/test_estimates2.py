"""Issue 30 item 3, round 2: estimates priced as the run works, and check's own progress lines.

- The refit and replicate engines fit with one BLAS thread; A(T) and the randomness check run in
  the command's own process with its BLAS threads. ``check`` times the per-record fits with one
  thread and prices A(T) and the randomness check by ``FitTime.main_ratio`` (a network fitted 10x
  slower with two BLAS threads than with one at load 10, and its estimate came out 6-50x high).
- ``mitigate`` on randomized training prices each retrained setting's randomness check and A(T).
- ``check`` reports its own phases (a first line within ``FIRST_LINE_S``).

No wall time is asserted: timings come from hand-made :class:`FitTime` objects, or only their structure
is checked.
"""

from __future__ import annotations

import re
from contextlib import contextmanager

import conftest
import pytest
from conftest import mixed_frame, run_cli, write_spec

from mptool.api import costs
from mptool.api.costs import FitTime, max_timed_fits, pdtp_cost, replicate_phase, time_fit
from mptool.inputs.prepare import prepare
from mptool.inputs.spec import parse_spec
from mptool.loo import RefitEngine
from mptool.loo.randomness import planned_fits
from mptool.loo.replicates import ReplicateEngine
from mptool.runtime import ui


def fit_time(seconds: float, n: int, main_ratio: float = 1.0) -> FitTime:
    """A FitTime measured at |T| = n (exponent 1), its fits in the process ``main_ratio`` times as long."""
    return FitTime(seconds, ((n, seconds),), 1.0, None, None, main_ratio=main_ratio)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def forest(tmp_path_factory: pytest.TempPathFactory):
    d = tmp_path_factory.mktemp("est2")
    csv = d / "m.csv"
    mixed_frame(120).to_csv(csv, index=False)
    return prepare(csv, parse_spec(forest_spec())), csv


def forest_spec(**params: int) -> dict:
    """A spec of a 3-tree forest (more ``params`` given) on 80 of the 120 rows."""
    return {"data": {"label": "label", "train_size": 80},
            "model": {"estimator": "random_forest", "params": {"n_estimators": 3, **params}}, "seed": 0}


def test_refits_use_the_one_thread_time_and_the_process_fits_the_main_time(forest) -> None:
    prep, _ = forest
    n = prep.train.n
    cost = pdtp_cost(prep.template, RefitEngine(), fit_time(1.0, n, main_ratio=3.0), n, 10, 1)
    by_name = {p.name: p for p in cost.phases}
    k = 1 + planned_fits(prep.template)
    assert by_name["randomness check"].seconds == pytest.approx(3.0 * k, rel=1e-9)  # float products: 1e-9
    assert by_name["A(T)"].seconds == pytest.approx(3.0, rel=1e-9)
    assert by_name["refits without one record"].seconds == pytest.approx(10 * (n - 1) / n, rel=1e-9)


def test_replicates_use_the_one_thread_time(forest) -> None:
    prep, _ = forest
    n = prep.train.n
    cost = pdtp_cost(prep.template, ReplicateEngine(), fit_time(1.0, n, main_ratio=5.0), n, 10, 1,
                     randomized=True, replicates=(4, 32))
    rep = next(p for p in cost.phases if p.name.startswith("replicates"))
    assert rep.seconds == pytest.approx(44 * (n - 1) / n, rel=1e-9)  # --jobs 1: in turn; float products
    assert rep.seconds_high == pytest.approx(352 * (n - 1) / n, rel=1e-9)
    assert {p.name: p for p in cost.phases}["A(T)"].seconds == pytest.approx(5.0, rel=1e-9)


def test_refit_timings_fit_with_one_blas_thread(forest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every timed fit but one runs inside one_blas_thread(); that one (the process's own threads) gives the ratio."""
    prep, _ = forest
    state = {"limited": False}
    seen: list[bool] = []

    @contextmanager
    def limited():
        state["limited"] = True
        try:
            yield
        finally:
            state["limited"] = False

    real = costs._timed_fit

    def spy(template, sub):
        seen.append(state["limited"])
        return real(template, sub)

    monkeypatch.setattr(costs, "one_blas_thread", limited)
    monkeypatch.setattr(costs, "_timed_fit", spy)
    steps: list[int] = []
    fit = time_fit(prep.template, prep.train, 0, prep.classes, one_thread=True, advance=steps.append)
    assert fit.one_thread and fit.main_ratio > 0
    assert seen.count(False) == 1 and seen[0] is True and seen[1] is False  # warm-up, then the process's threads
    assert len(steps) == len(seen) <= max_timed_fits(prep.template, prep.train.n)
    plain = time_fit(prep.template, prep.train, 0, prep.classes)
    assert not plain.one_thread and plain.main_ratio == 1.0


def test_mitigate_prices_each_settings_randomness_check(forest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Randomized mitigate: the baseline's A(T) and replicates; each retrained setting's randomness check (A(T)
    and its refits) and A(T) again, then its replicates; the workers start once (--jobs 1 here: in turn)."""
    prep, _ = forest
    n = prep.train.n
    fake = fit_time(1.0, n, main_ratio=2.0)
    monkeypatch.setattr(costs, "time_fit", lambda *a, **k: fake)
    monkeypatch.setattr(costs, "process_age", lambda: 0.0)
    other = parse_spec(forest_spec(max_depth=2))
    lo, hi = costs.mitigate_seconds(prep, [other], 5, 1, sample=True, removal_steps=0, replicates=(4, 32))
    phase = replicate_phase(fake, n, 5, (4, 32), 1, True)
    check = 1 + planned_fits(prep.template)
    assert lo == pytest.approx(2.0 + phase.seconds + (check + 1) * 2.0 + phase.seconds, rel=1e-9)  # float sums
    assert hi == pytest.approx(2.0 + phase.seconds_high + (check + 1) * 2.0 + phase.seconds_high, rel=1e-9)


def now_timer(monkeypatch: pytest.MonkeyPatch, started: list[str]) -> None:
    """Progress timers fire when started: what FIRST_LINE_S (as shipped: conftest pushes it a day away for
    other tests) seconds later looks like, without a sleep."""
    monkeypatch.setattr(ui, "FIRST_LINE_S", conftest.FIRST_LINE_S)

    class NowTimer:
        def __init__(self, delay: float, fn) -> None:
            assert delay == ui.FIRST_LINE_S <= 5.0
            self.fn, self.daemon = fn, False

        def start(self) -> None:
            started.append("x")
            self.fn()

        def cancel(self) -> None:
            pass

    monkeypatch.setattr(ui.threading, "Timer", NowTimer)


def test_check_reports_its_own_phases(forest, monkeypatch: pytest.MonkeyPatch) -> None:
    """check's phases (start, reading, timing, randomness) are progress phases: a line once FIRST_LINE_S has
    passed (here at once: the timer fires when started), none for a quick one on a normal run."""
    _, csv = forest
    started: list[str] = []

    now_timer(monkeypatch, started)
    spec = write_spec(csv.parent / "rf.yaml", "random_forest", model={"params": {"n_estimators": 3}})
    res = run_cli("check", csv, "--model", spec, "--sample", "5", "--jobs", "1")
    assert res.code == 0, res.stderr
    for label in ("check: reading the data and the spec", "check: timing fits of A(T) on subsets of T",
                  "check: randomness (refits with other seeds)"):
        assert f"[mptool] {label}: 0/" in res.stderr, res.stderr
    line = next(ln for ln in res.stdout.splitlines() if ln.strip().startswith("pdtp "))
    assert "replicates (4 to 32 per record)" in line and "known only as the run decides it" in line


def test_small_positive_measurements_are_not_taken_for_sample_weights() -> None:
    """A census instance weight (median about 1,600) is one; heavy-tailed measurements with a small median (the
    '... error' columns of breast_cancer: 0.002 to 24) are not (issue 30: init dropped five of them)."""
    import numpy as np
    import pandas as pd

    from mptool.inputs.sniff import WEIGHT_MEDIAN, weight_reason

    rng = np.random.default_rng(0)
    census = pd.Series(np.round(rng.lognormal(7.3, 0.8, 300), 2))
    assert weight_reason("24", census) is not None
    area_error = pd.Series(np.round(rng.lognormal(3.2, 0.8, 300), 2))  # median about 24, the same shape
    assert float(area_error.median()) < WEIGHT_MEDIAN and weight_reason("area error", area_error) is None
    assert weight_reason("fractal dimension error", area_error / 10_000) is None


def test_mitigate_reports_the_plans_timed_fits_only_past_the_first_line_delay(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """mitigate times fits of every setting before its plan line: a phase of its own, one step, so a line
    only once FIRST_LINE_S has passed (here at once) and none on a quick run (a "1/1" line every run
    would be noise)."""
    csv = tmp_path / "m.csv"
    mixed_frame(120).to_csv(csv, index=False)
    spec = write_spec(tmp_path / "nb.yaml", "categorical_nb", data={"train_size": 80})
    label = "[mptool] plan: timing fits of the settings for the estimate"
    args = ("mitigate", csv, "--model", spec, "--jobs", "1", "--defences", "release", "--force")
    quick = run_cli(*args, "--out", tmp_path / "a")
    assert quick.code in (0, 1), quick.stderr
    assert label not in quick.stderr
    now_timer(monkeypatch, [])
    slow = run_cli(*args, "--out", tmp_path / "b")
    assert slow.code == quick.code, slow.stderr
    assert f"{label}: 0/1 (0%)" in slow.stderr and f"{label}: 1/1 (100%)" in slow.stderr
    lines = slow.stderr.splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith(label))
    assert any(ln.startswith("plan:") for ln in lines[first:]), slow.stderr  # before the plan line


def test_pdtp_and_mitigate_report_the_fit_of_a_t_only_past_the_first_line_delay(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A(T)'s fit is a phase of one step (a network on a large T takes minutes): its line comes once
    FIRST_LINE_S has passed (here at once), never on a quick run; the verdict is the same either way."""
    csv = tmp_path / "m.csv"
    mixed_frame(120).to_csv(csv, index=False)
    spec = write_spec(tmp_path / "dt.yaml", "decision_tree", data={"train_size": 80})
    pdtp = ("pdtp", csv, "--model", spec, "--jobs", "1", "--sample", "3", "--noise-floor", "0", "--force")
    mit = ("mitigate", csv, "--model", spec, "--jobs", "1", "--sample", "3", "--defences", "release", "--force")
    quick = [run_cli(*pdtp, "--out", tmp_path / "p1"), run_cli(*mit, "--out", tmp_path / "m1")]
    now_timer(monkeypatch, [])
    slow = [run_cli(*pdtp, "--out", tmp_path / "p2"), run_cli(*mit, "--out", tmp_path / "m2")]
    for label, q, s in zip(("[mptool] A(T): fitting the model on the 80 records of T",
                            "[mptool] baseline: fitting A(T) on the 80 records of T"), quick, slow, strict=True):
        assert q.code == s.code and q.code in (0, 1), (q.stderr, s.stderr)
        assert label not in q.stderr
        assert f"{label}: 0/1 (0%)" in s.stderr and f"{label}: 1/1 (100%)" in s.stderr, s.stderr
    def verdict(res) -> list[str]:  # the verdict line less its time
        return [re.sub(r", [0-9.]+s\b", "", ln) for ln in res.stdout.splitlines() if ln.startswith("DTP-1")]

    assert verdict(quick[0]) and verdict(quick[0]) == verdict(slow[0])

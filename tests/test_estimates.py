"""Issue 30 item 3: the estimates' structure (every phase counted), not wall times.

``mptool check --sample 100`` says 100 refits plus the extra fits (A(T), the randomness check,
the noise floor); replicates are counted from the first look to the last; an exact engine is one
fit and its leave-one-out; a progress line comes within ``FIRST_LINE_S`` of a phase's start.
Timings come from a hand-made :class:`FitTime` (no fit is timed) except one ``check`` on 60 rows.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from conftest import FIRST_LINE_S, run_cli, write_spec

from mptool.api.costs import ExactTime, FitTime, pdtp_cost, subset
from mptool.inputs.prepare import prepare
from mptool.inputs.spec import parse_spec
from mptool.loo import EXACT_ENGINES, RefitEngine
from mptool.loo.replicates import ReplicateEngine
from mptool.runtime import ui


def fit_time(seconds: float = 1.0, n: int = 60) -> FitTime:
    """A FitTime measured at |T| = n (exponent 1): one fit takes ``seconds``."""
    return FitTime(seconds, ((n, seconds),), 1.0, None, None)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def tree_prep(tmp_path_factory: pytest.TempPathFactory):
    from conftest import mixed_frame

    d = tmp_path_factory.mktemp("est")
    csv = d / "m.csv"
    mixed_frame(200).to_csv(csv, index=False)
    spec = parse_spec({"data": {"label": "label"},
                       "model": {"estimator": "random_forest", "params": {"n_estimators": 3}}, "seed": 0})
    return prepare(csv, spec), csv


def test_sample_of_100_is_100_refits_plus_the_extra_fits(tree_prep) -> None:
    prep, _ = tree_prep
    cost = pdtp_cost(prep.template, RefitEngine(), fit_time(1.0, prep.train.n), prep.train.n, 100, 1)
    by_name = {p.name: p for p in cost.phases}
    assert by_name["refits without one record"].fits == 100
    assert by_name["A(T)"].fits == 1
    assert by_name["noise floor"].fits == 20  # a forest's fit may depend on the row order: 20 records
    check = by_name["randomness check"].fits
    from mptool.loo.randomness import SEEDS
    # A(T) for the check, a repeat, up to SEEDS other seeds (priced at the most), one or two row orders
    assert 2 + SEEDS + 1 <= check <= 2 + SEEDS + 2
    assert cost.fits == 100 + 1 + 20 + check
    n = prep.train.n  # --jobs 1: in turn; a fit of T 1 s, a refit of |T| - 1 records (n - 1) / n s (exponent 1)
    assert cost.seconds == pytest.approx(check + 1 + 120 * (n - 1) / n, rel=1e-9)  # float sums: relative 1e-9
    assert "refits without one record 100 fit(s)" in cost.describe()


def test_replicates_are_counted_from_the_first_look_to_the_last(tree_prep) -> None:
    prep, _ = tree_prep
    cost = pdtp_cost(prep.template, ReplicateEngine(), fit_time(1.0, prep.train.n), prep.train.n, 10, 1,
                     randomized=True, replicates=(4, 32))
    rep = next(p for p in cost.phases if p.name.startswith("replicates"))
    assert rep.fits == 4 * (10 + 1)  # 4 replicates of A(T) and of A(T minus t) per record
    n = prep.train.n
    assert rep.seconds_high == pytest.approx(32 * 11 * (n - 1) / n, rel=1e-9)  # float products: relative 1e-9
    assert cost.seconds_high is not None and cost.seconds_high > cost.seconds


def test_exact_engine_is_one_fit_and_its_leave_one_out(tree_prep) -> None:
    prep, _ = tree_prep
    exact = ExactTime(setup=2.0, per_record=0.5)
    cost = pdtp_cost(prep.template, EXACT_ENGINES[0], fit_time(), 60, 60, 1, exact=exact, read_s=1.5)
    assert [p.name for p in cost.phases] == ["start and reading the data", "A(T)", "closed-form leave-one-out"]
    assert cost.fits == 1
    assert cost.seconds == pytest.approx(1.5 + 1.0 + 2.0 + 0.5 * 60, rel=1e-9)  # float sums: relative 1e-9


def test_timing_subsets_hold_every_class(tree_prep) -> None:
    prep, _ = tree_prep
    sub = subset(prep.train, 10, 0, prep.classes)
    assert set(np.asarray(sub.y).tolist()) == set(np.asarray(prep.train.y).tolist())
    assert subset(prep.train, 10, 0, prep.classes).rows.tolist() == sub.rows.tolist()  # seeded


def test_check_prints_the_phases_of_a_sampled_refit_run(tmp_path) -> None:
    from conftest import mixed_frame

    csv = tmp_path / "m.csv"
    mixed_frame(40).to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", "decision_tree")
    res = run_cli("check", csv, "--model", spec, "--sample", "12", "--jobs", "1")
    assert res.code == 0, res.stderr
    line = next(ln for ln in res.stdout.splitlines() if ln.strip().startswith("pdtp "))
    assert "refits without one record 12 fit(s)" in line or "replicates (4 to 32 per record) 52 fit(s)" in line
    assert "randomness check" in line and "A(T) 1 fit(s)" in line
    assert "timing: one fit of A(T)" in res.stdout and "records of T" in res.stdout


def test_a_long_phase_prints_its_first_line_early(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list = []

    class NowTimer:  # the timer fires at once: what FIRST_LINE_S seconds later looks like, without a sleep
        def __init__(self, delay: float, fn) -> None:
            assert delay == ui.FIRST_LINE_S <= 5.0
            self.fn, self.daemon = fn, False

        def start(self) -> None:
            started.append(self)
            self.fn()

        def cancel(self) -> None:
            pass

    monkeypatch.setattr(ui, "FIRST_LINE_S", FIRST_LINE_S)  # the shipped delay (conftest moves it out of reach)
    monkeypatch.setattr(ui.threading, "Timer", NowTimer)
    err = io.StringIO()
    monkeypatch.setattr(ui.sys, "stderr", err)
    with ui.progress(1000, "leave-one-out (exact)") as advance:
        advance(1)  # 0.1 %: no 10 % step yet
    lines = err.getvalue().splitlines()
    assert started and lines[0].startswith("[mptool] leave-one-out (exact): 0/1000 (0%)") and "running" in lines[0]
    with ui.progress(10, "quick", quiet=True) as advance:  # --quiet: nothing
        advance(10)
    assert len(err.getvalue().splitlines()) == len(lines)


def test_the_randomness_check_reports_its_fits(tree_prep) -> None:
    """The refits of the randomness check are a phase with a progress bar (a first line within 5 s)."""
    from contextlib import contextmanager
    from types import SimpleNamespace

    from mptool.api.randomized import RANDOMNESS_PHASE, detect_for
    from mptool.loo.randomness import planned_fits

    prep, _ = tree_prep
    seen: list = []

    @contextmanager
    def progress(total: int, label: str):
        seen.append([label, total, 0])
        yield lambda n: seen[-1].__setitem__(2, seen[-1][2] + n)

    found = detect_for(prep, SimpleNamespace(engine="auto"), progress=progress).randomness
    assert found is not None and found.randomized  # a forest: its seed changes A(T)
    [(label, total, done)] = seen
    assert label == RANDOMNESS_PHASE and total == 1 + planned_fits(prep.template)
    # the bar completes: A(T), as is, one other seed (it changed A(T): the other seeds are skipped and
    # counted done), one row order (it changed A(T): no reverse order)
    assert done == total
    from mptool.loo.randomness import detection_fits
    assert found.seeds_tried == 1 and detection_fits(prep.template, found) == 3


def test_pdtp_prints_the_randomness_check_as_a_phase(tree_prep, monkeypatch) -> None:
    """The check prints from FIRST_LINE_S on (0 here: at once); a check shorter than that prints nothing, so a
    refusal that needs its result (a baseline of another engine kind) stays one line."""
    from mptool.runtime import ui

    monkeypatch.setattr(ui, "FIRST_LINE_S", 0.0)
    # and the timer fires in this thread as it starts: a real 0 s timer's thread could be scheduled after the
    # last of the check's quick fits (on a loaded machine), and a finished phase prints no first line
    monkeypatch.setattr(ui.threading, "Timer", _TimerNow)
    _, csv = tree_prep
    spec = write_spec(csv.parent / "rf.yaml", "random_forest", model={"params": {"n_estimators": 3}})
    res = run_cli("pdtp", csv, "--model", spec, "--records", "0", "--replicates", "4:4", "--jobs", "1",
                  "--out", csv.parent / "out", "--force")
    assert res.code in (0, 1), res.stderr
    assert "[mptool] randomness check (A(T) refitted" in res.stderr


class _TimerNow:
    """threading.Timer that calls its function when started, in the caller's thread (no scheduling race)."""

    def __init__(self, delay: float, fn) -> None:
        self.fn, self.daemon = fn, False

    def start(self) -> None:
        self.fn()

    def cancel(self) -> None:
        pass


def test_the_set_up_is_separated_from_the_cost_per_record() -> None:
    """Two batches timed as they finish: the first holds the set-up, the second does not (digits counted a
    0.6 s set-up once per record when 4 records were timed in one piece)."""
    from mptool.api.costs import _per_batch

    setup, per = _per_batch([(0.6 + 9 * 0.1, 9), (0.6 + 18 * 0.1, 9)])
    assert setup == pytest.approx(0.6, rel=1e-9) and per == pytest.approx(0.1, rel=1e-9)  # float sums
    assert _per_batch([(1.0, 9)]) is None  # one batch: nothing to separate


def test_a_fixed_cost_is_extrapolated_as_such() -> None:
    """A time that grew less than linearly (a forest of 50 trees: as long on 100 records as on 1,000) grows
    by its measured cost per record; one that grew faster keeps its exponent (at most 2)."""
    from mptool.api.costs import _extrapolated

    flat = _extrapolated([(100, 0.20), (400, 0.23)], None, None, 1000)  # type: ignore[arg-type]
    assert flat.slope == pytest.approx(1e-4, rel=1e-9) and flat.seconds == pytest.approx(0.29, rel=1e-9)
    steep = _extrapolated([(100, 0.1), (400, 1.6)], None, None, 800)  # type: ignore[arg-type]
    assert steep.slope is None and steep.exponent == pytest.approx(2.0, rel=1e-9)
    assert steep.seconds == pytest.approx(6.4, rel=1e-9)  # exponent 2: (800 / 400)^2 x 1.6 s

"""Tidy-ups (helper "tidy3"): guard_fit's warning filter safe in threads; ``mptool report`` refuses a pdtp.json
whose summary is too damaged to say what the verdict rests on."""

from __future__ import annotations

import threading
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import mixed_frame, run_cli, write_spec
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from test_bad_input import assert_refused
from test_red2 import ended as ended  # the fixture: replicate --fail-fast runs as test_ff2.py makes them

from mptool.runtime import signals

# --- item 1: guard_fit's "Training interrupted by user" filter held once per process while any fit runs ---------

#: Events a test's fits wait on (role + "-in": the fit has begun; role + "-go": it may go on).
_STEPS: dict[str, threading.Event] = {}


class _Swallows(ClassifierMixin, BaseEstimator):
    """A fit that waits for the test's go-ahead, then, as ``role`` "b" with ``swallow``, warns as scikit-learn's
    MLP does when it has swallowed a KeyboardInterrupt."""

    def __init__(self, role: str = "a", swallow: bool = True) -> None:
        self.role, self.swallow = role, swallow

    def fit(self, X, y):  # type: ignore[no-untyped-def]
        _STEPS[self.role + "-in"].set()
        assert _STEPS[self.role + "-go"].wait(timeout=60)
        if self.role == "b" and self.swallow:
            warnings.warn("Training interrupted by user.", UserWarning, stacklevel=2)
        self.classes_ = np.unique(y)
        return self

    def predict_proba(self, X):  # type: ignore[no-untyped-def]
        return np.full((len(X), len(self.classes_)), 1 / len(self.classes_))


def _interleave(run) -> dict[str, BaseException | None]:  # type: ignore[no-untyped-def]
    """Run ``run("a")`` and ``run("b")`` in two threads: A's fit begins, B's begins, A's ends, then B's.

    The order is forced with events (no timing): A leaves its fit while B is still inside its own.
    Returns what each raised (None: it returned).
    """
    for k in ("a-in", "a-go", "b-in", "b-go"):
        _STEPS[k] = threading.Event()
    raised: dict[str, BaseException | None] = {}

    def target(role: str) -> None:
        try:
            run(role)
            raised[role] = None
        except BaseException as exc:  # noqa: BLE001 - reported by the caller's assertions
            raised[role] = exc

    ta, tb = threading.Thread(target=target, args=("a",)), threading.Thread(target=target, args=("b",))
    ta.start()
    assert _STEPS["a-in"].wait(timeout=60)
    tb.start()
    assert _STEPS["b-in"].wait(timeout=60)
    _STEPS["a-go"].set()
    ta.join(timeout=60)
    _STEPS["b-go"].set()
    tb.join(timeout=60)
    assert not ta.is_alive() and not tb.is_alive()
    return raised


def test_a_swallowed_interrupt_is_an_error_in_a_fit_that_outlives_another_threads_fit(monkeypatch) -> None:
    """B's fit swallows an interrupt after A's fit, begun first, has ended: B raises Interrupted.

    With one ``warnings.catch_warnings`` per guard_fit, A's exit restored the filter list A saw on entry,
    without the "error" filter B had installed: B's warning then met the fit's "ignore UserWarning" and
    B's half-trained model came back as if complete.
    """
    from mptool.inputs import models

    monkeypatch.setitem(signals._state, "raised", False)  # set by guard_fit when it raises; put back after
    X, y = pd.DataFrame({"x": [0.0, 1.0, 2.0, 3.0]}), np.array([0, 1, 0, 1])
    before = list(warnings.filters)
    raised = _interleave(lambda role: models.fit(_Swallows(role), X, y))
    assert raised["a"] is None
    assert isinstance(raised["b"], signals.Interrupted), raised["b"]
    assert warnings.filters == before


def test_the_attack_models_fits_in_two_threads_leave_the_filters_as_they_found_them(monkeypatch) -> None:
    """The untargeted attack's MLP fits (``_train_one``) out of order in two threads: no filter left behind.

    Its own ``catch_warnings`` (ConvergenceWarning muted) around a guard_fit of its own, in two threads,
    left B's restore of a list that held A's filters installed for good.
    """
    from mptool.attacks import untargeted

    roles = ["a", "b"]  # A's thread asks for its attack model first (B's starts once A's fit has begun)
    monkeypatch.setattr(untargeted, "make_attack_classifier", lambda seed: _Swallows(roles.pop(0), swallow=False))
    F, labels = np.zeros((4, 2)), np.array([0, 1, 0, 1])
    before = list(warnings.filters)
    raised = _interleave(lambda role: untargeted._train_one(F, labels, seed=0))
    assert raised == {"a": None, "b": None}
    assert warnings.filters == before


def test_a_threading_backend_run_leaves_the_warning_filters_as_it_found_them(tmp_path: Path) -> None:
    """Refits of a logistic regression stopped after one iteration (a ConvergenceWarning on every fit) on two
    threads (--backend threading --jobs 2): none leaks, and the filter list is the same after the run as before."""
    import json

    csv = tmp_path / "d.csv"
    mixed_frame(12, seed=2).to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", "logistic_regression", model={"params": {"max_iter": 1}})
    args = ("pdtp", csv, "--model", spec, "--jobs", "2", "--backend", "threading", "--engine", "refit",
            "--records", "0,1,2,3", "--noise-floor", "0", "-q", "--out", tmp_path / "o")
    before = list(warnings.filters)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        inside = list(warnings.filters)
        res = run_cli(*args)
        assert list(warnings.filters) == inside
    assert res.code in (0, 1), res.stderr
    assert json.loads((tmp_path / "o" / "pdtp.json").read_text())["summary"]["workers"]["workers"] == 2
    assert [w for w in caught if issubclass(w.category, ConvergenceWarning)] == []
    assert list(warnings.filters) == before


# --- item 2: mptool report refuses a summary too damaged to say what the verdict rests on (tidy3-1 .. tidy3-8) ----


#: Refit runs of a tree on 24 records: name -> (exit code, flags, output section of the spec).
TREE_RUNS = {
    # a release policy, 6 records chosen with --records, stopped by --fail-fast at the first violator
    "exact": (1, ("--fail-fast", "--threshold", "0.5", "--records", "0,1,2,3,4,5"), {"release": {"top_k": 1}}),
    # a pass of 4 records chosen with --records: "DTP-1 not established"
    "records": (0, ("--threshold", "10", "--records", "0,1,2,3"), {}),
}


@pytest.fixture(scope="module")
def tree_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("tidy3-tree")
    mixed_frame(24, seed=5).to_csv(d / "d.csv", index=False)
    for name, (code, flags, output) in TREE_RUNS.items():
        spec = write_spec(d / f"{name}.yaml", "decision_tree", output={"bin_size": 0.01, **output})
        res = run_cli("pdtp", d / "d.csv", "--model", spec, "--out", d / name, "--jobs", "1", "--noise-floor", "0",
                      "-q", *flags)
        assert res.code == code, res.stderr
    return {name: d / name for name in TREE_RUNS}


def _put(key: str, value: object):  # type: ignore[no-untyped-def]
    return lambda s: s.__setitem__(key, value)


def _put_rep(key: str, value: object):  # type: ignore[no-untyped-def]
    return lambda s: s["replicates"].__setitem__(key, value)


#: case -> (run, how the summary is damaged, what the refusal names). Each was reported with exit 0 before.
DAMAGED = {
    # tidy3-1: an unknown verdict skipped every check; the report said "No DTP-1 verdict ... No pdtp.json"
    "verdict-unknown": ("exact", _put("verdict", "PASS"), "summary.verdict is not pass or fail"),
    # tidy3-2: n, n_train: a --records run's "N records chosen with --records of M" left out
    "n-null": ("exact", _put("n", None), "summary.n is not a whole number of records"),
    "n_train-text": ("exact", _put("n_train", "24"), "summary.n_train is not the whole number of records in T"),
    # ... and a pass of 4 records chosen with --records of 24 was headlined "DTP-1 holds"
    "n_train-text-pass": ("records", _put("n_train", "24"), "summary.n_train is not"),
    "n_train-below-n": ("exact", _put("n_train", 3), "summary.n_train is not the whole number of records in T"),
    "n_train-text-replicates": ("replicates", _put("n_train", "26"), "summary.n_train is not"),
    # tidy3-3: the release policy: its note emptied (the policy named nowhere) or not text
    "release_note-emptied": ("exact", _put("release_note", ""), "summary.release_note is not the note naming"),
    "release_note-number": ("exact", _put("release_note", 5), "summary.release_note is not the note naming"),
    "release-text": ("exact", _put("release", "top_k=1"), "summary.release is not the release policy"),
    # tidy3-4: a --fail-fast stop of the exact engines was not checked at all
    "stopped-text": ("exact", _put("stopped", "yes"), "summary.stopped is not a --fail-fast stop"),
    "stopped-after-above-of": ("exact", lambda s: s["stopped"].__setitem__("after", 7),
                               "summary.stopped is not a --fail-fast stop"),
    # tidy3-5: a replicate run read as an exact-engine run
    "replicates-text": ("replicates", _put("replicates", "yes"), "summary.replicates is not the replicate engine's"),
    # tidy3-6: what ending_words reads
    "fits-text": ("replicates", _put_rep("fits", "80"), "summary.replicates.fits is not a whole number of fits"),
    "budget_fits-text": ("replicates", _put_rep("budget_fits", "100"), "summary.replicates.budget_fits is not"),
    "budget_exhausted-text": ("replicates", _put_rep("budget_exhausted", "no"),
                              "summary.replicates.budget_exhausted is not true or false"),
    "confidence-text": ("replicates", _put_rep("confidence", "95%"), "summary.replicates.confidence is not"),
    # tidy3-7: the --baseline/--waivers block the report names the gate by
    "baseline-text": ("exact", _put("baseline", "none"), "summary.baseline is not the --baseline/--waivers block"),
    "baseline-counts": ("exact", _put("baseline", {"verdict": "fail", "counts": "x"}),
                        "summary.baseline is not the --baseline/--waivers block"),
}


def _damaged(run: Path, tmp: Path, damage) -> Path:  # type: ignore[no-untyped-def]
    import json
    import shutil

    copy = tmp / "run"
    shutil.copytree(run, copy)
    doc = json.loads((copy / "pdtp.json").read_text())
    damage(doc["summary"])
    (copy / "pdtp.json").write_text(json.dumps(doc))
    return copy


@pytest.mark.parametrize("case", list(DAMAGED))
def test_report_refuses_a_summary_too_damaged_to_say_what_the_verdict_rests_on(
        request: pytest.FixtureRequest, tmp_path: Path, case: str) -> None:
    """tidy3-1 .. tidy3-7: exit 2, one line naming the field, no value echoed, nothing written."""
    which, damage, said = DAMAGED[case]
    run = _damaged(request.getfixturevalue("tree_runs")[which] if which in TREE_RUNS
                   else request.getfixturevalue("ended")["stop"], tmp_path, damage)
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    res = run_cli("report", run, "--format", "md")
    line = assert_refused(res, [said, "a result file was edited: rerun mptool pdtp"], run, before, stdout_empty=True)
    assert "PASS" not in line and "95%" not in line and "top_k=1" not in line  # no value echoed


def test_report_refuses_a_damaged_ending_without_pdtp_csv_too(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """tidy3-8: without pdtp.csv the verdict was pdtp.json's alone and nothing else was checked, so a damaged
    --fail-fast block dropped "The verdict rests on" and the fail-fast rows without a word."""
    def damage(summary: dict) -> None:
        summary["replicates"]["fail_fast_spending"]["stopped_by"] = "someone"

    run = _damaged(request.getfixturevalue("ended")["stop"], tmp_path, damage)
    (run / "pdtp.csv").unlink()
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    res = run_cli("report", run, "--format", "md")
    assert_refused(res, ["summary.replicates.fail_fast_spending is not the --fail-fast block"], run, before,
                   stdout_empty=True)


def test_intact_runs_report_what_their_verdict_rests_on(tree_runs: dict[str, Path], request: pytest.FixtureRequest
                                                        ) -> None:
    """The replicate engine's report as before; an exact-engine run's report now names its release policy and its
    --fail-fast stop too (it named neither: only the replicate engine's verdict said what it rests on)."""
    md = run_cli("report", request.getfixturevalue("ended")["stop"], "--format", "md", "--out", "-")
    assert md.code == 0, md.stderr
    assert ("The verdict rests on: --fail-fast stopped at row 6 after 19 of 26 (stopped by the audit at level 0.025; "
            "ended by the --fail-fast stop after 80 of the --budget's 100 fits).") in md.stdout
    res = run_cli("report", tree_runs["exact"], "--format", "md", "--out", "-")
    assert res.code == 0, res.stderr
    assert ("records above the threshold. The verdict rests on: release policy top\\_k=1 is invertible (an attacker "
            "undoes it), so the full probability vector is measured; --fail-fast stopped at row 5 after 6 of 6. "
            "mptool pdtp exited with code 1") in res.stdout

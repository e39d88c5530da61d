"""Tidy-ups (helper "tidy3"): guard_fit's warning filter safe in threads; ``mptool report`` refuses a pdtp.json
whose summary is too damaged to say what the verdict rests on."""

from __future__ import annotations

import threading
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from conftest import mixed_frame, run_cli, write_spec
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning

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

"""Tidy-ups (helper "tidy"): warnings that are mptool's to mute, and only there; quiet third-party libraries;
the verdict's "rests on" line."""

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

# --- item 2: numpy's RuntimeWarnings muted around a model's fit/predict only, never process-wide ---------------


def _constant_feature(tmp: Path) -> tuple[Path, Path]:
    """GaussianNB on a feature constant in T: its predict_proba divides by a zero variance (red2-18)."""
    csv = tmp / "d.csv"
    csv.write_text("f0,label\n" + "0,p\n0,q\n" * 3)
    return csv, write_spec(tmp / "s.yaml", "gaussian_nb")


def test_a_cli_run_leaves_the_warning_filters_as_it_found_them(tmp_path: Path) -> None:
    """The root callback once set ``simplefilter("ignore", RuntimeWarning)`` for the whole process: a program
    calling ``mptool.cli.main`` (or any test after it) lost its own RuntimeWarnings."""
    csv, spec = _constant_feature(tmp_path)
    args = ("pdtp", csv, "--model", spec, "--jobs", "1", "-q")
    run_cli(*args, "--out", tmp_path / "warm")  # first imports done (a library may add a filter when imported)
    before = list(warnings.filters)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = run_cli(*args, "--out", tmp_path / "o")
        assert list(warnings.filters)[1:] == before  # "always" added above is the only entry on top
        warnings.warn("the user's own", RuntimeWarning, stacklevel=1)
    assert_refused(res, ["gaussian_nb gives non-finite probabilities for CSV row 0"])
    assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == ["the user's own"]
    assert list(warnings.filters) == before


def test_numpy_errors_of_the_model_are_muted_only_inside_its_calls() -> None:
    from sklearn.naive_bayes import GaussianNB

    from mptool.inputs.models import fit, proba_in

    X, y = np.zeros((4, 1)), np.array(["p", "q", "p", "q"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = fit(GaussianNB(var_smoothing=0.0), X, y)
        p = proba_in(model, X, np.array(["p", "q"]))
        assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]
        np.log(np.zeros(1))  # outside mptool's calls numpy warns as the user set it
    assert not np.isfinite(p).all()  # the model's output is unchanged: non-finite, refused by mptool's own check
    assert [w.category for w in caught] == [RuntimeWarning]



# --- item 3: SVC's deprecated ``probability`` (scikit-learn 1.9-1.10) said once, not on every fit -------------


def test_an_svc_spec_prints_no_future_warning_and_one_note(tmp_path: Path) -> None:
    from sklearn.svm import SVC

    if "probability" not in SVC().get_params():
        pytest.skip("scikit-learn >= 1.11: SVC has no probability parameter")
    csv = tmp_path / "d.csv"
    mixed_frame(16, seed=1).to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", "sklearn.svm.SVC", model={"params": {"probability": True}})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # every warning raised is recorded (and would have been printed)
        res = run_cli("check", csv, "--model", spec)
    assert res.code == 0, res.stderr
    assert not [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
    deprecated = SVC().get_params()["probability"] == "deprecated"  # scikit-learn 1.9 and 1.10
    assert res.stderr.count("model.params.probability of SVC is deprecated") == int(deprecated), res.stderr


class _Warns(ClassifierMixin, BaseEstimator):
    """A classifier whose fit warns like SVC(probability=True) on scikit-learn 1.9, and with another FutureWarning."""

    def __init__(self, message: str = "") -> None:
        self.message = message

    def fit(self, X, y):
        warnings.warn(self.message, FutureWarning, stacklevel=1)
        self.classes_ = np.unique(y)
        return self


@pytest.mark.parametrize(("message", "shown"), [
    ("The `probability` parameter was deprecated in 1.9 and will be removed in version 1.11.", False),
    ("The `loss` parameter was deprecated in 1.9", True),  # any other FutureWarning still shows
])
def test_fit_mutes_only_the_svc_probability_deprecation(message: str, shown: bool) -> None:
    from mptool.inputs.models import fit

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit(_Warns(message), np.zeros((4, 1)), np.array([0, 1, 0, 1]))
    assert [str(w.message) for w in caught if issubclass(w.category, FutureWarning)] == ([message] if shown else [])


# --- item 4: LightGBM's C library logs nothing per fit unless the spec asks -----------------------------------


def _lightgbm_pdtp(tmp: Path, name: str, **params) -> tuple[object, Path]:
    csv = tmp / "d.csv"
    if not csv.exists():
        mixed_frame(16, seed=3).to_csv(csv, index=False)
    spec = write_spec(tmp / f"{name}.yaml", "lightgbm.LGBMClassifier",
                      model={"params": {"n_jobs": 1, "n_estimators": 3, "min_child_samples": 3, **params}})
    res = run_cli("pdtp", csv, "--model", spec, "--out", tmp / name, "--jobs", "1", "-q", "--allow-import", "lightgbm",
                  "--noise-floor", "0", "--records", "0,1,2,3")
    assert res.code in (0, 1), res.stderr
    return res, tmp / name / "pdtp.csv"


def test_a_lightgbm_audit_prints_only_mptool_lines_and_the_same_results(tmp_path: Path) -> None:
    pytest.importorskip("lightgbm")
    import pandas as pd

    quiet, table = _lightgbm_pdtp(tmp_path, "default")
    assert quiet.stdout.splitlines() == [quiet.stdout.strip()] and quiet.stdout.startswith("DTP-1 "), quiet.stdout
    assert "[LightGBM]" not in quiet.stdout + quiet.stderr
    loud, again = _lightgbm_pdtp(tmp_path, "verbose", verbose=1)  # the spec's own level: the logs are back
    assert "[LightGBM] [Info]" in loud.stdout
    pd.testing.assert_frame_equal(pd.read_csv(table), pd.read_csv(again))  # exactly: the level changes no tree


@pytest.mark.parametrize("level", ["abc", True, 1.5, None, [1]])
def test_a_lightgbm_log_level_that_is_not_a_whole_number_is_refused(tmp_path: Path, level: object) -> None:
    """tidy-2: a spec's verbose that LightGBM's C library would reject mid-run is refused before any work."""
    pytest.importorskip("lightgbm")
    csv = tmp_path / "d.csv"
    mixed_frame(16, seed=3).to_csv(csv, index=False)
    spec = write_spec(tmp_path / "s.yaml", "lightgbm.LGBMClassifier",
                      model={"params": {"n_jobs": 1, "n_estimators": 3, "verbose": level}})
    out = tmp_path / "out"
    res = run_cli("pdtp", csv, "--model", spec, "--out", out, "-q", "--allow-import", "lightgbm")
    line = assert_refused(res, ["model.params.verbose: LightGBM's log level must be a whole number"])
    assert "abc" not in line  # the value is not echoed
    assert not out.exists()


# --- item 5: a report of a sampled run whose summary.sample is damaged is refused (tidy-1) ---------------------


@pytest.fixture(scope="module")
def sampled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A refit run of 4 sampled records of 24 that passes (a tree's PDTP is at most 5.29 < 10): "not established"."""
    d = tmp_path_factory.mktemp("tidy-sample")
    mixed_frame(24, seed=5).to_csv(d / "d.csv", index=False)
    spec = write_spec(d / "s.yaml", "decision_tree")
    res = run_cli("pdtp", d / "d.csv", "--model", spec, "--out", d / "run", "--jobs", "1", "--sample", "4",
                  "--threshold", "10", "-q")
    assert res.code == 0, res.stderr
    return d / "run"


def _set(key: str, value: object):
    return lambda sample: {**sample, key: value}


DAMAGED = {
    "text": lambda sample: "garbage",
    "empty": lambda sample: {},
    "k-as-text": _set("k", "4"),  # was read as no sample at all: the report said "DTP-1 holds" of 4 records in 24
    "k-above-n_train": _set("k", 25),
    "n_train-not-T": _set("n_train", 30),
    "violations-above-k": _set("violations", 5),
    "bound-as-text": _set("fraction_upper_95", "abc"),  # dropped "The verdict rests on" of a replicate run
    "bound-above-1": _set("fraction_upper_95", 1.5),
    "no-method": lambda sample: {k: v for k, v in sample.items() if k != "method"},
}


@pytest.mark.parametrize("case", list(DAMAGED))
def test_report_refuses_a_sample_block_mptool_never_writes(sampled: Path, tmp_path: Path, case: str) -> None:
    """tidy-1."""
    import json
    import shutil

    run = tmp_path / "run"
    shutil.copytree(sampled, run)
    doc = json.loads((run / "pdtp.json").read_text())
    doc["summary"]["sample"] = DAMAGED[case](doc["summary"]["sample"])
    (run / "pdtp.json").write_text(json.dumps(doc))
    before = sorted(p.name for p in run.iterdir())
    res = run_cli("report", run, "--format", "md")
    assert_refused(res, ["pdtp.json: summary.sample is not the --sample block mptool writes", "rerun mptool pdtp"],
                   stdout_empty=True)
    assert sorted(p.name for p in run.iterdir()) == before  # no report.md written


def test_report_of_an_intact_sample_says_what_pdtp_said(sampled: Path) -> None:
    res = run_cli("report", sampled, "--format", "md", "--out", "-")
    assert res.code == 0, res.stderr
    assert "DTP-1 not established (no violation among 4 sampled records of 24;" in res.stdout
    assert "DTP-1 holds" not in res.stdout


class _SteppedFit(ClassifierMixin, BaseEstimator):
    """A classifier whose fit waits for the test's go-ahead, then warns as a non-converged solver does."""

    def __init__(self, role: str = "a") -> None:
        self.role = role

    def fit(self, X, y):  # type: ignore[no-untyped-def]
        _STEPS[self.role + "-in"].set()
        _STEPS[self.role + "-go"].wait(timeout=60)
        warnings.warn("did not converge", ConvergenceWarning, stacklevel=2)
        self.classes_ = np.unique(y)
        return self


_STEPS: dict[str, threading.Event] = {}


def test_fit_warnings_stay_muted_when_fits_overlap_in_threads() -> None:
    """Thread A's fit ends while thread B's still runs (the threading backend): B's ConvergenceWarning is muted.

    With one ``warnings.catch_warnings`` per fit, A's exit restored the filter list A saw on entry and B's
    warning printed (seen at random in CI: test_honest, test_determinism). The overlap is made
    deterministic with events, not timing.
    """
    from mptool.inputs import models

    for k in ("a-in", "a-go", "b-in", "b-go"):
        _STEPS[k] = threading.Event()
    X, y = pd.DataFrame({"x": [0.0, 1.0, 2.0, 3.0]}), np.array([0, 1, 0, 1])
    errors: list[BaseException] = []

    def run(role: str) -> None:
        try:
            models.fit(_SteppedFit(role), X, y)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    before = list(warnings.filters)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ta, tb = threading.Thread(target=run, args=("a",)), threading.Thread(target=run, args=("b",))
        ta.start()
        assert _STEPS["a-in"].wait(timeout=60)
        tb.start()
        assert _STEPS["b-in"].wait(timeout=60)
        _STEPS["a-go"].set()  # A warns and leaves its fit while B is still inside its own
        ta.join(timeout=60)
        _STEPS["b-go"].set()
        tb.join(timeout=60)
        recorded = [w for w in seen if issubclass(w.category, ConvergenceWarning)]
    assert not errors
    assert recorded == []
    assert warnings.filters == before  # the fit filters are gone once the last fit ends


def _warns_outside_a_fit(i: int) -> int:
    """A task that saves and restores the filter list itself, then warns as a solver does (not inside a fit)."""
    with warnings.catch_warnings():
        warnings.simplefilter("default", DeprecationWarning)
    warnings.warn("did not converge", ConvergenceWarning, stacklevel=2)
    return i


def test_threading_dispatch_holds_the_fit_filters_for_every_task() -> None:
    """Tasks on threads of this process run under the fit filters for the whole dispatch (runtime.parallel)."""
    import mptool.inputs.models  # noqa: F401 - registers its fit filters
    from mptool.runtime.parallel import run_tasks

    before = list(warnings.filters)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = run_tasks(_warns_outside_a_fit, [(i,) for i in range(8)], jobs=2, backend="threading")
        recorded = [w for w in seen if issubclass(w.category, ConvergenceWarning)]
    assert out == list(range(8))
    assert recorded == []
    assert warnings.filters == before

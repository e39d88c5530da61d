"""benchmarks/bench_vs_art.py without IBM ART (issue 21 item 3): the suite never needs ART; the
benchmark says it is missing (exit 2), and its wrapper hands ART mptool's own binned release."""

from __future__ import annotations

import importlib.util
import runpy
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import mixed_frame, write_spec
from sklearn.base import clone

from mptool.inputs.models import fit, proba_in
from mptool.inputs.prepare import prepare
from mptool.inputs.spec import load_spec
from mptool.privacy.calibration import bin_probabilities

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_vs_art.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_vs_art", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_exits_2_with_one_line_when_art_is_missing(monkeypatch, capsys) -> None:
    """The script run as ``__main__`` (runpy, in this process: a subprocess re-imported mptool, sklearn and pandas
    only to reach the same ``sys.exit(main())``) with ART unimportable: exit 2, one stderr line, no stdout."""
    monkeypatch.setitem(sys.modules, "art", None)  # ``import art`` raises ImportError, as when it is not installed
    monkeypatch.setattr(sys, "argv", ["bench_vs_art.py"])
    with warnings.catch_warnings(record=True) as caught, pytest.raises(SystemExit) as info:
        # Python's default filters, as in a fresh process: a warning they show would be a second stderr line there
        warnings.resetwarnings()
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.simplefilter("ignore", category)
        warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
        runpy.run_path(str(BENCH), run_name="__main__")
    assert info.value.code == 2
    assert not [str(w.message) for w in caught]
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "adversarial-robustness-toolbox" in lines[0] and ".[peers]" in lines[0]
    assert out == ""


def test_wrapper_releases_mptools_binned_outputs(tmp_path: Path) -> None:
    """Fitted through the wrapper (as ART's ShadowModels does) or wrapping a fitted model (the
    target), the outputs are mptool's fit of the same rows, binned: the release mptool attacks."""
    bench = _bench()
    csv = tmp_path / "mixed.csv"
    mixed_frame(80, seed=2).to_csv(csv, index=False)
    prep = prepare(csv, load_spec(write_spec(tmp_path / "lr.yaml", "logistic_regression")))
    D = prep.population
    classes = np.array(sorted(set(D.y.tolist())), dtype=object)
    y_idx = np.array([list(classes).index(v) for v in D.y])
    rows = np.arange(0, D.n, 2)
    x = rows.astype(float).reshape(-1, 1)
    everyone = np.arange(D.n).astype(float).reshape(-1, 1)
    expected = bin_probabilities(proba_in(fit(prep.template, D.X.iloc[rows], D.y[rows]), D.X, classes), 0.01)
    unfitted = bench.RowsOfD(prep.template, D.X, classes, 0.01)
    assert unfitted.n_classes_ == 2  # ART reads the class count from the unfitted template
    refit = clone(unfitted).fit(x, y_idx[rows])
    assert np.array_equal(refit.predict_proba(everyone), expected)
    model = fit(prep.template, D.X.iloc[rows], D.y[rows])
    wrapped = bench.RowsOfD.wrap(model, D.X, classes, 0.01)
    assert np.array_equal(wrapped.predict_proba(everyone), expected)
    assert np.array_equal(wrapped.predict(everyone), expected.argmax(axis=1))

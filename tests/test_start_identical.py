"""Issue 28 (helper start): the military-scale shortcuts give the same bytes as the plain computation.

Each shortcut computes something once per distinct value or row and gathers it; each test compares
it with the row-by-row computation it replaces, exactly (``np.array_equal`` on the bit patterns:
these are the same floating-point operations on the same inputs, so no tolerance is allowed).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mptool.api.pdtp import taken
from mptool.inputs.data import label_counts
from mptool.inputs.models import fit, labels_for_fit
from mptool.inputs.prepare import fit_checked, prepare
from mptool.inputs.spec import parse_spec
from mptool.loo.base import LooRequest
from mptool.loo.design import class_index
from mptool.loo.naive_bayes import CategoricalCounts, NaiveBayesEngine, categorical_parts, nb_dtp_upper
from mptool.privacy import calibration, dtp


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.fixture(scope="module")
def duplicated() -> LooRequest:
    """A categorical naive Bayes T of 6,000 records with few distinct (x, y) pairs (like military.csv.gz)."""
    rng = np.random.default_rng(3)
    n = 6000
    frame = pd.DataFrame({
        "a": rng.choice(["x", "y", "z"], n), "b": rng.choice([True, False], n), "c": rng.integers(0, 4, n),
        "label": rng.choice(["lo", "mid", "hi"], n, p=[0.6, 0.3, 0.1]),
    })
    spec = parse_spec({"data": {"label": "label", "train_size": None}, "model": {"estimator": "categorical_nb"},
                       "seed": 0})
    prep = prepare(frame, spec)
    full = fit_checked(prep.template, prep.train)
    return LooRequest(spec, prep.template, prep.train, full, prep.classes, np.arange(prep.train.n), 1)


def test_nb_engine_once_per_distinct_pair_is_row_by_row(duplicated: LooRequest) -> None:
    req = duplicated
    got = NaiveBayesEngine().run(req, lambda k: None)
    enc, est = categorical_parts(req.template)  # type: ignore[misc]
    codes = enc.transform(req.train.X[list(req.template.steps[0][1].transformers[0][2])])
    y = class_index(req.train.y, req.classes)
    counts = CategoricalCounts.from_codes(codes, y, len(req.classes), np.asarray(est.min_categories), est.alpha,
                                          est.fit_prior)
    full, loo = counts.loo_proba(codes, y)  # every row, as before the shortcut
    assert same_bits(got.p_full, full) and same_bits(got.p_loo, loo)
    bound = nb_dtp_upper(req)
    rows = np.array_split(np.arange(req.train.n), 7)  # the bound of each slice alone: no sharing across rows
    alone = np.concatenate([nb_dtp_upper(LooRequest(**{**req.__dict__, "positions": r})) for r in rows])
    assert same_bits(bound, alone)


def test_pdtp_of_groups_and_binned_bound_are_row_by_row() -> None:
    rng = np.random.default_rng(5)
    base = rng.dirichlet(np.ones(3), size=40)
    p, q = base[rng.integers(0, 40, 9000)], base[rng.integers(0, 40, 9000)]
    p[7], q[7] = [0.0, 0.5, 0.5], [0.5, 0.5, 0.0]  # zeros: infinite raw ratios
    groups = dtp.pair_groups(p, q)
    assert groups is not None and len(groups[0]) < 2000
    for bin_size in (0.01, 0.0):
        a, b = dtp.pdtp_of(p, q, bin_size, groups), dtp.pdtp_of(p, q, bin_size)
        assert all(same_bits(getattr(a, f), getattr(b, f)) for f in ("pdtp", "worst", "p_full", "p_loo"))
    bounds = np.r_[rng.choice([0.0, -0.0, np.inf, np.nan, 1e-9, 0.3, 2.0], 6000), rng.random(10)]
    assert same_bits(calibration.binned_bound(bounds, 0.01), calibration._binned(bounds, 0.01, np.log(199)))


def test_labels_and_columns_from_distinct_values() -> None:
    y = np.array(["b", "a", "b", "c\x00", "c", "é", "a"] * 1000, dtype=object)
    mixed = np.array([1, 1.0, "1", True, "a"], dtype=object)  # a hash would merge 1, 1.0 and True
    for labels in (y, mixed):  # the same texts (the text width may differ) and counts as numpy's
        got, want = label_counts(labels), np.unique(labels.astype(str), return_counts=True)
        assert got[0].tolist() == want[0].tolist() and same_bits(got[1], want[1])
    assert labels_for_fit(mixed) is mixed and labels_for_fit(np.array(["a\x00", "b"], dtype=object)).dtype == object
    idx = np.arange(6000)[::-1]
    pd.testing.assert_frame_equal(pd.DataFrame({"c": taken(y, idx)}), pd.DataFrame({"c": y[idx]}), check_exact=True)


def test_text_labels_fit_the_same_model(duplicated: LooRequest) -> None:
    """A(T) fitted on the labels as a numpy text array: the same classes, in order, and the same probabilities."""
    req = duplicated
    text = labels_for_fit(req.train.y)
    assert text.dtype.kind == "U" and text.tolist() == req.train.y.tolist()
    model = fit(req.template, req.train.X, req.train.y)
    plain = req.template.__class__(req.template.steps).fit(req.train.X, req.train.y)  # object labels, as before
    assert np.asarray(model.classes_).tolist() == np.asarray(plain.classes_).tolist()
    assert same_bits(model.predict_proba(req.train.X), plain.predict_proba(req.train.X))


def test_pdtp_json_times_the_new_phases(cli, tmp_path) -> None:  # noqa: ANN001
    from conftest import mixed_frame, write_spec  # noqa: PLC0415

    data = tmp_path / "d.csv"
    mixed_frame(40).to_csv(data, index=False)
    spec = write_spec(tmp_path / "s.yaml", "categorical_nb", model={"bins": {"x1": [0.0], "x2": [2.0]}})
    res = cli("pdtp", data, "--model", spec, "--out", tmp_path / "out", "-q", "--jobs", "1")
    assert res.code in (0, 1), res.stderr
    import json  # noqa: PLC0415

    timings = json.loads((tmp_path / "out" / "pdtp.json").read_text())["summary"]["timings"]
    assert {"train_accuracy_s", "gate_s", "startup_cpu_s", "cpu_s"} <= set(timings), timings

"""Shared work of the categorical naive Bayes audit gives what the long way gives (issue 28, helper mil2).

- T encoded, counted and grouped once per request (``categorical_state``): the engine's
  probabilities, the DTP bound and the training accuracy equal those computed without it, for
  all of T and for a sample of it;
- ``LooResult.groups``: rows of one group are bit-identical, and the table and raw PDTP computed
  through them equal those computed row by row;
- ``ColumnTransformer`` loaded without ``sklearn.compose``'s package file is scikit-learn's class.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import write_spec

from mptool.inputs.prepare import fit_checked, prepare
from mptool.inputs.spec import load_spec
from mptool.loo import LooRequest, select_engine
from mptool.loo.naive_bayes import categorical_accuracy, nb_dtp_upper
from mptool.privacy.dtp import pdtp_of, raw_pdtp


@pytest.fixture(scope="module")
def nb(tmp_path_factory: pytest.TempPathFactory):
    """A categorical NB audit of 400 records with many repeated (x, y) pairs."""
    tmp = tmp_path_factory.mktemp("mil2")
    rng = np.random.default_rng(3)
    n = 400
    df = pd.DataFrame({
        "f1": rng.choice(["x", "y", "z"], n),
        "f2": rng.choice(["p", "q"], n),
        "f3": rng.integers(0, 3, n),
        "label": rng.choice(["a", "b", "c"], n, p=[0.6, 0.3, 0.1]),
    })
    data = tmp / "d.csv"
    df.to_csv(data, index=False)
    spec = load_spec(write_spec(tmp / "s.yaml", "categorical_nb", model={"params": {"alpha": 1.0}},
                                data={"categorical": ["f3"]}))
    prep = prepare(data, spec)
    full = fit_checked(prep.template, prep.train)
    engine = select_engine("auto", spec, prep.template)
    assert engine.name == "exact-naive-bayes"
    return spec, prep, full, engine


def _request(nb, positions: np.ndarray) -> LooRequest:
    spec, prep, full, _ = nb
    return LooRequest(spec, prep.template, prep.train, full, prep.classes, positions, 1)


@pytest.mark.parametrize("which", ["all", "sample"])
def test_shared_state_gives_the_same_numbers(nb, which: str) -> None:
    spec, prep, full, engine = nb
    n = prep.train.n
    pos = np.arange(n) if which == "all" else np.random.default_rng(1).choice(n, 57, replace=False)
    shared = _request(nb, pos)
    result = engine.run(shared, lambda k: None)
    bound = nb_dtp_upper(shared)  # the engine's state, kept in shared.memo
    assert "categorical" in shared.memo
    # the long way: each record's probabilities and bound from a request of that record alone
    for t in pos[:: max(1, len(pos) // 12)]:
        alone = _request(nb, np.array([t]))
        one = engine.run(alone, lambda k: None)
        i = int(np.flatnonzero(pos == t)[0])
        assert np.array_equal(one.p_full[0], result.p_full[i]) and np.array_equal(one.p_loo[0], result.p_loo[i])
        assert np.array_equal(nb_dtp_upper(alone), bound[i : i + 1])
    # training accuracy: the pipeline's predictions of every record, compared with the labels
    want = float(np.mean(full.predict(prep.train.X) == prep.train.y))
    assert categorical_accuracy(shared) == want  # exactly: a count over n either way


def test_groups_are_bit_identical_rows_and_give_the_same_table(nb) -> None:
    _, prep, _, engine = nb
    result = engine.run(_request(nb, np.arange(prep.train.n)), lambda k: None)
    first, inverse = result.groups
    assert len(first) < prep.train.n  # repeated records: fewer groups than rows
    assert np.array_equal(result.p_full, result.p_full[first][inverse])
    assert np.array_equal(result.p_loo, result.p_loo[first][inverse])
    assert np.array_equal(raw_pdtp(result.p_full, result.p_loo, result.groups),
                          raw_pdtp(result.p_full, result.p_loo))
    for bin_size in (0.01, 0.0):
        a = pdtp_of(result.p_full, result.p_loo, bin_size, result.groups)
        b = pdtp_of(result.p_full, result.p_loo, bin_size)
        assert all(np.array_equal(getattr(a, k), getattr(b, k)) for k in ("pdtp", "worst", "p_full", "p_loo"))


def test_column_transformer_is_scikit_learns() -> None:
    from sklearn.compose import ColumnTransformer

    from mptool.inputs import models

    assert models.ColumnTransformer is ColumnTransformer


def test_logistic_regression_check_without_linear_model_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from sklearn.linear_model import LogisticRegression

    from mptool.loo.linear import logistic_regression

    assert logistic_regression() is LogisticRegression
    monkeypatch.delitem(sys.modules, "sklearn.linear_model")  # restored after the test; nothing imported meanwhile
    assert logistic_regression() is None  # nothing can be a LogisticRegression then

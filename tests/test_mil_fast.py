"""The military audit's short cuts give what the long way gives (issue 28, helper mil).

- naive Bayes fitted on label codes, ``classes_`` set back: every fitted attribute equal;
- kept factorisations (mptool.inputs.memo): the same codes as pandas, refused writes, freed with the data;
- pdtp.csv with its last columns joined once per distinct combination: pandas' bytes.
"""

from __future__ import annotations

import gc

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.naive_bayes import BernoulliNB, CategoricalNB, ComplementNB, GaussianNB, MultinomialNB
from sklearn.pipeline import Pipeline

from mptool.inputs import memo
from mptool.inputs.models import fit, labels_for_fit
from mptool.loo.design import class_index
from mptool.outputs import csvtext
from mptool.outputs.formats import CSV_FLOAT_FORMAT


def _same(a: object, b: object) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.mark.parametrize("cls", [CategoricalNB, GaussianNB, MultinomialNB, BernoulliNB, ComplementNB])
def test_nb_on_label_codes_is_the_same_model(cls: type) -> None:
    rng = np.random.default_rng(0)
    y = np.array(rng.choice(["b", "a", "Z", "é", "ab", "a "], 300), dtype=object)
    X = pd.DataFrame(rng.integers(0, 4, (300, 3)), columns=["x0", "x1", "x2"])
    ours = fit(cls(), X, y)
    theirs = cls().fit(X, labels_for_fit(y))  # scikit-learn on the text labels
    assert sorted(vars(ours)) == sorted(vars(theirs))
    for name in vars(theirs):
        assert _same(getattr(ours, name), getattr(theirs, name)), name
    assert np.array_equal(ours.predict_proba(X), theirs.predict_proba(X))  # bit for bit: the same arithmetic
    assert np.array_equal(ours.predict(X), theirs.predict(X))


def test_nb_in_a_pipeline_and_other_labels_unchanged() -> None:
    X = pd.DataFrame({"a": [0, 1, 2, 1, 0, 2]})
    pipe = Pipeline([("pre", ColumnTransformer([("p", "passthrough", ["a"])])), ("clf", CategoricalNB())])
    y = np.array(["no", "yes", "yes", "no", "no", "yes"], dtype=object)
    model = fit(pipe, X, y)
    assert model.classes_.tolist() == ["no", "yes"] and model.classes_.dtype == np.dtype("<U3")
    ints = fit(CategoricalNB(), X, np.array([3, 1, 3, 1, 1, 3]))  # not text: fitted as given
    assert ints.classes_.tolist() == [1, 3]


def test_kept_codes_are_pandas_codes_and_read_only() -> None:
    col = pd.Series(["b", "a", None, "b"] * 3, dtype="str")
    first = memo.factorized(col)
    again = memo.factorized(pd.DataFrame({"c": col})[["c"]].iloc[:, 0])  # another frame of the same data
    assert again[1] is first[1]  # answered from the memo
    want = pd.factorize(col, use_na_sentinel=True)
    assert np.array_equal(first[0], want[0]) and list(first[1]) == list(want[1])
    with pytest.raises(ValueError):
        first[0][0] = 1

    labels = np.asarray(["x", "y"], dtype=object)[[0, 1, 1, 0]]
    kept = memo.remember(labels, np.array([0, 1, 1, 0]), np.asarray(["x", "y"], dtype=object))
    with pytest.raises(ValueError):  # a write would leave stale codes: refused
        kept[0] = "y"
    assert class_index(kept, np.asarray(["y", "x"], dtype=object)).tolist() == [1, 0, 0, 1]
    writable = np.asarray(["x", "y", "y", "x"], dtype=object)
    assert class_index(writable, np.asarray(["y", "x"], dtype=object)).tolist() == [1, 0, 0, 1]
    with pytest.raises(ValueError):
        class_index(writable, np.asarray(["y"], dtype=object))
    ident = id(kept)
    assert memo._MEMO[ident][0]() is kept
    # Count only this entry: the memo is per process, and other tests' entries leave whenever the
    # collector frees their data (a count before and after flickered with the tests run before it).
    del kept, labels
    gc.collect()
    assert ident not in memo._MEMO  # freed with its data


@pytest.mark.parametrize("rows", [5, 60, 200])  # a short chunk, one chunk, four chunks of 64 rows
def test_shared_tails_give_pandas_bytes(rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(csvtext, "CHUNK_ROWS", 64)
    rng = np.random.default_rng(1)
    kinds = rng.integers(0, 7, rows)
    frame = pd.DataFrame({
        "row": np.arange(rows),
        "pdtp": np.array([0.0, -0.0, 0.1, np.nan, 1.0986122886681098, 2.5, 1e-9])[kinds],
        "violation": kinds > 3,
        "fingerprint": pd.array(np.array(["ab", None, 'q"t', "a,b", "x", "y", "z"], dtype=object)[kinds], dtype="str"),
    })
    want = frame.to_csv(index=False, float_format=CSV_FLOAT_FORMAT, lineterminator="\n")
    assert csvtext.to_csv_text(frame, CSV_FLOAT_FORMAT) == want
    assert bytes(csvtext.to_csv_bytes(frame, CSV_FLOAT_FORMAT)) == want.encode()
    mostly_distinct = frame.assign(pdtp=rng.random(rows))  # nothing to share: every line joined as it is
    assert csvtext.to_csv_text(mostly_distinct, None) == mostly_distinct.to_csv(index=False, lineterminator="\n")
    no_lead = frame.drop(columns="row")  # no leading plain column
    assert csvtext.to_csv_text(no_lead, CSV_FLOAT_FORMAT) == no_lead.to_csv(
        index=False, float_format=CSV_FLOAT_FORMAT, lineterminator="\n")


def test_taken_labels_from_kept_codes() -> None:
    from mptool.api.pdtp import taken

    distinct_labels = np.asarray(["<=50K", ">50K", "a,b"], dtype=object)
    codes = np.arange(6000) % 3
    kept = memo.remember(distinct_labels[codes], codes, distinct_labels)
    idx = np.arange(5999, -1, -2)
    got = pd.Series(taken(kept, idx))
    want = pd.Series(np.asarray(kept, dtype=object)[idx])  # pandas' own text column of the same labels
    assert got.dtype == want.dtype and got.tolist() == want.tolist()

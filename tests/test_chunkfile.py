"""The data-only checkpoint format: every result type of run_tasks round-trips exactly; nothing else is held.

Exact means bit for bit: floats (NaN, -0.0, subnormals) through their hex form, arrays with
their dtype, shape and byte order, DataFrames with their column dtypes (pandas' string dtype
included), object arrays element by element with their Python types.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pandas as pd
import pytest

from mptool.runtime import chunkfile as cf

SECRET = b"s" * 40
BINDING = cf.canonical({"command": "test"})


def same(a: Any, b: Any) -> None:
    """Assert ``b`` is ``a`` rebuilt exactly (types, dtypes, bits)."""
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            same(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            same(a[k], b[k])
    elif isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
        assert a.columns.dtype == b.columns.dtype and list(a.dtypes) == list(b.dtypes)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        if a.dtype.kind == "O":
            for x, y in zip(a.ravel(), b.ravel(), strict=True):
                same(x, y)
        else:
            assert a.tobytes() == b.tobytes()
    elif isinstance(a, float):
        assert a.hex() == b.hex() if a == a else b != b
    elif isinstance(a, np.generic):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    else:
        assert a == b


def roundtrip(value: Any) -> Any:
    data = cf.pack(value, {"format": 2, "key": {"command": "test"}}, SECRET, BINDING)
    _, got = cf.read(io.BytesIO(data), len(data), SECRET, BINDING)
    return got


def test_every_result_type_of_run_tasks_roundtrips_exactly() -> None:
    rng = np.random.default_rng(0)
    text_frame = pd.DataFrame({"color": pd.Series(["red", "", "blue"]).astype(str), "x1": [1.5, np.nan, -0.0]})
    object_frame = pd.DataFrame({"c": np.array(["a", "b", "c"], dtype=object)}).astype(object)
    values = [
        rng.random((4, 3)),  # loo_chunk: p_loo rows
        (rng.random((2, 5)), rng.random(2)),  # _warm_chunk: (p_loo, shift)
        [(rng.random((2, 3, 2)), np.array([0.5, 0.75]), np.array([0.25, 0.5]))],  # target_chunk
        (rng.random((2, 6)) < 0.5, rng.random((2, 6, 3))),  # pool_chunk: (members, preds)
        [(text_frame, np.array(["yes", "no", "yes"], dtype=object), np.array([True, False, True]), rng.random((3, 2)))],
        [(object_frame, np.array([1, 0, 1]), np.zeros(3, dtype=bool), np.ones((3, 2)))],  # synthetic, pandas 2 dtypes
        np.asfortranarray(rng.random((3, 4))),
        np.arange(5, dtype=">i4"),
        np.array(["ab", "c"]),
        np.array([1, "a", None, 2.5, np.float32(3)], dtype=object),
        np.empty((0, 3)),
        np.array([], dtype=object),
        {"ids": np.arange(3), "arrays": {"p_loo": rng.random((3, 2))}},
        [0, 1, -(10**30), True, None, "text", 0.1, float("nan"), float("inf"), -0.0, 5e-324],
        np.float64(0.1),
        np.int64(-3),
        np.bool_(True),
        np.str_("x"),
    ]
    for value in values:
        same(value, roundtrip(value))


@pytest.mark.parametrize(
    "value",
    [
        {1, 2},
        object(),
        pd.Series([1.0]),
        np.array(["2020-01-01"], dtype="datetime64[D]"),
        np.ma.array([1.0]),
        pd.DataFrame({"a": [1.0]}, index=[5]),
        pd.DataFrame({"a": pd.Categorical(["x"])}),
        np.array([{1, 2}], dtype=object),
        lambda: None,
    ],
    ids=["set", "object", "series", "datetime", "masked", "frame-index", "categorical", "object-set", "function"],
)
def test_types_outside_the_format_are_refused_when_saving(value: Any) -> None:
    with pytest.raises(TypeError, match="a checkpoint"):
        cf.pack(value, {}, SECRET, BINDING)


def test_reading_checks_key_then_hmac() -> None:
    data = cf.pack([1.0], {"key": {"command": "test"}}, SECRET, BINDING)
    with pytest.raises(cf.ChunkError) as err:
        cf.read(io.BytesIO(data), len(data), SECRET, cf.canonical({"command": "other"}))
    assert err.value.kind == "foreign"
    with pytest.raises(cf.ChunkError) as err:
        cf.read(io.BytesIO(data), len(data), b"another key" * 4, BINDING)
    assert err.value.kind == "unverified"
    with pytest.raises(cf.ChunkError) as err:
        cf.read(io.BytesIO(data), cf.MAX_CHUNK_BYTES + 1, SECRET, BINDING)
    assert err.value.kind == "malformed"


@pytest.mark.parametrize(
    "node",
    [
        {"t": "pickle", "v": "gASV"},
        {"t": "list", "v": {"not": "a list"}},
        {"t": "ndarray", "ref": 7},
        {"t": "scalar", "ref": -1},
        {"t": "float", "v": 1.5},
        [1, 2],
        1.5,
        {"t": "frame", "range": [0, 1, 0], "names": {"t": "list", "v": []}, "names_dtype": "|O", "columns": []},
        {
            "t": "frame",
            "range": [0, 1, 1],
            "names": {"t": "list", "v": ["a"]},
            "names_dtype": "|O",
            "columns": [{"dtype": "category", "v": {"t": "objarray", "shape": [1], "v": ["x"]}}],
        },
        {"t": "objarray", "shape": [3], "v": [1]},
        {"t": "dict", "v": [[{"t": "list", "v": []}, 1]]},
    ],
)
def test_malformed_structures_are_refused(node: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Signed with the right key (as only a key holder could) and still refused: no node names code."""
    monkeypatch.setattr(cf, "encode", lambda value, arrays, depth=0: node)
    data = cf.pack(None, {"key": {"command": "test"}}, SECRET, BINDING)
    with pytest.raises(cf.ChunkError) as err:
        cf.read(io.BytesIO(data), len(data), SECRET, BINDING)
    assert err.value.kind == "malformed"

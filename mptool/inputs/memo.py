"""Codes of data that cannot change, computed once per run (issue 28).

A naive Bayes audit of a big T factorises the same columns many times: A(T)'s fit, its
predictions, the exact engine, the DTP bounds, the per-record table and the fingerprints each
encode T's text columns and labels again (the 1.41 M military records: about 2 CPU s of
repeated hashing). Here a column's ``pd.factorize`` is kept while the column lives, for data
that cannot change in place:

- a pyarrow-backed text column (pandas' ``str`` dtype): its ``ChunkedArray`` is immutable,
  and pandas shares it between every frame and view of the column;
- a read-only numpy array that owns its data (the labels :func:`remember` marks read-only
  when they are read: writing into them raises instead of leaving stale codes).

An entry leaves when its data is freed (a weak reference's callback). The codes given out are
read-only, in the narrowest integer type that holds them; callers copy before changing them.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
import pandas as pd

#: id of the data -> (a weak reference to it, its codes, its distinct values, its codes in categories by the
#: categories); codes as pd.factorize gives them.
_MEMO: dict[int, tuple[Any, np.ndarray, Any, dict[tuple, np.ndarray]]] = {}


def _data(values: Any) -> Any:
    """The immutable object behind ``values`` (a pyarrow ChunkedArray, a read-only numpy array), or None."""
    if isinstance(values, np.ndarray):
        if values.flags.writeable or not values.flags.owndata:
            return None
        return values
    array = getattr(values, "array", values)  # a Series' array; an array itself
    data = getattr(array, "_pa_array", None)
    if data is None or not isinstance(getattr(values, "dtype", None), pd.StringDtype):
        return None
    return data


def factorized(values: Any) -> tuple[np.ndarray, Any]:
    """``pd.factorize(values, use_na_sentinel=True)``, computed once while immutable ``values`` live."""
    data = _data(values)
    if data is not None and (hit := _MEMO.get(id(data))) is not None and hit[0]() is data:
        return hit[1], hit[2]
    codes, distinct = pd.factorize(values, use_na_sentinel=True)
    if data is not None:
        codes = _keep(data, codes, distinct)
    return codes, distinct


def distinct(values: Any) -> Any:
    """``pd.unique(values)``: for a kept text column without missing cells, its factorisation's distinct values
    (the same values, first seen first), so reading the data and encoding T hash the column once."""
    if _data(values) is not None:
        codes, uniques = factorized(values)
        if not (codes < 0).any():
            return uniques
    return pd.unique(values)


def category_codes(values: Any, categories: tuple) -> tuple[np.ndarray, np.ndarray]:
    """(``pd.Categorical(values, categories).codes``, ``values.isna()``) of a text column, each distinct value
    looked up once; kept per ``categories`` while immutable ``values`` live (A(T)'s encoder meets T again and
    again: its fit, its predictions, the engines)."""
    codes, distinct = factorized(values)
    data = _data(values)
    entry = _MEMO.get(id(data)) if data is not None else None
    key = tuple((type(v), v) for v in categories)
    if entry is not None and entry[0]() is data and (kept := entry[3].get(key)) is not None:
        return kept.astype(np.int64), codes < 0
    # pandas' own lookup (what Categorical(values, dtype) does, without its deprecated path for values outside
    # the categories: pandas 4 raises there, we want -1)
    lookup = _dtype(categories, key).categories.get_indexer_for(distinct).astype(np.int64)
    out = np.where(codes >= 0, lookup[np.maximum(codes, 0)], -1)
    if entry is not None and entry[0]() is data:
        entry[3][key] = out.astype(np.min_scalar_type(-len(categories) - 1))
    return out, codes < 0


def _dtype(categories: tuple, key: tuple) -> pd.CategoricalDtype:
    """``CategoricalDtype(categories)``, built (and its lookup table hashed) once per domain: what
    ``pd.Categorical(values, categories=categories)`` builds at every call."""
    if (dtype := _DTYPES.get(key)) is None:
        if len(_DTYPES) >= 256:
            _DTYPES.clear()
        dtype = _DTYPES[key] = pd.CategoricalDtype(list(categories), ordered=False)
    return dtype


_DTYPES: dict[tuple, pd.CategoricalDtype] = {}


def remember(values: np.ndarray, codes: np.ndarray, distinct: Any) -> np.ndarray:
    """``values`` made read-only, with ``pd.factorize(values)``'s ``codes`` and ``distinct`` kept for it.

    The caller vouches that ``values`` is ``distinct[codes]`` (each value its distinct one).
    """
    values.flags.writeable = False
    if values.flags.owndata:
        _keep(values, np.asarray(codes), distinct)
    return values


def _keep(data: Any, codes: np.ndarray, distinct: Any) -> np.ndarray:
    """Keep ``codes`` (in the narrowest integer type that holds them: 1.4 MB, not 11 MB, per million) for ``data``."""
    ident = id(data)
    codes = codes.astype(np.min_scalar_type(-len(distinct) - 1), copy=False)
    codes.flags.writeable = False
    _MEMO[ident] = (weakref.ref(data, lambda _ref: _MEMO.pop(ident, None)), codes, distinct, {})
    return codes

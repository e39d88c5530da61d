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

#: id of the data -> (a weak reference to it, its codes, its distinct values); codes as pd.factorize gives them.
_MEMO: dict[int, tuple[Any, np.ndarray, Any]] = {}


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
    _MEMO[ident] = (weakref.ref(data, lambda _ref: _MEMO.pop(ident, None)), codes, distinct)
    return codes

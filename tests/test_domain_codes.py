"""DomainEncoder's category codes equal pandas' own ``pd.Categorical(col, categories).codes``, column by column.

The encoder looks equal-domain numeric columns up together and caches each domain's Index (issue 25:
thousands of 0/1 columns); the reference here is the plain per-column ``pd.Categorical`` lookup.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from mptool.inputs.models import DomainEncoder
from mptool.runtime import ui
from mptool.runtime.errors import InputError


def reference_codes(frame: pd.DataFrame, domains: tuple) -> np.ndarray:
    """One column at a time: ``pd.Categorical`` codes (missing: the code after the last), or bin numbers."""
    out = np.empty((len(frame), len(domains)), dtype=np.int64)
    for j, (kind, values, _) in enumerate(domains):
        col = frame.iloc[:, j]
        if kind == "edges":
            x = col.to_numpy(dtype=float)
            codes = np.searchsorted(np.asarray(values, dtype=float), x, side="right")
            out[:, j] = np.where(np.isnan(x), len(values) + 1, codes)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # pandas warns of values outside the categories
                codes = pd.Categorical(col, categories=list(values)).codes.astype(np.int64)
            out[:, j] = np.where(col.isna().to_numpy(), len(values), codes)
    return out


def mixed() -> tuple[pd.DataFrame, tuple]:
    rng = np.random.default_rng(3)
    n = 40
    frame = pd.DataFrame({
        "b1": rng.integers(0, 2, n), "b2": rng.integers(0, 2, n), "b3": rng.integers(0, 2, n),
        "f": rng.integers(0, 3, n).astype(float),
        "fn": np.where(rng.random(n) < 0.2, np.nan, rng.integers(0, 3, n).astype(float)),
        "s": rng.choice(["a", "b", "c"], n), "sn": pd.Series(rng.choice(["a", "b", None], n), dtype=object),
        "e": rng.normal(size=n), "bo": rng.random(n) < 0.5, "u": rng.integers(0, 2, n).astype(np.uint8),
        "i": pd.array(rng.integers(0, 2, n), dtype="Int64"),
    })
    domains = (
        ("categories", (0, 1), False), ("categories", (1, 0), False), ("categories", (0, 1), False),
        ("categories", (0.0, 1.0, 2.0), False), ("categories", (0.0, 1.0, 2.0), True),
        ("categories", ("a", "b", "c"), False), ("categories", ("a", "b"), True), ("edges", (-1.0, 0.0, 1.0), False),
        ("categories", (False, True), False), ("categories", (0, 1), False), ("categories", (0, 1), False),
    )
    return frame, domains


def test_codes_equal_pandas_categorical_per_column() -> None:
    frame, domains = mixed()
    got = DomainEncoder(domains).fit(frame).transform(frame)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, reference_codes(frame, domains))  # integer codes: exact
    wide = pd.DataFrame(np.random.default_rng(0).integers(0, 2, size=(30, 300)))
    wide[7] = wide[7].astype(float)  # another dtype: looked up apart from the int columns, same codes
    dw = tuple(("categories", (0, 1) if j % 3 else (1, 0), False) for j in range(300))
    np.testing.assert_array_equal(DomainEncoder(dw).transform(wide), reference_codes(wide, dw))


@pytest.mark.parametrize("j, domain", [
    (0, ("categories", (0,), False)),
    (5, ("categories", ("a",), False)),
    (3, ("categories", (0.0,), False)),
    (8, ("categories", (True,), False)),
])
def test_a_value_outside_the_domain_names_its_column_and_first_value(j: int, domain: tuple) -> None:
    frame, domains = mixed()
    domains = tuple(domain if k == j else d for k, d in enumerate(domains))
    col = frame.iloc[:, j]
    first = col[~col.isin(domain[1])].iloc[0]
    with pytest.raises(InputError) as info:
        DomainEncoder(domains).fit(frame).transform(frame)
    assert str(info.value) == (f"column '{frame.columns[j]}': value {ui.quoted(first)} is not in the column's domain "
                               "(the values of the input CSV)")

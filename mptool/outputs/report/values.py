"""Numbers read from result files and values formatted for display: the helpers every report module
shares (:mod:`loader`, :mod:`context`, :mod:`mitigation`, :mod:`attribute`), kept here so that none of
them imports another for them."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd


def number(value: Any) -> float | None:
    """A finite float, or None for anything else (None, NaN, strings, bools, a whole number beyond a float's
    range: an edited result file)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return out if math.isfinite(out) else None


def fmt(value: Any, digits: int | None = 4) -> str:
    """A value for display: floats with ``digits`` decimals (``None``: as short as exact enough,
    integral floats as integers), integers as integers, booleans as yes/no, missing as '—'."""
    if value is None or (not isinstance(value, str | dict | list) and bool(pd.isna(value))):
        return "—"
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        x = float(value)
        if not np.isfinite(x):
            return "—"
        if digits is None:
            return str(int(x)) if x.is_integer() and abs(x) < 1e15 else f"{x:.6g}"
        return f"{x:.{digits}f}"
    return str(value)

"""Per-record CSV text written column by column: the exact text of pandas' ``DataFrame.to_csv``, faster.

``pandas.DataFrame.to_csv(index=False, float_format=F, lineterminator="\\n")`` formats every
float with a Python call and a missing-value test per cell and writes every row through the
``csv`` module (7.3 CPU s for the 1.41 M-row military ``pdtp.csv``, issue 28). Here each
column becomes text at once, with the rules pandas applies
(``pandas.core.indexes.base.get_values_for_csv``, then ``csv.writer`` with ``QUOTE_MINIMAL``):

- floats: ``F % v`` (``str(v)`` without ``F``, numpy's shortest round-trip text), a missing
  value (NaN) empty; each distinct bit pattern is formatted once (so ``-0.0`` stays ``-0``);
- integers and booleans: numpy's ``astype(str)`` (``12``, ``True``), as pandas does;
- text (pandas' ``str`` dtype) and object columns: the value's ``str``, a missing value
  (``None``, NaN, ``pd.NA``) empty;
- a text that holds the delimiter, a quote or a line break is quoted by the ``csv`` module
  itself, so quoting follows the running Python's rules exactly.

Anything else (dates, categoricals, nullable integer columns, a single column, no rows, column
names that are not text) goes to pandas unchanged. tests/test_startup_output.py compares the
two renderers byte for byte.
"""

from __future__ import annotations

import csv
import io
import re
from typing import Any

import numpy as np
import pandas as pd

#: Rows rendered per piece: bounds the transient per-cell strings (a few hundred MB at 1.4 M rows).
CHUNK_ROWS = 65_536
#: Characters after which a value may be quoted (a superset of the csv module's rule; those go to it).
_SPECIAL = re.compile(r'[,"\r\n]')


def to_csv_text(frame: pd.DataFrame, float_format: str | None = None) -> str:
    """``frame.to_csv(index=False, float_format=float_format, lineterminator="\\n")``, column by column."""
    columns = _column_kinds(frame)
    if columns is None:
        return frame.to_csv(index=False, float_format=float_format, lineterminator="\n")
    return str(_render(frame, columns, float_format), "utf-8")


def to_csv_bytes(frame: pd.DataFrame, float_format: str | None = None) -> bytearray:
    """:func:`to_csv_text` encoded as UTF-8, built in one buffer: no text copy of a file of a few hundred MB."""
    columns = _column_kinds(frame)
    if columns is None:
        return bytearray(frame.to_csv(index=False, float_format=float_format, lineterminator="\n").encode("utf-8"))
    return _render(frame, columns, float_format)


def _render(frame: pd.DataFrame, columns: list[tuple[str, Any]], float_format: str | None) -> bytearray:
    """The UTF-8 bytes of the CSV text of ``frame`` (header line, then each chunk of rows joined by Arrow)."""
    import pyarrow.compute as pc

    out = bytearray(_csv_line(list(frame.columns)).encode("utf-8"))
    for start in range(0, len(frame), CHUNK_ROWS):
        cells = [_texts(kind, values[start:start + CHUNK_ROWS], float_format) for kind, values in columns]
        lines = pc.binary_join_element_wise(*cells, ",")
        lines = pc.binary_join_element_wise(lines, "", "\n")  # each line and its "\n" (no null: every cell is text)
        out += _arrow_bytes(lines)
    return out


def _arrow_bytes(lines: Any) -> memoryview:
    """The bytes of an Arrow string array laid end to end (its data buffer between the first and last offset)."""
    import pyarrow as pa

    offsets_buf, data = lines.buffers()[1:3]
    width = 8 if pa.types.is_large_string(lines.type) else 4
    offsets = np.frombuffer(offsets_buf, dtype=np.int64 if width == 8 else np.int32, count=len(lines) + 1,
                            offset=lines.offset * width)
    return memoryview(data)[int(offsets[0]):int(offsets[-1])]


def _column_kinds(frame: pd.DataFrame) -> list[tuple[str, Any]] | None:
    """Each column as (kind, values) for :func:`_texts`, or None when pandas must render the frame."""
    if frame.shape[1] < 2 or len(frame) == 0 or isinstance(frame.columns, pd.MultiIndex):
        return None
    if not all(isinstance(c, str) for c in frame.columns):
        return None
    out: list[tuple[str, Any]] = []
    for j in range(frame.shape[1]):
        col = frame.iloc[:, j]
        dtype = col.dtype
        if isinstance(dtype, np.dtype) and (dtype.kind in "iub" or (dtype.kind == "f" and dtype.itemsize in (4, 8))):
            out.append(("float" if dtype.kind == "f" else "plain", col.to_numpy()))
        elif isinstance(dtype, pd.StringDtype):
            out.append(("text", col.array))
        elif isinstance(dtype, np.dtype) and dtype.kind == "O":
            values = col.to_numpy()
            kind = pd.api.types.infer_dtype(values, skipna=True)  # only str, or only bool: one text per value
            out.append(("text" if kind in ("string", "boolean") else "object", values))
        else:
            return None
    return out


def _texts(kind: str, values: np.ndarray, float_format: str | None) -> Any:
    """The CSV field of every value of one column chunk as an Arrow string array (quoted where csv would)."""
    import pyarrow as pa

    if kind == "plain" and values.dtype == np.bool_:  # numpy's text of a boolean, as pandas writes it
        return pa.array(["False", "True"], type=pa.string()).take(pa.array(values.view(np.uint8)))
    if kind == "plain":  # integers: Arrow's decimal text is numpy's (and pandas'); nothing missing or quoted
        import pyarrow.compute as pc

        return pc.cast(pa.array(values), pa.string())
    if kind == "float":
        distinct, codes = _float_texts(values, float_format)
    elif kind == "text":  # every value a str (or every one a bool) or missing: one text per distinct value
        codes, uniques = pd.factorize(values, use_na_sentinel=True)
        distinct = [*_quote_all([str(v) for v in np.asarray(uniques, dtype=object).tolist()]), ""]
        codes[codes < 0] = len(distinct) - 1
    else:  # mixed objects: str() of each (the csv module's own conversion), missing ones empty
        missing = pd.isna(values)  # pandas' own test: None, NaN, NaT, pd.NA, Decimal NaN
        if missing.all():  # e.g. the fingerprint column without a key
            return pa.nulls(len(values), pa.string()).fill_null("")
        texts = ["" if m else str(v) for v, m in zip(values.tolist(), missing.tolist(), strict=True)]
        return pa.array(_quote_all(texts), type=pa.string())
    return pa.array(distinct, type=pa.string()).take(pa.array(codes))


def _float_texts(values: np.ndarray, float_format: str | None) -> tuple[list[str], np.ndarray]:
    """Float text as pandas writes it (``float_format % v``, else numpy's ``str``; NaN empty), as the
    distinct texts and each value's index into them: one call per distinct bit pattern, so -0.0 stays -0."""
    bits = values.view(np.int64 if values.dtype.itemsize == 8 else np.int32)
    distinct_bits, codes = np.unique(bits, return_inverse=True)
    distinct = distinct_bits.view(values.dtype)
    if float_format is None:
        texts = distinct.astype(str).tolist()
    else:
        texts = [float_format % v for v in distinct.tolist()]
    for i in np.flatnonzero(np.isnan(distinct)).tolist():
        texts[i] = ""
    return texts, codes.reshape(-1)


def _csv_line(fields: list[Any]) -> str:
    """One line written by the csv module as pandas configures it (QUOTE_MINIMAL, ``"``, ``\\n``)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n", delimiter=",", quotechar='"', quoting=csv.QUOTE_MINIMAL,
               doublequote=True).writerow(fields)
    return buf.getvalue()


def _quote_all(texts: list[str]) -> list[str]:
    """``texts`` with each one that holds a delimiter, quote or line break as the csv module quotes it."""
    if _SPECIAL.search("\x00".join(texts)) is None:
        return texts
    return [_quoted(t) if _SPECIAL.search(t) else t for t in texts]


def _quoted(text: str) -> str:
    """``text`` as the csv module writes it inside a row of several fields."""
    return _csv_line([text, ""])[:-2]

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
        cells = [_coded(kind, values[start:start + CHUNK_ROWS], float_format) for kind, values in columns]
        lines = _shared_tail(cells)
        if lines is None:
            lines = pc.binary_join_element_wise(*[_text_array(*c) if isinstance(c, tuple) else c for c in cells], ",")
            lines = pc.binary_join_element_wise(lines, "", "\n")  # each line and its "\n" (no null: all is text)
        out += _arrow_bytes(lines)
    return out


def _shared_tail(cells: list[Any]) -> Any:
    """The lines of a chunk (each with its ``\n``) when its last columns take few distinct combinations, else None.

    A column given as (distinct texts, codes) is text only where the lines need it: when the
    columns after the leading plain ones (e.g. ``row``) take few distinct combinations (the
    1.41 M military records: 1,646), each combination's text ``a,b,...\n`` is joined once and
    taken by index -- the same bytes, a fraction of the per-cell joins.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    lead = 0
    while lead < len(cells) and not isinstance(cells[lead], tuple):
        lead += 1
    tail = cells[lead:]
    if len(tail) >= 2 and all(isinstance(c, tuple) for c in tail):
        n = len(tail[0][1])
        inverse = np.zeros(n, dtype=np.int64)
        for texts, codes in tail:  # the combination's index, renumbered by a hash at each column (no overflow)
            inverse = np.asarray(pd.factorize(inverse * len(texts) + codes)[0], dtype=np.int64)
            if inverse.size and int(inverse.max()) >= n // 4:  # mostly distinct: nothing to share
                break
        else:
            first = np.full(int(inverse.max()) + 1 if n else 0, -1, dtype=np.int64)
            first[inverse[::-1]] = np.arange(n - 1, -1, -1)
            joined = pc.binary_join_element_wise(*[_text_array(t, c[first]) for t, c in tail], ",")
            joined = pc.binary_join_element_wise(joined, "", "\n")
            return pc.binary_join_element_wise(*cells[:lead], joined.take(pa.array(inverse)), ",")
    return None


def _text_array(texts: list[str], codes: np.ndarray) -> Any:
    """The Arrow text array of ``texts[codes]``."""
    import pyarrow as pa

    return pa.array(texts, type=pa.string()).take(pa.array(codes))


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
    cells = _coded(kind, values, float_format)
    return _text_array(*cells) if isinstance(cells, tuple) else cells


def _coded(kind: str, values: np.ndarray, float_format: str | None) -> Any:
    """:func:`_texts` as (distinct texts, each value's index into them) where a column has such codes, else the
    Arrow string array itself."""
    import pyarrow as pa

    if kind == "plain" and values.dtype == np.bool_:  # numpy's text of a boolean, as pandas writes it
        return ["False", "True"], values.view(np.uint8)
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
    return distinct, codes


def _float_texts(values: np.ndarray, float_format: str | None) -> tuple[list[str], np.ndarray]:
    """Float text as pandas writes it (``float_format % v``, else numpy's ``str``; NaN empty), as the
    distinct texts and each value's index into them: one call per distinct bit pattern, so -0.0 stays -0."""
    bits = values.view(np.int64 if values.dtype.itemsize == 8 else np.int32)
    codes, distinct_bits = pd.factorize(bits)  # a hash, not a sort: the same texts in first-seen order
    distinct = np.asarray(distinct_bits, dtype=bits.dtype).view(values.dtype)
    if float_format is None:
        texts = distinct.astype(str).tolist()
    else:
        texts = [float_format % v for v in distinct.tolist()]
    for i in np.flatnonzero(np.isnan(distinct)).tolist():
        texts[i] = ""
    return texts, np.asarray(codes).reshape(-1)


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

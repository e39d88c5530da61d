"""Every result file mptool writes, behind one interface: a named format renders a payload to text.

A command says what it writes as a list of :class:`OutputFile` (file name, format, payload) and
hands it to :func:`write_files`, which renders every file first and only then writes each one
atomically (:func:`mptool.outputs.results.write_atomic`, looked up at each call). A payload
that fails to render (a value JSON cannot hold, a broken frame) therefore replaces none of the
run's files. Each file on its own is all-or-nothing (written under a temporary name, renamed);
the free space for all of them is checked first (a full disk: exit 2 before any is replaced), and
a write that still fails part-way through the list (a disk quota) leaves the files before it replaced.

The formats (:data:`FORMATS`):

- ``csv``: a per-record DataFrame, floats in :data:`CSV_FLOAT_FORMAT` (12 significant digits,
  stable across platforms), the text of pandas' ``to_csv`` written column by column
  (:mod:`mptool.outputs.csvtext`);
- ``csv-exact``: a DataFrame with floats in Python's shortest round-trip form (attempts.csv, so
  every attack metric recomputes exactly from it);
- ``json``: any mapping of plain values, NumPy scalars and arrays, paths; NaN and inf become
  null; keys keep their order, so the same run gives the same bytes;
- ``junit``: a :class:`JunitSuite` (JUnit XML for CI test reporters, :mod:`mptool.outputs.junit`);
- ``text``: a string already rendered (the HTML and Markdown report, whose templates live in
  :mod:`mptool.outputs.report`).

Adding a format (Parquet, say) is one renderer and one entry in :data:`FORMATS`.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mptool.outputs import results
from mptool.outputs.csvtext import to_csv_bytes, to_csv_text
from mptool.outputs.junit import GateCase, junit_xml

#: Float format of per-record CSV files (12 significant digits: stable across platforms).
CSV_FLOAT_FORMAT = "%.12g"


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON values: NumPy scalars and arrays unpacked, paths, decimals and dates as text,
    NaN/inf/NaT/NA as None."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()]
    if value is pd.NaT or value is pd.NA:
        return None
    if isinstance(value, np.datetime64 | np.timedelta64):
        return None if np.isnat(value) else str(value)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path | decimal.Decimal | dt.timedelta):
        return str(value)
    if isinstance(value, dt.date | dt.time):  # a Parquet date or timestamp id or label (pd.Timestamp too)
        return value.isoformat()
    return value


def to_json(obj: Any) -> str:
    """Deterministic JSON text (NaN/inf become null)."""
    return json.dumps(jsonable(obj), indent=2, sort_keys=False, allow_nan=False) + "\n"


def to_csv(frame: pd.DataFrame) -> str:
    """Per-record CSV text in mptool's float format (pandas' ``to_csv`` text, written column by column)."""
    return to_csv_text(frame, CSV_FLOAT_FORMAT)


def to_csv_utf8(frame: pd.DataFrame) -> bytearray:
    """:func:`to_csv` as its UTF-8 bytes, rendered straight into one buffer (the per-record files of a big T)."""
    return to_csv_bytes(frame, CSV_FLOAT_FORMAT)


def to_csv_exact(frame: pd.DataFrame) -> str:
    """CSV text with floats in Python's shortest round-trip form (nothing lost in the file)."""
    return to_csv_text(frame)


#: Per-record columns written and printed only with ``--show-values`` (docs/outputs.md): ``label`` is a
#: training value itself; ``worst_class`` stands in for it -- with the record's ``p_full`` it gives the
#: model's prediction at x_t (in a binary problem the class whose probability moved most is the less
#: likely one), so it names the label as often as the model is right on T (80-86% on Adult).
VALUE_COLUMNS = ("label", "worst_class")

#: attack.csv's ``pdtp_decision`` values (docs/randomness.md section 8); "" where PDTP was not measured.
PDTP_DECISIONS = ("violation", "below", "undecided")


def published(frame: pd.DataFrame, show_values: bool = False) -> pd.DataFrame:
    """``frame`` as it may be written or printed: without :data:`VALUE_COLUMNS` unless ``show_values``.

    With ``show_values`` the very same frame (so the files are byte-identical to those written
    before the columns became opt-in).
    """
    if show_values:
        return frame
    return frame.drop(columns=[c for c in VALUE_COLUMNS if c in frame.columns])


def records_for_json(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows of a per-record frame as JSON-ready dicts."""
    return [jsonable(r) for r in frame.to_dict(orient="records")]


@dataclass(frozen=True)
class JunitSuite:
    """The payload of a ``junit`` file: one test suite of gate cases."""

    name: str
    cases: Sequence[GateCase]
    seconds: float = 0.0
    stdout: str = ""


def _junit(suite: JunitSuite) -> str:
    return junit_xml(suite.name, suite.cases, suite.seconds, suite.stdout)


def _text(text: str | bytes | bytearray) -> str | bytes | bytearray:
    if not isinstance(text, str | bytes | bytearray):
        raise TypeError(f"a text output needs str or bytes, got {type(text).__name__}")
    return text


#: Format name -> renderer (payload -> file content).
FORMATS: dict[str, Callable[[Any], str | bytes]] = {
    "csv": to_csv,
    "csv-exact": to_csv_exact,
    "json": to_json,
    "junit": _junit,
    "text": _text,
}


@dataclass(frozen=True)
class OutputFile:
    """One result file: its name inside the output folder, its format and what it holds."""

    name: str
    format: str
    payload: Any


def render(file: OutputFile) -> str | bytes | bytearray:
    """The content of ``file`` in its format."""
    try:
        renderer = FORMATS[file.format]
    except KeyError:
        raise ValueError(f"unknown output format {file.format!r} (known: {', '.join(FORMATS)})") from None
    return renderer(file.payload)


def write_files(out_dir: Path, files: Sequence[OutputFile]) -> list[Path]:
    """Render every file of ``files``, then write each into ``out_dir`` atomically; the paths written.

    Rendering all before writing any means an error in one payload replaces none of the files;
    checking the free space of each folder first means a full disk replaces none either.
    """
    rendered = [(out_dir / f.name, render(f)) for f in files]
    for folder in dict.fromkeys(path.parent for path, _ in rendered):  # a full disk replaces none of them
        mine = [(path, content) for path, content in rendered if path.parent == folder]
        results.check_free_space(folder, [len(c.encode("utf-8")) if isinstance(c, str) else len(c) for _, c in mine],
                                 ", ".join(path.name for path, _ in mine))
    for path, content in rendered:
        results.write_atomic(path, content)
    return [path for path, _ in rendered]

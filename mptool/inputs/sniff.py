"""Guessing how a data file is read, its label and a starter spec: what ``mptool init`` prints.

Everything guessed here is written into the spec as an explicit value with a comment, so
the user reviews it and the run reads the file exactly as the spec says (nothing is sniffed
at run time). The guesses look at the first ``SNIFF_BYTES`` of the file.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mptool.inputs.data import (
    LIKELY_MARKERS,
    MAX_CATEGORIES,
    MAX_LABEL_VALUES,
    check_path,
    is_parquet,
    looks_numeric,
    read_csv,
    stray_text,
)
from mptool.inputs.spec import ReadSpec
from mptool.runtime import ui
from mptool.runtime.errors import InputError

#: Bytes of the file the read options are guessed from.
SNIFF_BYTES = 1 << 20
#: Separators tried, in order of preference when two fit equally well.
SEPARATORS = (",", ";", "\t", "|")
#: Column names taken as the label when ``--label`` is not given (case-insensitive), before "the last column".
LABEL_NAMES = ("label", "class", "target", "income", "y", "outcome")
#: Markers always taken as missing when a cell holds them (the UCI convention), beside the empty cell.
ALWAYS_MISSING = ("?",)
#: A numeric column with at most this many distinct values is used as categories by categorical_nb.
FEW_VALUES = 20
#: Quantile edges given to other numeric columns under categorical_nb.
QUANTILES = (0.2, 0.4, 0.6, 0.8)
#: Column names (lower case, letters only) taken as a sample weight; any name holding "wgt" is one too.
WEIGHT_NAMES = ("weight", "weights", "wt", "sampleweight", "instanceweight", "finalweight", "surveyweight",
                "personweight", "designweight", "weighting")
#: ``missing: drop`` leaving out more than this share of the rows gets a note with the ``impute`` alternative.
MISSING_SHARE_NOTE = 0.10


@dataclass
class Sniffed:
    """The read options, missing markers and notes guessed for one file."""

    read: dict[str, Any]
    missing_values: list[str]
    notes: list[str] = field(default_factory=list)


def _head_text(path: Path) -> tuple[bytes, bool]:
    """The first ``SNIFF_BYTES`` bytes (decompressed for .gz) and whether that is the whole file."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            blob = fh.read(SNIFF_BYTES + 1)
    except (OSError, EOFError) as exc:
        raise InputError(f"{path}: cannot read the file ({exc.__class__.__name__})") from None
    return blob[:SNIFF_BYTES], len(blob) <= SNIFF_BYTES


def _decode(blob: bytes, whole: bool) -> tuple[str, str]:
    """The text and its encoding: UTF-8 (utf-8-sig after a byte-order mark) when it decodes, else latin-1."""
    if blob.startswith(b"\xef\xbb\xbf"):
        text, _ = _decode(blob[3:], whole)
        return text, "utf-8-sig"
    for encoding in ("utf-8", "latin-1"):
        try:
            text = blob.decode(encoding) if whole else blob.decode(encoding, errors="strict")
            return text, encoding
        except UnicodeDecodeError as exc:
            if encoding == "utf-8" and not whole and exc.start >= len(blob) - 3:
                return blob[: exc.start].decode("utf-8"), "utf-8"  # a character cut by the sample's end
    raise AssertionError("latin-1 decodes any bytes")  # pragma: no cover


def _rows(lines: list[str], sep: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO("\n".join(lines)), delimiter=sep))


def _separator(lines: list[str]) -> str:
    """The separator giving the most columns with the same count on every sampled line."""
    best, best_cols = ",", 1
    for sep in SEPARATORS:
        counts = {len(r) for r in _rows(lines, sep) if r}
        if len(counts) == 1 and (cols := counts.pop()) > best_cols:
            best, best_cols = sep, cols
    return best


_INTEGER = re.compile(r"^[-+]?[0-9]+$")


def _stands_out(cell: str, column: list[str]) -> bool:
    """Whether the whole number ``cell`` is unlike the rest of its column: text or decimals below it, or out of range.

    ``column`` holds the column's other non-empty cells (missing markers left out).
    """
    if not column:
        return False
    if not all(_INTEGER.match(c) for c in column):
        return True  # a whole number over text or decimals: a name (e.g. a year) over measurements
    values = [int(c) for c in column]
    return not min(values) <= int(cell) <= max(values)


def header_row(first: list[str], body: list[list[str]]) -> tuple[bool, str | None]:
    """Whether the first line holds column names, and a note when some of them are numbers.

    Names without a number are a header. A line of numbers is one too when it is the column
    numbers ``0, 1, ..., N-1`` (N >= 3), or when its cells are distinct, every number among
    them is whole, and each stands out from the rest of its column (:func:`_stands_out`:
    ``2019,2020,2021,label`` over measurements). Otherwise it is data.
    """
    cells = [c.strip() for c in first]
    numbers = [j for j, c in enumerate(cells) if looks_numeric(c)]
    if not numbers:
        return True, None
    if not body or len(set(cells)) != len(cells) or not all(_INTEGER.match(cells[j]) for j in numbers):
        return False, None
    if len(cells) >= 3 and cells == [str(i) for i in range(len(cells))]:
        return True, ("the first line is the column numbers 0, 1, ..., N-1: read as the header (the columns keep "
                      "those names); pass --header false if it is a record")
    for j in numbers:
        column = [r[j].strip() for r in body if j < len(r)]
        if not _stands_out(cells[j], [c for c in column if c and c not in LIKELY_MARKERS]):
            return False, None
    return True, (f"the first line's {len(numbers)} whole number(s) are distinct and unlike the values below them "
                  "(years or column numbers?): read as the header; pass --header false if it is a record")


def sniff_read(path: Path, header: bool | None = None) -> Sniffed:
    """Guess ``data.read`` and ``data.missing_values`` for ``path`` from its first bytes.

    ``header`` (``init --header``) says whether the first line is a header instead of guessing.
    """
    check_path(path)
    if is_parquet(path):
        notes = ["Parquet file: column names and types come from the file"]
        if header is not None:
            notes.append("--header is for CSV files; a Parquet file always names its columns")
        return Sniffed({}, [""], notes)
    blob, whole = _head_text(path)
    if not blob.strip():
        raise InputError(f"{path}: the file is empty; it needs data rows")
    text, encoding = _decode(blob, whole)
    lines = text.splitlines()
    if not whole and len(lines) > 1:
        lines = lines[:-1]  # the last line may be cut
    lines = [ln for ln in lines[:2000] if ln.strip()]
    try:
        sep = _separator(lines)
        rows = _rows(lines, sep)
    except csv.Error as exc:  # e.g. a cell longer than the csv module's field limit (128 KiB): not a table
        detail = ui.excerpt(exc, 80)
        raise InputError(f"{path}: cannot read the first {SNIFF_BYTES:,} bytes as CSV ({detail})") from None
    cells = [c for r in rows[1:] for c in r[1:]]
    skip = bool(cells) and sum(c.startswith(" ") for c in cells) > 0.5 * len(cells)
    first = [c.strip() if skip else c for c in rows[0]]
    guessed, note = header_row(first, [[c.strip() if skip else c for c in r] for r in rows[1:]])
    given = header is not None
    header = guessed if header is None else header
    body = [[c.strip() if skip else c for c in r] for r in (rows[1:] if header else rows)]
    decimal = "."
    if sep != "," and sum(bool(pd.Series(r).str.fullmatch(r"-?[0-9]+,[0-9]+").any()) for r in body[:200]) > 0:
        decimal = ","
    read = {"separator": sep, "header": header, "encoding": encoding, "decimal": decimal, "skip_spaces": skip}
    markers = [""] + _markers(body)
    notes = []
    if given:
        notes.append(f"header {'true' if header else 'false'}, as --header says")
    elif not header:
        notes.append("the first line looks like data (it has numbers): header false, columns named 0, 1, 2, ...; "
                     "pass --header true if it holds the column names")
    elif note:
        notes.append(note)
    return Sniffed(read, markers, notes)


def _markers(body: list[list[str]]) -> list[str]:
    """Cell texts that look like missing markers: '?' anywhere, others in columns that are otherwise numbers."""
    found: set[str] = set()
    width = max((len(r) for r in body), default=0)
    for j in range(width):
        column = [r[j] for r in body if j < len(r)]
        marks = {c for c in column if c in LIKELY_MARKERS}
        found |= marks & set(ALWAYS_MISSING)
        others = [c for c in column if c not in marks and c != ""]
        if marks and others and all(looks_numeric(c) for c in others):
            found |= marks
    return sorted(found)


def guess_label(columns: list[str], label: str | None) -> tuple[str, str]:
    """The label column and why: ``--label``, a usual label name, or the last column."""
    if label is not None:
        if label not in columns:
            known = ui.listing(columns, 10, quote=False)
            raise InputError(f"--label '{ui.excerpt(label)}' is not a column of the file (columns: {known})")
        return label, "given by --label"
    for name in LABEL_NAMES:
        for col in columns:
            if col.strip().lower() == name:
                return col, f"a usual label name ('{name}'); pass --label COL to choose another"
    return columns[-1], "the last column; pass --label COL to choose another"


@dataclass
class Starter:
    """What a starter spec says, before it is written as text."""

    label: str
    label_why: str
    read: dict[str, Any]
    missing_values: list[str]
    drop: list[str]
    categorical: list[str]
    bins: dict[str, list[float]]
    estimator: str
    params: dict[str, Any]
    train_size: int | None
    rows: int
    kinds: dict[str, str]
    notes: list[str]
    missing_rows: int = 0  # rows with a missing cell in a used column (missing: drop leaves them out)
    missing: str = "drop"  # impute when many rows have an empty cell and every such cell is in a category column


#: Smallest median of a column taken for a sample weight by its values (:func:`weight_reason`).
WEIGHT_MEDIAN = 100.0


def weight_reason(name: str, values: pd.Series) -> str | None:
    """Why a column looks like a sample weight (a survey's design weight, not a feature), or None.

    By name (:data:`WEIGHT_NAMES`, or "wgt" in it: ``fnlwgt``, ``PWGTP``), or by its values:
    numbers, all positive, mostly not whole (>= 90 %), many distinct (>= 10 % of the rows), a
    median of at least :data:`WEIGHT_MEDIAN` (a design weight stands for many people) and a heavy
    right tail (skewness >= 1 and largest >= 5 x the median) -- the shape of a census ``instance
    weight`` column read without a header (median about 1,600). Without the median rule the five
    ``... error`` columns of scikit-learn's breast_cancer (medians 0.002 to 24) were dropped as weights.
    """
    letters = re.sub(r"[^a-z]", "", name.lower())
    if "wgt" in letters or letters in WEIGHT_NAMES or letters.endswith(("sampleweight", "instanceweight")):
        return "by its name"
    if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
        return None
    x = values.dropna().to_numpy(dtype=float)
    if len(x) < 20 or x.min() <= 0:
        return None
    median = float(np.median(x))
    whole = float(np.mean(np.mod(x, 1.0) == 0))
    if whole > 0.1 or len(np.unique(x)) < 0.1 * len(x) or median < WEIGHT_MEDIAN or x.max() < 5 * median:
        return None
    skew = float(pd.Series(x).skew())
    return "by its values: positive, not whole numbers, a heavy right tail" if skew >= 1 else None


def _named_columns(flag: str, names: list[str], columns: list[str], label: str) -> list[str]:
    """The columns ``--drop``/``--weights`` name (each a column of the file, not the label); InputError otherwise."""
    for name in names:
        if name not in columns:
            known = ui.listing(columns, 10, quote=False)
            raise InputError(f"{flag} '{ui.excerpt(name)}' is not a column of the file (columns: {known})")
        if name == label:
            raise InputError(f"{flag} '{ui.excerpt(name)}' is the label column; pass --label with another column "
                             "or name a feature")
    return list(dict.fromkeys(names))


def _edges(values: pd.Series) -> list[float]:
    """Bin edges of a numeric column at its quantiles (3 significant digits), each cutting off some values.

    Edges at or below the smallest value cut nothing and are left out; a column whose
    quantiles all fall on its smallest value (mostly zeros) gets one edge just above it, so
    that value stands alone. Edges are rounded aggregates, never one record's value.
    """
    x = values.dropna().to_numpy(dtype=float)
    lo, hi = float(x.min()), float(x.max())
    edges = sorted({float(f"{q:.3g}") for q in np.quantile(x, QUANTILES)} - {lo})
    edges = [e for e in edges if lo < e <= hi]
    if not edges:  # mostly the smallest value: one edge just above it (rounded, not another record's value)
        step = 1.0 if np.all(np.mod(x, 1.0) == 0) else float(f"{(hi - lo) / 100 or 1.0:.3g}")
        edges = [float(f"{lo + step:.3g}")]
    return [int(e) if e.is_integer() else e for e in edges]


def check_usable(label: str, y: pd.Series, kept: list[str]) -> None:
    """Refuse (exit 2) a file no spec could audit: a label with one value, or no feature column left."""
    shown = ui.excerpt(label, 40)
    if y.nunique(dropna=True) < 2:
        raise InputError(f"label '{shown}' has {y.nunique(dropna=True)} distinct value(s): a classifier needs two "
                         "classes; pass --label with a class column")
    if not kept:
        raise InputError(f"no feature column besides the label '{shown}' (every other column was dropped or there "
                         "is none): nothing to train on")


def starter(
    path: Path, label: str | None, header: bool | None = None, drop: list[str] | None = None,
    weights: str | None = None,
) -> Starter:
    """Read ``path`` with the guessed options (``header``: as ``init --header`` says) and choose the label,
    column kinds and an estimator.

    ``drop`` (``init --drop``) columns are left out; a column that looks like a sample weight
    (:func:`weight_reason`) is left out with a note. ``weights`` (``init --weights``) names the
    sample-weight column: the spec has no sample-weight field (every fit, A(T) and each
    leave-one-out, is unweighted), so it stays dropped, and a note says so.
    """
    sniffed = sniff_read(path, header)
    df = read_csv(path, sniffed.missing_values, ReadSpec(**sniffed.read) if sniffed.read else None)
    columns = [str(c) for c in df.columns]
    df.columns = columns
    label, why = guess_label(columns, label)
    notes = list(sniffed.notes)
    y = df[label]
    if pd.api.types.is_numeric_dtype(y) and y.nunique() > MAX_LABEL_VALUES:
        notes.append(f"label '{label}' has {y.nunique()} distinct numbers: pass --label with a class column")
    given = _named_columns("--drop", list(drop or []), columns, label)
    weight_col = _named_columns("--weights", [weights], columns, label)[0] if weights is not None else None
    drop, categorical, bins, kinds = [], [], {}, {}
    for c in given:
        drop.append(c)
        kinds[c] = "dropped: --drop"
    if weight_col is not None and weight_col not in drop:
        drop.append(weight_col)
        kinds[weight_col] = "dropped: the sample weight (--weights)"
    if weight_col is not None:
        notes.append(f"--weights '{weight_col}': the spec has no sample-weight field (mptool audits unweighted fits: "
                     f"A(T) and every leave-one-out refit weigh each record once), so '{weight_col}' stays in "
                     "data.drop; the PDTP reported is of the unweighted model")
    features = [c for c in columns if c != label]
    numeric = {c: pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) for c in features}
    for c in features:
        if c in drop:
            continue
        if weight_col is None and (reason := weight_reason(c, df[c])) is not None:
            drop.append(c)
            kinds[c] = f"dropped: looks like a sample weight ({reason})"
            notes.append(f"column '{c}' looks like a sample weight ({reason}): dropped (data.drop), as mptool audits "
                         "unweighted fits; if it is a feature, take it out of data.drop (or pass --weights COL to "
                         "name the weight column yourself)")
            continue
        distinct = df[c].nunique()
        if not numeric[c] and (stray := stray_text(df[c])) is not None:
            notes.append(f"column '{c}' holds numbers except {stray[0]} text cell(s): mptool check refuses it until "
                         "they are fixed, listed in data.missing_values, or the column is declared")
        if not numeric[c] and distinct > MAX_CATEGORIES:
            drop.append(c)
            kinds[c] = f"dropped: text with {distinct} distinct values (an identifier or free text?)"
        else:
            kinds[c] = f"numbers, {distinct} values" if numeric[c] else f"categories, {distinct} values"
    kept = [c for c in features if c not in drop]
    check_usable(label, y, kept)
    lost = int(df[kept + [label]].isna().any(axis=1).sum())
    missing = "drop"
    if lost > MISSING_SHARE_NOTE * len(df):
        counts = df[kept].isna().sum()
        worst = counts[counts > 0].sort_values(ascending=False, kind="stable")
        most = ", ".join(f"'{ui.excerpt(c, 40)}' {int(k)}" for c, k in worst.head(3).items())
        share = f"{lost} of {len(df)} rows ({lost / len(df):.0%})"
        if len(worst) and not any(numeric[c] for c in worst.index):
            missing = "impute"
            notes.append(f"data.missing: impute, as {share} have an empty cell, all in category columns (most in "
                         f"{most}): each empty cell becomes its own category (the exact engines keep working); "
                         "set missing: drop to leave those rows out instead")
        else:
            notes.append(f"missing: drop leaves out {share} with a missing cell (most in {most or 'the label'}); "
                         "data.missing: impute keeps them (an empty category becomes its own category, an empty "
                         "number the median of T, which takes the refit engine for logistic regression), or drop "
                         "those columns (--drop)")
    mostly_categorical = sum(not numeric[c] for c in kept) >= len(kept) / 2
    if mostly_categorical:
        estimator, params = "categorical_nb", {"alpha": 1.0}
        for c in kept:
            if numeric[c] and df[c].nunique() <= FEW_VALUES:
                categorical.append(c)
                kinds[c] += ": each value a category (data.categorical)"
            elif numeric[c]:
                bins[c] = _edges(df[c])
                kinds[c] += f": cut into {len(bins[c]) + 1} bins at quantiles (model.bins)"
    else:
        estimator, params = "logistic_regression", {"C": 1.0, "max_iter": 1000}
    n = len(df)
    kinds = {c: kinds[c] for c in features if c in kinds}  # in the file's column order
    drop = [c for c in features if c in drop]
    return Starter(label, why, sniffed.read, sniffed.missing_values, drop, categorical, bins, estimator, params,
                   None if n <= 2000 else 1000, n, kinds, notes, lost, missing)

"""Reading the dataset CSV into records, and drawing the training set T.

The one place where CSV files are read. The feature *schema* (each categorical column's
domain of values, each numeric column's range) comes from the whole usable CSV, not from
T, so removing one record from T never changes the feature space: the domain X^m over
which DTP is defined (Long et al., Definition 4.1) is fixed.
"""

from __future__ import annotations

import gzip
import hashlib
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mptool.inputs.spec import Spec
from mptool.runtime import ui
from mptool.runtime.errors import InputError

#: A categorical column with more distinct values than this is refused (an id or free text).
MAX_CATEGORIES = 1000
#: The category that stands for an empty cell under ``missing: impute``.
MISSING_CATEGORY = "<missing>"


@dataclass(frozen=True)
class Column:
    """One feature column of the schema."""

    name: str
    kind: str  # "categorical" or "numeric"
    categories: tuple[Any, ...] | None = None  # domain, for categorical columns
    values: tuple[float, ...] | None = None  # sorted distinct values of a numeric column (<= MAX_CATEGORIES)
    minimum: float | None = None
    maximum: float | None = None
    has_missing: bool = False


@dataclass(frozen=True)
class Schema:
    """Feature columns, their domains, and the label's classes."""

    columns: tuple[Column, ...]
    label: str
    classes: tuple[Any, ...]
    id: str | None = None

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)


@dataclass(frozen=True)
class Records:
    """Feature rows, labels and CSV row numbers of a set of records (the population or T)."""

    X: pd.DataFrame
    y: np.ndarray
    rows: np.ndarray
    schema: Schema
    ids: np.ndarray | None = None
    source: str = ""
    sha256: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    dropped_missing: int = 0  # rows of the CSV left out for a missing cell (data.missing: drop)

    @property
    def n(self) -> int:
        return len(self.y)

    def take(self, idx: np.ndarray | list[int]) -> Records:
        """The records at positions ``idx`` (in that order)."""
        idx = np.asarray(idx, dtype=np.int64)
        return replace(
            self,
            X=self.X.iloc[idx].reset_index(drop=True),
            y=self.y[idx],
            rows=self.rows[idx],
            ids=None if self.ids is None else self.ids[idx],
        )

    def without(self, position: int) -> Records:
        """T \\ {t}: every record but the one at ``position``."""
        keep = np.ones(self.n, dtype=bool)
        keep[position] = False
        return self.take(np.flatnonzero(keep))


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes (recorded in every result as the data hash)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _unreadable(path: Path, exc: BaseException) -> str:
    """One line saying why ``path`` cannot be read as CSV, with the data row of a ragged line."""
    detail = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
    if isinstance(exc, UnicodeDecodeError):
        return f"{path}: cannot read it as CSV text ({detail}); save the file as UTF-8"
    m = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", detail)
    if m:
        want, line, got = (int(g) for g in m.groups())
        return (
            f"{path}: line {line} (data row {line - 2}) has {got} fields but the header has {want}; "
            "quote cells that contain commas"
        )
    return f"{path}: cannot read it as CSV ({exc.__class__.__name__}: {detail})"


def _check_gzip(path: Path) -> None:
    """Decompress ``path`` to its end: a truncated .gz must not be read as a shorter, valid-looking CSV."""
    try:
        with gzip.open(path, "rb") as fh:
            while fh.read(1 << 20):
                pass
    except (OSError, EOFError) as exc:
        detail = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
        raise InputError(f"{path}: the gzip file is damaged or truncated ({detail}); copy it again") from None


#: Cell texts read as missing unless the spec says otherwise (``data.missing_values``): the empty cell only.
DEFAULT_MISSING = ("",)
#: Cell texts that often mean "missing"; a numeric-looking column holding them is reported (never silently).
_LIKELY_MARKERS = frozenset(
    {"?", "-", ".", "NA", "N/A", "n/a", "na", "NaN", "nan", "null", "NULL", "None", "none", "missing", "#N/A"}
)


def _pandas_csv(path: Path, missing: tuple[str, ...] | None, **kwargs: Any) -> pd.DataFrame:
    """The one call of ``pandas.read_csv``: pandas' own list of missing markers is never used.

    ``missing`` None keeps every cell as its text (empty cells stay ""); otherwise exactly
    the cells equal to one of the ``missing`` texts are missing (NaN).
    """
    if missing is None:
        return pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False, **kwargs)
    if not missing:
        return pd.read_csv(path, keep_default_na=False, na_filter=False, **kwargs)
    return pd.read_csv(path, keep_default_na=False, na_values=list(missing), **kwargs)


def read_csv(path: str | Path, missing: tuple[str, ...] | list[str] = DEFAULT_MISSING) -> pd.DataFrame:
    """Read a comma-separated file (optionally gzip) with a header row, or raise InputError.

    A cell is missing only when its text is one of ``missing`` (``data.missing_values``;
    by default the empty cell): ``NA``, ``None`` or ``null`` are values unless listed.
    Refuses: a missing, unreadable or empty file; a header without rows; duplicate column
    names; a file that looks separated by something other than commas.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: data file not found; pass the path of a CSV file with a header row")
    if path.is_dir():
        raise InputError(f"{path}: is a directory; pass the path of a CSV file")
    if path.suffix == ".gz":
        _check_gzip(path)
    try:
        header = _pandas_csv(path, None, header=None, nrows=1)
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: the file is empty; it needs a header row and data rows") from None
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, EOFError) as exc:
        raise InputError(_unreadable(path, exc)) from None
    names = [str(v) for v in header.iloc[0].tolist()]
    if len(names) == 1:
        for sep, label in ((";", "semicolons"), ("\t", "tabs"), ("|", "pipes")):
            if sep in names[0]:
                raise InputError(
                    f"{path}: the header looks separated by {label}, not commas; "
                    "mptool reads comma-separated CSV: convert the file"
                )
    odd = [n for n in names if ui.has_unsafe(n)]
    if odd:
        raise InputError(f"{path}: column name {ui.quoted(odd[0])} contains a control character; rename the column")
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise InputError(f"{path}: duplicate column name(s) {ui.listing(dups)}; rename them")
    try:
        df = _pandas_csv(path, tuple(missing), low_memory=False)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, OSError, EOFError) as exc:
        raise InputError(_unreadable(path, exc)) from None
    if len(df) == 0:
        raise InputError(f"{path}: the file has a header but no data rows")
    return df


def _first_row(mask: pd.Series) -> int:
    return int(mask.to_numpy().nonzero()[0][0])


def frame_input(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """A caller's DataFrame as if read from CSV: string column names, unique, rows 0..n-1; and its SHA-256.

    The hash is over the frame's CSV text, so the same values give the same manifest hash.
    """
    if not isinstance(frame, pd.DataFrame) or len(frame) == 0 or len(frame.columns) == 0:
        raise InputError("data: the DataFrame is empty; it needs columns and rows")
    names = [str(c) for c in frame.columns]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise InputError(f"data: duplicate column name(s) {', '.join(map(repr, dups))}; rename them")
    df = frame.copy()
    df.columns = names
    df = df.reset_index(drop=True)
    return df, hashlib.sha256(df.to_csv(index=False, lineterminator="\n").encode()).hexdigest()


def _frame_markers(df: pd.DataFrame, markers: list[str]) -> pd.DataFrame:
    """A caller's DataFrame read as a CSV is: text cells equal to a marker become missing (NaN)."""
    out = df.copy()
    for name in out.columns:
        s = out[name]
        if pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s) or not markers:
            continue
        hit = s.map(lambda v: isinstance(v, str) and v in markers).to_numpy(dtype=bool)
        if hit.any():
            out[name] = s.mask(hit).infer_objects()
    return out


def load_records(path: str | Path | pd.DataFrame, spec: Spec) -> Records:
    """Read the CSV (or take a DataFrame) and apply the spec's data section: the usable population of records.

    Returns every usable row (after the ``missing`` policy) with its 0-based CSV row
    number (DataFrame: its 0-based position). Raises InputError, naming the file, column
    and row, for anything unusable.
    """
    ds = spec.data
    if isinstance(path, pd.DataFrame):
        df, sha256 = frame_input(path)
        df = _frame_markers(df, ds.missing_values)
        where = "data (DataFrame)"
    else:
        df, sha256, where = read_csv(path, ds.missing_values), "", str(path)
    columns = list(df.columns)
    for key, name in (("data.label", ds.label), ("data.id", ds.id)):
        if name is not None and name not in columns:
            known = ui.listing(columns, 10, quote=False)
            raise InputError(f"{where}: {key} column '{name}' is not in the file (columns: {known})")
    for name in ds.drop:
        if name not in columns:
            raise InputError(f"{where}: data.drop names column '{name}', which is not in the file")
    for name in spec.model.bins:
        if name not in columns:
            raise InputError(f"{where}: model.bins names column '{name}', which is not in the file")
    features = [c for c in columns if c not in {ds.label, ds.id, *ds.drop}]
    if not features:
        raise InputError(f"{where}: no feature columns left after removing label, id and data.drop")
    used = [*features, ds.label]

    notes = _marker_hints(df[used], ds.missing_values)
    dropped = 0
    na = df[used].isna()
    if na.to_numpy().any():
        bad = [c for c in used if na[c].any()]
        if ds.missing == "error":
            c = bad[0]
            raise InputError(
                f"{where}: column '{c}' has an empty cell at row {_first_row(na[c])} "
                f"({int(na[c].sum())} in that column); data.missing is 'error': fill the cells, "
                "or set data.missing to drop or impute"
            )
        drop_mask = na.any(axis=1) if ds.missing == "drop" else na[ds.label]
        if drop_mask.any():
            dropped = int(drop_mask.sum())
            why = "with a missing cell" if ds.missing == "drop" else "with a missing label"
            markers = ", ".join(repr(m) for m in ds.missing_values)
            notes.append(
                f"dropped {dropped} of {len(df)} rows {why} (data.missing: {ds.missing}; "
                f"cells read as missing: {markers})"
            )
            df = df.loc[~drop_mask.to_numpy()]
    if len(df) == 0:
        raise InputError(f"{where}: no rows left after dropping rows with empty cells; use data.missing: impute")

    cols: list[Column] = []
    frame: dict[str, pd.Series] = {}
    for name in features:
        s = df[name]
        numeric = pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)
        if spec.model.preprocess == "none" and not numeric:
            example = s.dropna().iloc[0] if s.notna().any() else ""
            raise InputError(
                f"{where}: column '{name}' holds text (e.g. {ui.quoted(example)}) but model.preprocess is none, "
                "which needs numeric columns; set preprocess: auto or add the column to data.drop"
            )
        if name in spec.model.bins and not numeric:
            raise InputError(f"{where}: model.bins names column '{name}', which is not numeric")
        if numeric:
            vals = s.astype(float)
            inf = np.isinf(vals.to_numpy())
            if inf.any():
                row = int(vals.index[inf.nonzero()[0][0]])
                raise InputError(f"{where}: column '{name}' has an infinite value at row {row}; replace it")
            uniq = np.unique(vals.dropna().to_numpy())
            cols.append(
                Column(
                    name,
                    "numeric",
                    values=tuple(float(v) for v in uniq) if len(uniq) <= MAX_CATEGORIES else None,
                    minimum=float(uniq[0]) if len(uniq) else None,
                    maximum=float(uniq[-1]) if len(uniq) else None,
                    has_missing=bool(vals.isna().any()),
                )
            )
            frame[name] = vals
        else:
            has_missing = bool(s.isna().any())
            text = s.astype(object).where(s.notna(), MISSING_CATEGORY).astype(str)
            cats = tuple(sorted(text.unique()))
            if len(cats) > MAX_CATEGORIES:
                raise InputError(
                    f"{where}: categorical column '{name}' has {len(cats)} distinct values "
                    f"(limit {MAX_CATEGORIES}); it looks like an identifier or free text: "
                    "add it to data.drop or set it as data.id"
                )
            cols.append(Column(name, "categorical", categories=cats, has_missing=has_missing))
            frame[name] = text
    y_series = df[ds.label]
    classes = tuple(sorted(pd.unique(y_series).tolist(), key=lambda v: (str(type(v)), v)))
    if len(classes) < 2:
        raise InputError(
            f"{where}: label column '{ds.label}' has a single class ({ui.quoted(classes[0])}); "
            "a classifier needs at least two"
        )
    schema = Schema(columns=tuple(cols), label=ds.label, classes=classes, id=ds.id)
    return Records(
        X=pd.DataFrame(frame, index=df.index).reset_index(drop=True),
        y=y_series.to_numpy(),
        rows=df.index.to_numpy(dtype=np.int64),
        ids=None if ds.id is None else df[ds.id].to_numpy(),
        schema=schema,
        source=where,
        sha256=sha256 or file_sha256(path),
        notes=tuple(notes),
        dropped_missing=dropped,
    )


def _marker_hints(df: pd.DataFrame, markers: list[str]) -> list[str]:
    """Notes for text columns that are numbers except for a few cells that look like missing markers.

    Such cells (``NA``, ``?``, ...) are values unless ``data.missing_values`` lists them, which
    turns the column into categories; this says so instead of leaving it silent.
    """
    notes = []
    for name in df.columns:
        s = df[name]
        if pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s):
            continue
        text = s.dropna().astype(str)
        numeric = pd.to_numeric(text, errors="coerce").notna()
        odd = set(text[~numeric].unique().tolist())
        if numeric.any() and odd and odd <= _LIKELY_MARKERS and not odd & set(markers):
            shown = ", ".join(repr(v) for v in sorted(odd))
            notes.append(
                f"column '{name}' holds numbers and {shown} ({int((~numeric).sum())} cells), so it is read as "
                f"categories; if {shown} means missing, add it to data.missing_values"
            )
    return notes


def draw_training_set(population: Records, train_size: int | None, seed: int) -> Records:
    """Draw T: ``train_size`` records uniformly without replacement (seeded), in CSV order.

    ``None`` takes every record. Refuses a size larger than the population or a T with a
    single class; notes a class with a single record (removing it empties the class).
    """
    n = population.n
    if train_size is None:
        idx = np.arange(n)
    else:
        if train_size > n:
            raise InputError(
                f"{population.source}: data.train_size is {train_size} but only {n} usable rows exist; "
                "lower --train-size or use null for every row"
            )
        rng = np.random.default_rng(seed)
        idx = np.sort(rng.choice(n, size=train_size, replace=False))
    T = population.take(idx)
    labels, counts = np.unique(T.y.astype(str), return_counts=True)
    if len(labels) < 2:
        raise InputError(
            f"{population.source}: the training set has a single class ({ui.quoted(labels[0])}); "
            "raise data.train_size or check the label column"
        )
    lonely = labels[counts == 1]
    notes = list(T.notes)
    if len(lonely):
        notes.append(
            f"class(es) {ui.listing(lonely.tolist())} have a single training record: "
            "removing it empties the class"
        )
    return replace(T, notes=tuple(notes))


def read_rows_verbatim(path: str | Path, rows: np.ndarray | list[int]) -> pd.DataFrame:
    """The data rows numbered ``rows`` (0-based, header excluded, in the given order) of a CSV.

    Every cell is kept as the text in the file (no type inference, empty cells stay
    empty), with the file's own columns, so writing the frame back gives the input's
    format. Row numbers are counted as :func:`read_csv` counts them.
    """
    df = _pandas_csv(Path(path), None, low_memory=False)
    return df.iloc[np.asarray(rows, dtype=np.int64)]

"""Reading the dataset CSV into records, and drawing the training set T.

The one place where CSV files are read. The feature *schema* (each categorical column's
domain of values, each numeric column's range) comes from the whole usable CSV, not from
T, so removing one record from T never changes the feature space: the domain X^m over
which DTP is defined (Long et al., Definition 4.1) is fixed.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import unicodedata
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mptool.inputs.memo import distinct, factorized, remember
from mptool.inputs.spec import ReadSpec, Spec
from mptool.runtime import ui
from mptool.runtime.errors import InputError

#: A categorical column with more distinct values than this is refused (an id or free text).
MAX_CATEGORIES = 1000
#: The category that stands for an empty cell under ``missing: impute``.
MISSING_CATEGORY = "<missing>"
#: Largest magnitude of a numeric cell: its square (feature scaling, variances) stays finite.
MAX_ABS_VALUE = 1e100
#: A numeric label with more distinct values than this, not all whole numbers, is refused as continuous.
MAX_LABEL_VALUES = 50


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
    why: str = ""  # why the column has this kind (shown by ``mptool check``)


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
        if len(idx) == self.n and bool((idx == np.arange(self.n)).all()):
            return self  # every record in order (T = the population, all of T audited): nothing copied (issue 28)
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


def check_distinct_names(names: list[str], where: str) -> None:
    """InputError for duplicate column names, also those equal after Unicode NFKC normalisation.

    ``ﬁ`` (a ligature) and ``fi``, or a composed and a decomposed ``é``, look the same on
    screen and in a report; a spec naming one would silently use the other's column.
    """
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise InputError(f"{where}: duplicate column name(s) {ui.listing(dups)}; rename them")
    seen: dict[str, str] = {}
    for name in names:
        key = unicodedata.normalize("NFKC", name)
        if key in seen:
            raise InputError(
                f"{where}: column names {ui.quoted(seen[key])} and {ui.quoted(name)} are the same text after "
                "Unicode normalisation (NFKC: ligatures, composed and decomposed accents); rename one"
            )
        seen[key] = name


def _unreadable(path: Path, exc: BaseException, header: bool = True) -> str:
    """One line saying why ``path`` cannot be read as CSV, with the data row of a ragged line."""
    detail = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
    if isinstance(exc, UnicodeDecodeError):
        return (
            f"{path}: cannot read it as {exc.encoding} text ({detail}); save the file as UTF-8 "
            "or set data.read.encoding (e.g. latin-1, cp1252)"
        )
    m = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", detail)
    if m:
        want, line, got = (int(g) for g in m.groups())
        first = "the header has" if header else "the first line has"
        return (
            f"{path}: line {line} (data row {line - 1 - int(header)}) has {got} fields but {first} {want}; "
            "quote cells that contain the separator"
        )
    return f"{path}: cannot read it as CSV ({exc.__class__.__name__}: {detail})"


#: A .gz file unpacking to more than this many bytes, and more than BOMB_RATIO times its size, is refused.
BOMB_BYTES = 256 << 20
#: Unpacked / packed size beyond which a large file is taken for a decompression bomb (real CSV text packs 5-350x).
BOMB_RATIO = 500


#: A .gz unpacking to at most this many bytes is parsed from the bytes its check unpacked (not unpacked twice).
KEEP_UNPACKED_BYTES = 64 << 20


def _check_gzip(path: Path) -> bytes | None:
    """Decompress ``path`` to its end: a truncated .gz must not be read as a shorter, valid-looking CSV.

    The unpacked bytes are counted: a bomb (a few MB unpacking to many GB) is refused before
    pandas reads it into memory. Returned when they are at most ``KEEP_UNPACKED_BYTES`` (the CSV
    is then parsed from them: the 1.41 M military records' 50 MB are unpacked once), else None.
    """
    packed, total = max(path.stat().st_size, 1), 0
    kept: list[bytes] | None = []
    try:
        with gzip.open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                total += len(chunk)
                kept = kept if kept is not None and total <= KEEP_UNPACKED_BYTES else None
                if kept is not None:
                    kept.append(chunk)
                if total > BOMB_BYTES and total > BOMB_RATIO * packed:
                    raise InputError(
                        f"{path}: unpacks to more than {total:,} bytes from {packed:,} (over {BOMB_RATIO} times "
                        "its size): refused as a decompression bomb; unpack it yourself if it is real data"
                    )
    except (OSError, EOFError) as exc:
        detail = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
        raise InputError(f"{path}: the gzip file is damaged or truncated ({detail}); copy it again") from None
    return b"".join(kept) if kept is not None else None


#: Longest first line of a CSV: a file without a line break (zeros, a binary file) is not read whole into memory.
MAX_FIRST_LINE_BYTES = 16 << 20


def _check_first_line(path: Path) -> None:
    """InputError unless a line break comes within the first ``MAX_FIRST_LINE_BYTES`` (decompressed) bytes.

    Read in pieces up to the first line break: a CSV's header ends in its first piece, so a .gz
    is not unpacked a third time just for this (issue 28).
    """
    seen = 0
    try:
        with (gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")) as fh:
            while seen < MAX_FIRST_LINE_BYTES:
                piece = fh.read(min(1 << 16, MAX_FIRST_LINE_BYTES - seen))
                if not piece or b"\n" in piece or b"\r" in piece:
                    return
                seen += len(piece)
    except (OSError, EOFError):
        return  # a damaged .gz or unreadable file is reported by the read itself
    if seen >= MAX_FIRST_LINE_BYTES:
        raise InputError(
            f"{path}: no line break in the first {MAX_FIRST_LINE_BYTES:,} bytes; a CSV has a header row and "
            "one line per record (is it a binary or compressed file without .gz?)"
        )


#: Cell texts read as missing unless the spec says otherwise (``data.missing_values``): the empty cell only.
DEFAULT_MISSING = ("",)
#: Cell texts that often mean "missing"; a numeric-looking column holding them is reported (never silently).
LIKELY_MARKERS = frozenset(
    {"?", "-", ".", "NA", "N/A", "n/a", "na", "NaN", "nan", "null", "NULL", "None", "none", "missing", "#N/A"}
)
_LIKELY_MARKERS = LIKELY_MARKERS
#: File name endings read as Parquet (everything else is CSV text, gzip-compressed when it ends in .gz).
PARQUET_SUFFIXES = (".parquet", ".pq")
#: Compressed-file endings pandas would read by itself; only gzip is checked and documented, so these are refused.
_OTHER_COMPRESSIONS = (".bz2", ".xz", ".lzma", ".zip", ".zst", ".tar", ".7z")
#: Separators a one-column read is checked for (the hint names ``data.read.separator``).
_OTHER_SEPARATORS = ((";", "semicolons", "';'"), ("\t", "tabs", '"\\t"'), ("|", "pipes", "'|'"))
_NUMBER = re.compile(r"^[-+]?(?:[0-9]+(?:[.,][0-9]*)?|[.,][0-9]+)(?:[eE][-+]?[0-9]+)?$")


def is_parquet(path: str | Path) -> bool:
    """Whether ``path`` is read as Parquet (by its name's ending)."""
    return Path(path).name.lower().endswith(PARQUET_SUFFIXES)


def looks_numeric(text: Any) -> bool:
    """Whether a cell's text is a number (either decimal mark): how a header that is really data is told."""
    return isinstance(text, str) and bool(_NUMBER.match(text.strip()))


def _csv_options(read: ReadSpec) -> dict[str, Any]:
    return {"sep": read.separator, "encoding": read.encoding, "decimal": read.decimal,
            "skipinitialspace": read.skip_spaces}


def _pandas_csv(path: Path | io.BytesIO, missing: tuple[str, ...] | None, **kwargs: Any) -> pd.DataFrame:
    """The one call of ``pandas.read_csv``: pandas' own list of missing markers is never used.

    ``missing`` None keeps every cell as its text (empty cells stay ""); otherwise exactly
    the cells equal to one of the ``missing`` texts are missing (NaN).
    """
    if missing is None:
        return pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False, **kwargs)
    if not missing:
        return pd.read_csv(path, keep_default_na=False, na_filter=False, **kwargs)
    return pd.read_csv(path, keep_default_na=False, na_values=list(missing), **kwargs)


def check_path(path: Path) -> None:
    """InputError unless ``path`` is an existing file."""
    if not path.exists():
        raise InputError(f"{path}: data file not found; pass the path of a CSV or Parquet file")
    if path.is_dir():
        raise InputError(f"{path}: is a directory; pass the path of a CSV or Parquet file")
    if not path.is_file():  # a pipe would block the read forever, a device like /dev/zero fill the memory
        raise InputError(
            f"{path}: not a regular file (a pipe, device or socket); save the data to a file and pass its path"
        )
    other = [ext for ext in _OTHER_COMPRESSIONS if path.name.lower().endswith(ext)]
    if other:  # pandas would decompress it whole into memory, unchecked (a 30 KB .xz holds 200 MB of zeros)
        raise InputError(
            f"{path}: compressed as {other[0]}; mptool reads .csv, .csv.gz and Parquet: decompress the file "
            "or compress it with gzip"
        )


def read_csv(
    path: str | Path, missing: tuple[str, ...] | list[str] = DEFAULT_MISSING, read: ReadSpec | None = None
) -> pd.DataFrame:
    """Read a data file as ``data.read`` says (CSV, optionally gzip; or Parquet), or raise InputError.

    A cell is missing only when its text is one of ``missing`` (``data.missing_values``;
    by default the empty cell): ``NA``, ``None`` or ``null`` are values unless listed.
    Refuses: a missing, unreadable or empty file; a header without rows; duplicate column
    names; a file read as one column whose first line holds another separator, and a first
    line that looks like data while ``data.read.header`` is unset (each names the option).
    """
    path, read = Path(path), read or ReadSpec()
    check_path(path)
    if is_parquet(path):
        return read_parquet(path, missing)
    _check_first_line(path)
    unpacked = _check_gzip(path) if path.suffix == ".gz" else None
    names = _header_names(path, read)
    kwargs = _csv_options(read)
    if read.header is not True and read.header is not None:
        kwargs.update(header=None, names=names)
    try:
        df = _pandas_csv(io.BytesIO(unpacked) if unpacked is not None else path, tuple(missing), low_memory=False,
                         **kwargs)
        del unpacked
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, OSError, EOFError) as exc:
        has_header = read.header is not False and not isinstance(read.header, list)
        raise InputError(_unreadable(path, exc, has_header)) from None
    if len(df) == 0:
        raise InputError(f"{path}: the file has a header but no data rows")
    return df


def _header_names(path: Path, read: ReadSpec) -> list[str]:
    """The column names a CSV is read with (checked), from its first line and ``data.read.header``."""
    try:
        first = _pandas_csv(path, None, header=None, nrows=1, **_csv_options(read))
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: the file is empty; it needs a header row and data rows") from None
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, EOFError, ValueError) as exc:
        raise InputError(_unreadable(path, exc)) from None
    cells = [str(v) for v in first.iloc[0].tolist()]
    if len(cells) == 1:
        for sep, label, written in _OTHER_SEPARATORS:
            if sep != read.separator and sep in cells[0]:
                raise InputError(
                    f"{path}: read as one column (separator {read.separator!r}), and the first line holds "
                    f"{label}: set data.read.separator: {written} in the spec ('mptool init' detects it)"
                )
    if read.header is False:
        return [str(i) for i in range(len(cells))]
    if isinstance(read.header, list):
        if len(read.header) != len(cells):
            raise InputError(
                f"{path}: data.read.header names {len(read.header)} columns but the first line has {len(cells)}"
            )
        bad = [n for n in read.header if not n.strip() or ui.has_unsafe(n)]
        if bad:  # the same rule as names read from a header row
            raise InputError(f"{path}: data.read.header names column {ui.quoted(bad[0])}: a column name is "
                             "non-empty and has no control characters; rename it")
        check_distinct_names(list(read.header), f"{path}: data.read.header")
        return list(read.header)
    numeric = [i for i, c in enumerate(cells) if looks_numeric(c)]
    if read.header is None and numeric:
        raise InputError(
            f"{path}: the first line looks like data, not column names ({len(numeric)} of {len(cells)} cells are "
            f"numbers, e.g. column {numeric[0]}): set data.read.header: false if the file has no header row "
            "(columns are then named 0, 1, 2, ...), or header: true to keep the line as names"
        )
    odd = [n for n in cells if ui.has_unsafe(n)]
    if odd:
        raise InputError(f"{path}: column name {ui.quoted(odd[0])} contains a control character; rename the column")
    if read.skip_spaces:
        cells = [c.lstrip(" ") for c in cells]
    check_distinct_names(cells, str(path))
    return cells


def read_parquet(path: Path, missing: tuple[str, ...] | list[str] = DEFAULT_MISSING) -> pd.DataFrame:
    """A Parquet file as :func:`read_csv` would give its CSV: text column names, null and marker cells missing."""
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        raise InputError(f"{path}: reading Parquet needs pyarrow (pip install pyarrow)") from None
    try:
        _check_parquet_size(path, pq.ParquetFile(path).metadata)
        table = pq.read_table(path)
        _plain_parquet_types(path, table.schema)
        df = table.to_pandas()
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for a damaged file
        detail = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
        raise InputError(
            f"{path}: cannot read it as Parquet ({exc.__class__.__name__}: {ui.excerpt(detail, 120)})"
        ) from None
    df = frame_columns(df, str(path), empty=f"{path}: the file has no data rows")
    return _frame_markers(df, list(missing))


#: Bytes a Parquet cell takes at least once read into a DataFrame (a float64 or int64; text takes more).
PARQUET_CELL_BYTES = 8


def _check_parquet_size(path: Path, meta: Any) -> None:
    """InputError when the Parquet footer says the file decodes to a decompression bomb, before any page is read.

    The decoded size is the larger of the row groups' uncompressed size and rows x columns x
    ``PARQUET_CELL_BYTES`` (run-length and dictionary encodings make a column of one repeated
    value tiny even uncompressed, so the row count is what bounds the DataFrame). The rule is
    the one for .csv.gz: more than ``BOMB_BYTES`` and more than ``BOMB_RATIO`` times the file's size.
    """
    packed = max(path.stat().st_size, 1)
    rows, cols = int(meta.num_rows), int(meta.num_columns)
    chunks = sum(int(meta.row_group(i).total_byte_size) for i in range(meta.num_row_groups))
    decoded = max(chunks, rows * cols * PARQUET_CELL_BYTES)
    if decoded > BOMB_BYTES and decoded > BOMB_RATIO * packed:
        raise InputError(
            f"{path}: its footer says {rows:,} rows x {cols} columns, at least {decoded:,} bytes once read, from "
            f"{packed:,} bytes on disk (over {BOMB_RATIO} times its size): refused as a decompression bomb; "
            "if it is real data, audit a sample of its rows"
        )


def _plain_parquet_types(path: Path, schema: Any) -> None:
    """InputError for a column whose cells are not one plain value (list, struct, map, union, binary).

    Such cells become arrays, dicts or bytes in pandas: they cannot be hashed into categories,
    bytes are not text, and a long array's text elides its middle (two lists, one category).
    """
    import pyarrow as pa

    for field_ in schema:
        t = field_.type.value_type if pa.types.is_dictionary(field_.type) else field_.type
        if pa.types.is_nested(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t) \
                or pa.types.is_fixed_size_binary(t):
            raise InputError(
                f"{path}: column {ui.quoted(field_.name)} has Parquet type {ui.excerpt(t, 60)}; mptool reads "
                "columns of numbers, text, true/false and dates: store it as one of those or write the file without it"
            )


def _first_row(mask: pd.Series) -> int:
    return int(mask.to_numpy().nonzero()[0][0])


def frame_columns(frame: pd.DataFrame, where: str = "data", empty: str | None = None) -> pd.DataFrame:
    """A copy of ``frame`` with text column names (checked: no control characters, unique), rows 0..n-1."""
    if not isinstance(frame, pd.DataFrame) or len(frame) == 0 or len(frame.columns) == 0:
        raise InputError(empty or f"{where}: the DataFrame is empty; it needs columns and rows")
    names = [str(c) for c in frame.columns]
    odd = [n for n in names if ui.has_unsafe(n)]
    if odd:
        raise InputError(f"{where}: column name {ui.quoted(odd[0])} contains a control character; rename the column")
    check_distinct_names(names, where)
    df = frame.copy()
    df.columns = names
    return df.reset_index(drop=True)


def frame_input(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """A caller's DataFrame as if read from CSV (:func:`frame_columns`) and its SHA-256.

    The hash is over the frame's CSV text, so the same values give the same manifest hash.
    """
    df = frame_columns(frame)
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
    """Read the data file (or take a DataFrame) and apply the spec's data section: the usable population.

    Returns every usable row (after the ``missing`` policy) with its 0-based data row
    number (DataFrame: its 0-based position). Raises InputError, naming the file, column
    and row, for anything unusable.
    """
    ds = spec.data
    if isinstance(path, pd.DataFrame):
        df, sha256 = frame_input(path)
        df = _frame_markers(df, ds.missing_values)
        where = "data (DataFrame)"
    else:
        df, sha256, where = read_csv(path, ds.missing_values, ds.read), "", str(path)
    features = _feature_names(list(df.columns), spec, where)
    used = [*features, ds.label]
    notes = _marker_hints(df[used], ds.missing_values)
    df, dropped = _apply_missing(df, used, spec, where, notes)
    cols: list[Column] = []
    frame: dict[str, pd.Series] = {}
    for name in features:
        col, values = _feature(name, df[name], spec, where)
        cols.append(col)
        frame[name] = values
    y = _label(df[ds.label], spec, where, notes)
    classes = tuple(sorted(pd.unique(y).tolist(), key=lambda v: (str(type(v)), v)))
    if len(classes) < 2:
        raise InputError(
            f"{where}: label column '{ds.label}' has a single class ({ui.quoted(classes[0])}); "
            "a classifier needs at least two"
        )
    schema = Schema(columns=tuple(cols), label=ds.label, classes=classes, id=ds.id)
    return Records(
        X=pd.DataFrame(frame, index=df.index).reset_index(drop=True),
        y=y,
        rows=df.index.to_numpy(dtype=np.int64),
        ids=None if ds.id is None else df[ds.id].to_numpy(),
        schema=schema,
        source=where,
        sha256=sha256 or file_sha256(path),
        notes=tuple(notes),
        dropped_missing=dropped,
    )


def _feature_names(columns: list[str], spec: Spec, where: str) -> list[str]:
    """The feature columns (every column but label, id and data.drop); every name the spec gives must exist."""
    ds = spec.data
    for key, name in (("data.label", ds.label), ("data.id", ds.id)):
        if name is not None and name not in columns:
            known = ui.listing(columns, 10, quote=False)
            raise InputError(f"{where}: {key} column '{name}' is not in the file (columns: {known})")
    named = [("data.drop", ds.drop), ("model.bins", list(spec.model.bins)), ("data.categorical", ds.categorical),
             ("data.numeric", ds.numeric)]
    for key, names in named:
        for name in names:
            if name not in columns:
                raise InputError(f"{where}: {key} names column '{name}', which is not in the file")
    features = [c for c in columns if c not in {ds.label, ds.id, *ds.drop}]
    for key, names in named[1:]:
        for name in names:
            if name not in features:
                role = "the label" if name == ds.label else "the id" if name == ds.id else "in data.drop"
                raise InputError(f"{where}: {key} names column '{name}', which is {role}, not a feature")
    both = sorted(set(spec.model.bins) & set(ds.categorical))
    if both:
        raise InputError(f"{where}: column '{both[0]}' has model.bins edges but is listed in data.categorical")
    if not features:
        raise InputError(f"{where}: no feature columns left after removing label, id and data.drop")
    return features


def _apply_missing(
    df: pd.DataFrame, used: list[str], spec: Spec, where: str, notes: list[str]
) -> tuple[pd.DataFrame, int]:
    """The ``data.missing`` policy: refuse (error), drop rows, or keep them (impute; rows without label dropped)."""
    ds = spec.data
    na = df[used].isna()
    dropped = 0
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
    return df, dropped


def _category_text(s: pd.Series) -> pd.Series:
    """A column's cells as category text; whole floats written as integers (13.0 -> "13"), missing kept."""
    def text(v: Any) -> str:
        if isinstance(v, float | np.floating) and float(v).is_integer():
            return str(int(v))
        return str(v)

    return s.map({v: text(v) for v in pd.unique(s.dropna())})


def _feature(name: str, s: pd.Series, spec: Spec, where: str) -> tuple[Column, pd.Series]:
    """One feature column: its kind (numbers or categories, ``data.categorical``/``data.numeric``) and values."""
    ds = spec.data
    numeric = pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)
    why = "numbers" if numeric else "true/false" if pd.api.types.is_bool_dtype(s) else "text"
    if name in ds.numeric:
        if not numeric:
            parsed = pd.to_numeric(s, errors="coerce")
            bad = parsed.isna() & s.notna()
            if bad.any():
                raise InputError(
                    f"{where}: data.numeric lists column '{name}', but row {int(s.index[bad.to_numpy()][0])} holds "
                    f"text ({int(bad.sum())} cells); list its missing marker in data.missing_values or remove "
                    "the column from data.numeric"
                )
            s, numeric = parsed, True
        why = "data.numeric"
    elif name in ds.categorical:
        s, numeric, why = _category_text(s) if numeric else s, False, "data.categorical"
    elif not numeric and why == "text":
        _refuse_stray_text(name, s, where)
    if spec.model.preprocess == "none" and not numeric:
        example = "" if why == "data.categorical" else s.dropna().iloc[0] if s.notna().any() else ""
        raise InputError(
            f"{where}: column '{name}' holds {'categories' if example == '' else 'text'}"
            f"{f' (e.g. {ui.quoted(example)})' if example != '' else ''} but model.preprocess is none, "
            "which needs numeric columns; set preprocess: auto or add the column to data.drop"
        )
    if name in spec.model.bins and not numeric:
        raise InputError(f"{where}: model.bins names column '{name}', which is not numeric")
    if numeric:
        return _numeric_column(name, s, where, why)
    has_missing = bool(s.isna().any())
    if s.dtype == _TEXT_DTYPE:  # text already: the same cells without a round trip through Python objects
        text = s.where(s.notna(), MISSING_CATEGORY) if has_missing else s
    elif s.dtype == np.bool_:  # "False"/"True" by index, as str() writes them (nothing is missing in a bool column)
        import pyarrow as pa

        cells = pa.array(["False", "True"], type=pa.large_string()).take(pa.array(s.to_numpy().astype(np.int8)))
        text = pd.Series(pd.array(cells, dtype=str), index=s.index, name=s.name)
    else:
        text = s.astype(object).where(s.notna(), MISSING_CATEGORY).astype(str)
    cats = tuple(sorted(distinct(text)))
    if len(cats) > MAX_CATEGORIES:
        raise InputError(
            f"{where}: categorical column '{name}' has {len(cats)} distinct values "
            f"(limit {MAX_CATEGORIES}); it looks like an identifier or free text: "
            "add it to data.drop or set it as data.id"
        )
    return Column(name, "categorical", categories=cats, has_missing=has_missing, why=why), text


#: pandas' text dtype (what ``astype(str)`` gives): a column of it is category text as it stands.
_TEXT_DTYPE = pd.Series([], dtype=str).dtype

#: A text column whose non-missing cells are numbers but for at most this many (or ``STRAY_SHARE`` of them)...
STRAY_CELLS = 5
#: ... is taken for a numeric column with typos, and refused instead of read as categories.
STRAY_SHARE = 0.01


def stray_text(s: pd.Series) -> tuple[int, int] | None:
    """(text cells, non-missing cells) when the column is numbers but for a few text cells, else None.

    A few is at most ``STRAY_CELLS`` or ``STRAY_SHARE`` of the non-missing cells (and at most a
    tenth). Cells that look like missing markers (``?``, ``NA``) do not count: :func:`_marker_hints`
    speaks of those.
    """
    text = s.dropna()
    if text.empty or pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s):
        return None
    cells = text.astype(str)
    values = pd.Series(distinct(cells))  # each distinct text once
    odd = set(values[pd.to_numeric(values, errors="coerce").isna()].tolist())
    if not odd or odd <= _LIKELY_MARKERS or len(odd) == len(values):
        return None
    stray, n = int(cells.isin(odd).sum()), len(cells)
    return (stray, n) if stray <= max(STRAY_CELLS, STRAY_SHARE * n) and stray <= 0.1 * n else None


def _refuse_stray_text(name: str, s: pd.Series, where: str) -> None:
    """InputError for a column of numbers with a few text cells (a typo such as ``4O``).

    Read as it is, one such cell turns the column into categories (every distinct number one
    category) without a word. The count is named, never the cells (they are data).
    """
    found = stray_text(s)
    if found is not None:
        raise InputError(
            f"{where}: column '{name}' holds numbers except {found[0]} of its {found[1]} non-missing cells, which "
            "are text, so it would be read as categories: fix those cells, list their text in "
            "data.missing_values if it means missing, list the column in data.numeric (the error then names the "
            "first such row) or in data.categorical to keep it as categories"
        )


def _numeric_column(name: str, s: pd.Series, where: str, why: str) -> tuple[Column, pd.Series]:
    vals = s.astype(float)
    inf = np.isinf(vals.to_numpy())
    if inf.any():
        row = int(vals.index[inf.nonzero()[0][0]])
        raise InputError(f"{where}: column '{name}' has an infinite value at row {row}; replace it")
    huge = np.abs(vals.to_numpy()) > MAX_ABS_VALUE
    if huge.any():  # scaling squares it: 1e308 overflows to inf and the fit fails with a misleading NaN error
        row = int(vals.index[huge.nonzero()[0][0]])
        raise InputError(
            f"{where}: column '{name}' has a value of magnitude above {MAX_ABS_VALUE:g} at row {row}, too large to "
            "compute with; rescale the column or add it to data.drop"
        )
    uniq = np.unique(vals.dropna().to_numpy())
    col = Column(
        name,
        "numeric",
        values=tuple(float(v) for v in uniq) if len(uniq) <= MAX_CATEGORIES else None,
        minimum=float(uniq[0]) if len(uniq) else None,
        maximum=float(uniq[-1]) if len(uniq) else None,
        has_missing=bool(vals.isna().any()),
        why=why,
    )
    return col, vals


def label_bin_names(edges: list[float]) -> list[str]:
    """Class names of ``data.label_bins``: bin k = [edge k-1, edge k), e.g. ``<25``, ``[25, 35)``, ``>=65``."""
    names = [f"<{edges[0]:g}"]
    names += [f"[{a:g}, {b:g})" for a, b in zip(edges, edges[1:], strict=False)]
    return [*names, f">={edges[-1]:g}"]


def _label(y: pd.Series, spec: Spec, where: str, notes: list[str]) -> np.ndarray:
    """The label column as classes: refused when it looks continuous, cut by ``data.label_bins`` when given."""
    ds = spec.data
    numeric = pd.api.types.is_numeric_dtype(y) and not pd.api.types.is_bool_dtype(y)
    if ds.label_bins is not None:
        if not numeric:
            raise InputError(f"{where}: data.label_bins cuts a numeric label, but label '{ds.label}' holds text")
        vals = y.to_numpy(dtype=float)
        if not np.isfinite(vals).all():
            raise InputError(f"{where}: label '{ds.label}' has an infinite value; replace it")
        names = np.asarray(label_bin_names(ds.label_bins), dtype=object)
        codes = np.searchsorted(np.asarray(ds.label_bins, dtype=float), vals, side="right")
        notes.append(f"label '{ds.label}' cut into {len(np.unique(codes))} classes by data.label_bins")
        return names[codes]
    if numeric:
        uniq = pd.unique(y.dropna())
        whole = bool(np.all(np.mod(uniq.astype(float), 1.0) == 0))
        if (not whole and len(uniq) > MAX_LABEL_VALUES) or len(uniq) > MAX_CATEGORIES:
            raise InputError(
                f"{where}: label '{ds.label}' looks continuous ({len(uniq)} distinct numeric values); "
                "mptool audits classifiers: bin it with data.label_bins or choose a class column"
            )
    if y.dtype == _TEXT_DTYPE:  # one str object per distinct label, shared (1.41 M labels: 11 MB, not 100 MB)
        codes, seen = factorized(y)
        if len(codes) and codes.min() >= 0:
            seen = np.asarray(seen, dtype=object)
            return remember(seen[codes], codes, seen)  # read-only, its codes kept (mptool.inputs.memo)
    return y.to_numpy()


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
        values = pd.Series(distinct(text))  # each distinct text once: a column of 50,000 cells has few
        numeric = pd.to_numeric(values, errors="coerce").notna()
        odd = set(values[~numeric].tolist())
        if numeric.any() and odd and odd <= _LIKELY_MARKERS and not odd & set(markers):
            shown = ", ".join(repr(v) for v in sorted(odd))
            notes.append(
                f"column '{name}' holds numbers and {shown} ({int(text.isin(odd).sum())} cells), so it is read as "
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
    labels, counts = label_counts(T.y)
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


def label_counts(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(y.astype(str), return_counts=True)``: each label's text (sorted) and its count.

    Text labels (every one a ``str``) are counted per distinct value (a hash factorisation), so
    no label is converted: the same texts as numpy's (trailing NULs dropped) and the same counts
    (issue 28). Other labels (numbers, mixed types, which a hash would merge: ``1`` and ``1.0``)
    go to numpy.
    """
    arr = np.asarray(y)
    codes, distinct = factorized(arr) if arr.dtype == object else (None, [])
    if codes is not None and (codes < 0).any():  # a missing label: counted as numpy counts it
        codes, distinct = pd.factorize(arr, use_na_sentinel=False)
    values = list(np.asarray(distinct, dtype=object).tolist())
    if codes is None or not all(type(v) is str for v in values):
        return np.unique(arr.astype(str), return_counts=True)
    tally: dict[str, int] = {}
    for value, count in zip(values, np.bincount(codes, minlength=len(values)).tolist(), strict=True):
        text = value.rstrip("\x00")
        tally[text] = tally.get(text, 0) + count
    labels = sorted(tally)
    return np.asarray(labels, dtype=str), np.asarray([tally[t] for t in labels], dtype=np.int64)


def read_rows_verbatim(
    path: str | Path, rows: np.ndarray | list[int], read: ReadSpec | None = None
) -> pd.DataFrame:
    """The data rows numbered ``rows`` (0-based, header excluded, in the given order) of a data file.

    CSV: every cell is kept as the text in the file (no type inference, empty cells stay
    empty), with the file's columns as :func:`read_csv` names them (``data.read``), so
    writing the frame back with the same separator gives the input's cells. Parquet: the
    typed rows. Row numbers are counted as :func:`read_csv` counts them.
    """
    path, read = Path(path), read or ReadSpec()
    if is_parquet(path):
        df = read_parquet(path, ())
    else:
        kwargs = _csv_options(read)
        if read.header is not True and read.header is not None:
            kwargs.update(header=None, names=_header_names(path, read))
        df = _pandas_csv(path, None, low_memory=False, **kwargs)
    return df.iloc[np.asarray(rows, dtype=np.int64)]

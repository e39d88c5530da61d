"""``mptool init DATA [--label COL]``: a commented starter spec on stdout, notes and the next command on stderr."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer

from mptool.cli.app import app
from mptool.runtime import ui
from mptool.runtime.errors import EXIT_OK, InputError

INIT_EPILOG = "Exit codes: 0 = the spec is printed; 2 = the file cannot be read (one error line)."


def spec_text(path: Path, st) -> str:
    """The starter spec as commented YAML (read back by the strict reader before it is printed)."""
    from mptool.inputs.spec import yaml_value as v

    r = st.read
    lines = [
        f"# Starter spec written by 'mptool init' for {ui.safe_line(path.name, 200)} ({st.rows} rows read).",
        "# Review every line; 'mptool check DATA --model THIS.yaml' shows what a run would do.",
        "data:",
        f"  label: {v(st.label)}    # {st.label_why}",
    ]
    if r:
        sep = {"\t": '"\\t"'}.get(r["separator"], v(r["separator"]))
        lines += [
            "  read:                 # how the file is read (detected; see docs/spec.md 'Reading data')",
            f"    separator: {sep}",
            f"    header: {v(r['header'])}"
            + ("" if r["header"] else "         # no header row: columns are named 0, 1, 2, ..."),
            f"    encoding: {v(r['encoding'])}",
            f"    decimal: {v(r['decimal'])}",
            f"    skip_spaces: {v(r['skip_spaces'])}" + ("     # cells start with a space after each separator"
                                                          if r["skip_spaces"] else ""),
        ]
    lines += [
        f"  missing_values: {v(st.missing_values)}   # cell texts read as missing",
        (f"  missing: impute       # rows with an empty cell are kept (drop would leave out {st.missing_rows} of "
         f"{st.rows} rows, {st.missing_rows / st.rows:.0%})" if st.missing == "impute" else
         "  missing: drop         # rows with a missing cell are left out (impute keeps them)"
         + (f"; here {st.missing_rows} of {st.rows} rows ({st.missing_rows / st.rows:.0%})" if st.missing_rows
            else "")),
        f"  drop: {v(st.drop)}",
        f"  categorical: {v(st.categorical)}   # numeric columns used as categories",
        f"  train_size: {v(st.train_size)}" + ("       # records drawn as T; null audits every row"
                                               if st.train_size else "       # null: every usable row is in T"),
        "model:",
        f"  estimator: {st.estimator}   # "
        + ("mostly categorical columns: exact leave-one-out (exact-naive-bayes)" if st.estimator == "categorical_nb"
           else "mostly numeric columns: exact leave-one-out (exact-newton-logistic)"),
        f"  params: {v(st.params)}",
        "  preprocess: auto",
    ]
    if st.bins:
        lines.append("  bins:                 # fixed edges (bin k = [edge k-1, edge k)): exact leave-one-out")
        lines += [f"    {v(name)}: {v(edges)}" for name, edges in st.bins.items()]
    lines += ["output:", "  bin_size: 0.01         # probabilities binned as in Long et al. 5.2", "seed: 0"]
    lines.append("# columns:")
    lines += [ui.safe_line(f"#   {name}: {why}", 300) for name, why in st.kinds.items()]
    return "\n".join(lines) + "\n"


def _header_flag(value: str | None) -> bool | None:
    """``--header true|false`` as a bool (None when not given); InputError for anything else."""
    if value is None:
        return None
    choice = {"true": True, "false": False}.get(value.strip().lower())
    if choice is None:
        raise InputError(f"--header {ui.quoted(ui.excerpt(value, 40))}: give true or false")
    return choice


def _drop_flag(values: list[str]) -> list[str]:
    """``--drop`` values as column names: each value a name, or names separated by commas (empty names refused).

    A value is split at commas; a column whose name holds a comma is named in the spec's
    data.drop instead.
    """
    names = []
    for value in values:
        parts = [p.strip() for p in value.split(",")]
        if not all(parts):
            raise InputError(f"--drop {ui.quoted(ui.excerpt(value, 40))}: give column names separated by commas")
        names += parts
    return names


@app.command(epilog=INIT_EPILOG)
def init(
    data: Annotated[Path, typer.Argument(help="Dataset (CSV, CSV.gz or Parquet).")],
    label: Annotated[str | None, typer.Option(help="The label column (guessed when not given).")] = None,
    header: Annotated[
        str | None, typer.Option(help="Whether the first line holds the column names: true or false (guessed "
                                      "when not given).")
    ] = None,
    drop: Annotated[
        list[str] | None, typer.Option(help="Columns left out of the model: COL or COL,COL (repeatable).")
    ] = None,
    weights: Annotated[
        str | None, typer.Option(help="The sample-weight column (kept out of the features; the spec has no "
                                      "weighted fit, so it stays dropped).")
    ] = None,
) -> int:
    """Print a commented starter spec for DATA: mptool init data.csv --label y > spec.yaml

    Detects how the file is read (separator, header row, encoding, decimal mark, spaces after
    separators, missing-value markers; --header true|false says whether the first line holds
    the column names), guesses the label (--label, a column named label,
    class, target, income, y or outcome, else the last column), drops the --drop columns and
    any column that looks like a sample weight (by name, e.g. fnlwgt, or by its values; --weights
    names it), says how many rows missing: drop would leave out, and chooses an estimator
    with an exact leave-one-out engine: categorical_nb for mostly categorical data (numeric
    columns as categories or cut at quantile edges), logistic_regression otherwise. The spec
    goes to stdout, notes and the next commands to stderr. Writes no file.
    """
    from mptool.inputs.sniff import starter
    from mptool.inputs.spec import parse_spec, read_yaml

    dropped = _drop_flag(drop or [])
    st = starter(data, label, _header_flag(header), dropped, weights)
    text = spec_text(data, st)
    parse_spec(read_yaml(text, "the starter spec"), "the starter spec")  # what init prints must load
    sys.stdout.write(text)
    sys.stdout.flush()
    for note in st.notes:
        ui.info(f"note: {note}")
    arg = shlex.quote(str(data))  # the commands are copied into a shell: a name like 'x.csv; rm ...' stays one word
    given = [("label", label), ("header", header), *(("drop", d) for d in drop or []), ("weights", weights)]
    flags = "".join(f" --{name} {shlex.quote(value)}" for name, value in given if value is not None)
    ui.info(f"next: mptool init {arg}{flags} > spec.yaml (review it), then mptool check {arg} --model spec.yaml, "
            f"then mptool pdtp {arg} --model spec.yaml")
    return EXIT_OK

"""``mptool report``: a results folder -> report.html / report.md (reads result files only)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from mptool.cli.app import (
    app,
)
from mptool.runtime import ui
from mptool.runtime.errors import EXIT_OK, InputError

REPORT_EXIT_HELP = (
    "Exit codes: 0 = report written (whatever the verdict: the audit commands gate CI); "
    "2 = no results in RESULTS_DIR, a result file edited (or, under MPTOOL_FINGERPRINT_KEY, a signed pdtp.json "
    "that does not verify), or bad usage; 3 = unexpected internal error."
)


ResultsArg = Annotated[Path | None, typer.Argument(help="The --out directory of pdtp / attack / reduce-dtp runs.")]
OutOpt = Annotated[
    Path | None,
    typer.Option(help="Report file; '-' prints to stdout [default: RESULTS_DIR/report.html or report.md]."),
]
FormatOpt = Annotated[str, typer.Option("--format", "-f", help="html, md (GitHub Markdown) or both.")]
TopOpt = Annotated[int, typer.Option(help="Riskiest records listed.")]
ShowValuesOpt = Annotated[
    bool,
    typer.Option(
        "--show-values",
        help="HTML only: add the riskiest records' labels, worst classes, feature values and ids (the label and "
        "features read from the audited CSV). "
        "Off by default; the Markdown summary never holds them.",
    ),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No notes on stderr.")]
ForceOpt = Annotated[bool, typer.Option(help="Overwrite an existing report file.")]
HistoryOpt = Annotated[
    Path | None,
    typer.Option(help="A folder of timestamped pdtp runs (one --out folder each): the trend report "
                 "[default file: DIR/history.html or history.md]. A RESULTS_DIR holding only run folders "
                 "is read the same way."),
]


@app.command(epilog=REPORT_EXIT_HELP)
def report(
    results_dir: ResultsArg = None,
    out: OutOpt = None,
    format: FormatOpt = "html",
    top: TopOpt = 20,
    show_values: ShowValuesOpt = False,
    quiet: QuietOpt = False,
    force: ForceOpt = False,
    history: HistoryOpt = None,
) -> int:
    """A self-contained HTML report and/or a Markdown summary of a results directory.

    Reads pdtp.csv/json, attack.csv/json and reduce.csv/json, whichever are present (says
    which are missing), and never reruns an audit. HTML: verdict, summary, plots embedded
    as SVG, riskiest records (row number, PDTP, probabilities), attacks, reduce-dtp
    trace, run manifest; one file, no network. Markdown: verdict, summary and riskiest
    records for $GITHUB_STEP_SUMMARY ('--format md --out - >> "$GITHUB_STEP_SUMMARY"').
    No report shows the records' labels, worst classes, feature values or ids unless --show-values is given, and
    then only the HTML one. An existing report file is overwritten only with --force; the
    results and the data and spec they name never.

    With --history DIR: max/mean PDTP and violations per run over time (trend plot in HTML)
    and the records whose PDTP changed most (row and fingerprint, never ids or values).
    """
    from mptool.outputs.report import load_results, output_paths, render
    from mptool.outputs.report.history import has_runs
    from mptool.outputs.report.loader import input_files
    from mptool.outputs.results import check_output_file

    to_stdout = check_report_flags(results_dir, out, format, top, show_values, history)
    if history is not None or has_runs(results_dir):
        return _history_report(history or results_dir, out, format, top, quiet, force, to_stdout)
    paths = output_paths(results_dir, None if to_stdout else out, format)
    inputs = load_results(results_dir, top, show_values=show_values)
    for path in [] if to_stdout else paths.values():
        check_output_file(path, force, "--out", input_files(inputs))
    if inputs.missing and not quiet:  # --quiet: errors only (a CI log need not list absent attack files)
        ui.warn(f"not in {results_dir}: {', '.join(inputs.missing)}; the report leaves out what needs them")
    for note in [] if quiet else inputs.notes:  # the report's notice box says them too
        ui.warn(note)
    texts = render(inputs, format, top, quiet, show_values=show_values)
    if show_values and inputs.features is not None:
        ui.warn(
            f"the HTML report holds the feature values of the {len(inputs.features)} riskiest training records "
            "(--show-values): do not publish it"
        )
    return _emit(texts, paths, to_stdout, "report", quiet)


def check_report_flags(
    results_dir: Path | None, out: Path | None, fmt: str, top: int, show_values: bool, history: Path | None
) -> bool:
    """Every ``report`` flag checked before anything is read; whether the report goes to stdout (``--out -``)."""
    from mptool.outputs.report import FORMATS

    if fmt not in FORMATS:
        raise InputError(f"--format must be one of {', '.join(FORMATS)} (got '{fmt}')")
    if top < 1:
        raise InputError(f"--top must be 1 or more (got {top})")
    to_stdout = out is not None and str(out) == "-"
    if to_stdout and fmt == "both":
        raise InputError("--out - (stdout) takes one format: use --format html or --format md")
    if show_values and fmt == "md":
        raise InputError(
            "--show-values applies to the HTML report only: the Markdown summary never holds feature values "
            "(use --format html or both)"
        )
    if history is not None and results_dir is not None:
        raise InputError("give RESULTS_DIR or --history DIR, not both")
    if results_dir is None and history is None:
        raise InputError("mptool report: give RESULTS_DIR (a run's --out folder) or --history DIR (a folder of runs)")
    return to_stdout


def _emit(texts: dict[str, str], paths: dict[str, Path], to_stdout: bool, what: str, quiet: bool) -> int:
    """The rendered report: to stdout (one format), or every file in ``paths`` (all rendered before any is written)."""
    from mptool.outputs.formats import OutputFile, write_files

    if to_stdout:
        sys.stdout.write(next(iter(texts.values())))
        return EXIT_OK
    files = [OutputFile(str(path), "text", texts[kind]) for kind, path in paths.items()]
    for path in write_files(Path("."), files):  # Path(".") / name is name, relative or absolute
        ui.info(f"{what}: {path}", quiet)
    return EXIT_OK


def _history_report(
    folder: Path, out: Path | None, fmt: str, top: int, quiet: bool, force: bool, to_stdout: bool
) -> int:
    """``report --history DIR``: the trend over the runs in DIR's subfolders."""
    from mptool.outputs.report.history import load_history, render_history
    from mptool.outputs.results import check_output_file

    hist = load_history(folder)
    base = out if out is not None else folder / ("history.md" if fmt == "md" else "history.html")
    paths = {"html": base, "md": base if fmt == "md" else base.with_suffix(".md")}
    paths = {k: v for k, v in paths.items() if fmt in (k, "both")}
    inputs = [("a run's result file", run.path) for run in hist.runs]
    for path in [] if to_stdout else paths.values():
        check_output_file(path, force, "--out", inputs)
    for note in [] if quiet else hist.notes:  # --quiet: errors only; the report lists them too
        ui.warn(note)
    return _emit(render_history(hist, fmt, top), paths, to_stdout, "history report", quiet)

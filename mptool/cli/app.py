"""mptool's command line: one thin function per subcommand.

Flags become spec overrides, the subcommand's run() does the work, and errors map to exit
codes: 0 pass, 1 finding, 2 bad input or usage, 3 internal error, 130 interrupted.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from mptool import __version__
from mptool.runtime import ui
from mptool.runtime.errors import EXIT_BAD_INPUT, EXIT_FINDING, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, InputError

EXIT_CODES_HELP = (
    "Exit codes: 0 = DTP-1 holds (no record above the threshold); 1 = violation; "
    "2 = bad input or usage; 3 = unexpected internal error (rerun with --debug for a traceback); "
    "130 = interrupted."
)

app = typer.Typer(
    name="mptool",
    help="Membership-privacy audit for machine-learning classifiers (PDTP/DTP, Long et al.).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
_state = {"debug": False}
out_console = Console(highlight=False, soft_wrap=True)

# Scale-out and resume options shared by every subcommand with long parallel work.
BackendOpt = Annotated[
    str, typer.Option(help="Parallel backend: loky (local processes), threading, dask or ray.")
]
SchedulerOpt = Annotated[
    str | None,
    typer.Option(help="Address of a running Dask scheduler (e.g. tcp://10.0.0.5:8786); implies --backend dask."),
]
ResumeOpt = Annotated[
    bool, typer.Option(help="Continue the interrupted run whose checkpoint is in --out DIR.")
]


def _version(value: bool) -> None:
    if value:
        print(f"mptool {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of internal errors.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Membership-privacy audit for machine-learning classifiers."""
    _state["debug"] = debug


def parse_rows(text: str | None) -> list[int] | None:
    """``"0,5,9"`` -> [0, 5, 9]; InputError on anything else."""
    if text is None:
        return None
    try:
        rows = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InputError(f"--records takes comma-separated CSV row numbers such as 0,5,9 (got '{text}')") from None
    if not rows or min(rows) < 0:
        raise InputError(f"--records takes non-negative CSV row numbers such as 0,5,9 (got '{text}')")
    return rows


def resolve_inputs(data: Path | None, model: Path | None, command: str, quiet: bool) -> tuple[Path, Path]:
    """DATA and --model, or the bundled Adult demo when both are omitted."""
    from mptool.inputs.bundled import ADULT_CSV, DEMO_CONFIG

    if data is None and model is None:
        ui.info(
            f"No data given: auditing the bundled UCI Adult data ({ADULT_CSV.name}) with configs/"
            f"{DEMO_CONFIG.name}. Run 'mptool {command} DATA.csv --model SPEC.yaml' for your own.",
            quiet,
        )
        return ADULT_CSV, DEMO_CONFIG
    if data is None:
        raise InputError(f"mptool {command}: give the DATA.csv argument together with --model")
    if model is None:
        raise InputError(f"mptool {command}: --model SPEC.yaml is required with DATA (see configs/ for examples)")
    return data, model


def print_pdtp_summary(summary: dict, table, quiet: bool) -> None:
    """Verdict line and the ten riskiest records."""
    verdict = summary["verdict"]
    line = (
        f"DTP-1 {'VIOLATED' if verdict == 'fail' else 'holds'}: max PDTP {summary['max']:.4f} "
        f"(threshold {summary['threshold']:g}), {summary['violations']} of {summary['n']} records above; "
        f"engine {summary['engine']}, {summary['timings']['total_s']:.2f}s"
    )
    if quiet:
        print(line)
        return
    top = table.sort_values(["pdtp", "row"], ascending=[False, True]).head(10)
    t = Table(title="Riskiest records", title_justify="left")
    for col in ("row", *(["id"] if "id" in table else []), "label", "pdtp", "worst_class", "p_full", "p_loo"):
        t.add_column(col, justify="right" if col in ("row", "pdtp", "p_full", "p_loo") else "left")
    for _, r in top.iterrows():
        cells = [str(r["row"]), *([str(r["id"])] if "id" in table else [])]
        cells += [str(r["label"]), f"{r['pdtp']:.4f}", str(r["worst_class"]), f"{r['p_full']:.3f}", f"{r['p_loo']:.3f}"]
        t.add_row(*cells)
    out_console.print(t)
    s = summary
    out_console.print(
        f"records {s['n']} (of T={s['n_train']}), mean {s['mean']:.4f}, median {s['median']:.4f}, "
        f"p95 {s['p95']:.4f}, max {s['max']:.4f}"
    )
    out_console.print(line, style="bold red" if verdict == "fail" else "bold green")


@app.command(epilog=EXIT_CODES_HELP)
def pdtp(
    data: Annotated[Path | None, typer.Argument(help="Dataset CSV with a header row (omit both for the demo).")] = None,
    model: Annotated[Path | None, typer.Option("--model", "-m", help="Model spec YAML.")] = None,
    out: Annotated[Path | None, typer.Option(help="Output directory [default: mptool-out/pdtp-TIMESTAMP].")] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Parallel workers; 0 = every core.")] = 0,
    threshold: Annotated[float, typer.Option(help="DTP-1 threshold on PDTP (log-ratio).")] = 1.0,
    train_size: Annotated[int | None, typer.Option(help="Override data.train_size.")] = None,
    seed: Annotated[int | None, typer.Option(help="Override the spec's seed.")] = None,
    bin_size: Annotated[float | None, typer.Option(help="Override output.bin_size (0 = no binning).")] = None,
    records: Annotated[str | None, typer.Option(help="Only these CSV rows, e.g. 0,5,9 (must be in T).")] = None,
    sample: Annotated[int | None, typer.Option(help="Only K records of T, drawn with the seed.")] = None,
    engine: Annotated[str, typer.Option(help="Leave-one-out engine: auto, exact or refit.")] = "auto",
    queries: Annotated[
        str,
        typer.Option(
            help="Query points of the DTP estimate: self (PDTP, x_t only), train (every record of T, "
            "as IBM ART) or a CSV file with the feature columns; adds column dtp_queries."
        ),
    ] = "self",
    allow_import: Annotated[
        list[str] | None, typer.Option("--allow-import", help="Module a dotted estimator path may import from.")
    ] = None,
    force: Annotated[bool, typer.Option(help="Overwrite results already in --out.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the verdict line; no progress.")] = False,
    backend: BackendOpt = "loky",
    scheduler: SchedulerOpt = None,
    resume: ResumeOpt = False,
) -> int:
    """PDTP of every training record (leave-one-out) and the DTP-1 verdict.

    Writes DIR/pdtp.csv (one row per record: row, [id], label, pdtp, worst_class, p_full,
    p_loo, violation) and DIR/pdtp.json (summary + records). With no arguments, audits the
    bundled UCI Adult data with configs/adult-nb.yaml.
    """
    from mptool.api.pdtp import PdtpOptions, run_pdtp, select_positions
    from mptool.inputs.prepare import prepare
    from mptool.inputs.spec import load_spec
    from mptool.loo import select_engine
    from mptool.outputs.results import default_out_dir, prepare_out_dir, records_for_json, to_csv, to_json, write_atomic
    from mptool.runtime.checkpoint import Checkpoint, options_dict, run_key, saving_on_interrupt
    from mptool.runtime.parallel import check_backend, session

    data_path, spec_path = resolve_inputs(data, model, "pdtp", quiet)
    if threshold < 0:
        raise InputError(f"--threshold must be non-negative (got {threshold})")
    if jobs < 0:
        raise InputError(f"--jobs must be 0 (every core) or a positive number (got {jobs})")
    if resume and out is None:
        raise InputError("--resume needs --out DIR: the output directory of the interrupted run")
    backend = check_backend(backend, scheduler)
    overrides = {"data.train_size": train_size, "seed": seed, "output.bin_size": bin_size}
    spec = load_spec(spec_path, overrides)
    options = PdtpOptions(
        threshold, parse_rows(records), sample, jobs or None, engine, backend=backend, queries=queries
    )
    out_dir = prepare_out_dir(out or default_out_dir("pdtp"), ["pdtp.csv", "pdtp.json"], force)
    prep = prepare(data_path, spec, tuple(allow_import or ()))
    for note in prep.notes:
        ui.warn(note)
    select_positions(prep, options.records, options.sample)  # fail fast: before progress output
    select_engine(options.engine, spec, prep.template)
    key = run_key("pdtp", spec.sha256(), prep.train.sha256, options_dict(options))
    ckpt = Checkpoint.open(out_dir, key, resume=resume, force=force)
    ui.info(f"training set T: {prep.train.n} records from {data_path}; estimator {spec.model.estimator}", quiet)
    with session(backend, scheduler, jobs or None), saving_on_interrupt(ckpt):
        outcome = run_pdtp(prep, options, lambda n, label: ui.progress(n, label, quiet), checkpoint=ckpt)
    if ckpt.reused:
        ui.info(f"resumed: {sum(ckpt.reused.values())} finished record(s) taken from {ckpt.directory}", quiet)
    summary = {**outcome.summary, "spec": spec.model_dump(mode="json"), "out": str(out_dir)}
    write_atomic(out_dir / "pdtp.csv", to_csv(outcome.table))
    write_atomic(out_dir / "pdtp.json", to_json({"summary": summary, "records": records_for_json(outcome.table)}))
    ckpt.clear()
    print_pdtp_summary(outcome.summary, outcome.table, quiet)
    ui.info(f"results: {out_dir / 'pdtp.csv'}, {out_dir / 'pdtp.json'}", quiet)
    return EXIT_FINDING if outcome.summary["verdict"] == "fail" else EXIT_OK


REDUCE_EXIT_HELP = (
    "Exit codes: 0 = a prefix of removals within --max-removals reaches DTP-1 (or T already satisfies it); "
    "1 = none does; 2 = bad input or usage; 3 = unexpected internal error; 130 = interrupted."
)


@app.command("reduce-dtp", epilog=REDUCE_EXIT_HELP)
def reduce_dtp(
    data: Annotated[Path | None, typer.Argument(help="Dataset CSV with a header row (omit both for the demo).")] = None,
    model: Annotated[Path | None, typer.Option("--model", "-m", help="Model spec YAML.")] = None,
    out: Annotated[Path | None, typer.Option(help="Output directory [default: mptool-out/reduce-TIMESTAMP].")] = None,
    threshold: Annotated[float, typer.Option(help="DTP-1 threshold on PDTP (log-ratio).")] = 1.0,
    max_removals: Annotated[int, typer.Option(help="Removal budget: steps in the trace.")] = 50,
    strategy: Annotated[str, typer.Option(help="greedy (the paper's) or lookahead:K.")] = "greedy",
    write_clean: Annotated[
        Path | None,
        typer.Option(
            help="Write T minus the best prefix (the lowest-maximum one if DTP-1 is not reached) here, "
            "in the input's columns and cell text; a .gz name compresses."
        ),
    ] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Parallel workers; 0 = every core.")] = 0,
    train_size: Annotated[int | None, typer.Option(help="Override data.train_size.")] = None,
    seed: Annotated[int | None, typer.Option(help="Override the spec's seed.")] = None,
    bin_size: Annotated[float | None, typer.Option(help="Override output.bin_size (0 = no binning).")] = None,
    engine: Annotated[str, typer.Option(help="Leave-one-out engine: auto, exact or refit.")] = "auto",
    allow_import: Annotated[
        list[str] | None, typer.Option("--allow-import", help="Module a dotted estimator path may import from.")
    ] = None,
    force: Annotated[bool, typer.Option(help="Overwrite results already in --out and --write-clean.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the verdict line; no progress.")] = False,
    backend: BackendOpt = "loky",
    scheduler: SchedulerOpt = None,
    resume: ResumeOpt = False,
) -> int:
    """Remove the riskiest records step by step until DTP-1 holds (Long et al. section 8).

    Each step removes a record and recomputes every remaining record's PDTP. Writes
    DIR/reduce.csv (step, row, id, pdtp_before, max_pdtp_after, violations_after,
    records_left; step 0 = no removal) and DIR/reduce.json (best_prefix, reached, strategy,
    engine, threshold, timings, manifest, trace). With --write-clean, also DIR/clean-spec.yaml
    (train_size null): 'mptool pdtp CLEAN.csv --model DIR/clean-spec.yaml' reproduces best_max.
    """
    from mptool.api.reduce import ReduceOptions, parse_strategy, print_trace, run_reduce
    from mptool.api.reduce import write_clean as write_clean_csv
    from mptool.inputs.prepare import prepare
    from mptool.inputs.spec import load_spec
    from mptool.outputs.results import default_out_dir, prepare_out_dir, to_csv, to_json, write_atomic
    from mptool.runtime.checkpoint import Checkpoint, options_dict, run_key, saving_on_interrupt
    from mptool.runtime.parallel import check_backend, checkpointing, session

    data_path, spec_path = resolve_inputs(data, model, "reduce-dtp", quiet)
    if threshold < 0:
        raise InputError(f"--threshold must be non-negative (got {threshold})")
    if max_removals < 0:
        raise InputError(f"--max-removals must be 0 or more (got {max_removals})")
    if jobs < 0:
        raise InputError(f"--jobs must be 0 (every core) or a positive number (got {jobs})")
    if resume and out is None:
        raise InputError("--resume needs --out DIR: the output directory of the interrupted run")
    backend = check_backend(backend, scheduler)
    options = ReduceOptions(threshold, max_removals, parse_strategy(strategy), jobs or None, engine, backend=backend)
    spec = load_spec(spec_path, {"data.train_size": train_size, "seed": seed, "output.bin_size": bin_size})
    names = ["reduce.csv", "reduce.json", *(["clean-spec.yaml"] if write_clean else [])]
    out_dir = prepare_out_dir(out or default_out_dir("reduce"), names, force)
    if write_clean is not None:
        if write_clean.exists() and not force:
            raise InputError(f"{write_clean}: --write-clean target exists; pass --force or choose another path")
        if write_clean.resolve() == Path(data_path).resolve():
            raise InputError(f"{write_clean}: --write-clean would overwrite the input data; choose another path")
        if not write_clean.parent.is_dir():
            raise InputError(f"{write_clean}: the folder for --write-clean does not exist")
    prep = prepare(data_path, spec, tuple(allow_import or ()))
    for note in prep.notes:
        ui.warn(note)
    ui.info(f"training set T: {prep.train.n} records from {data_path}; estimator {spec.model.estimator}", quiet)
    ckpt = Checkpoint.open(out_dir, run_key("reduce-dtp", spec.sha256(), prep.train.sha256, options_dict(options)),
                           resume=resume, force=force)
    with session(backend, scheduler, jobs or None), checkpointing(ckpt), saving_on_interrupt(ckpt):
        outcome = run_reduce(prep, options, lambda n, label: ui.progress(n, label, quiet))
    if ckpt.reused:
        ui.info(f"resumed: {sum(ckpt.reused.values())} finished task(s) taken from {ckpt.directory}", quiet)
    if write_clean is not None:
        outcome.summary["clean"] = write_clean_csv(prep, outcome, write_clean, out_dir / "clean-spec.yaml")
        for note in outcome.summary["clean"]["notes"]:
            ui.warn(note)
    document = {**outcome.summary, "spec": spec.model_dump(mode="json"), "out": str(out_dir)}
    document["trace"] = document.pop("trace")  # the long list last
    write_atomic(out_dir / "reduce.csv", to_csv(outcome.table))
    write_atomic(out_dir / "reduce.json", to_json(document))
    ckpt.clear()
    print_trace(outcome, quiet)
    ui.info(f"results: {out_dir / 'reduce.csv'}, {out_dir / 'reduce.json'}", quiet)
    if write_clean is not None:
        ui.info(f"clean data: {write_clean}; check it with: {outcome.summary['clean']['command']}", quiet)
    return EXIT_OK if outcome.summary["reached"] else EXIT_FINDING


ATTACK_EXIT_HELP = (
    "Exit codes: 0 = no gate given or no gate exceeded; 1 = --max-accuracy or --max-auc exceeded by the "
    "strongest attack; 2 = bad input or usage; 3 = unexpected internal error; 130 = interrupted."
)


@app.command(epilog=ATTACK_EXIT_HELP)
def attack(
    data: Annotated[Path | None, typer.Argument(help="Dataset CSV with a header row (omit both for the demo).")] = None,
    model: Annotated[Path | None, typer.Option("--model", "-m", help="Model spec YAML.")] = None,
    attacks: Annotated[
        str, typer.Option(help="Comma-separated: untargeted,distance,frequency,threshold,lira, or all.")
    ] = "all",
    candidates: Annotated[int, typer.Option(help="Size of the candidate set D drawn from the data (even).")] = 2000,
    iterations: Annotated[int, typer.Option(help="Iterations; each trains A on both halves of D.")] = 10,
    targets: Annotated[int, typer.Option(help="Target records drawn from D.")] = 100,
    shadows: Annotated[int, typer.Option(help="Shadow models M of the untargeted and threshold attacks.")] = 20,
    pairs: Annotated[int, typer.Option(help="In/out shadow pairs per target per iteration (targeted, LiRA).")] = 5,
    shadow_pool: Annotated[
        int, typer.Option(help="K > 0: one shared pool of K shadows on random halves of D for every attack.")
    ] = 0,
    shadow_data: Annotated[
        str, typer.Option(help="Untargeted shadow data: population, marginals or noisy:F.")
    ] = "population",
    per_class: Annotated[bool, typer.Option(help="Untargeted: one attack model per class (Shokri).")] = False,
    pdtp_iterations: Annotated[int, typer.Option(help="Iterations whose PDTP is measured and averaged.")] = 10,
    max_accuracy: Annotated[float | None, typer.Option(help="Exit 1 if an attack's accuracy exceeds this.")] = None,
    max_auc: Annotated[float | None, typer.Option(help="Exit 1 if an attack's ROC AUC exceeds this.")] = None,
    out: Annotated[Path | None, typer.Option(help="Output directory [default: mptool-out/attack-TIMESTAMP].")] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Parallel workers; 0 = every core.")] = 0,
    seed: Annotated[int | None, typer.Option(help="Override the spec's seed.")] = None,
    bin_size: Annotated[float | None, typer.Option(help="Override output.bin_size (0 = no binning).")] = None,
    engine: Annotated[str, typer.Option(help="Leave-one-out engine for PDTP: auto, exact or refit.")] = "auto",
    allow_import: Annotated[
        list[str] | None, typer.Option("--allow-import", help="Module a dotted estimator path may import from.")
    ] = None,
    force: Annotated[bool, typer.Option(help="Overwrite results already in --out.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the result lines; no progress.")] = False,
    backend: BackendOpt = "loky",
    scheduler: SchedulerOpt = None,
    resume: ResumeOpt = False,
) -> int:
    """Membership inference attacks under the paper's protocol, per-target accuracy beside PDTP.

    Long et al. 5.4: D (--candidates rows) is split into halves each iteration; the model
    trained on each half is attacked on every target, so each target is once a member and
    once not. Attacks: untargeted (Shokri), distance and frequency (Long 5.3), threshold
    (Yeom), lira (Carlini; online and offline). Without --shadow-pool, targeted attacks and
    LiRA train --pairs fresh in/out pairs per target per iteration, as the paper does.

    DIR/attack.csv, one row per target: row, [id], label, pdtp_mean, <attack>_accuracy per
    attack (lira gives lira_ and lira_offline_), max_accuracy, lira_score (mean online
    LiRA log-likelihood ratio while a member), kl_leakage (Farokhi-Kaafar), n_attacks,
    pdtp_measurements. DIR/attack.json: {"summary": {...}, "attacks": {name: {accuracy,
    precision, recall, f1, auc, advantage, tpr_at_1pct_fpr, tpr_at_0.1pct_fpr,
    correlation_with_pdtp, roc: {fpr, tpr}}}, "records": [...]}.
    """
    from mptool.attacks.protocol import AttackOptions, parse_attacks, run_attack, summary_lines
    from mptool.inputs.prepare import prepare
    from mptool.inputs.spec import load_spec
    from mptool.outputs.results import default_out_dir, prepare_out_dir, records_for_json, to_csv, to_json, write_atomic
    from mptool.runtime.checkpoint import Checkpoint, options_dict, run_key, saving_on_interrupt
    from mptool.runtime.parallel import check_backend, checkpointing, session

    data_path, spec_path = resolve_inputs(data, model, "attack", quiet)
    if jobs < 0:
        raise InputError(f"--jobs must be 0 (every core) or a positive number (got {jobs})")
    options = AttackOptions(
        attacks=parse_attacks(attacks), candidates=candidates, iterations=iterations, targets=targets,
        shadows=shadows, pairs=pairs, shadow_pool=shadow_pool, shadow_data=shadow_data, per_class=per_class,
        pdtp_iterations=pdtp_iterations, jobs=jobs or None, engine=engine, max_accuracy=max_accuracy,
        max_auc=max_auc, backend=check_backend(backend, scheduler),
    )
    if resume and out is None:
        raise InputError("--resume needs --out DIR: the output directory of the interrupted run")
    spec = load_spec(spec_path, {"seed": seed, "output.bin_size": bin_size})
    out_dir = prepare_out_dir(out or default_out_dir("attack"), ["attack.csv", "attack.json"], force)
    prep = prepare(data_path, spec, tuple(allow_import or ()))
    for note in prep.notes:
        ui.warn(note)
    ui.info(
        f"candidate set D: {candidates} of {prep.population.n} records from {data_path}; "
        f"estimator {spec.model.estimator}; attacks {', '.join(options.attacks)}",
        quiet,
    )
    ckpt = Checkpoint.open(out_dir, run_key("attack", spec.sha256(), prep.train.sha256, options_dict(options)),
                           resume=resume, force=force)
    with session(options.backend, scheduler, jobs or None), checkpointing(ckpt), saving_on_interrupt(ckpt):
        outcome = run_attack(prep, options, lambda n, label: ui.progress(n, label, quiet))
    if ckpt.reused:
        ui.info(f"resumed: {sum(ckpt.reused.values())} finished task(s) taken from {ckpt.directory}", quiet)
    summary = {**outcome.summary, "spec": spec.model_dump(mode="json"), "out": str(out_dir)}
    document = {"summary": summary, "attacks": outcome.attacks, "records": records_for_json(outcome.table)}
    write_atomic(out_dir / "attack.csv", to_csv(outcome.table))
    write_atomic(out_dir / "attack.json", to_json(document))
    ckpt.clear()
    for note in outcome.notes:
        ui.info(note, quiet)
    for line in summary_lines(outcome):
        print(line)
    exceeded = outcome.summary["gate"]["exceeded"]
    for item in exceeded:
        print(f"gate exceeded: {item}")
    ui.info(f"results: {out_dir / 'attack.csv'}, {out_dir / 'attack.json'}", quiet)
    return EXIT_FINDING if exceeded else EXIT_OK


REPORT_EXIT_HELP = (
    "Exit codes: 0 = report written (whatever the verdict: the audit commands gate CI); "
    "2 = no results in RESULTS_DIR, or bad usage; 3 = unexpected internal error."
)


@app.command(epilog=REPORT_EXIT_HELP)
def report(
    results_dir: Annotated[Path, typer.Argument(help="The --out directory of pdtp / attack / reduce-dtp runs.")],
    out: Annotated[
        Path | None,
        typer.Option(help="Report file; '-' prints to stdout [default: RESULTS_DIR/report.html or report.md]."),
    ] = None,
    format: Annotated[str, typer.Option("--format", "-f", help="html, md (GitHub Markdown) or both.")] = "html",
    top: Annotated[int, typer.Option(help="Riskiest records listed.")] = 20,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No notes on stderr.")] = False,
) -> int:
    """A self-contained HTML report and/or a Markdown summary of a results directory.

    Reads pdtp.csv/json, attack.csv/json and reduce.csv/json, whichever are present (says
    which are missing), and never reruns an audit. HTML: verdict, summary, plots embedded
    as SVG, riskiest records with feature values, attacks, reduce-dtp trace, run manifest;
    one file, no network. Markdown: verdict, summary and riskiest records for
    $GITHUB_STEP_SUMMARY ('--format md --out - >> "$GITHUB_STEP_SUMMARY"'). Overwrites --out.
    """
    from mptool.outputs.report import FORMATS, load_results, output_paths, render
    from mptool.outputs.results import write_atomic

    if format not in FORMATS:
        raise InputError(f"--format must be one of {', '.join(FORMATS)} (got '{format}')")
    if top < 1:
        raise InputError(f"--top must be 1 or more (got {top})")
    to_stdout = out is not None and str(out) == "-"
    if to_stdout and format == "both":
        raise InputError("--out - (stdout) takes one format: use --format html or --format md")
    paths = output_paths(results_dir, None if to_stdout else out, format)
    for path in paths.values():
        if not to_stdout and (path.is_dir() or not path.parent.is_dir()):
            raise InputError(f"{path}: --out must be a file in an existing folder")
    inputs = load_results(results_dir, top)
    if inputs.missing:
        ui.warn(f"not in {results_dir}: {', '.join(inputs.missing)}; the report leaves out what needs them")
    for note in inputs.notes:
        ui.warn(note)
    texts = render(inputs, format, top, quiet)
    if to_stdout:
        sys.stdout.write(next(iter(texts.values())))
        return EXIT_OK
    for kind, path in paths.items():
        write_atomic(path, texts[kind])
        ui.info(f"report: {path}", quiet)
    return EXIT_OK


datasets_app = typer.Typer(help="Build datasets for experiments (the purchase-style stand-in).", no_args_is_help=True)
app.add_typer(datasets_app, name="datasets")


@datasets_app.command("make-purchase")
def make_purchase_cmd(
    out: Annotated[Path, typer.Option(help="CSV file to write (.gz compresses).")] = Path("purchase.csv.gz"),
    rows: Annotated[int, typer.Option(help="Customers (records).")] = 5000,
    features: Annotated[int, typer.Option(help="Binary product-category columns.")] = 600,
    classes: Annotated[int, typer.Option(help="k-means clusters = class labels (the paper: 10).")] = 10,
    segments: Annotated[int, typer.Option(help="Latent shopper types the purchases are drawn from.")] = 20,
    seed: Annotated[int, typer.Option(help="Seed of the generator and of k-means.")] = 0,
    force: Annotated[bool, typer.Option(help="Overwrite --out if it exists.")] = False,
) -> int:
    """Purchase-style data: binary purchase columns and k-means cluster labels.

    The stand-in for the Kaggle purchase data of Long et al. section 5.1. Writes columns
    c000.. (0/1) and 'class' (cluster index). Use it with a spec whose data.label is
    'class', e.g. estimator mlp with max_iter 30 (the paper's purchase NN).
    """
    from mptool.inputs.purchase import make_purchase
    from mptool.outputs.results import write_atomic

    if out.exists() and not force:
        raise InputError(f"{out}: exists; pass --force to overwrite or choose another --out")
    if not out.parent.is_dir():
        raise InputError(f"{out}: the folder does not exist")
    frame = make_purchase(rows, features, classes, segments, seed)
    text = frame.to_csv(index=False, lineterminator="\n")
    if out.suffix == ".gz":
        import gzip

        write_atomic(out, gzip.compress(text.encode(), mtime=0))
    else:
        write_atomic(out, text)
    counts = frame["class"].value_counts().sort_index().tolist()
    print(f"wrote {out}: {rows} records, {features} binary features, classes (k-means) sizes {counts}")
    return EXIT_OK


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app and map outcomes to exit codes."""
    try:
        code = app(args=argv, prog_name="mptool", standalone_mode=False)
    except typer.Exit as exc:
        code = exc.exit_code
    except typer.TyperException as exc:  # usage errors from argument parsing
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            print(ctx.get_help())
            code = EXIT_OK
        else:  # one line, like every other bad-input message
            where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            print(f"mptool: error: {exc.format_message()}{where}", file=sys.stderr)
            code = EXIT_BAD_INPUT
    except (typer.Abort, KeyboardInterrupt):
        print("mptool: interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    except InputError as exc:
        print(f"mptool: error: {exc}", file=sys.stderr)
        code = EXIT_BAD_INPUT
    except Exception as exc:  # noqa: BLE001 - last-resort mapping to exit 3
        if _state["debug"]:
            traceback.print_exc()
        print(
            f"mptool: internal error: {exc.__class__.__name__}: {exc}".splitlines()[0]
            + " (rerun with --debug for a traceback; please report it)",
            file=sys.stderr,
        )
        code = EXIT_INTERNAL
    sys.exit(code if isinstance(code, int) else EXIT_OK)

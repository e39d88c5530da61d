"""``mptool reduce-dtp``: flags -> :func:`mptool.api.operations.reduce_dtp` -> reduce.csv/json, clean CSV."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from mptool.cli import ci
from mptool.cli.app import (
    AllowImportOpt,
    BackendOpt,
    BinSizeOpt,
    CheckpointOpener,
    DataArg,
    EngineOpt,
    JobsOpt,
    ModelOpt,
    QuietOpt,
    ResumeOpt,
    SchedulerOpt,
    SeedOpt,
    ThresholdOpt,
    TrainSizeOpt,
    app,
    resolve_inputs,
)
from mptool.inputs import options as flags
from mptool.runtime import startup, ui
from mptool.runtime.errors import EXIT_FINDING, EXIT_OK, InputError

REDUCE_EXIT_HELP = (
    "Exit codes: 0 = a prefix of removals within --max-removals reaches DTP-1 (or T already satisfies it); "
    "1 = none does; 2 = bad input or usage; 3 = unexpected internal error; 130/143 = interrupted (SIGINT/SIGTERM)."
)


OutOpt = Annotated[Path | None, typer.Option(help="Output directory [default: mptool-out/reduce-TIMESTAMP].")]
MaxRemovalsOpt = Annotated[int, typer.Option(help="Removal budget: steps in the trace.")]
StrategyOpt = Annotated[str, typer.Option(help="greedy (the paper's) or lookahead:K.")]
WriteCleanOpt = Annotated[
    Path | None,
    typer.Option(
        help="Write T minus the best prefix (the lowest-maximum one if DTP-1 is not reached) here, "
        "in the input's columns and cell text; a .gz name compresses."
    ),
]
ForceOpt = Annotated[bool, typer.Option(help="Overwrite results already in --out and --write-clean.")]


@app.command("reduce-dtp", epilog=REDUCE_EXIT_HELP)
def reduce_dtp(
    data: DataArg = None,
    model: ModelOpt = None,
    out: OutOpt = None,
    threshold: ThresholdOpt = 1.0,
    max_removals: MaxRemovalsOpt = 50,
    strategy: StrategyOpt = "greedy",
    write_clean: WriteCleanOpt = None,
    jobs: JobsOpt = 0,
    train_size: TrainSizeOpt = None,
    seed: SeedOpt = None,
    bin_size: BinSizeOpt = None,
    engine: EngineOpt = "auto",
    allow_import: AllowImportOpt = None,
    force: ForceOpt = False,
    quiet: QuietOpt = False,
    backend: BackendOpt = "loky",
    scheduler: SchedulerOpt = None,
    resume: ResumeOpt = False,
    format: ci.FormatOpt = "csv",
) -> int:
    """Remove the riskiest records step by step until DTP-1 holds (Long et al. section 8).

    Each step removes a record and recomputes every remaining record's PDTP. Writes
    DIR/reduce.csv (step, row, id, pdtp_before, max_pdtp_after, violations_after,
    records_left; step 0 = no removal) and DIR/reduce.json (best_prefix, reached, strategy,
    engine, threshold, timings, manifest, trace). With --write-clean, also DIR/clean-spec.yaml
    (train_size null): 'mptool pdtp CLEAN.csv --model DIR/clean-spec.yaml' reproduces best_max.
    """
    from mptool.api.operations import prestart_refits
    from mptool.api.operations import reduce_dtp as run
    from mptool.api.reduce import parse_strategy
    from mptool.inputs.prepare import prepare
    from mptool.inputs.spec import load_spec
    from mptool.outputs.results import check_output_file, default_out_dir, prepare_out_dir
    from mptool.runtime.parallel import check_backend

    startup.loaded()  # the start-up's objects frozen, the collector back to its defaults
    flags.check_run_flags(jobs=jobs, scheduler=scheduler, seed=seed, bin_size=bin_size, allow_import=allow_import)
    flags.check_reduce_flags(threshold=threshold, train_size=train_size, max_removals=max_removals)
    formats = flags.check_formats(format)
    data_path, spec_path = resolve_inputs(data, model, "reduce-dtp", quiet)
    if resume and out is None:
        raise InputError("--resume needs --out DIR: the output directory of the interrupted run")
    backend = check_backend(backend, scheduler)
    parse_strategy(strategy)
    spec = load_spec(spec_path, {"data.train_size": train_size, "seed": seed, "output.bin_size": bin_size})
    names = ["reduce.csv", "reduce.json", *(["clean-spec.yaml"] if write_clean else [])]
    names += ["junit.xml"] if "junit" in formats else []
    inputs = {"the data file": data_path, "the spec": spec_path}
    out_dir = prepare_out_dir(out or default_out_dir("reduce"), names, force, resume=resume, inputs=inputs)
    if write_clean is not None:
        check_output_file(write_clean, force, "--write-clean", inputs)
    prestart_refits(spec, engine, jobs or None, backend, tuple(allow_import or ()))  # workers start while T is read
    prep = prepare(data_path, spec, tuple(allow_import or ()))
    for note in prep.notes:
        ui.warn(note)
    start = f"training set T: {prep.train.n} records from {data_path}; estimator {spec.model.estimator}"
    opener = CheckpointOpener(out_dir, resume, force, start, quiet)

    result = run(
        data_path, spec, threshold=threshold, max_removals=max_removals, strategy=strategy, jobs=jobs or None,
        engine=engine, backend=backend, scheduler=scheduler, progress=lambda n, label: ui.progress(n, label, quiet),
        checkpoint=opener, prepared=prep,
    )
    workers = result.outcome.summary.get("workers") or {}
    if workers.get("fits"):  # the refit engine: how many workers ran the refits and why
        from mptool.runtime.parallel import workers_line

        ui.info(workers_line(workers, "the refits"), quiet)
    return finish_reduce(result.outcome, prep, spec, out_dir, write_clean, formats, opener, quiet)


def finish_reduce(
    outcome: Any, prep: Any, spec: Any, out_dir: Path, write_clean: Path | None, formats: tuple[str, ...],
    opener: CheckpointOpener, quiet: bool,
) -> int:
    """After the search: the cleaned CSV and its spec (--write-clean), reduce.csv, reduce.json (junit.xml),
    the trace on the terminal and the exit code (0 when DTP-1 was reached)."""
    from mptool.api.reduce import print_trace
    from mptool.api.reduce import write_clean as write_clean_csv
    from mptool.outputs.formats import OutputFile, write_files

    assert outcome is not None
    if write_clean is not None:
        outcome.summary["clean"] = write_clean_csv(prep, outcome, write_clean, out_dir / "clean-spec.yaml")
        for note in outcome.summary["clean"]["notes"]:
            ui.warn(note)
    document = {**outcome.summary, "spec": spec.model_dump(mode="json"), "out": str(out_dir)}
    document["trace"] = document.pop("trace")  # the long list last
    files = [OutputFile("reduce.csv", "csv", outcome.table), OutputFile("reduce.json", "json", document)]
    if "junit" in formats:
        cases = ci.reduce_cases(outcome.summary, outcome.table)
        files.append(ci.junit_file("mptool reduce-dtp", cases, float(outcome.summary["timings"]["total_s"])))
    write_files(out_dir, files)
    opener.finish("task(s)")
    print_trace(outcome, quiet)
    ui.info(f"results: {out_dir / 'reduce.csv'}, {out_dir / 'reduce.json'}", quiet)
    if write_clean is not None:
        ui.info(f"clean data: {write_clean}; check it with: {outcome.summary['clean']['command']}", quiet)
    return EXIT_OK if outcome.summary["reached"] else EXIT_FINDING

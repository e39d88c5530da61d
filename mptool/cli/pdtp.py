"""``mptool pdtp``: flags -> :func:`mptool.api.operations.pdtp` -> pdtp.csv/pdtp.json, verdict line, exit code."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from mptool.cli import ci
from mptool.cli.app import (
    EXIT_CODES_HELP,
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
    ShowValuesOpt,
    ThresholdOpt,
    TrainSizeOpt,
    app,
    parse_rows,
    resolve_inputs,
)
from mptool.inputs import options as flags
from mptool.outputs.ending import ending_words, fail_fast_split, stop_words
from mptool.runtime import startup, ui
from mptool.runtime.errors import EXIT_FINDING, EXIT_OK, InputError


def bin_edge_clause(summary: dict) -> str:
    """The verdict line's clause on bin-edge violations (binned PDTP above the threshold, raw not).

    Empty when binning is off or no record is above the threshold on the binned scale.
    """
    if not summary.get("bin_size") or not summary.get("violations_binned"):
        return ""
    edge, thr = summary["violations_bin_edge"], f"{summary['threshold']:g}"
    if summary.get("gate") == "raw":
        return f" (binned: {summary['violations_binned']} above, {edge} only a bin-edge step)"
    return f" ({edge} only a bin-edge step: raw ratio <= {thr})"


def noise_floor_clause(summary: dict) -> str:
    """The verdict line's clause on the noise floor, when one was measured."""
    floor = summary.get("noise_floor") or {}
    if not floor.get("records"):
        return ""
    return (
        f"; noise floor p95 {floor['p95']:.4f} ({floor['records']} records refitted with their row moved), "
        f"{floor['records_above_p95']} of {summary['n']} records above it"
    )


def replicate_verdict_line(summary: dict) -> str:
    """The verdict of a randomized audit (replicate engine): decided violations, decided below, undecided.

    Never a bare "holds" while a record is undecided: that verdict reads "not established".
    """
    rep = summary["replicates"]
    thr = f"{summary['threshold']:g}{', gate raw' if summary.get('gate') == 'raw' else ''}"
    head = {"fail": "DTP-1 VIOLATED", "pass": "DTP-1 holds"}.get(summary["verdict"], "DTP-1 not established")
    budget = ", budget spent" if rep["budget_exhausted"] else ""
    if rep.get("fail_fast_spending"):  # --fail-fast: say why the run ended (a stop, the budget, or complete)
        budget = f"; {ending_words(summary)}"
    release = f"; {summary['release_note']}" if summary.get("release_note") else ""
    return (
        f"{head}: {summary['violations']} of {summary['n']} records decided above {thr} beyond training randomness, "
        f"{summary['decided_below']} decided below, {summary['undecided']} undecided (max estimate "
        f"{summary['max']:.4f}; {int(100 * rep['confidence'])}% confidence, error control {rep['error_control']}: "
        f"{rep['error_control_means']}{fail_fast_clause(rep.get('fail_fast_spending'))}); engine replicates "
        f"({rep['replicates_min']}-{rep['replicates_max']} replicates, {rep['fits']} fits{budget}){release}, "
        f"{summary['timings']['total_s']:.2f}s"
    )


def fail_fast_clause(spend: dict | None) -> str:
    """The verdict line's words on ``--fail-fast`` with replicates: how the violations' error level was split,
    and which part stopped the run at what level (docs/randomness.md section 4)."""
    if not spend:
        return ""
    stop = stop_words(spend)
    return f"; fail-fast: {fail_fast_split(spend)}{'; ' + stop if stop else ''}"


def verdict_line(summary: dict) -> str:
    """The one-line DTP-1 verdict: max, threshold, violations (+ bin-edge clause, + noise-floor clause,
    + the release policy and what of it was measured, :func:`mptool.privacy.release.measured_note`)."""
    if summary.get("replicates"):
        return replicate_verdict_line(summary)
    raw = summary.get("gate") == "raw"
    gate = ", gate raw" if raw else ""
    release = f"; {summary['release_note']}" if summary.get("release_note") else ""
    return (
        f"DTP-1 {'VIOLATED' if summary['verdict'] == 'fail' else 'holds'}: max {'raw ' if raw else ''}PDTP "
        f"{summary['max']:.4f} (threshold {summary['threshold']:g}{gate}), {summary['violations']} of "
        f"{summary['n']} records above{bin_edge_clause(summary)}{noise_floor_clause(summary)}{release}; "
        f"engine {summary['engine']}, {summary['timings']['total_s']:.2f}s"
    )


def noise_floor_line(summary: dict) -> str:
    """A terminal line on training noise: the measured floor, or why the pairing is exact."""
    floor = summary.get("noise_floor") or {}
    if not floor.get("records"):
        return f"training noise: {floor.get('why', '')}; {floor.get('note', '')}"
    b, r = floor["binned"], floor["raw"]
    return (
        f"noise floor ({floor['records']} records, A(T) vs A(T with t's row moved to the end), same seed; "
        f"{floor['why']}): binned mean {b['mean']:.4f}, p95 {b['p95']:.4f}, max {b['max']:.4f}, "
        f"{100 * b['fraction_above_threshold']:.0f}% above {summary['threshold']:g}; raw mean {r['mean']:.4f}, "
        f"max {r['max']:.4f}; {floor['records_above_p95']} of {summary['n']} records' PDTP above the floor's p95"
    )


def _percent(fraction: float) -> str:
    """A fraction as a percentage with one decimal (two significant digits below 0.1%)."""
    pct = 100.0 * fraction
    return f"{pct:.1f}%" if pct >= 0.1 or pct == 0 else f"{pct:.2g}%"


def qualified_verdict(summary: dict, line: str) -> str:
    """The verdict line said for what it covers: a ``--fail-fast`` stop or a ``--sample`` (else ``line``).

    A stop at a confirmed violator is an exact "VIOLATED"; a sample that passes never says
    "DTP-1 holds": it gives the 95% upper bound on the fraction of T above the threshold; nor
    do records chosen with ``--records`` that pass (no bound: they were not drawn at random).
    """
    stopped, sample = summary.get("stopped"), summary.get("sample")
    if stopped:
        return line.replace(
            "DTP-1 VIOLATED",
            f"DTP-1 VIOLATED (stopped at the first confirmed violator, row {stopped['row']}, after "
            f"{stopped['after']} of {stopped['of']} {'records' if summary.get('replicates') else 'refits'}; "
            "--fail-fast)",  # the replicate engine fits each record several times: 'after' counts records
            1,
        )
    if sample and sample["k"] < sample["n_train"] and (
            summary.get("verdict") == "undecided" or sample.get("fraction_upper_95") is None):
        # the replicate engine with undecided records (a VIOLATED run too): no Clopper-Pearson bound (api/pdtp.py)
        return f"{line}; sample of {sample['k']} of {sample['n_train']} records (no bound while records are undecided)"
    if not sample or sample["k"] >= sample["n_train"]:
        n, n_train = summary.get("n", 0), summary.get("n_train", 0)
        if summary["verdict"] != "pass" or n >= n_train:
            return line
        return line.replace(  # --records: a few chosen records say nothing about the rest of T
            "DTP-1 holds",
            f"DTP-1 not established (no violation among the {n} records given with --records, of {n_train} in T; "
            "audit every record for a verdict)",
            1,
        )
    bound = f"with 95% confidence at most {_percent(sample['fraction_upper_95'])} of T is above the threshold"
    if summary["verdict"] == "fail":
        return f"{line}; sample of {sample['k']} of {sample['n_train']} records: {bound}"
    return line.replace(
        "DTP-1 holds",
        f"DTP-1 not established (no violation among {sample['k']} sampled records of {sample['n_train']}; "
        f"{bound}; audit every record for a verdict)",
        1,
    )


def print_pdtp_summary(summary: dict, table, quiet: bool) -> None:
    """Verdict line and the ten riskiest records (``label`` and ``worst_class`` only where ``table`` has them:
    with ``--show-values``, :func:`mptool.outputs.formats.published`)."""
    verdict = summary["verdict"]
    line = verdict_line(summary)
    line = qualified_verdict(summary, line)
    if quiet:
        ui.echo(line, limit=None)
        return
    if summary.get("replicates"):
        print_replicate_table(table)
    from rich.table import Table

    out_console = ui.out_console
    key = "pdtp_raw" if summary.get("gate") == "raw" else "pdtp"
    top = table.sort_values([key, "row"], ascending=[False, True]).head(10)
    if summary.get("replicates"):
        top = top.iloc[:0]
    t = Table(title="Riskiest records", title_justify="left")
    cols = ("row", *(c for c in ("id", "label") if c in table), "pdtp", "pdtp_raw",
            *(["worst_class"] if "worst_class" in table else []), "p_full", "p_loo")
    for col in (*cols, "note"):
        t.add_column(col, justify="right" if col in ("row", "pdtp", "pdtp_raw", "p_full", "p_loo") else "left")
    for _, r in top.iterrows():  # id, label and class come from the data: escaped excerpts
        cells = [ui.cell(r["row"]), *(ui.cell(r[c]) for c in ("id", "label") if c in table)]
        cells += [f"{r['pdtp']:.4f}", f"{r['pdtp_raw']:.4f}"]
        cells += [ui.cell(r["worst_class"])] if "worst_class" in table else []
        cells += [f"{r['p_full']:.3f}", f"{r['p_loo']:.3f}", "bin edge" if r["bin_edge"] else ""]
        t.add_row(*cells)
    if not summary.get("replicates"):
        out_console.print(t)
    s = summary
    out_console.print(
        f"records {s['n']} (of T={s['n_train']}), mean {s['mean']:.4f}, median {s['median']:.4f}, "
        f"p95 {s['p95']:.4f}, max {s['max']:.4f}; above {s['threshold']:g}: binned {s['violations_binned']} "
        f"(bin-edge steps {s['violations_bin_edge']}), raw {s['violations_raw']}",
        markup=False,
    )
    if not summary.get("replicates"):
        out_console.print(ui.safe_line(noise_floor_line(summary)), markup=False, highlight=False)
    style = "bold red" if verdict == "fail" else "bold yellow" if "not established" in line else "bold green"
    out_console.print(ui.safe_line(line, None), style=style)


def print_replicate_table(table) -> None:
    """The ten riskiest records of a randomized audit: estimate, bounds, decision, replicates, spread
    (``label`` only where ``table`` has it: with ``--show-values``)."""
    from rich.table import Table

    top = table.sort_values(["pdtp_low", "row"], ascending=[False, True]).head(10)
    t = Table(title="Riskiest records (influence beyond training randomness)", title_justify="left")
    shown = ["label"] if "label" in table else []
    for col in ("row", *shown, "pdtp", "95% bounds", "violation", "replicates", "sd_full"):
        t.add_column(col, justify="left" if col in ("label", "violation") else "right")
    for _, r in top.iterrows():
        t.add_row(ui.cell(r["row"]), *(ui.cell(r[c]) for c in shown), f"{r['pdtp']:.4f}",
                  f"[{r['pdtp_low']:.3f}, {r['pdtp_high']:.3f}]", str(r["violation"]), str(r["replicates"]),
                  f"{r['sd_full']:.4f}")
    ui.out_console.print(t)


# pdtp's own flags, declared once here so that the command's signature reads as a list of flags.
OutOpt = Annotated[Path | None, typer.Option(help="Output directory [default: mptool-out/pdtp-TIMESTAMP].")]
RecordsOpt = Annotated[str | None, typer.Option(help="Only these CSV rows, e.g. 0,5,9 (must be in T).")]
SampleOpt = Annotated[int | None, typer.Option(help="Only K records of T, drawn with the seed.")]
GateOpt = Annotated[
    str,
    typer.Option(
        help="Scale of the DTP-1 verdict: binned (the paper's binned PDTP) or raw (unbinned PDTP, "
        "which bin-edge steps do not trip)."
    ),
]
NoiseFloorOpt = Annotated[
    int | None,
    typer.Option(
        "--noise-floor",
        help="Refit engine (--engine refit): records refitted with their row moved to the end of T (true "
        "influence 0) to measure training noise [default there: 20 when the fit depends on row order, else 0]. "
        "Deprecated: --engine auto decides randomized training with replicates instead (docs/randomness.md).",
    ),
]
FailFastOpt = Annotated[
    bool,
    typer.Option(
        "--fail-fast",
        help="Refit engine: stop at the first confirmed violator (exit 1; pdtp.csv then holds the records "
        "refitted up to it, pdtp.json says complete: false). A passing run still refits every record. "
        "Exact engines compute every record at once and report all.",
    ),
]
OrderOpt = Annotated[
    str, typer.Option(help="Refit engine's order: risk (records the screen ranks riskiest first) or row.")
]
QueriesOpt = Annotated[
    str,
    typer.Option(
        help="Query points of the DTP estimate: self (PDTP, x_t only), train (every record of T, "
        "as IBM ART) or a CSV file with the feature columns; adds column dtp_queries."
    ),
]
TrainedOpt = Annotated[
    Path | None,
    typer.Option(
        help="The shipped model, saved with skops.io.dump (never pickle) or exported to ONNX (MODEL.onnx): "
        "checked to predict like A(T) of the "
        "spec on T, then audited (its probabilities stand for A(T)'s)."
    ),
]
JsonRecordsOpt = Annotated[
    bool, typer.Option("--json-records", help="Also put every record in pdtp.json (by default only in pdtp.csv).")
]
ForceOpt = Annotated[bool, typer.Option(help="Overwrite results already in --out.")]
ReplicatesOpt = Annotated[
    str | None,
    typer.Option(help="Randomized training (replicate engine): MIN:MAX training replicates per record, MIN "
                 "first, doubled for records still undecided [default: 4:32]."),
]
BudgetOpt = Annotated[
    int | None, typer.Option(help="Replicate engine: at most this many fits; records left undecided say so.")
]
ErrorControlOpt = Annotated[
    str,
    typer.Option("--error-control", help="Replicate engine: error control across records: bh (false-discovery "
                 "rate, Benjamini-Hochberg), holm (family-wise) or record (per record); 5% each."),
]


PDTP_HELP = """PDTP of every training record (leave-one-out) and the DTP-1 verdict.

Writes DIR/pdtp.csv, one row per record: row, [id], [label], pdtp, pdtp_raw, [worst_class],
p_full, p_loo, violation, bin_edge, dtp_upper, dtp_upper_binned, dtp_upper_vacuous,
[dtp_queries] (with --queries train|FILE), [above_noise_floor] (when a noise floor is
measured), fingerprint, [baseline_status, baseline_pdtp] (with --baseline), [waived] (with
--waivers); and DIR/pdtp.json (summary and run manifest; the records too with
--json-records). label and worst_class (a stand-in for the label) are training values:
written and printed only with --show-values (docs/outputs.md). DATA may be CSV, CSV.gz or Parquet (see
data.read in the spec). With no arguments, audits the bundled UCI Adult data with
configs/adult-nb.yaml.

Randomized training (a network, a forest, bagged boosting): --engine auto refits A(T) with
up to three other seeds and with T's rows permuted; when a prediction changes it audits with replicates
(docs/randomness.md): pdtp is then the PDTP of the expected prediction, violation is True,
False or undecided (exit 1 unless every record is decided below), and pdtp_low, pdtp_high,
replicates and sd_full are added; --replicates MIN:MAX, --budget FITS and --error-control set it.
There --waivers excuse records decided above (never undecided ones), and --baseline compares
decisions with a replicate run's (new: decided above now, not then; fixed: decided below now).

With --baseline, only records new or worse than the baseline run count (exit 1); with
--waivers, waived records do not count until their waiver expires; pdtp.json then has a
'baseline' block.

"""


@app.command(epilog=EXIT_CODES_HELP, help=PDTP_HELP)
def pdtp(
    data: DataArg = None,
    model: ModelOpt = None,
    out: OutOpt = None,
    jobs: JobsOpt = 0,
    threshold: ThresholdOpt = 1.0,
    train_size: TrainSizeOpt = None,
    seed: SeedOpt = None,
    bin_size: BinSizeOpt = None,
    records: RecordsOpt = None,
    sample: SampleOpt = None,
    engine: EngineOpt = "auto",
    gate: GateOpt = "binned",
    noise_floor: NoiseFloorOpt = None,
    fail_fast: FailFastOpt = False,
    order: OrderOpt = "risk",
    queries: QueriesOpt = "self",
    allow_import: AllowImportOpt = None,
    trained: TrainedOpt = None,
    json_records: JsonRecordsOpt = False,
    force: ForceOpt = False,
    quiet: QuietOpt = False,
    backend: BackendOpt = "loky",
    scheduler: SchedulerOpt = None,
    resume: ResumeOpt = False,
    baseline: ci.BaselineOpt = None,
    baseline_tolerance: ci.ToleranceOpt = ci.DEFAULT_TOLERANCE,
    waivers: ci.WaiversOpt = None,
    format: ci.FormatOpt = "csv",
    replicates: ReplicatesOpt = None,
    budget: BudgetOpt = None,
    error_control: ErrorControlOpt = "bh",
    show_values: ShowValuesOpt = False,
) -> int:
    """``mptool pdtp`` (help: :data:`PDTP_HELP`): flags checked, the API's pdtp run, its files and verdict.

    Long only by its flag list (one parameter per flag, as typer declares them); the work is
    :func:`check_pdtp_cli_flags`, :func:`mptool.api.operations.pdtp` and :func:`finish_pdtp`.
    """
    startup_cpu = time.process_time()  # the interpreter, the imports and the flag parsing before this line
    from mptool.api.early import start_early
    from mptool.inputs.spec import load_spec
    from mptool.outputs.results import default_out_dir, prepare_out_dir
    from mptool.runtime.parallel import check_backend

    formats = check_pdtp_cli_flags(
        jobs, scheduler, seed, bin_size, allow_import, threshold, train_size, sample, gate, noise_floor, order,
        fail_fast, trained, baseline, baseline_tolerance, waivers, format,
    )
    data_path, spec_path = resolve_inputs(data, model, "pdtp", quiet)
    if resume and out is None:
        raise InputError("--resume needs --out DIR: the output directory of the interrupted run")
    backend = check_backend(backend, scheduler)
    spec = load_spec(spec_path, {"data.train_size": train_size, "seed": seed, "output.bin_size": bin_size})
    rows = parse_rows(records)
    gate_inputs = ci.read_gate_inputs(baseline, waivers, baseline_tolerance)  # also MPTOOL_FINGERPRINT_KEY
    inputs = {"the data file": data_path, "the spec": spec_path, "the --queries file": queries,
              "the --baseline": gate_inputs.baseline.path if gate_inputs.baseline else None,
              "the --waivers file": waivers, "the --trained model": trained}
    names = ["pdtp.csv", "pdtp.json", *(["junit.xml"] if "junit" in formats else [])]
    out_dir = prepare_out_dir(out or default_out_dir("pdtp"), names, force, resume=resume, inputs=inputs)
    start_early(spec, engine, jobs or None, backend, fail_fast)  # the workers import while this process does
    from mptool.api.operations import pdtp as run
    from mptool.api.operations import prepare_pdtp
    from mptool.api.pdtp import PdtpOptions

    startup.loaded()  # the start-up's objects frozen, the collector back to its defaults

    options = PdtpOptions(
        threshold, rows, sample, jobs or None, engine, backend=backend, queries=queries, gate=gate,
        noise_floor=noise_floor, fail_fast=fail_fast, order=order, trained=None if trained is None else str(trained),
        replicates=replicates, budget=budget, error_control=error_control,
    )
    t_read = time.perf_counter()
    prep = prepare_pdtp(data_path, spec, options, tuple(allow_import or ()),  # refusals before any progress line
                        lambda n, label: ui.progress(n, label, quiet, steps=False))
    t_read = time.perf_counter() - t_read
    from mptool.api.baseline import decision_rule
    from mptool.api.randomized import ALPHA, uses_replicates

    rule = decision_rule(threshold, gate, error_control, 1 - ALPHA)
    ci.check_before_work(prep, gate_inputs, engine, uses_replicates(prep, options), rule)
    check_randomized_flags(prep, options)
    for note in prep.notes:
        ui.warn(note)
    start = f"training set T: {prep.train.n} records from {data_path}; estimator {spec.model.estimator}"
    opener = CheckpointOpener(out_dir, resume, force, start, quiet)
    result = run(
        data_path, spec, threshold=threshold, records=rows, sample=sample, jobs=jobs or None, engine=engine,
        queries=queries, gate=gate, noise_floor=noise_floor, backend=backend, scheduler=scheduler, trained=trained,
        # a one-step phase (A(T)'s fit) has no 10 % steps: a line only if it runs past 5 s
        progress=lambda n, label: ui.progress(n, label, quiet, steps=n > 1),
        checkpoint=opener, prepared=prep, fail_fast=fail_fast, order=order,
        replicates=replicates, budget=budget, error_control=error_control,
    )
    from mptool.api.randomized import randomness_line

    line = randomness_line(result.summary.get("randomness") or {}, result.summary["engine"])
    if line:
        ui.info(line, quiet)
    for note in (result.summary.get("replicates") or {}).get("notes", []):
        ui.warn(note)
    return finish_pdtp(result, spec, out_dir, opener, gate_inputs, formats, json_records, quiet, t_read,
                       startup_cpu, show_values)


def check_randomized_flags(prep: Any, options: Any) -> None:
    """Refuse, before the audit, what the replicate engine cannot honour: --trained.

    A shipped model is one draw of a randomized A, not A. ``--waivers`` work: a waiver excuses a
    record decided above the threshold; ``--baseline`` compares decisions with a replicate run's
    (:mod:`mptool.api.baseline`); undecided records are never waived nor passed, so they keep the
    verdict "not established".
    """
    from mptool.api.randomized import uses_replicates

    if not uses_replicates(prep, options):
        return
    why = "--engine replicates" if options.engine == "replicates" else "training is randomized (replicate engine)"
    if options.trained is not None:
        raise InputError(f"--trained cannot be used when {why}: a shipped model is one draw of the randomized "
                         "training, not A(T); drop --trained")


def check_pdtp_cli_flags(
    jobs: int, scheduler: str | None, seed: int | None, bin_size: float | None, allow_import: list[str] | None,
    threshold: float, train_size: int | None, sample: int | None, gate: str, noise_floor: int | None, order: str,
    fail_fast: bool, trained: Path | None, baseline: Path | None, tolerance: float, waivers: Path | None, fmt: str,
) -> tuple[str, ...]:
    """Every pdtp flag checked (:mod:`mptool.inputs.options`) before any file is read; the output formats."""
    flags.check_run_flags(jobs=jobs, scheduler=scheduler, seed=seed, bin_size=bin_size, allow_import=allow_import)
    flags.check_pdtp_flags(
        threshold=threshold, train_size=train_size, sample=sample, gate=gate, noise_floor=noise_floor,
        baseline_or_waivers=baseline is not None or waivers is not None, order=order, fail_fast=fail_fast,
        trained=trained,
    )
    formats = flags.check_ci_flags(formats=fmt, tolerance=tolerance, baseline=baseline, waivers=waivers)
    flags.check_fail_fast_gate(fail_fast, baseline, waivers)
    return formats


def finish_pdtp(
    result: Any, spec: Any, out_dir: Path, opener: CheckpointOpener, gate_inputs: Any, formats: tuple[str, ...],
    json_records: bool, quiet: bool, read_s: float = 0.0, startup_cpu_s: float = 0.0, show_values: bool = False,
) -> int:
    """After the run: the baseline/waiver gate, pdtp.csv, pdtp.json (junit.xml), terminal lines, exit code.

    Without ``show_values`` no file or line holds a record's ``label`` or ``worst_class``
    (:func:`mptool.outputs.formats.published`); with it every file is as before they became opt-in.

    pdtp.json's timings gain ``read_prepare_s`` (reading the data, drawing T), ``gate_s`` (the
    baseline/waiver gate), ``write_csv_s`` (rendering pdtp.csv, rendered before pdtp.json so that
    its time is in it; every file is still rendered before any is written), ``startup_cpu_s``
    (CPU seconds of the interpreter, imports and flag parsing before the command) and
    ``cpu_s`` (the process's CPU seconds when pdtp.json is rendered: all but writing the files).
    Signing comes after the timings (the MAC covers them): its wall seconds are ``signature.sign_s``.
    """
    from mptool.inputs.signature import signature_block
    from mptool.outputs.formats import OutputFile, jsonable, published, records_for_json, to_csv_utf8, write_files

    summary = {**result.summary, "spec": spec.model_dump(mode="json"), "out": str(out_dir), "records_file": "pdtp.csv"}
    # the gate only adds columns: no deep copy of a big T's table (issue 28)
    table = published(result.table, show_values).copy(deep=False)
    t_gate = time.perf_counter()
    outcome = ci.apply_gate(table, summary, result.summary["threshold"], gate_inputs)
    if outcome is not None:
        summary["baseline"] = outcome.block
    t_csv = time.perf_counter()
    records = to_csv_utf8(table)
    summary["timings"] = {**summary["timings"], "read_prepare_s": round(read_s, 4),
                          "gate_s": round(t_csv - t_gate, 4), "write_csv_s": round(time.perf_counter() - t_csv, 4),
                          "startup_cpu_s": round(startup_cpu_s, 4), "cpu_s": round(time.process_time(), 4)}
    doc = jsonable({"summary": summary, **({"records": records_for_json(table)} if json_records else {})})
    t_sign = time.perf_counter()
    seal = signature_block(doc, None if json_records else records)  # a baseline's seal
    # its own time sits in the block, which the MAC leaves out (it cannot cover the time of computing it)
    doc["summary"]["signature"] = {**seal, "sign_s": round(time.perf_counter() - t_sign, 4)}
    files = [OutputFile("pdtp.csv", "text", records), OutputFile("pdtp.json", "json", doc)]
    if "junit" in formats:
        cases = ci.pdtp_cases(summary, table, outcome)
        files.append(ci.junit_file("mptool pdtp", cases, summary["timings"]["total_s"]))
    write_files(out_dir, files)
    opener.finish("fit(s)" if result.summary.get("replicates") else "record(s)")
    print_pdtp_summary(dict(result.summary), published(result.table, show_values), quiet)
    if outcome is not None:
        ci.print_gate(outcome, bool(summary["identity"].get("id")), quiet)
    workers = result.summary.get("workers") or {}
    if workers.get("fits"):  # the refit engine: how many workers ran the refits and why
        from mptool.runtime.parallel import workers_line

        ui.info(workers_line(workers, "the refits"), quiet)
    ui.info(f"results: {out_dir / 'pdtp.csv'}, {out_dir / 'pdtp.json'}", quiet)
    verdict = outcome.verdict if outcome is not None else result.verdict
    return EXIT_OK if verdict == "pass" else EXIT_FINDING  # "undecided" (replicate engine) fails closed

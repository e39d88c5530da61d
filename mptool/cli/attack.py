"""``mptool attack``: flags -> :func:`mptool.api.operations.attack` -> attack.csv/json, gate exit code."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from mptool.attacks import DEFAULT_SHADOW_POOL
from mptool.cli import ci
from mptool.cli.app import (
    AllowImportOpt,
    BackendOpt,
    BinSizeOpt,
    CheckpointOpener,
    DataArg,
    JobsOpt,
    ModelOpt,
    ResumeOpt,
    SchedulerOpt,
    SeedOpt,
    ShowValuesOpt,
    app,
    resolve_inputs,
)
from mptool.inputs import options as flags
from mptool.runtime import startup, ui
from mptool.runtime.errors import EXIT_FINDING, EXIT_OK, InputError

ATTACK_EXIT_HELP = (
    "Exit codes: 0 = no gate given or no gate exceeded; 1 = the lower end of an attack's 95% interval above "
    "--max-accuracy or --max-auc, or a gate the run is too small to decide (fails closed); 2 = bad input or usage; "
    "3 = unexpected internal error; 130/143 = interrupted (SIGINT/SIGTERM)."
)


# attack's flags, declared once here so that the command's signature reads as a list of flags.
AttacksOpt = Annotated[
    str,
    typer.Option(
        help="Comma-separated: untargeted,distance,frequency,threshold,lira,rmia, or all; plus label_only "
        "(Choquette-Choo's label-only attack and its label-free variant) and attribute:COLUMN "
        "(Yeom's attribute inference of a feature column; alone, or beside membership attacks)."
    ),
]
AttributeValuesOpt = Annotated[
    bool,
    typer.Option(
        help="With attribute:COLUMN: also write attribute.csv, each attempt's true and inferred value of the "
        "column. These are the values the audit protects: off by default."
    ),
]
CandidatesOpt = Annotated[
    int | None,
    typer.Option(
        help="Size of the candidate set D drawn from the data (even); the target models train on |D|/2. "
        "[default: 2 x data.train_size, as pdtp's T; 2000 when it is null; capped by the data]",
        show_default=False,
    ),
]
IterationsOpt = Annotated[int, typer.Option(help="Iterations; each trains A on both halves of D.")]
TargetsOpt = Annotated[int, typer.Option(help="Target records drawn from D.")]
ShadowsOpt = Annotated[
    int,
    typer.Option(
        help="Shadow models M of the untargeted and threshold attacks (with a pool: the untargeted attack "
        "learns from the first M pool models, the threshold attack from all)."
    ),
]
PairsOpt = Annotated[
    int, typer.Option(help="With --shadow-pool 0: in/out shadow pairs per target per iteration (targeted, LiRA).")
]
ShadowPoolOpt = Annotated[
    int | None,
    typer.Option(
        help=f"K: one shared pool of K shadows on random halves of D for every attack [default: "
        f"{DEFAULT_SHADOW_POOL} with distance, frequency or lira, grown until every target is in and out of "
        "one; else none]; 0: the paper's per-target pairs (--pairs; far slower).",
        show_default=False,
    ),
]
ShadowDataOpt = Annotated[
    str,
    typer.Option(
        help="Untargeted shadow data: population, marginals, noisy:F, or synthesize[:Q] (no data: Shokri's "
        "hill-climbing on the target model's outputs, at most Q queries per record, default 1000)."
    ),
]
PerClassOpt = Annotated[bool, typer.Option(help="Untargeted: one attack model per class (Shokri).")]
UntargetedFeaturesOpt = Annotated[
    str,
    typer.Option(
        help="Untargeted attack features: xyq (record, label, output; Long et al.), yq (label and output; "
        "Shokri et al.) or auto (xyq with population shadow data, yq with synthetic)."
    ),
]
PdtpIterationsOpt = Annotated[int, typer.Option(help="Iterations whose PDTP is measured and averaged.")]
MaxAccuracyOpt = Annotated[
    float | None, typer.Option(help="Exit 1 if an attack's accuracy exceeds this beyond noise (95% lower end).")
]
MaxAucOpt = Annotated[
    float | None, typer.Option(help="Exit 1 if an attack's ROC AUC exceeds this beyond noise (95% lower end).")
]
BudgetOpt = Annotated[
    float | None,
    typer.Option(
        help="Seconds the work after reading the data may take, by the estimate from one timed fit: lowers "
        "--pdtp-iterations, the shadow models, --iterations, --targets in that order, never below a minimum; "
        "exit 2 if even that does not fit."
    ),
]
OutOpt = Annotated[Path | None, typer.Option(help="Output directory [default: mptool-out/attack-TIMESTAMP].")]
EngineOpt = Annotated[
    str,
    typer.Option(help="Leave-one-out engine for PDTP: auto, exact, refit, or replicates (randomized training: "
                 "each target decided beyond the training randomness, attack.csv pdtp_decision)."),
]
ReplicatesOpt = Annotated[
    str | None,
    typer.Option(help="--engine replicates: MIN:MAX training replicates per target, MIN first, doubled for "
                 "targets still undecided [default: 4:32]."),
]
TrainedOpt = Annotated[
    Path | None,
    typer.Option(
        help="The shipped model, saved with skops.io.dump (never pickle) or exported to ONNX (MODEL.onnx): "
        "checked to predict like A(T) of the "
        "spec, then attacked too (loss threshold; T as members, rows outside T as non-members)."
    ),
]
RmiaGammaOpt = Annotated[
    float, typer.Option(help="rmia: a population record z counts when x's likelihood ratio over z exceeds this.")
]
RmiaOfflineAOpt = Annotated[
    str, typer.Option(help="rmia_offline: a in Pr(x) = ((1+a) Pr_OUT(x) + 1 - a)/2; auto = tuned on the pool.")
]
ForceOpt = Annotated[bool, typer.Option(help="Overwrite results already in --out.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Only the result lines; no progress.")]

ATTACK_HELP = """Membership inference attacks under the paper's protocol, per-target accuracy beside PDTP.

Long et al. 5.4: D (--candidates rows) is split into halves each iteration; the model
trained on each half is attacked on every target, so each target is once a member and
once not. The training-set size is |D|/2; by default |D| = 2 x data.train_size, so it
equals pdtp's |T|. Attacks: untargeted (Shokri), distance and frequency (Long 5.3),
threshold (Yeom), lira (Carlini; online and offline), rmia (Zarifzadeh; online and
offline; pool models as references, without a pool the --shadows ones). By default every attack draws its
shadow models from one pool; --shadow-pool 0 trains --pairs fresh in/out pairs per
target per iteration, as the paper does (about 100 times the fits). Before the work, one
line gives the planned model fits and an estimated time; --budget sizes the run to fit.

DIR/attack.csv, one row per target: row, [id], [label], pdtp_mean, pdtp_decision (violation,
below or undecided; --engine replicates decides randomized training), <attack>_accuracy per
attack (lira gives lira_ and lira_offline_, rmia rmia_ and rmia_offline_), max_accuracy, lira_score (mean online
LiRA log-likelihood ratio while a member), kl_leakage (Farokhi-Kaafar, nats; empty where
not estimable), n_attacks, pdtp_measurements. DIR/attack.json: {"summary": {...}, "attacks":
{name: {accuracy,
precision, recall, f1, auc, advantage, tpr_at_1pct_fpr, tpr_at_0.1pct_fpr,
correlation_with_pdtp, roc: {fpr, tpr}}}, "records": [...]}; summary.strongest_attack names
the attack of highest TPR at 1% FPR with that TPR's 95% bootstrap interval over targets
(tpr_at_1pct_fpr_interval, the attack's own from its intervals); summary.train_size is
|D|/2 and summary.candidates_from says where |D| came from; summary.plan holds the planned
fits, the estimate and what --budget changed. DIR/attempts.csv, one row per attack per
attempt: row, iteration, attack, member, score, decision (every metric recomputes from it).
The label (a training value) is in attack.csv and attack.json's records only with
--show-values (docs/outputs.md).

attribute:COLUMN (Yeom et al. section 4): on the same target models and targets, the
inversion adversary infers COLUMN from the other features and the label by the model's loss
under each candidate value times its prior; attack.json's attacks.attribute gives its accuracy
on members and non-members, the attribute advantage (their difference, Definition 5), the
prior-only baseline and 95% bootstrap intervals. In attempts.csv its decision is "inferred
right" and its score the posterior of the true value (the membership reduction of Theorem 6).
The true and inferred values are written only with --attribute-values (DIR/attribute.csv).

"""


@app.command(epilog=ATTACK_EXIT_HELP, help=ATTACK_HELP)
def attack(
    data: DataArg = None,
    model: ModelOpt = None,
    attacks: AttacksOpt = "all",
    attribute_values: AttributeValuesOpt = False,
    candidates: CandidatesOpt = None,
    iterations: IterationsOpt = 10,
    targets: TargetsOpt = 100,
    shadows: ShadowsOpt = 20,
    pairs: PairsOpt = 5,
    shadow_pool: ShadowPoolOpt = None,
    shadow_data: ShadowDataOpt = "population",
    per_class: PerClassOpt = False,
    untargeted_features: UntargetedFeaturesOpt = "auto",
    pdtp_iterations: PdtpIterationsOpt = 10,
    max_accuracy: MaxAccuracyOpt = None,
    max_auc: MaxAucOpt = None,
    budget: BudgetOpt = None,
    out: OutOpt = None,
    jobs: JobsOpt = 0,
    seed: SeedOpt = None,
    bin_size: BinSizeOpt = None,
    engine: EngineOpt = "auto",
    replicates: ReplicatesOpt = None,
    allow_import: AllowImportOpt = None,
    trained: TrainedOpt = None,
    rmia_gamma: RmiaGammaOpt = 1.0,
    rmia_offline_a: RmiaOfflineAOpt = "auto",
    force: ForceOpt = False,
    quiet: QuietOpt = False,
    backend: BackendOpt = "loky",
    scheduler: SchedulerOpt = None,
    resume: ResumeOpt = False,
    format: ci.FormatOpt = "csv",
    show_values: ShowValuesOpt = False,
) -> int:
    """``mptool attack`` (help: :data:`ATTACK_HELP`): flags checked, the API's attack run, its files written.

    Long only by its flag list (one parameter per flag, as typer declares them); the work is
    :func:`check_attack_cli_flags`, :func:`mptool.api.operations.attack` and :func:`finish_attack`.
    """
    from mptool.api.operations import attack as run
    from mptool.api.operations import with_trained
    from mptool.attacks.plan import resolve_candidates
    from mptool.attacks.protocol import parse_attacks
    from mptool.inputs.prepare import prepare
    from mptool.inputs.spec import load_spec
    from mptool.outputs.results import default_out_dir, prepare_out_dir
    from mptool.runtime.parallel import check_backend

    startup.loaded()  # the start-up's objects frozen, the collector back to its defaults
    flags.check_run_flags(jobs=jobs, scheduler=scheduler, seed=seed, bin_size=bin_size, allow_import=allow_import)
    formats = flags.check_formats(format)
    counts = {"candidates": candidates, "iterations": iterations, "targets": targets, "shadows": shadows,
              "pairs": pairs, "shadow_pool": shadow_pool, "pdtp_iterations": pdtp_iterations}
    flags.check_attack_flags(counts=counts, max_accuracy=max_accuracy, max_auc=max_auc, budget=budget)
    flags.check_untargeted_features(untargeted_features)
    flags.check_trained(trained)
    flags.check_rmia_flags(rmia_gamma, rmia_offline_a)
    from mptool.api.randomized import check_attack_replicates

    check_attack_replicates(engine, replicates)
    data_path, spec_path = resolve_inputs(data, model, "attack", quiet)
    backend = check_backend(backend, scheduler)
    names = parse_attacks(attacks)
    flags.check_attribute_values(attribute_values, names)
    if resume and out is None:
        raise InputError("--resume needs --out DIR: the output directory of the interrupted run")
    spec = load_spec(spec_path, {"seed": seed, "output.bin_size": bin_size})
    inputs = {"the data file": data_path, "the spec": spec_path, "the --trained model": trained}
    results = ["attack.csv", "attack.json", "attempts.csv", *(["junit.xml"] if "junit" in formats else []),
               *(["attribute.csv"] if attribute_values else [])]
    out_dir = prepare_out_dir(out or default_out_dir("attack"), results, force, resume=resume, inputs=inputs)
    prep = with_trained(prepare(data_path, spec, tuple(allow_import or ())), trained, tuple(allow_import or ()))
    for note in prep.notes:
        ui.warn(note)
    n_cand, why = resolve_candidates(candidates, spec.data.train_size, prep.population.n)
    start = (
        f"candidate set D: {n_cand} of {prep.population.n} records from {data_path} ({why}); "
        f"estimator {spec.model.estimator}; attacks {', '.join(names)}"
    )
    opener = CheckpointOpener(out_dir, resume, force, start, quiet)

    result = run(
        data_path, spec, attacks=names, candidates=candidates, iterations=iterations, targets=targets,
        shadows=shadows, pairs=pairs, shadow_pool=shadow_pool, shadow_data=shadow_data, per_class=per_class,
        untargeted_features=untargeted_features,
        pdtp_iterations=pdtp_iterations, max_accuracy=max_accuracy, max_auc=max_auc, budget=budget, jobs=jobs or None,
        engine=engine, replicates=replicates, backend=backend, scheduler=scheduler,
        progress=lambda n, label: ui.progress(n, label, quiet),
        checkpoint=opener, prepared=prep, on_plan=opener.lines.append, trained=trained,
        rmia_gamma=rmia_gamma, rmia_offline_a=rmia_offline_a,
    )
    return finish_attack(result, len(prep.notes), spec, out_dir, opener, formats, attribute_values, quiet,
                         show_values)


def finish_attack(
    result: Any, known_notes: int, spec: Any, out_dir: Path, opener: CheckpointOpener, formats: tuple[str, ...],
    attribute_values: bool, quiet: bool, show_values: bool = False,
) -> int:
    """After the run: attack.csv, attack.json, attempts.csv (attribute.csv, junit.xml), the result
    lines, the gates, and the exit code (1 when a gate is exceeded or cannot decide: it fails closed).

    The per-target table is written without ``label`` unless ``show_values``
    (:func:`mptool.outputs.formats.published`)."""
    from mptool.outputs.attack_text import summary_lines
    from mptool.outputs.formats import OutputFile, published, records_for_json, write_files

    summary = {**result.summary, "spec": spec.model_dump(mode="json"), "out": str(out_dir)}
    table = published(result.table, show_values)
    document = {"summary": summary, "attacks": dict(result.attacks), "records": records_for_json(table)}
    files = [
        OutputFile("attack.csv", "csv", table),
        OutputFile("attack.json", "json", document),
        OutputFile("attempts.csv", "csv-exact", result.attempts),
    ]
    if attribute_values and result.attribute_values is not None:  # opt-in: the protected values themselves
        files.append(OutputFile("attribute.csv", "csv", result.attribute_values))
    if "junit" in formats:
        files.append(ci.junit_file("mptool attack", ci.attack_cases(summary), float(summary["timings"]["total_s"])))
    write_files(out_dir, files)
    opener.finish("task(s)")
    for note in result.notes[known_notes:]:
        ui.info(note, quiet)
    for line in summary_lines(result):
        ui.echo(line)
    print_artefact(result.summary.get("artefact"))
    if result.summary.get("release_note"):
        ui.echo(result.summary["release_note"], limit=None)
    exceeded = result.summary["gate"]["exceeded"]
    for item in exceeded:
        ui.echo(f"gate exceeded: {item}")
    undecided = result.summary["gate"].get("undecided", [])
    for item in undecided:
        ui.warn(f"gate cannot decide: {item}; counted as failed (a gate fails closed)")
    ui.info(f"results: {out_dir / 'attack.csv'}, {out_dir / 'attack.json'}, {out_dir / 'attempts.csv'}", quiet)
    return EXIT_FINDING if exceeded or undecided else EXIT_OK


def print_artefact(art: dict | None) -> None:
    """The ``--trained`` artefact's attack line (or the note on why it was not attacked)."""
    if art is None:
        return
    auc = "-" if art.get("auc") is None else f"{art['auc']:.4f}"
    ui.echo(art["note"] if "note" in art else (
        f"artefact (--trained): threshold attack on {art['members']} members and {art['non_members']} "
        f"non-members: accuracy {art['accuracy']:.4f}, AUC {auc}, advantage {art['advantage']:.4f}"
    ), limit=None)

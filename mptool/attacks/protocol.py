"""The evaluation protocol of Long et al. (section 5.4) around the membership attacks.

1. A candidate set D of ``candidates`` rows is drawn (seeded) from every usable CSV row.
   ``targets`` records of D are the adversary's targets.
2. In each of ``iterations`` iterations D is split into equal halves D1, D2; the target
   model A(D1) is attacked on every target, then A(D2), so each target is once a member and
   once not (baseline accuracy 0.5). The training-set size is therefore |D| / 2: without
   --candidates, |D| is 2 x the spec's data.train_size, so the target models train on as many
   records as ``mptool pdtp``'s T (:func:`mptool.attacks.plan.resolve_candidates`).
3. Per-target accuracy of an attack = correct guesses / attacks on that record (2 per
   iteration). PDTP of each target is measured while it is a member in the first
   ``pdtp_iterations`` iterations (one leave-one-out per iteration) and averaged.
4. Over all attempts of an attack (each saved in attempts.csv): accuracy, precision, recall,
   F1, ROC AUC, advantage TPR - FPR (Yeom et al., Definition 4; = 2 * accuracy - 1 here, as
   members and non-members are attacked equally often), TPR at 1% and 0.1% FPR, and the
   Pearson and Spearman correlations of per-target accuracy with mean PDTP (Long et al.,
   Tables 1 and 2). The strongest attack is the one of highest TPR at 1% FPR, named with the
   bootstrap interval of that TPR.

The run is a sequence of named phases, each a function of the previous phases' results:
:func:`draw_candidates` (D, the targets and the splits), :func:`plan_work` (fit counts, an
estimated time, --budget; :mod:`mptool.attacks.plan`), :func:`train_targets` (A(D1),
A(D2) and their outputs on the targets), :func:`measure_pdtp`, :func:`gather_evidence`
(shadow models: pool, general shadows or per-target pairs), :func:`run_attacks` (one helper
per attack) and :func:`score` (per-target table, metrics, summary).

Every random choice is seeded from the spec's seed and a per-phase tag, so results do not
depend on --jobs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from mptool.attacks import ATTACK_CHOICES, DEFAULT_CANDIDATES, NEEDS_EVIDENCE, RESULT_NAMES
from mptool.attacks import attribute as attribute_mod
from mptool.attacks import lira as lira_mod
from mptool.attacks import plan as plan_mod
from mptool.attacks import rmia as rmia_mod
from mptool.attacks import synthesis as synth_mod
from mptool.attacks.intervals import TAG_BOOTSTRAP, bootstrap_intervals
from mptool.attacks.leakage import LeakageEstimate, kl_leakage, summarise, true_label_logit
from mptool.attacks.metrics import (
    ATTEMPT_COLUMNS,
    METRICS_NOTE,
    ROC_POINTS,
    attempts_frame,
    binary_metrics,
    correlations,
    downsample_roc,
    strongest_attack,
    tpr_at_fpr,
)
from mptool.attacks.shadows import (
    ShadowPairs,
    ShadowPool,
    parse_source,
    pool_covers,
    rng_for,
    train_pairs,
    train_pool,
    train_synthetic,
)
from mptool.attacks.targeted import distance, frequency
from mptool.attacks.threshold import expected_training_loss, threshold
from mptool.attacks.untargeted import FeatureEncoder, resolve_features, train_untargeted
from mptool.inputs.data import Records
from mptool.inputs.models import fit, proba_in
from mptool.inputs.options import ATTACK_CELLS_MAX, check_synthesis_total
from mptool.inputs.prepare import Prepared, fit_checked
from mptool.loo import LooRequest, select_engine
from mptool.outputs.results import manifest
from mptool.privacy.calibration import bin_probabilities
from mptool.privacy.dtp import pdtp_of
from mptool.runtime import ui
from mptool.runtime.errors import InputError
from mptool.runtime.parallel import chunk_positions, resolve_jobs, run_tasks

__all__ = [
    "ATTACK_COLUMNS",
    "ATTEMPT_COLUMNS",
    "ROC_POINTS",
    "AttackOptions",
    "AttackOutcome",
    "Planned",
    "binary_metrics",
    "correlations",
    "downsample_roc",
    "parse_attacks",
    "plan_attack",
    "run_attack",
    "summary_lines",
    "tpr_at_fpr",
]

TAG_CANDIDATES, TAG_TARGETS, TAG_SPLIT, TAG_PLAN = 1, 2, 3, 4

#: attack.csv columns (``<attack>_accuracy`` appears once per attack run, in run order).
ATTACK_COLUMNS = {
    "row": "0-based data row of the input CSV (header excluded)",
    "id": "value of the spec's id column (only when data.id is set)",
    "label": "the record's label",
    "pdtp_mean": "mean PDTP of the record while a member, over the first --pdtp-iterations iterations",
    "<attack>_accuracy": "per-target accuracy: correct membership guesses / attacks on the record (2 per iteration)",
    **attribute_mod.COLUMNS,
    "max_accuracy": "largest per-target accuracy over the attacks run",
    "lira_score": "mean online LiRA log-likelihood ratio while the record is a member (empty without lira)",
    "kl_leakage": "Farokhi-Kaafar KL membership leakage in nats: Gaussian approximation on the logit of the "
    "in/out shadows' unbinned true-label probability; empty where not estimable (reasons in attack.json)",
    "n_attacks": "number of attacks on the record (2 x iterations)",
    "pdtp_measurements": "number of PDTP measurements averaged in pdtp_mean",
}


@dataclass(frozen=True)
class AttackOptions:
    """Run options of ``mptool attack`` that are not part of the spec.

    The defaults here are the paper's protocol (per-target shadow pairs, ``shadow_pool=0``).
    ``mptool attack`` and :func:`mptool.attack` default instead to a shadow pool of
    :data:`mptool.attacks.DEFAULT_SHADOW_POOL` models with ``auto_pool=True`` (the pool
    grows until every target is in and out of some model) and to ``candidates=None``
    (2 x data.train_size; :func:`mptool.attacks.plan.resolve_candidates`). ``budget``: seconds
    the run should take; the counts are then upper limits (:func:`mptool.attacks.plan.size_to_budget`).
    """

    attacks: tuple[str, ...] = ATTACK_CHOICES
    candidates: int | None = DEFAULT_CANDIDATES
    iterations: int = 10
    targets: int = 100
    shadows: int = 20
    pairs: int = 5
    shadow_pool: int = 0
    shadow_data: str = "population"
    per_class: bool = False
    untargeted_features: str = "auto"
    pdtp_iterations: int = 10
    jobs: int | None = None
    engine: str = "auto"
    backend: str = "loky"
    max_accuracy: float | None = None
    max_auc: float | None = None
    auto_pool: bool = False
    budget: float | None = None
    rmia_gamma: float = rmia_mod.GAMMA
    rmia_offline_a: float | None = None  # None: tuned on the reference models


@dataclass
class AttackOutcome:
    """Per-target table, per-attack metrics and the run summary."""

    table: pd.DataFrame
    attacks: dict[str, dict[str, Any]]
    summary: dict[str, Any]
    notes: list[str] = field(default_factory=list)  # the run's own (not the data's: those are Prepared.notes)
    attempts: pd.DataFrame | None = None  # attempts.csv: one row per attack per attempt (ATTEMPT_COLUMNS)
    attribute_values: pd.DataFrame | None = None  # attribute.csv, written only on opt-in (raw sensitive values)


def parse_attacks(text: str) -> tuple[str, ...]:
    """``all`` or a comma-separated subset of the attack names, in canonical order, then
    ``attribute:COLUMN`` if given (:mod:`mptool.attacks.attribute`; the column's case is kept)."""
    rest, attr = attribute_mod.split_choices([p.strip() for p in text.split(",") if p.strip()])
    parts = [p.lower() for p in rest]
    if not parts and not attr:
        raise InputError("--attacks needs at least one attack name or 'all'")
    if "all" in parts:
        return ATTACK_CHOICES + attr
    bad = [p for p in parts if p not in ATTACK_CHOICES]
    if bad:
        shown = ui.excerpt(bad[0], 40)
        raise InputError(
            f"--attacks: unknown attack '{shown}' (choose from {', '.join(ATTACK_CHOICES)}, attribute:COLUMN or all)"
        )
    return tuple(a for a in ATTACK_CHOICES if a in parts) + attr


# ---------------------------------------------------------------------------- target models


def target_chunk(
    template: Any,
    X: pd.DataFrame,
    y: np.ndarray,
    classes: np.ndarray,
    in_first: np.ndarray,
    targets: np.ndarray,
    bin_size: float,
    y_idx: np.ndarray | None = None,
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]]:
    """Fit A(D1) and A(D2) for each split row of ``in_first``: binned outputs on the targets, train/test
    accuracy, and with ``y_idx`` (class index per record of D) the binned true-label probability on all of D."""
    out = []
    for mask in in_first:
        q = np.empty((2, len(targets), len(classes)))
        p_all = None if y_idx is None else np.empty((2, len(y)))
        train_acc, test_acc = np.empty(2), np.empty(2)
        for h, half in enumerate((mask, ~mask)):
            model = fit(template, X.iloc[np.flatnonzero(half)], y[half])
            q[h] = bin_probabilities(proba_in(model, X.iloc[targets], classes), bin_size)
            if p_all is not None:
                every = bin_probabilities(proba_in(model, X, classes), bin_size)
                p_all[h] = every[np.arange(len(y)), y_idx]
            pred = model.predict(X)
            train_acc[h] = np.mean(pred[half] == y[half])
            test_acc[h] = np.mean(pred[~half] == y[~half])
        out.append((q, train_acc, test_acc, p_all))
    return out


# ---------------------------------------------------------------------------- the run


Progress = Callable[[int, str], AbstractContextManager[Callable[[int], None]]]


def _check(options: AttackOptions, population_n: int) -> None:
    """Refuse run options that are out of range before any work (InputError -> exit 2)."""
    o = options
    assert o.candidates is not None  # resolved by resolve_options
    if o.candidates < 4 or o.candidates % 2:
        raise InputError(f"--candidates must be an even number of at least 4 (got {o.candidates})")
    if o.iterations * o.candidates > ATTACK_CELLS_MAX:
        raise InputError(
            f"--iterations x |D| is {o.iterations * o.candidates:,}, more than {ATTACK_CELLS_MAX:,}; "
            "lower --iterations or --candidates"
        )
    if o.candidates > population_n:
        raise InputError(
            f"--candidates is {o.candidates} but the data has only {population_n} usable rows; lower --candidates"
        )
    if not 1 <= o.targets <= o.candidates:
        default = " (the default)" if o.targets == AttackOptions.targets else ""
        raise InputError(
            f"--targets {o.targets}{default} is more than the candidate set D's {o.candidates} records; "
            f"give --targets {o.candidates} or fewer, or more data"
        )
    if o.iterations < 1:
        raise InputError(f"--iterations must be at least 1 (got {o.iterations})")
    if o.pdtp_iterations < 0:
        raise InputError(f"--pdtp-iterations must be 0 or more (got {o.pdtp_iterations})")
    if o.shadows < 1 or o.pairs < 1:
        raise InputError("--shadows and --pairs must be at least 1")
    if o.shadow_pool < 0 or o.shadow_pool == 1:
        raise InputError(f"--shadow-pool must be 0 (per-target pairs) or at least 2 models (got {o.shadow_pool})")
    for name, v in (("--max-accuracy", o.max_accuracy), ("--max-auc", o.max_auc)):
        if v is not None and not 0.0 <= v <= 1.0:
            raise InputError(f"{name} must be between 0 and 1 (got {v})")


@dataclass
class Run:
    """What every phase shares: inputs, options, and the run's bookkeeping (fits, timings, notes)."""

    prep: Prepared
    options: AttackOptions
    progress: Progress
    jobs: int
    source: str
    fraction: float
    fits: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    plan: dict[str, Any] = field(default_factory=dict)  # attack.json summary.plan
    synthesis: synth_mod.ShadowData | None = None  # --shadow-data synthesize: made while planning

    @property
    def seed(self) -> int:
        """The spec's seed: every random choice derives from it."""
        return self.prep.spec.seed

    @property
    def bin_size(self) -> float:
        """Width of the output bins (0 = unbinned)."""
        return self.prep.spec.output.bin_size


@dataclass(frozen=True)
class Draw:
    """Phase 1 (Long et al. 5.4, steps 1-2): the candidate set D, the targets and the splits."""

    D: Records
    classes: np.ndarray  # the output columns, in label order
    y_idx: np.ndarray  # (|D|,) class index of every record of D
    tpos: np.ndarray  # (targets,) positions of the targets in D, sorted
    in_first: np.ndarray  # (iterations, |D|) bool: record j of D is in D1 in iteration i
    n_half: int  # |D1| = |D2| = |D| / 2, the training-set size

    @property
    def cls_pos(self) -> dict[Any, int]:
        """Class label -> output column."""
        return {c: i for i, c in enumerate(self.classes)}

    @property
    def target_y(self) -> np.ndarray:
        """Class index of each target."""
        return self.y_idx[self.tpos]


@dataclass(frozen=True)
class TargetOutputs:
    """Phase 2 (Long et al. 5.4, step 2): the target models' binned outputs on the targets."""

    q: np.ndarray  # (iterations, 2, targets, classes): A(D1) then A(D2)
    member: np.ndarray  # (iterations, 2, targets) bool: the target is in that model's training half
    train_accuracy: float
    test_accuracy: float
    p_all: np.ndarray | None = None  # (iterations, 2, |D|): true-label probability on all of D (rmia only)


@dataclass(frozen=True)
class PdtpMeasure:
    """Mean PDTP of each target while a member (Long et al. 5.4, step 3; PDTP of section 4)."""

    mean: np.ndarray  # (targets,) NaN where not measured
    count: np.ndarray  # (targets,) measurements averaged
    iterations: int
    engine: str | None


@dataclass(frozen=True)
class Evidence:
    """Phase 3: shadow models (Long et al. 5.3; Shokri et al. V-B) the attacks learn from."""

    pool: ShadowPool | None  # --shadow-pool: shared in/out source for every attack
    general: ShadowPool | None  # shadows of the untargeted and threshold attacks
    pairs: list[ShadowPairs] | None  # per-target in/out pairs per iteration (the paper's targeted attacks)
    tpos: np.ndarray

    def for_target(self, i: int, t: int) -> tuple[np.ndarray, np.ndarray]:
        """In and out shadow prediction vectors on target ``t`` for iteration ``i``."""
        if self.pool is not None:
            return self.pool.evidence(int(self.tpos[t]))
        assert self.pairs is not None
        return self.pairs[i].in_preds[t], self.pairs[i].out_preds[t]

    def raw_for_target(self, i: int, t: int) -> tuple[np.ndarray, np.ndarray]:
        """As :meth:`for_target`, unbinned (the auditor's own shadow models)."""
        if self.pool is not None:
            return self.pool.raw_evidence(int(self.tpos[t]))
        assert self.pairs is not None and self.pairs[i].in_raw is not None and self.pairs[i].out_raw is not None
        return self.pairs[i].in_raw[t], self.pairs[i].out_raw[t]

    def iterations_used(self, iterations: int) -> list[int]:
        """Iterations with their own evidence: one shared pool, or fresh pairs per iteration."""
        return [0] if self.pool is not None else list(range(iterations))


@dataclass
class AttackResults:
    """Phase 4: per attempt score and decision of every attack, shaped like TargetOutputs.member."""

    results: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    extra: dict[str, dict[str, Any]] = field(default_factory=dict)
    lira_score: np.ndarray | None = None
    leakage: list[LeakageEstimate] | None = None
    per_target: dict[str, np.ndarray] = field(default_factory=dict)  # attack.csv columns of attribute inference
    attribute_values: pd.DataFrame | None = None  # true and inferred sensitive values per attempt (opt-in file)

    @property
    def kl(self) -> np.ndarray | None:
        """Per-target kl_leakage in nats, NaN where not estimable; None without per-record shadows."""
        if self.leakage is None:
            return None
        return np.array([np.nan if e.value is None else e.value for e in self.leakage], dtype=float)


@dataclass(frozen=True)
class Planned:
    """The run's plan (:func:`plan_attack`): the counts it will run with and attack.json's plan."""

    options: AttackOptions  # |D| resolved, sized to --budget, the pool covering every target
    plan: dict[str, Any]  # candidates_from, fits, estimated_s, costs, budget_s, changes
    line: str  # the plan line printed before the work starts
    synthesis: synth_mod.ShadowData | None = None  # --shadow-data synthesize: the shadow data, made while planning


def plan_attack(prep: Prepared, options: AttackOptions) -> Planned:
    """Resolve |D|, check the options, then count the fits, time one fit of A and apply --budget
    (:func:`plan_work`). Refusals (InputError) come from here, before any of the protocol's work."""
    with threadpool_limits(limits=1):
        options, candidates_from = resolve_options(prep, options)
        _check(options, prep.population.n)
        sensitive_column(prep, options)  # attribute:COLUMN checked before any work
        run = new_run(prep, options, _no_progress)
        run.plan["candidates_from"] = candidates_from
        draw = draw_candidates(run)
        line = plan_work(run, draw, select_pdtp_engine(options, prep))
        made = synthesize_shadow_data(run, draw)
        return Planned(run.options, run.plan, line + ("" if made is None else synth_mod.plan_text(made.summary)), made)


def synthesize_shadow_data(run: Run, draw: Draw) -> synth_mod.ShadowData | None:
    """--shadow-data synthesize with the untargeted attack: the model-based shadow data (Shokri et al.
    V-C, :func:`mptool.attacks.synthesis.make_shadow_data`), made while planning so that a synthesis
    that falls short stops the run (exit 2) before any work is written, and the plan line states
    the queries spent. A Dask backend is not open yet here: the synthesis then uses local processes."""
    if not (run.source == "synthesize" and "untargeted" in run.options.attacks):
        return None
    backend = run.options.backend if run.options.backend != "dask" else "loky"
    return synth_mod.make_shadow_data(
        run.prep.template, draw.D, np.flatnonzero(draw.in_first[0]), draw.classes, run.bin_size, run.seed,
        int(run.fraction), run.jobs, backend,
    )


def run_attack(
    prep: Prepared,
    options: AttackOptions,
    progress: Progress,
    announce: Callable[[str], None] | None = None,
    planned: Planned | None = None,
) -> AttackOutcome:
    """Run the protocol and every chosen attack; ``progress(total, label)`` yields ``advance(n)``.

    ``planned``: the plan :func:`plan_attack` made of ``options`` (else it is made here and
    its line goes to ``announce``). BLAS/OpenMP pools are limited to one thread in this
    process: the protocol makes many small fits, which multi-threaded BLAS slows down
    (several times over on a busy machine); parallelism comes from --jobs worker processes
    instead (joblib limits theirs likewise).
    """
    if planned is None:
        planned = plan_attack(prep, options)
        (announce or (lambda line: None))(planned.line)
    with threadpool_limits(limits=1):
        return _run_attack(prep, planned, progress)


def resolve_options(prep: Prepared, options: AttackOptions) -> tuple[AttackOptions, str]:
    """``options`` with |D| resolved (:func:`mptool.attacks.plan.resolve_candidates`), and why that |D|."""
    n_cand, why = plan_mod.resolve_candidates(options.candidates, prep.spec.data.train_size, prep.population.n)
    return replace(options, candidates=n_cand), why


def select_pdtp_engine(options: AttackOptions, prep: Prepared) -> Any:
    """The leave-one-out engine of the PDTP measurements (None without them)."""
    return select_engine(options.engine, prep.spec, prep.template) if options.pdtp_iterations else None


def new_run(prep: Prepared, options: AttackOptions, progress: Progress) -> Run:
    """The run's shared state for ``options`` (already resolved and checked)."""
    source, fraction = parse_source(options.shadow_data)
    return Run(prep, options, progress, resolve_jobs(options.jobs), source, fraction)  # notes: the run's own


@contextmanager
def _no_progress(total: int, label: str) -> Iterator[Callable[[int], None]]:
    yield lambda n: None


def _run_attack(prep: Prepared, planned: Planned, progress: Progress) -> AttackOutcome:
    """The phases of Long et al. 5.4 in order, with the planned counts; each phase is a function below."""
    t_start = time.perf_counter()
    run = new_run(prep, planned.options, progress)
    run.plan = dict(planned.plan)
    run.timings["plan_s"] = planned.plan["seconds"]
    if planned.synthesis is not None:
        run.synthesis = planned.synthesis
        run.fits["synthesis_model"] = 1
        run.timings["synthesis_s"] = planned.synthesis.seconds
        note = synth_mod.failure_note(planned.synthesis.summary)
        run.notes.extend([note] if note else [])
    engine = select_pdtp_engine(run.options, prep)
    draw = draw_candidates(run, check=False)  # the plan's draw, checked there
    targets = train_targets(run, draw)
    measured = measure_pdtp(run, draw, engine)
    evidence = gather_evidence(run, draw)
    attacked = run_attacks(run, draw, targets, evidence)
    return score(run, draw, targets, measured, attacked, t_start)


def draw_candidates(run: Run, check: bool = True) -> Draw:
    """Draw D, the targets and one D1/D2 split per iteration (Long et al. 5.4, steps 1-2).

    D is ``candidates`` rows of the population without replacement; the targets are
    ``targets`` positions of D; in iteration i, D1 is the first half of a seeded
    permutation of D. One fit on D1 of the first iteration checks the data and parameters
    before any parallel work (bad input -> exit 2 early; skipped with ``check`` False).
    """
    o, seed, pop = run.options, run.seed, run.prep.population
    cand = np.sort(rng_for(seed, TAG_CANDIDATES).choice(pop.n, size=o.candidates, replace=False))
    D = pop.take(cand)
    classes = np.array(sorted(set(D.y.tolist()), key=lambda v: (str(type(v)), v)), dtype=object)
    if len(classes) < 2:
        raise InputError(f"{pop.source}: the candidate set has a single class; raise --candidates")
    cls_pos = {c: i for i, c in enumerate(classes)}
    y_idx = np.array([cls_pos[v] for v in D.y], dtype=np.int64)
    n_half = o.candidates // 2
    tpos = np.sort(rng_for(seed, TAG_TARGETS).choice(o.candidates, size=o.targets, replace=False))
    in_first = np.zeros((o.iterations, o.candidates), dtype=bool)
    for i in range(o.iterations):
        in_first[i, rng_for(seed, TAG_SPLIT, i).permutation(o.candidates)[:n_half]] = True
    if check:
        fit_checked(run.prep.template, D.take(np.flatnonzero(in_first[0])))  # bad data/params -> exit 2 early
    return Draw(D, classes, y_idx, tpos, in_first, n_half)


def run_needs(run: Run, engine: Any) -> plan_mod.Needs:
    """Which kinds of model fits the chosen attacks, shadow data and PDTP engine call for."""
    o, wants = run.options, set(run.options.attacks)
    pdtp_on = engine is not None and o.pdtp_iterations > 0
    rmia_refs = "rmia" in wants and not o.shadow_pool  # without a pool rmia's references are the general shadows
    return plan_mod.Needs(
        evidence=bool(wants & (NEEDS_EVIDENCE if o.shadow_pool else NEEDS_EVIDENCE - {"rmia"})),
        general="threshold" in wants or ("untargeted" in wants and run.source == "population") or rmia_refs,
        synthetic="untargeted" in wants and run.source != "population",
        untargeted="untargeted" in wants,
        pdtp=pdtp_on,
        refit_pdtp=pdtp_on and engine.name == "refit",
        attribute=attribute_mod.column_of(o.attacks) is not None,
    )


def plan_work(run: Run, draw: Draw, engine: Any) -> str:
    """Count the model fits, time one fit of A on a half of D, apply --budget and check the pool
    (:mod:`mptool.attacks.plan`); sets ``run.options`` and ``run.plan`` and returns the plan line.

    The run then draws its targets and splits for the chosen counts, exactly as a run given
    those counts as flags (without --budget) draws them.
    """
    t0 = time.perf_counter()
    needs, given = run_needs(run, engine), run.options
    if given.auto_pool and not needs.evidence:  # no attack needs per-record shadows: --shadows general ones serve
        given = replace(given, shadow_pool=0, auto_pool=False)
    costs = plan_mod.time_costs(
        run.prep.template,
        draw.D,
        draw.in_first[0],
        draw.classes,
        run.jobs if given.backend != "threading" else 1,
        classifier_timer(run, draw) if needs.untargeted else None,
    )
    auto_jobs = given.jobs is None and given.backend == "loky"  # --jobs 0: every core, unless one is faster
    if auto_jobs:
        costs = plan_mod.fewer_workers(given, needs, costs)
    chosen, changes = given, []
    if given.budget is not None:
        chosen, changes = plan_mod.size_to_budget(given, needs, costs, given.budget)
        costs = plan_mod.fewer_workers(chosen, needs, costs) if auto_jobs else costs
    run.options = replace(chosen, budget=None, auto_pool=False, jobs=1 if costs.workers == 1 else given.jobs)
    run.jobs = resolve_jobs(run.options.jobs)
    if (chosen.iterations, chosen.targets) != (given.iterations, given.targets):
        draw = draw_candidates(run, check=False)
    if chosen.shadow_pool and needs.evidence:
        run.options = covering_pool(run, draw, grow=given.auto_pool or chosen.shadow_pool != given.shadow_pool)
    if run.options.shadow_pool != chosen.shadow_pool:
        changes.append(f"shadow-pool {chosen.shadow_pool} -> {run.options.shadow_pool} (every target in and out)")
    o = run.options
    fits = synthesis_plan(run, needs)
    run.plan.update(
        fits={**plan_mod.count_fits(o, needs), **fits},
        estimated_s=round(plan_mod.estimate_seconds(o, needs, costs), 1),
        costs=costs.as_dict(),
        budget_s=given.budget,
        changes=changes,
        seconds=round(time.perf_counter() - t0, 3),
    )
    alone = auto_jobs and costs.workers == 1 and resolve_jobs(None) > 1
    return plan_mod.plan_line(o, needs, costs, given.budget, changes, alone)


def synthesis_plan(run: Run, needs: plan_mod.Needs) -> dict[str, int]:
    """--shadow-data synthesize: the extra fit (the queried model, Shokri et al. V-C); checks the
    query budget (|D| records x Q queries at most) against its cap."""
    if not (needs.synthetic and run.source == "synthesize"):
        return {}
    o = run.options
    assert o.candidates is not None
    check_synthesis_total(o.candidates, int(run.fraction))
    run.plan["synthesis_queries_max"] = o.candidates * int(run.fraction)
    return {"synthesis_model": 1}


def classifier_timer(run: Run, draw: Draw) -> Callable[[np.ndarray], float]:
    """Seconds the untargeted attack classifier takes on the first ``len(q)`` records of D with
    outputs ``q`` and seeded coin-flip membership (the estimate of its cost, per row)."""

    def timed(q: np.ndarray) -> float:
        rows = len(q)
        x = FeatureEncoder.fit(draw.D.X, draw.D.schema).transform(draw.D.X.iloc[:rows])
        member = rng_for(run.seed, TAG_PLAN).random(rows) < 0.5
        t0 = time.perf_counter()
        train_untargeted(x, draw.y_idx[:rows], q, member, len(draw.classes), run.seed, run.options.per_class)
        return time.perf_counter() - t0

    return timed


def covering_pool(run: Run, draw: Draw, grow: bool) -> AttackOptions:
    """The options with a pool in which every target is in at least one model and out of at least
    one (else its in/out evidence is empty). Checked on the pool's seeded subsets before any fit:
    a pool size the user gave is refused (exit 2); a default or --budget one grows model by model."""
    o = run.options
    assert o.candidates is not None
    k = o.shadow_pool
    while not pool_covers(o.candidates, k, draw.n_half, run.seed, draw.tpos):
        if not grow:
            raise InputError(f"--shadow-pool {k}: a target is in all or none of the pool; use more models")
        k += 1
    return replace(o, shadow_pool=k)


def train_targets(run: Run, draw: Draw) -> TargetOutputs:
    """Fit A(D1) and A(D2) in every iteration and record their binned outputs on the targets
    (Long et al. 5.4, step 2: each target is once a member and once not per iteration)."""
    o, D = run.options, draw.D
    t0 = time.perf_counter()
    y_full = draw.y_idx if "rmia" in o.attacks else None  # rmia also needs every record's output (its z)
    chunks = chunk_positions(np.arange(o.iterations), run.jobs, per_job=1)
    with run.progress(o.iterations, "target models") as advance:
        parts = run_tasks(
            target_chunk,
            (
                (run.prep.template, D.X, D.y, draw.classes, draw.in_first[c], draw.tpos, run.bin_size, y_full)
                for c in chunks
            ),
            jobs=run.jobs,
            backend=o.backend,
            on_result=lambda r: advance(len(r)),
        )
    flat = [r for part in parts for r in part]
    first = draw.in_first[:, draw.tpos]
    run.fits["target"] = 2 * o.iterations
    run.timings["target_models_s"] = time.perf_counter() - t0
    return TargetOutputs(
        q=np.stack([r[0] for r in flat]),
        member=np.stack([np.stack([first[i], ~first[i]]) for i in range(o.iterations)]),
        train_accuracy=float(np.mean([r[1] for r in flat])),
        test_accuracy=float(np.mean([r[2] for r in flat])),
        p_all=None if y_full is None else np.stack([r[3] for r in flat]),
    )


def measure_pdtp(run: Run, draw: Draw, engine: Any) -> PdtpMeasure:
    """PDTP of each target while a member, averaged over the first ``pdtp_iterations``
    iterations (Long et al. 5.4, step 3): one leave-one-out per iteration on its half."""
    o, D, bin_size = run.options, draw.D, run.bin_size
    t0 = time.perf_counter()
    total, count = np.zeros(o.targets), np.zeros(o.targets, dtype=int)
    n_pdtp = min(o.pdtp_iterations, o.iterations)
    engine_name = None
    if engine is not None and n_pdtp:
        with run.progress(n_pdtp * o.targets, f"PDTP leave-one-out ({engine.name})") as advance:
            for i in range(n_pdtp):
                for half in (draw.in_first[i], ~draw.in_first[i]):
                    half_idx = np.flatnonzero(half)
                    which = np.flatnonzero(half[draw.tpos])
                    if not which.size:
                        continue
                    Th = D.take(half_idx)
                    positions = np.searchsorted(half_idx, draw.tpos[which]).astype(np.int64)
                    model = fit(run.prep.template, Th.X, Th.y)
                    req = LooRequest(
                        run.prep.spec, run.prep.template, Th, model, draw.classes, positions, run.jobs, o.backend
                    )
                    res = engine.run(req, advance)
                    engine_name = res.engine
                    vals = pdtp_of(res.p_full, res.p_loo, bin_size)
                    total[which] += vals.pdtp
                    count[which] += 1
        run.fits["pdtp_full"] = 2 * n_pdtp
        run.fits["pdtp_leave_one_out_records"] = int(count.sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    run.timings["pdtp_s"] = time.perf_counter() - t0
    return PdtpMeasure(mean, count, n_pdtp, engine_name)


def gather_evidence(run: Run, draw: Draw) -> Evidence:
    """Train the shadow models the chosen attacks need (Long et al. 5.3 and 5.4).

    With --shadow-pool K: K models on random halves of D serve every attack. Otherwise the
    untargeted (population data) and threshold attacks get ``shadows`` general models, and
    the targeted attacks and LiRA get ``pairs`` fresh in/out pairs per target per iteration.
    """
    o, D = run.options, draw.D
    needs = run_needs(run, None)
    need_evidence, need_general = needs.evidence, needs.general
    common = (run.prep.template, D.X, D.y, draw.classes)
    pool = general = pairs = None
    t0 = time.perf_counter()
    if o.shadow_pool:
        with run.progress(o.shadow_pool, "shadow pool") as advance:
            pool = train_pool(*common, o.shadow_pool, draw.n_half, run.seed, run.bin_size, run.jobs, o.backend, advance)
        run.fits["shadow_pool"] = o.shadow_pool
        general = pool  # every target is in and out of some pool model: checked by plan_work
    else:
        if need_general:
            with run.progress(o.shadows, "shadow models") as advance:
                general = train_pool(
                    *common, o.shadows, draw.n_half, run.seed, run.bin_size, run.jobs, o.backend, advance
                )
            run.fits["shadow_general"] = o.shadows
        if need_evidence:
            with run.progress(o.iterations * o.targets, f"shadow pairs ({2 * o.pairs} per target)") as advance:
                pairs = train_pairs(
                    *common,
                    draw.tpos,
                    o.iterations,
                    o.pairs,
                    draw.n_half,
                    run.seed,
                    run.bin_size,
                    run.jobs,
                    o.backend,
                    advance,
                )
            run.fits["shadow_pairs"] = 2 * o.pairs * o.targets * o.iterations
    run.timings["shadows_s"] = time.perf_counter() - t0
    return Evidence(pool, general, pairs, draw.tpos)


def run_attacks(run: Run, draw: Draw, targets: TargetOutputs, evidence: Evidence) -> AttackResults:
    """Attack every target model on every target with each chosen attack (Long et al. 5.3-5.4)."""
    wants = set(run.options.attacks)
    t0 = time.perf_counter()
    out = AttackResults()
    if "untargeted" in wants:
        out.results["untargeted"], out.extra["untargeted"] = attack_untargeted(run, draw, targets, evidence)
    if "threshold" in wants:
        out.results["threshold"], out.extra["threshold"] = attack_threshold(run, draw, targets, evidence)
    out.lira_score = np.full(run.options.targets, np.nan)
    if wants & NEEDS_EVIDENCE:
        for name, fn in (("distance", distance), ("frequency", frequency)):
            if name in wants:
                out.results[name] = per_target_attack(fn, targets, evidence)
        if "lira" in wants:
            online, offline, out.extra["lira"] = attack_lira(draw, targets, evidence, run.bin_size)
            out.results["lira"], out.results["lira_offline"] = online, offline
            out.lira_score = mean_member_score(online[0], targets.member)
    if "rmia" in wants:
        online, offline, out.extra["rmia"] = attack_rmia(run, draw, targets, evidence)
        out.extra["rmia_offline"] = out.extra["rmia"]
        out.results["rmia"], out.results["rmia_offline"] = online, offline
    out.leakage = leakage_per_target(evidence, draw, run.options.iterations)
    if attribute_mod.column_of(run.options.attacks) is not None:
        out.results[attribute_mod.NAME], out.extra[attribute_mod.NAME], out.per_target, out.attribute_values = (
            attack_attribute(run, draw, targets)
        )
    run.timings["attacks_s"] = time.perf_counter() - t0
    return out


def sensitive_column(prep: Prepared, options: AttackOptions) -> attribute_mod.Sensitive | None:
    """The sensitive column of ``attribute:COLUMN`` with its candidates (None without it); InputError if unusable."""
    column = attribute_mod.column_of(options.attacks)
    if column is None:
        return None
    return attribute_mod.resolve(prep.population, prep.spec.model.bins, column)


def attack_attribute(
    run: Run, draw: Draw, targets: TargetOutputs
) -> tuple[Scored, dict, dict[str, np.ndarray], pd.DataFrame]:
    """Yeom et al.'s attribute inference (section 4) on every target under every target model
    (:mod:`mptool.attacks.attribute`): the membership-reduction result, its extra values, attack.csv
    columns and the per-attempt true/inferred values (written only with --attribute-values)."""
    o = run.options
    sens = sensitive_column(run.prep, o)
    assert sens is not None
    with run.progress(o.iterations, f"attribute inference ({sens.k} candidate values)") as advance:
        p_y = attribute_mod.query_targets(
            run.prep.template, draw.D, draw.classes, draw.y_idx, draw.in_first, draw.tpos, sens, run.bin_size,
            run.jobs, o.backend, advance,
        )
    run.fits["attribute_target"] = 2 * o.iterations
    truth = sens.codes(draw.D.X.iloc[draw.tpos])
    inf = attribute_mod.infer(p_y, sens.prior, truth)
    m = targets.member
    extra = {**attribute_mod.describe(sens),
             **attribute_mod.summarise(m, inf, rng_for(run.seed, attribute_mod.TAG_ATTRIBUTE_BOOTSTRAP))}
    extra["attribute_intervals"] = extra.pop("intervals")
    with np.errstate(invalid="ignore"):
        columns = {
            "attribute_right_member": (inf.right & m).sum(axis=(0, 1)) / m.sum(axis=(0, 1)),
            "attribute_right_nonmember": (inf.right & ~m).sum(axis=(0, 1)) / (~m).sum(axis=(0, 1)),
            "attribute_confidence": inf.confidence.mean(axis=(0, 1)),
        }
    values = attribute_mod.values_frame(draw.D.rows[draw.tpos], m, inf, truth, sens)
    return (inf.p_true, inf.right), extra, columns, values


Scored = tuple[np.ndarray, np.ndarray]


def attack_untargeted(run: Run, draw: Draw, targets: TargetOutputs, evidence: Evidence) -> tuple[Scored, dict]:
    """Shokri et al.'s shadow-model attack (Long et al., Algorithm 1): an attack classifier
    trained on the shadows' (x, y, q, in/out) rows, queried with each target model's output."""
    o, D, k = run.options, draw.D, len(draw.classes)
    features = resolve_features(o.untargeted_features, run.source != "population")
    encoder = FeatureEncoder.fit(D.X, D.schema, use_record=features == "xyq")
    if run.source == "synthesize":
        Xs, ys_idx, pool = synthesized_shadows(run, draw)
        m = pool.size
        x_rows = np.tile(encoder.transform(Xs), (m, 1))
        y_rows = np.tile(ys_idx, m)
        q_rows = pool.preds.reshape(-1, k)
        m_rows = pool.members.reshape(-1)
    elif run.source == "population":
        general = evidence.general
        assert general is not None
        m = min(general.size, o.shadows)  # a pool larger than --shadows lends its first --shadows models
        x_rows = np.tile(encoder.transform(D.X), (m, 1))
        y_rows = np.tile(draw.y_idx, m)
        q_rows = general.preds[:m].reshape(-1, k)
        m_rows = general.members[:m].reshape(-1)
    else:
        with run.progress(o.shadows, f"shadow models ({o.shadow_data} data)") as advance:
            synth = train_synthetic(
                run.prep.template,
                D.X,
                D.y,
                draw.classes,
                o.shadows,
                draw.n_half,
                run.source,
                run.fraction,
                run.seed,
                run.bin_size,
                run.jobs,
                o.backend,
                advance,
            )
        run.fits["shadow_synthetic"] = o.shadows
        cls_pos = draw.cls_pos
        x_rows = np.vstack([encoder.transform(s[0]) for s in synth])
        y_rows = np.concatenate([[cls_pos.get(v, 0) for v in s[1]] for s in synth]).astype(np.int64)
        m_rows = np.concatenate([s[2] for s in synth])
        q_rows = np.vstack([s[3] for s in synth])
    with run.progress(1, "untargeted attack classifier") as advance:
        model = train_untargeted(x_rows, y_rows, q_rows, m_rows, k, run.seed, o.per_class)
        advance(1)
    xt = encoder.transform(D.X.iloc[draw.tpos])
    reps = targets.q.shape[0] * targets.q.shape[1]
    s, d = model.score(np.tile(xt, (reps, 1)), np.tile(draw.target_y, reps), targets.q.reshape(-1, k))
    shape = targets.member.shape
    extra = {
        "attack_training_rows": int(len(m_rows)), "per_class": o.per_class, "shadow_data": o.shadow_data,
        "features": {"xyq": "x, y, q (Long et al. Algorithm 1)", "yq": "y, q (Shokri et al.)"}[features],
    }
    return (s.reshape(shape), d.reshape(shape)), extra


def synthesized_shadows(run: Run, draw: Draw) -> tuple[pd.DataFrame, np.ndarray, ShadowPool]:
    """Shadows on model-based shadow data (Shokri et al. V-C; made while planning,
    :func:`synthesize_shadow_data`): --shadows models, each on a random half of the records made,
    queried on all of them, as the population shadows are on D."""
    o, made = run.options, run.synthesis
    assert made is not None
    with run.progress(o.shadows, "shadow models (model-based synthetic data)") as advance:
        labels = draw.classes[made.y_idx].astype(draw.D.y.dtype)  # the data's label type (not object)
        pool = train_pool(run.prep.template, made.X, labels, draw.classes, o.shadows,
                          len(made.y_idx) // 2, run.seed, run.bin_size, run.jobs, o.backend, advance)
    run.fits["shadow_synthetic"] = o.shadows
    return made.X, made.y_idx, pool


def attack_threshold(run: Run, draw: Draw, targets: TargetOutputs, evidence: Evidence) -> tuple[Scored, dict]:
    """Yeom et al.'s loss threshold at the shadows' expected training loss."""
    general = evidence.general
    assert general is not None
    tau = expected_training_loss(general.preds, general.members, draw.y_idx)
    shape = targets.member.shape
    sc, dc = np.empty(shape), np.zeros(shape, dtype=bool)
    ty = draw.target_y
    for i in range(shape[0]):
        for t in range(shape[2]):
            sc[i, :, t], dc[i, :, t] = threshold(targets.q[i, :, t], int(ty[t]), tau)
    return (sc, dc), {"threshold_loss": tau}


def per_target_attack(fn: Callable[..., Scored], targets: TargetOutputs, evidence: Evidence) -> Scored:
    """A targeted attack ``fn(q, in_preds, out_preds)`` (Long et al. 5.3) on every target model."""
    shape = targets.member.shape
    sc, dc = np.empty(shape), np.zeros(shape, dtype=bool)
    for i in range(shape[0]):
        for t in range(shape[2]):
            sc[i, :, t], dc[i, :, t] = fn(targets.q[i, :, t], *evidence.for_target(i, t))
    return sc, dc


def attack_lira(draw: Draw, targets: TargetOutputs, evidence: Evidence, bin_size: float) -> tuple[Scored, Scored, dict]:
    """Carlini et al.'s LiRA, online and offline, on the logit of the true class's probability, with the
    binned observation integrated over its bin and shrunk per-record variances (mptool.attacks.lira)."""
    shape = targets.member.shape
    ty = draw.target_y
    keys = [(i, t) for i in evidence.iterations_used(shape[0]) for t in range(shape[2])]
    phis = [[lira_mod.logit_confidence(e, int(ty[t])) for e in evidence.for_target(i, t)] for i, t in keys]
    fit_in = lira_mod.fit_side([p[0] for p in phis], bin_size)
    fit_out = lira_mod.fit_side([p[1] for p in phis], bin_size)
    where = {k: j for j, k in enumerate(keys)}
    on_s, on_d = np.empty(shape), np.zeros(shape, dtype=bool)
    off_s, off_d = np.empty(shape), np.zeros(shape, dtype=bool)
    for i in range(shape[0]):
        for t in range(shape[2]):
            j = where[(0, t) if evidence.pool is not None else (i, t)]
            lo, hi = lira_mod.logit_interval(targets.q[i, :, t], int(ty[t]), bin_size)
            (on_s[i, :, t], on_d[i, :, t]), (off_s[i, :, t], off_d[i, :, t]) = lira_mod.lira_binned(
                lo, hi, (fit_in.mean[j], fit_in.std[j]), (fit_out.mean[j], fit_out.std[j])
            )
    extra = {
        "observation": "the bin of p_y (Gaussian in logit space integrated over it)" if bin_size > 0 else "exact p_y",
        "prior_models": lira_mod.PRIOR_MODELS,
        "pooled_std_in": fit_in.pooled_std,
        "pooled_std_out": fit_out.pooled_std,
        "models_in": [int(fit_in.count.min()), int(fit_in.count.max())],
        "models_out": [int(fit_out.count.min()), int(fit_out.count.max())],
    }
    return (on_s, on_d), (off_s, off_d), extra


def attack_rmia(run: Run, draw: Draw, targets: TargetOutputs, evidence: Evidence) -> tuple[Scored, Scored, dict]:
    """Zarifzadeh et al.'s RMIA, online and offline (mptool.attacks.rmia): the pool (else the general
    shadows) as reference models, z drawn from the records each target model did not train on."""
    refs = evidence.pool if evidence.pool is not None else evidence.general
    assert refs is not None and targets.p_all is not None
    p_ref = refs.preds[:, np.arange(len(draw.y_idx)), draw.y_idx]
    in_target = np.stack([np.stack([m, ~m]) for m in draw.in_first])
    o = run.options
    r = rmia_mod.rmia(
        targets.p_all, in_target, draw.tpos, p_ref, refs.members, run.seed, o.rmia_gamma, o.rmia_offline_a
    )
    on_d, off_d = r.decisions
    extra = {
        "gamma": r.gamma,
        "offline_a": r.a,
        "offline_a_from": "tuned on the reference models (grid 0..1 by 0.1)" if r.a_tuned
        else ("--rmia-offline-a" if o.rmia_offline_a is not None else "default (too few reference models to tune)"),
        "population_per_model": r.population,
        "reference_models": refs.size,
        "references": "shadow pool" if evidence.pool is not None else "general shadows (--shadows)",
        "offline_fallback_targets": r.offline_fallback,
    }
    return (r.online, on_d), (r.offline, off_d), extra


def mean_member_score(scores: np.ndarray, member: np.ndarray) -> np.ndarray:
    """Per target: the mean score over the attempts where the target was a member."""
    return np.array([scores[:, :, t][member[:, :, t]].mean() for t in range(member.shape[2])])


def leakage_per_target(evidence: Evidence, draw: Draw, iterations: int) -> list[LeakageEstimate] | None:
    """Farokhi & Kaafar's KL membership leakage of each target from all its unbinned in/out shadow
    outputs (mptool.attacks.leakage); None without per-record shadows (no pool, no pairs)."""
    if evidence.pool is None and evidence.pairs is None:
        return None
    out = []
    for t, y in enumerate(draw.target_y):
        ev = [evidence.raw_for_target(i, t) for i in evidence.iterations_used(iterations)]
        phi_in, sat_in = true_label_logit(np.concatenate([e[0] for e in ev]), int(y))
        phi_out, sat_out = true_label_logit(np.concatenate([e[1] for e in ev]), int(y))
        out.append(kl_leakage(phi_in, phi_out, sat_in, sat_out))
    return out


def score(
    run: Run, draw: Draw, targets: TargetOutputs, measured: PdtpMeasure, attacked: AttackResults, t_start: float
) -> AttackOutcome:
    """Per-target accuracy table, per-attack metrics over all attempts and the run summary
    (Long et al. 5.4, step 4; Tables 1 and 2)."""
    names = [r for a in ATTACK_CHOICES if a in run.options.attacks for r in RESULT_NAMES[a]]
    names += [n for n in (attribute_mod.NAME,) if n in attacked.results]
    table, attack_out = per_target_table(draw, targets, measured, attacked, names, run.seed)
    summary = run_summary(run, draw, targets, measured, table, attack_out, names, attacked)
    summary["timings"] = {k: round(v, 3) for k, v in {**run.timings, "total_s": time.perf_counter() - t_start}.items()}
    summary["manifest"] = manifest(
        run.prep.spec.sha256(), run.prep.population.sha256, run.seed, run.prep.population.source
    )
    notes = run.notes
    attempts = attempts_frame(draw.D.rows[draw.tpos], targets.member, {n: attacked.results[n] for n in names})
    o = run.options
    if "untargeted" in o.attacks and o.shadow_pool and run.source == "population":
        notes.append(
            f"the untargeted attack uses {min(o.shadow_pool, o.shadows)} of the {o.shadow_pool} pool models "
            "as its shadows (--shadows), the threshold attack all of them"
        )
    return AttackOutcome(table=table, attacks=attack_out, summary=summary, notes=notes, attempts=attempts,
                         attribute_values=attacked.attribute_values)


def per_target_table(
    draw: Draw, targets: TargetOutputs, measured: PdtpMeasure, attacked: AttackResults, names: list[str],
    seed: int = 0,
) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    """attack.csv (one row per target, columns as in ATTACK_COLUMNS) and each attack's metrics,
    each with its bootstrap confidence intervals (:mod:`mptool.attacks.intervals`, seeded per attack)."""
    D, tpos, member = draw.D, draw.tpos, targets.member
    table = pd.DataFrame({"row": D.rows[tpos]})
    if D.ids is not None:
        table["id"] = D.ids[tpos]
    table["label"] = D.y[tpos]
    table["pdtp_mean"] = measured.mean
    attack_out: dict[str, dict[str, Any]] = {}
    for name in names:
        sc, decision = attacked.results[name]
        per_target = (decision == member).mean(axis=(0, 1))
        table[f"{name}_accuracy"] = per_target
        m = binary_metrics(member, decision, sc)
        m["per_target_accuracy_mean"] = float(per_target.mean())
        m["per_target_accuracy_max"] = float(per_target.max())
        m["correlation_with_pdtp"] = correlations(per_target, measured.mean)
        m.update(attacked.extra.get(name, {}))
        m["intervals"] = bootstrap_intervals(
            *np.broadcast_arrays(member, decision, sc), rng_for(seed, TAG_BOOTSTRAP, names.index(name))
        )
        m["roc"] = m.pop("roc")  # the long arrays last
        attack_out[name] = m
    for column, values in attacked.per_target.items():
        table[column] = values
    table["max_accuracy"] = table[[f"{n}_accuracy" for n in names]].max(axis=1)
    table["lira_score"] = attacked.lira_score
    table["kl_leakage"] = np.full(len(tpos), np.nan) if attacked.kl is None else attacked.kl
    table["n_attacks"] = 2 * member.shape[0]
    table["pdtp_measurements"] = measured.count
    return table, attack_out


#: How --max-accuracy and --max-auc decide (written in attack.json's summary.gate).
GATE_RULE = (
    "a gate is exceeded when the lower end of an attack's 95% bootstrap interval (over targets) is above the "
    "limit; it is undecided when no lower end is but an attack's estimate or upper end is: the run is too "
    "small to tell the attack from noise. An undecided gate fails closed (exit 1, with a line saying it could "
    "not decide and how to make the run decide): a gate that could not check never passes"
)


def gate(
    options: AttackOptions, attack_out: dict[str, dict[str, Any]]
) -> tuple[str, str | None, list[str], list[str]]:
    """The most accurate attack, the attack of highest AUC, the gates exceeded and the gates undecided (GATE_RULE)."""
    best_acc = max(attack_out, key=lambda k: attack_out[k]["accuracy"])
    aucs = {k: v["auc"] for k, v in attack_out.items() if v["auc"] is not None}
    best_auc = max(aucs, key=lambda k: aucs[k]) if aucs else None
    exceeded: list[str] = []
    undecided: list[str] = []
    for key, word, limit in (("accuracy", "accuracy", options.max_accuracy), ("auc", "AUC", options.max_auc)):
        if limit is None:
            continue
        rows = []
        for name, m in attack_out.items():
            if m.get(key) is None:
                continue
            iv = (m.get("intervals") or {}).get(key) or {}
            low, high = iv.get("low"), iv.get("high")
            rows.append((name, m[key], m[key] if low is None else low, m[key] if high is None else high))
        over = [r for r in rows if r[2] > limit]
        near = [r for r in rows if max(r[1], r[3]) > limit]
        if over:
            name, point, low, high = max(over, key=lambda r: (r[2], r[1]))
            exceeded.append(f"{name} {word} {point:.4f} (95% interval {low:.4f} to {high:.4f}) > {limit:g}")
        elif near:
            name, point, low, high = max(near, key=lambda r: (r[1], r[3]))
            undecided.append(
                f"{name} {word} {point:.4f}, 95% interval {low:.4f} to {high:.4f}, contains {limit:g}: too few "
                "targets or iterations to decide (raise --targets or --iterations)"
            )
    return best_acc, best_auc, exceeded, undecided


def run_summary(
    run: Run,
    draw: Draw,
    targets: TargetOutputs,
    measured: PdtpMeasure,
    table: pd.DataFrame,
    attack_out: dict[str, dict[str, Any]],
    names: list[str],
    attacked: AttackResults,
) -> dict[str, Any]:
    """attack.json's summary: the run's setup, target-model accuracy, PDTP, leakage, gate, fits."""
    o, pm = run.options, measured.mean
    kl = table["kl_leakage"].to_numpy(dtype=float)
    leakage: dict[str, Any] = {
        "estimated": 0,
        "note": "needs per-record shadows: --shadow-pool or the targeted attacks",
    }
    if attacked.leakage is not None:
        leakage = summarise(attacked.leakage, {n: table[f"{n}_accuracy"].to_numpy() for n in names})
    leakage["correlation_with_pdtp"] = correlations(kl, pm)
    best_acc, best_auc, exceeded, undecided = gate(o, attack_out)
    finite = np.isfinite(pm).any()
    return {
        "estimator": run.prep.choice.name,
        "attacks": names,
        "candidates": o.candidates,
        "candidates_from": run.plan.get("candidates_from"),
        "train_size": draw.n_half,
        "targets": o.targets,
        "iterations": o.iterations,
        "pdtp_iterations": measured.iterations,
        "engine": measured.engine,
        "shadows": o.shadows,
        "pairs": o.pairs,
        "shadow_pool": o.shadow_pool,
        "shadow_data": o.shadow_data,
        "classes": draw.classes.tolist(),
        "bin_size": run.bin_size,
        "target_model": {"train_accuracy": targets.train_accuracy, "test_accuracy": targets.test_accuracy},
        "pdtp_mean_average": float(np.nanmean(pm)) if finite else None,
        "pdtp_mean_max": float(np.nanmax(pm)) if finite else None,
        "max_accuracy": {
            "mean": float(table["max_accuracy"].mean()),
            "correlation_with_pdtp": correlations(table["max_accuracy"].to_numpy(), pm),
        },
        "kl_leakage": leakage,
        "best_accuracy_attack": best_acc,
        "best_auc_attack": best_auc,
        "strongest_attack": strongest_attack(attack_out),
        "metrics": METRICS_NOTE,
        "gate": {"max_accuracy": o.max_accuracy, "max_auc": o.max_auc, "exceeded": exceeded, "undecided": undecided,
                 "rule": GATE_RULE},
        "fits": {**run.fits, "total": int(sum(v for k, v in run.fits.items() if k != "pdtp_leave_one_out_records"))},
        "plan": {k: v for k, v in run.plan.items() if k not in ("candidates_from", "seconds")},
        "jobs": run.jobs,
        **({"synthesis": run.synthesis.summary} if run.synthesis is not None else {}),
    }


def interval_lines(attacks: dict[str, dict[str, Any]]) -> list[str]:
    """One line per attack: the 95% intervals of accuracy, AUC and TPR at 1% FPR ('n/e' = not estimable)."""

    def span(iv: dict[str, Any] | None) -> str:
        if not iv or iv.get("estimable") is False or iv.get("low") is None:
            return "n/e"
        return f"{iv['low']:.3f}-{iv['high']:.3f}"

    lines = []
    for name, m in attacks.items():
        iv = m.get("intervals") or {}
        if iv:
            lines.append(
                f"  {name}: 95% intervals (bootstrap over {iv.get('targets')} targets): accuracy "
                f"{span(iv.get('accuracy'))}, AUC {span(iv.get('auc'))}, TPR@1% {span(iv.get('tpr_at_1pct_fpr'))}, "
                f"TPR@0.1% {span(iv.get('tpr_at_0.1pct_fpr'))}"
            )
    return lines


def strongest_line(best: dict[str, Any]) -> str:
    """The terminal line naming the strongest attack, its TPR at 1% FPR and that TPR's 95% interval."""
    iv = best.get("tpr_at_1pct_fpr_interval")
    where = ""
    if iv and iv.get("estimable") is not False and iv.get("low") is not None:
        where = f" [{iv.get('confidence', 0.95):.0%} interval {iv['low']:.3f}-{iv['high']:.3f}]"
    elif iv:
        where = " [interval not estimable: fewer than 100 non-member attempts]"
    return (
        f"strongest attack: {best['name']}, TPR {best['tpr_at_1pct_fpr']:.3f}{where} at 1% FPR "
        f"(AUC {best['auc']:.3f}; {best['nonmember_attempts']} non-member attempts)"
    )


def summary_lines(outcome: AttackOutcome) -> list[str]:
    """Plain-text lines for the terminal: one per attack, then the target model and PDTP."""
    s = outcome.summary
    lines = [
        f"{'attack':<14}{'accuracy':>9}{'AUC':>8}{'adv':>8}{'TPR@1%':>8}{'prec':>7}{'recall':>7}{'F1':>7}{'r(PDTP)':>9}"
    ]

    def f(v: Any, w: int, d: int = 4) -> str:
        return f"{v:>{w}.{d}f}" if isinstance(v, int | float) and v == v else f"{'-':>{w}}"

    for name, m in outcome.attacks.items():
        r = m["correlation_with_pdtp"]["pearson"]
        lines.append(
            f"{name:<14}{f(m['accuracy'], 9)}{f(m['auc'], 8, 3)}{f(m['advantage'], 8, 3)}"
            f"{f(m['tpr_at_1pct_fpr'], 8, 3)}{f(m['precision'], 7, 3)}{f(m['recall'], 7, 3)}{f(m['f1'], 7, 3)}"
            f"{f(r, 9, 3)}"
        )
    lines += interval_lines(outcome.attacks)
    if attribute_mod.NAME in outcome.attacks:
        lines.append(attribute_mod.summary_line(outcome.attacks[attribute_mod.NAME]))
    best = s.get("strongest_attack")
    if best is not None:
        lines.append(strongest_line(best))
    tm = s["target_model"]
    lines.append(
        f"target model: train accuracy {tm['train_accuracy']:.4f}, test accuracy {tm['test_accuracy']:.4f}; "
        f"average PDTP {s['pdtp_mean_average'] if s['pdtp_mean_average'] is None else round(s['pdtp_mean_average'], 4)}"
        f"; max per-target accuracy vs PDTP r = {s['max_accuracy']['correlation_with_pdtp']['pearson']}"
    )
    syn = s.get("synthesis")
    if syn is not None:
        lines.append(
            f"model-based shadow data: {syn['synthesized']} of {syn['requested']} records synthesised "
            f"({syn['failed']} failed), {syn['queries']:,} queries of the target model"
        )
    lines.append(f"model fits: {s['fits']['total']}, {s['timings']['total_s']:.1f}s")
    return lines

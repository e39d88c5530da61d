"""mptool's public Python API: the three audits as functions that return frozen results.

Each operation takes the data (a CSV/Parquet path or a pandas DataFrame) and a model spec
(a :class:`~mptool.inputs.spec.Spec`, a mapping shaped like the YAML, or a YAML path), runs
the audit and returns a frozen result holding the per-record DataFrame and the JSON summary.
Nothing here prints, writes a file or calls ``sys.exit``: bad input raises
:class:`~mptool.runtime.errors.InputError` (the CLI maps it to exit 2). Progress and
checkpoints are passed in (``progress``, ``checkpoint``), never reached for.

- :func:`pdtp` -- PDTP of every (or each chosen) training record and the DTP-1 verdict
  (Long et al., Definitions 4.3/4.4, sections 5.2 and 6).
- :func:`attack` -- the membership attacks under the paper's protocol (section 5.4).
- :func:`reduce_dtp` -- greedy / look-ahead removal until DTP-1 holds (section 8).

Example (a notebook cell)::

    import mptool
    result = mptool.pdtp("adult.csv", "configs/adult-nb.yaml", records=[0, 5, 9])
    result.verdict            # 'pass' or 'fail'
    result.table.head()       # row, label, pdtp, worst_class, p_full, p_loo, violation, ...
                              # (the CLI writes label and worst_class only with --show-values)
    result.summary["max"]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import pandas as pd

from mptool.api.early import WARM_MODULES
from mptool.api.pdtp import PdtpOptions, noise_floor_records, run_pdtp, select_positions
from mptool.api.randomized import check_attack_replicates, check_replicate_options, detect_for
from mptool.inputs import options as checks
from mptool.inputs.models import proba_in, resolve_estimator
from mptool.inputs.prepare import Prepared, fit_checked, prepare
from mptool.inputs.spec import Spec, load_spec, parse_spec
from mptool.loo import no_exact_engine, select_engine
from mptool.privacy.release import gate_policy, policy_dict, release_summary, released_template
from mptool.privacy.stability import resolve_queries
from mptool.runtime import prestart
from mptool.runtime.checkpoint import options_dict, run_key, saving_on_interrupt
from mptool.runtime.errors import InputError
from mptool.runtime.parallel import check_backend, checkpointing, choose_workers, session

if TYPE_CHECKING:  # imported where used: reduce-dtp, attack and --trained are not on the pdtp demo's path (issue 28)
    from mptool.api.reduce import ReduceOutcome

Data = str | Path | pd.DataFrame
SpecLike = Spec | Mapping[str, Any] | str | Path
#: ``progress(total, label)`` is a context manager yielding ``advance(n)`` (see :func:`mptool.runtime.ui.progress`).
Progress = Callable[[int, str], AbstractContextManager[Callable[[int], None]]]
#: ``checkpoint(run_key)`` opens the run's checkpoint (see :class:`mptool.runtime.checkpoint.Checkpoint`).
CheckpointFactory = Callable[[str], Any]


@contextmanager
def _no_progress(total: int, label: str) -> Iterator[Callable[[int], None]]:
    yield lambda n: None


@dataclass(frozen=True)
class AuditResult:
    """What an operation returns: the per-record table, the JSON summary and the spec it ran."""

    table: pd.DataFrame
    summary: Mapping[str, Any]
    spec: Spec
    notes: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        """'pass' or 'fail': DTP-1 holds (pdtp), no attack gate exceeded (attack), DTP-1 reached (reduce-dtp)."""
        raise NotImplementedError


@dataclass(frozen=True)
class PdtpResult(AuditResult):
    """:func:`pdtp`'s result: ``table`` has the columns of ``mptool.api.pdtp.PDTP_COLUMNS``."""

    @property
    def verdict(self) -> str:
        return str(self.summary["verdict"])


@dataclass(frozen=True)
class AttackResult(AuditResult):
    """:func:`attack`'s result: per-target ``table``, per-attack metrics in ``attacks``, and ``attempts``
    (one row per attack per attempt: row, iteration, attack, member, score, decision)."""

    attacks: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    attempts: pd.DataFrame | None = None
    attribute_values: pd.DataFrame | None = None  # attribute:COLUMN's true/inferred values per attempt (raw data)

    @property
    def verdict(self) -> str:
        return "fail" if self.summary["gate"]["exceeded"] else "pass"


@dataclass(frozen=True)
class ReduceResult(AuditResult):
    """:func:`reduce_dtp`'s result: the step ``table`` (step 0 = nothing removed); ``outcome`` for write-clean."""

    outcome: ReduceOutcome | None = None

    @property
    def verdict(self) -> str:
        return "pass" if self.summary["reached"] else "fail"


def as_spec(spec: SpecLike, overrides: Mapping[str, Any] | None = None) -> Spec:
    """A validated :class:`Spec` from a Spec, a YAML-shaped mapping or a YAML file path."""
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    if isinstance(spec, Spec):
        return parse_spec(spec.model_dump(mode="json"), "spec", overrides) if overrides else spec
    if isinstance(spec, Mapping):
        return parse_spec(dict(spec), "spec", overrides)
    return load_spec(spec, overrides)


@contextmanager
def _run_context(
    backend: str, scheduler: str | None, jobs: int | None, ckpt: Any, tasks: bool = True
) -> Iterator[None]:
    """The parallel session; with a checkpoint, finished tasks are saved and reused (``tasks``), kept on interrupt."""
    with ExitStack() as stack:
        stack.callback(prestart.release)  # workers started early and never used stop with the run
        stack.enter_context(session(backend, scheduler, jobs))
        if ckpt is not None:
            if tasks:
                stack.enter_context(checkpointing(ckpt))
            stack.enter_context(saving_on_interrupt(ckpt))
        yield


def with_trained(prep: Prepared, trained: str | Path | None, allow_import: tuple[str, ...] = ()) -> Prepared:
    """``prep`` with the --trained artefact loaded and checked to predict like A(T) on T (InputError if not)."""
    if trained is None:
        return prep
    from mptool.inputs.trained import compare_to_spec, load_trained

    shipped = load_trained(trained, allow_import)
    p_spec = proba_in(fit_checked(prep.template, prep.train), prep.train.X, prep.classes)
    numeric = [c.name for c in prep.train.schema.columns if c.kind == "numeric"]
    return replace(prep, trained=compare_to_spec(shipped, prep.train.X, prep.classes, p_spec, prep.train.rows, numeric))


def prestart_refits(spec: Spec, engine: str, jobs: int | None, backend: str, allow_import: tuple[str, ...] = (),
                    fail_fast: bool = False) -> bool:
    """Start the run's ``--jobs N`` loky workers now, before the data is read and A(T) fitted, when the run
    surely refits on N > 1 of them (:mod:`mptool.runtime.prestart`); True when started.

    Never for an exact engine (``--engine exact``, or ``auto`` where one is written for the estimator:
    :func:`mptool.loo.no_exact_engine`), for ``--jobs 0`` (the planner decides after timing a fit, and
    may choose this process), one worker, another backend, or ``--fail-fast`` (its riskiest record is
    refitted here first, so that a violator there ends the run with no worker started).
    """
    if backend != "loky" or jobs is None or jobs <= 1 or fail_fast or engine == "exact" or not prestart.enabled():
        return False
    try:
        choice = resolve_estimator(spec.model, spec.seed, allow_import)
    except InputError:
        return False  # prepare() refuses it with its own line
    if engine == "auto" and not no_exact_engine(spec, choice.make()):
        return False
    return prestart.start(jobs, backend, (*WARM_MODULES, choice.cls.__module__))


def prestart_planned(prep: Prepared, options: PdtpOptions, audited: int, fit_s: float) -> bool:
    """With ``--jobs 0``, start the workers the planner will choose as soon as one fit of A(T) is timed
    (``fit_s``), before the randomness detection's refits and the audit's own fit; True when started.

    The planner (:func:`mptool.runtime.parallel.choose_workers`) is asked about the fewest fits the
    audit makes (one per audited record): when it keeps them in this process, nothing starts.
    """
    if options.jobs is not None or options.fail_fast or options.backend != "loky" or not prestart.enabled():
        return False
    planned = choose_workers(None, options.backend, audited, fit_s)["workers"]
    if planned <= 1:
        return False
    return prestart.start(planned, options.backend, (*WARM_MODULES, prep.choice.cls.__module__))


def prepare_pdtp(data: Data, spec: Spec, options: PdtpOptions, allow_import: tuple[str, ...] = (),
                 progress: Progress | None = None) -> Prepared:
    """Read the data, draw T and check the options against it (records in T, an engine that accepts the spec);
    then the randomness check where the run needs it, its fits reported through ``progress``.

    The workers of a run that surely refits on ``--jobs N > 1`` start first (:func:`prestart_refits`).
    """
    prestart_refits(spec, options.engine, options.jobs, options.backend, allow_import, options.fail_fast)
    try:
        return _checked_pdtp(data, spec, options, allow_import, progress)
    except BaseException:
        prestart.release()  # a refused run stops the workers started for it
        raise


def _checked_pdtp(data: Data, spec: Spec, options: PdtpOptions, allow_import: tuple[str, ...],
                  progress: Progress | None) -> Prepared:
    """:func:`prepare_pdtp`'s reading and checks."""
    prep = prepare(data, spec, allow_import)
    prep = with_trained(prep, options.trained, allow_import)
    positions = select_positions(prep, options.records, options.sample)
    noise_floor_records(prep.template, options.noise_floor, len(positions))  # a --noise-floor too large fails here
    select_engine(options.engine, spec, prep.template, replicates=True)
    check_replicate_options(options.replicates, options.budget, options.error_control)
    resolve_queries(options.queries, prep.train, spec.data.missing_values)  # a bad --queries file fails here
    if options.queries != "self" and policy_dict(spec.output.release):
        raise InputError("--queries measures the full probability vector; it cannot be combined with "
                         "output.release (remove one)")
    # randomized training? (the replicate engine then audits); with --jobs 0, workers the planner will use start
    return detect_for(prep, options, lambda fit_s: prestart_planned(prep, options, len(positions), fit_s), progress)


def pdtp(
    data: Data,
    spec: SpecLike,
    *,
    threshold: float = 1.0,
    records: list[int] | None = None,
    sample: int | None = None,
    jobs: int | None = None,
    engine: str = "auto",
    queries: str = "self",
    gate: str = "binned",
    noise_floor: int | None = None,
    backend: str = "loky",
    scheduler: str | None = None,
    allow_import: tuple[str, ...] = (),
    trained: str | Path | None = None,
    progress: Progress | None = None,
    checkpoint: CheckpointFactory | None = None,
    prepared: Prepared | None = None,
    fail_fast: bool = False,
    order: str = "risk",
    replicates: str | None = None,
    budget: int | None = None,
    error_control: str = "bh",
) -> PdtpResult:
    """PDTP of the training records of ``spec`` on ``data`` and the DTP-1 verdict (Long et al. 4.3-4.4, 5).

    ``records`` are CSV row numbers in T, ``sample`` a seeded draw of K records of T.
    ``gate`` is the scale of the verdict: ``binned`` (the paper's, default) or ``raw``.
    ``noise_floor`` records are refitted with their row moved to the end of T (None: 20 when
    the estimator's fit depends on row order, else 0; see :mod:`mptool.privacy.noise`).
    ``prepared`` skips reading the data again when the caller already prepared it.
    ``fail_fast``: the refit engine stops at the first confirmed violator in its ``order``
    (``risk``: screened riskiest first, or ``row``); ``summary["complete"]`` is then False.
    ``trained`` is the shipped model (a skops file): checked to predict like A(T) on T
    (else InputError), then its probabilities stand for A(T)'s in every record's PDTP.
    ``replicates`` ("MIN:MAX"), ``budget`` (fits) and ``error_control`` (bh, holm, record) set the
    replicate engine, which ``engine="auto"`` picks when training is randomized (docs/randomness.md).
    """
    checks.check_operation(
        jobs=jobs, scheduler=scheduler, allow_import=allow_import, threshold=threshold, sample=sample,
        gate=gate, noise_floor=noise_floor, order=order, fail_fast=fail_fast,
    )
    spec = as_spec(spec)
    backend = check_backend(backend, scheduler)
    checks.check_trained(trained)
    options = PdtpOptions(
        threshold, records, sample, jobs, engine, backend=backend, queries=queries, gate=gate, noise_floor=noise_floor,
        fail_fast=fail_fast, order=order,
        trained=None if trained is None else str(trained),
        replicates=replicates, budget=budget, error_control=error_control,
    )
    prep = prepared or prepare_pdtp(data, spec, options, allow_import, progress)
    key = run_key("pdtp", spec.sha256(), prep.train.sha256, options_dict(options))
    ckpt = checkpoint(key) if checkpoint else None
    with _run_context(backend, scheduler, jobs, ckpt, tasks=False):  # run_pdtp checkpoints per chunk itself
        outcome = run_pdtp(prep, options, progress or _no_progress, checkpoint=ckpt)
    return PdtpResult(outcome.table, MappingProxyType(outcome.summary), spec, tuple(prep.notes))


def attack(
    data: Data,
    spec: SpecLike,
    *,
    attacks: str | tuple[str, ...] = "all",
    candidates: int | None = None,
    iterations: int = 10,
    targets: int = 100,
    shadows: int = 20,
    pairs: int = 5,
    shadow_pool: int | None = None,
    shadow_data: str = "population",
    per_class: bool = False,
    untargeted_features: str = "auto",
    pdtp_iterations: int = 10,
    max_accuracy: float | None = None,
    max_auc: float | None = None,
    budget: float | None = None,
    jobs: int | None = None,
    engine: str = "auto",
    replicates: str | None = None,
    backend: str = "loky",
    scheduler: str | None = None,
    allow_import: tuple[str, ...] = (),
    trained: str | Path | None = None,
    rmia_gamma: float = 1.0,
    rmia_offline_a: str | float | None = "auto",
    progress: Progress | None = None,
    checkpoint: CheckpointFactory | None = None,
    prepared: Prepared | None = None,
    on_plan: Callable[[str], None] | None = None,
) -> AttackResult:
    """Membership attacks on ``spec`` under Long et al.'s protocol (5.4), per-target accuracy beside PDTP.

    (Long by its parameter list, one per ``mptool attack`` flag; the work is in
    :mod:`mptool.attacks.protocol`.)

    ``candidates`` None: 2 x the spec's data.train_size (so the target models train on as many
    records as :func:`pdtp`'s T), 2,000 when it is null, capped by the data. ``shadow_pool`` None:
    a pool of :data:`~mptool.attacks.DEFAULT_SHADOW_POOL` shadow models (grown until every
    target is in and out of one); 0: the paper's per-target pairs (``pairs`` per target per
    iteration). ``budget``: seconds the run should take; the counts are lowered to fit
    (:func:`mptool.attacks.plan.size_to_budget`). ``on_plan(line)`` gets the plan (model fits and
    an estimated time) before the work starts; summary["plan"] holds it too.
    ``trained`` (a skops file, checked to be A(T)) is attacked too: T as members, as many rows
    from outside T as non-members (``summary["artefact"]``; the gates apply to it as well).
    ``rmia_gamma``, ``rmia_offline_a``: RMIA's pairwise threshold and offline a ("auto": tuned;
    :mod:`mptool.attacks.rmia`). ``engine="replicates"``: each PDTP measurement by the replicate
    engine with ``replicates`` MIN:MAX training replicates per target (None: 4:32), which decides each
    target beyond the training randomness (attack.csv ``pdtp_decision``; docs/randomness.md).
    """
    from mptool.attacks import DEFAULT_SHADOW_POOL
    from mptool.attacks.artefact import artefact_gates, attack_artefact  # the attack modules: only here (issue 28)
    from mptool.attacks.protocol import AttackOptions, parse_attacks, plan_attack, run_attack

    checks.check_operation(jobs=jobs, scheduler=scheduler, allow_import=allow_import)
    checks.check_attack_flags(
        counts={"candidates": candidates, "iterations": iterations, "targets": targets, "shadows": shadows,
                "pairs": pairs, "shadow_pool": shadow_pool, "pdtp_iterations": pdtp_iterations},
        max_accuracy=max_accuracy, max_auc=max_auc, budget=budget, dashes=False,
    )
    checks.check_untargeted_features(untargeted_features, "untargeted_features")
    rmia_a = checks.check_rmia_flags(rmia_gamma, rmia_offline_a, dashes=False)
    check_attack_replicates(engine, replicates)
    spec = as_spec(spec)
    options = AttackOptions(
        attacks=parse_attacks(attacks) if isinstance(attacks, str) else tuple(attacks), candidates=candidates,
        iterations=iterations, targets=targets, shadows=shadows, pairs=pairs,
        shadow_pool=DEFAULT_SHADOW_POOL if shadow_pool is None else shadow_pool, auto_pool=shadow_pool is None,
        shadow_data=shadow_data, per_class=per_class, untargeted_features=untargeted_features,
        pdtp_iterations=pdtp_iterations, jobs=jobs, engine=engine, replicates=replicates,
        max_accuracy=max_accuracy, max_auc=max_auc, backend=check_backend(backend, scheduler), budget=budget,
        rmia_gamma=float(rmia_gamma), rmia_offline_a=rmia_a,
    )
    checks.check_trained(trained)
    prep = prepared or with_trained(prepare(data, spec, allow_import), trained, allow_import)
    if trained is not None and prep.trained is None:
        prep = with_trained(prep, trained, allow_import)
    # attacked as released, less what an attacker undoes (a temperature; mptool.privacy.release.gate_policy)
    prep = replace(prep, template=released_template(prep.template, gate_policy(spec.output.release, len(prep.classes))))
    planned = plan_attack(prep, options)  # refusals (a --budget too short ...) before the checkpoint opens
    if on_plan is not None:
        on_plan(planned.line)
    key = run_key("attack", spec.sha256(), prep.train.sha256, {**options_dict(options), "trained": str(trained)})
    ckpt = checkpoint(key) if checkpoint else None
    with _run_context(options.backend, scheduler, jobs, ckpt):
        outcome = run_attack(prep, options, progress or _no_progress, planned=planned)
    outcome.summary.update(release_summary(spec.output.release, len(prep.classes)))  # named with the verdict
    artefact = attack_artefact(prep, spec.output.bin_size)
    if artefact is not None:
        outcome.summary["artefact"] = artefact
        outcome.summary["gate"]["exceeded"].extend(artefact_gates(artefact, max_accuracy, max_auc))
    return AttackResult(
        outcome.table, MappingProxyType(outcome.summary), spec, (*prep.notes, *outcome.notes),
        attacks=MappingProxyType(outcome.attacks),
        attempts=outcome.attempts, attribute_values=outcome.attribute_values,
    )


def reduce_dtp(
    data: Data,
    spec: SpecLike,
    *,
    threshold: float = 1.0,
    max_removals: int = 50,
    strategy: str = "greedy",
    jobs: int | None = None,
    engine: str = "auto",
    backend: str = "loky",
    scheduler: str | None = None,
    allow_import: tuple[str, ...] = (),
    progress: Progress | None = None,
    checkpoint: CheckpointFactory | None = None,
    prepared: Prepared | None = None,
) -> ReduceResult:
    """Records to remove so the classifier passes DTP-1 (Long et al. section 8): the trace and the best prefix."""
    checks.check_operation(
        jobs=jobs, scheduler=scheduler, allow_import=allow_import, threshold=threshold, max_removals=max_removals
    )
    spec = as_spec(spec)
    backend = check_backend(backend, scheduler)
    from mptool.api.reduce import ReduceOptions, parse_strategy, run_reduce

    options = ReduceOptions(threshold, max_removals, parse_strategy(strategy), jobs, engine, backend=backend)
    if prepared is None:
        prestart_refits(spec, engine, jobs, backend, allow_import)
    try:
        prep = prepared or prepare(data, spec, allow_import)
    except BaseException:
        prestart.release()
        raise
    key = run_key("reduce-dtp", spec.sha256(), prep.train.sha256, options_dict(options))
    ckpt = checkpoint(key) if checkpoint else None
    with _run_context(backend, scheduler, jobs, ckpt):
        outcome = run_reduce(prep, options, progress or _no_progress)
    return ReduceResult(outcome.table, MappingProxyType(outcome.summary), spec, tuple(prep.notes), outcome=outcome)

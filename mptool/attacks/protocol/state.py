"""The attack run's options, its shared state and its outcome (every phase of
:mod:`mptool.attacks.protocol` reads them): ``mptool attack``'s run options, their checks before any
work, and :class:`Run`, the bookkeeping every phase writes to (fits, timings, notes, plan)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from mptool.attacks import ATTACK_CHOICES, DEFAULT_CANDIDATES, EXTRA_CHOICES
from mptool.attacks import attribute as attribute_mod
from mptool.attacks import plan as plan_mod
from mptool.attacks import rmia as rmia_mod
from mptool.attacks import synthesis as synth_mod
from mptool.attacks.shadows import parse_source
from mptool.inputs.options import ATTACK_CELLS_MAX
from mptool.inputs.prepare import Prepared
from mptool.loo import select_engine
from mptool.runtime import ui
from mptool.runtime.errors import InputError
from mptool.runtime.parallel import resolve_jobs

Progress = Callable[[int, str], AbstractContextManager[Callable[[int], None]]]


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
    replicates: str | None = None  # --engine replicates: MIN:MAX training replicates per record (None: 4:32)
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
    known = ATTACK_CHOICES + EXTRA_CHOICES
    bad = [p for p in parts if p not in known]
    if bad:
        shown = ui.excerpt(bad[0], 40)
        raise InputError(
            f"--attacks: unknown attack '{shown}' (choose from {', '.join(known)}, attribute:COLUMN or all)"
        )
    return tuple(a for a in known if a in parts) + attr


def check_options(options: AttackOptions, population_n: int) -> None:
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


def sensitive_column(prep: Prepared, options: AttackOptions) -> attribute_mod.Sensitive | None:
    """The sensitive column of ``attribute:COLUMN`` with its candidates (None without it); InputError if unusable."""
    column = attribute_mod.column_of(options.attacks)
    if column is None:
        return None
    return attribute_mod.resolve(prep.population, prep.spec.model.bins, column)


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


def resolve_options(prep: Prepared, options: AttackOptions) -> tuple[AttackOptions, str]:
    """``options`` with |D| resolved (:func:`mptool.attacks.plan.resolve_candidates`), and why that |D|."""
    n_cand, why = plan_mod.resolve_candidates(options.candidates, prep.spec.data.train_size, prep.population.n)
    return replace(options, candidates=n_cand), why


def select_pdtp_engine(options: AttackOptions, prep: Prepared) -> Any:
    """The leave-one-out engine of the PDTP measurements (None without them).

    ``--engine replicates``: the replicate engine of ``mptool pdtp`` (:mod:`mptool.loo.replicates`)
    with ``--replicates MIN:MAX``, Benjamini-Hochberg across the targets of each measurement, the
    DTP-1 threshold 1 on the binned scale. Its plan has no release policy: the attack's template is
    already the released model (:func:`mptool.privacy.release.released_template`)."""
    if not options.pdtp_iterations:
        return None
    if options.engine != "replicates":
        return select_engine(options.engine, prep.spec, prep.template)
    from mptool.loo.replicates import ReplicateEngine, ReplicatePlan, parse_replicates

    lo, hi = parse_replicates(options.replicates)
    return ReplicateEngine(ReplicatePlan(lo, hi, None, "bh", 1.0, prep.spec.output.bin_size, "binned", None))


def new_run(prep: Prepared, options: AttackOptions, progress: Progress) -> Run:
    """The run's shared state for ``options`` (already resolved and checked)."""
    source, fraction = parse_source(options.shadow_data)
    return Run(prep, options, progress, resolve_jobs(options.jobs), source, fraction)  # notes: the run's own


@contextmanager
def no_progress(total: int, label: str) -> Iterator[Callable[[int], None]]:
    yield lambda n: None

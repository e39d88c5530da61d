"""``mptool check``: what a run would do, worked out without running it (a dry run).

Reads the data and the spec exactly as ``pdtp`` does (every refusal is the same exit 2),
then says what T is, how each column is used, which leave-one-out engine each command
would take and why (:func:`mptool.loo.engine_reasons`), how many model fits each needs and
about how long they would take, phase by phase (:mod:`mptool.api.costs`: fits timed on
subsets of T growing to |T|, an exact engine's leave-one-out timed on records of T, the
randomness check, replicates and noise floor counted).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mptool.api.costs import (
    ExactTime,
    FitTime,
    max_timed_fits,
    pdtp_cost,
    time_exact,
    time_fit,
    will_randomize,
)
from mptool.api.pdtp import PdtpOptions, select_positions
from mptool.attacks import DEFAULT_SHADOW_POOL
from mptool.attacks.plan import Needs, count_fits, resolve_candidates
from mptool.attacks.protocol import AttackOptions
from mptool.inputs.data import is_parquet
from mptool.inputs.models import column_uses
from mptool.inputs.prepare import Prepared, prepare
from mptool.inputs.spec import Spec
from mptool.loo import RefitEngine, check_before_work, engine_reasons, select_engine
from mptool.loo.replicates import DEFAULT_MAX, DEFAULT_MIN
from mptool.privacy.release import gate_policy, measured_note
from mptool.privacy.stability import stability_bound
from mptool.runtime import ui
from mptool.runtime.parallel import parallel_seconds, resolve_jobs

#: ``mptool attack``'s default options (every attack, a shadow pool of DEFAULT_SHADOW_POOL): the attack estimate.
ATTACK_DEFAULTS = AttackOptions(shadow_pool=DEFAULT_SHADOW_POOL, auto_pool=True, candidates=None)
#: Default ``--max-removals`` of reduce-dtp.
REDUCE_STEPS = 50


@dataclass(frozen=True)
class CommandPlan:
    """One command's engine, fit count and time estimate."""

    command: str
    engine: str
    fits: int
    seconds: float
    detail: str
    seconds_high: float | None = None  # replicates: when every record needs the last look


@dataclass
class CheckPlan:
    """Everything ``mptool check`` prints."""

    prep: Prepared
    source: str
    fmt: str
    rows_usable: int
    rows_dropped: int
    class_counts: list[tuple[Any, int]]
    columns: list[tuple[str, str, str]]
    engines: list[tuple[str, str | None]]
    chosen: str
    bound: str
    release: str = "none (the full probability vector is measured)"  # the policy and what the gate measures
    commands: list[CommandPlan] = field(default_factory=list)
    fit_seconds: float = 0.0
    timed_sizes: tuple[tuple[int, float], ...] = ()  # (records, wall seconds) of the timed fits
    notes: tuple[str, ...] = ()


def _commands(prep: Prepared, engine: Any, fit: FitTime, exact: ExactTime | None, jobs: int | None, n: int,
              randomized: bool, read_s: float, auto: bool = True, seed_found: bool = False) -> list[CommandPlan]:
    """Fit counts and estimated seconds of pdtp, reduce-dtp and attack (default options), phase by phase.

    ``auto``: ``--engine auto`` (the refit engine then checks the training randomness first)."""
    cost = pdtp_cost(prep.template, engine, fit, prep.train.n, n, jobs, exact=exact, randomized=randomized,
                     seed_found=seed_found, read_s=read_s, auto=auto)
    detail = f"{cost.describe()}; {n} records"
    if randomized:  # what no dry run can know: how many looks each record needs before it is decided
        lo, hi = DEFAULT_MIN, DEFAULT_MAX
        detail += (f"; the range: every record decided at the first look ({lo} replicates) to every record at the "
                   f"last ({hi}); how many each needs is known only as the run decides it")
    out = [CommandPlan("pdtp", "replicates" if randomized else engine.name, cost.fits, cost.seconds, detail,
                       cost.seconds_high)]
    first, later = (pdtp_cost(prep.template, engine, fit, prep.train.n, prep.train.n, jobs, exact=exact, auto=False,
                              noise_floor=0, warm=warm) for warm in (False, True))
    out.append(
        CommandPlan(
            "reduce-dtp", engine.name, REDUCE_STEPS * first.fits,
            read_s + first.seconds + (REDUCE_STEPS - 1) * later.seconds,
            f"at most {REDUCE_STEPS} removal steps (--max-removals), each a full PDTP of the records left",
        )
    )
    out.append(attack_plan(prep, engine.name, exact is not None, fit, jobs))
    return out


def attack_plan(prep: Prepared, engine: str, exact: bool, fit: FitTime, jobs: int | None) -> CommandPlan:
    """Fit count and estimated seconds of ``mptool attack`` with its defaults (:mod:`mptool.attacks.plan`).

    The counts are :func:`mptool.attacks.plan.count_fits` of the default options (every attack,
    a pool of :data:`~mptool.attacks.DEFAULT_SHADOW_POOL` shadow models, |D| = 2 x data.train_size);
    the time scales the timed fits to the target models' training-set size (:meth:`FitTime.at`). The attack
    classifiers and a pool grown to cover every target are left out: ``mptool attack`` prints its
    own, fuller plan line before it starts.
    """
    a = ATTACK_DEFAULTS
    n_cand, _ = resolve_candidates(None, prep.spec.data.train_size, prep.population.n)
    size = n_cand // 2
    needs = Needs(evidence=True, general=False, synthetic=False, untargeted=True, pdtp=True, refit_pdtp=not exact)
    fits = sum(count_fits(a, needs).values())
    return CommandPlan(
        "attack", engine, fits, parallel_seconds(fits * fit.at(size), resolve_jobs(jobs)),
        f"default options: {a.iterations} iterations, {a.targets} targets, a pool of {a.shadow_pool} shadow "
        f"models, training sets of {size} records (the attack prints its own plan line)",
    )


def check_plan(
    data: Any, spec: Spec, engine: str = "auto", allow_import: tuple[str, ...] = (), jobs: int | None = 1,
    records: list[int] | None = None, sample: int | None = None, startup_s: float = 0.0, progress: Any = None,
) -> CheckPlan:
    """Validate ``spec`` against ``data`` as a run would, and work out the plan of each command.

    ``startup_s``: seconds the command took to start (``mptool check`` passes its own, which
    ``pdtp`` pays too); added to the time of reading the data as the first phase. ``progress(total,
    label)`` (as :func:`mptool.runtime.ui.progress`) reports the check's own phases: reading the data,
    the timed fits, the timed leave-one-out of an exact engine, the randomness refit."""
    phase = progress or (lambda n, label: ui.progress(n, label, quiet=True))  # an API caller: no lines
    t_read = time.perf_counter()
    with phase(1, "check: reading the data and the spec") as advance:
        prep = prepare(data, spec, allow_import)
        advance(1)
    read_s = startup_s + time.perf_counter() - t_read
    positions = select_positions(prep, records, sample)
    chosen = select_engine(engine, spec, prep.template)
    reasons = engine_reasons(spec, prep.template) if engine != "refit" else []
    refit = isinstance(chosen, RefitEngine)
    detects = refit and engine == "auto"  # the randomness check's first refit runs on the largest timed subset
    timing = max_timed_fits(prep.template, prep.train.n, not refit)
    with phase(timing, "check: timing fits of A(T) on subsets of T") as advance:
        fit = time_fit(prep.template, prep.train, spec.seed, prep.classes, full=not refit, reserve=int(detects),
                       one_thread=refit, advance=advance)
    check_before_work(chosen, prep.template, prep.train, prep.classes, positions)  # pdtp refuses the same, first
    exact = None
    if not refit:
        with phase(1, f"check: timing the leave-one-out ({chosen.name}) on records of T") as advance:
            exact = time_exact(chosen, spec, prep.template, fit, prep.classes, prep.train.n, spec.seed)
            advance(1)
    randomized = seed_found = False
    if detects:
        with phase(1, "check: randomness (refits with other seeds)") as advance:
            found = will_randomize(prep.template, fit, prep.classes, spec.seed)
            randomized, seed_found = found.randomized, bool(found.seed)
            advance(1)
    T = prep.train
    labels, counts = np.unique(T.y.astype(str), return_counts=True)
    order = {str(c): c for c in prep.classes}
    bound = stability_bound(prep.template, T, prep.classes)
    source = str(data) if not hasattr(data, "columns") else "a DataFrame"
    plan = CheckPlan(
        prep=prep,
        source=source,
        fmt="DataFrame" if source == "a DataFrame" else "Parquet" if is_parquet(source) else "CSV",
        rows_usable=prep.population.n,
        rows_dropped=prep.population.dropped_missing,
        class_counts=[(order.get(lab, lab), int(c)) for lab, c in zip(labels, counts, strict=True)],
        columns=column_uses(spec, T.schema, prep.choice),
        engines=reasons,
        chosen=chosen.name,
        bound=f"{bound.kind}: {bound.reason}" if not gate_policy(spec.output.release, len(prep.classes)) else (
            "none: the family bounds are of the full probability vector, and the release policy as measured "
            "can raise a log-ratio"),
        release=measured_note(spec.output.release, len(prep.classes)) or CheckPlan.release,
        fit_seconds=fit.seconds,
        timed_sizes=fit.sizes,
        notes=prep.notes,
    )
    plan.commands = _commands(prep, chosen, fit, exact, jobs, len(positions), randomized, read_s, engine == "auto",
                              seed_found)
    return plan


__all__ = ["CheckPlan", "CommandPlan", "PdtpOptions", "check_plan"]

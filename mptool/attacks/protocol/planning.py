"""Phase 2, plan: count the model fits each phase will make, time one fit of A, apply
--budget and check the shadow pool (:mod:`mptool.attacks.plan` holds the arithmetic), all before any
of the protocol's work, so that every refusal comes first."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from mptool.attacks import NEEDS_EVIDENCE
from mptool.attacks import attribute as attribute_mod
from mptool.attacks import plan as plan_mod
from mptool.attacks import synthesis as synth_mod
from mptool.attacks.protocol.draw import TAG_PLAN, Draw, draw_candidates
from mptool.attacks.protocol.state import (
    AttackOptions,
    Run,
    check_options,
    new_run,
    no_progress,
    resolve_options,
    select_pdtp_engine,
    sensitive_column,
)
from mptool.attacks.shadows import pool_covers, rng_for
from mptool.attacks.untargeted import FeatureEncoder, train_untargeted
from mptool.inputs.options import check_synthesis_total
from mptool.inputs.prepare import Prepared
from mptool.runtime.errors import InputError
from mptool.runtime.parallel import one_thread, resolve_jobs


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
    with one_thread(None):
        options, candidates_from = resolve_options(prep, options)
        check_options(options, prep.population.n)
        sensitive_column(prep, options)  # attribute:COLUMN checked before any work
        run = new_run(prep, options, no_progress)
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
        refit_pdtp=pdtp_on and engine.name in ("refit", "replicates"),
        replicates=engine.plan.min_r if pdtp_on and engine.name == "replicates" else 0,
        replicates_max=engine.plan.max_r if pdtp_on and engine.name == "replicates" else 0,
        attribute=attribute_mod.column_of(o.attacks) is not None,
        label_only="label_only" in wants,
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

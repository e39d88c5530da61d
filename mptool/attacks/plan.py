"""The attack run's plan: defaults, model-fit counts, a time estimate and ``--budget``.

Before the protocol's work starts (Long et al. 5.4), :func:`count_fits` counts the model
fits each phase will make, :func:`time_costs` times one fit of the target pipeline A on a
half of the candidate set D (and its predictions, and the untargeted attack classifier on
one shadow's rows), and :func:`estimate_seconds` turns the two into an estimated wall time
of the work still to come: the fits spread over the --jobs workers, the workers' start-up
and the attack classifier (reading the data is done by then; the attacks' own arithmetic is
left out, it is small beside the fits). It is an estimate: the timed fit stands for every
fit, and other processes on the machine slow the workers as they come and go.

``--budget SECONDS`` (:func:`size_to_budget`) bounds that estimate (the work after reading the
data, not the interpreter's start or the CSV): it treats the run's counts as upper limits and
lowers them, in :data:`BUDGET_ORDER`, until the estimate fits: first the PDTP iterations,
then the shadow models (pool size; or pairs per target, then general shadows), then the
iterations, then the targets. Each count is lowered only as far as needed and never below
:data:`MINIMUM` (a count given below its minimum is kept); if even the minimum plan does not
fit, the run is refused (exit 2) before any work. The plan chosen is printed and recorded in
attack.json; running it again with those counts as flags (and no --budget) gives the same
results, since the counts, not the budget, fix every random choice.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mptool.attacks import DEFAULT_CANDIDATES
from mptool.inputs.models import fit, proba_in
from mptool.runtime import parallel
from mptool.runtime.errors import InputError

#: The counts --budget lowers, in this order ("shadow models" is one of the three, by mode).
BUDGET_ORDER = ("pdtp_iterations", "shadow_pool", "pairs", "shadows", "iterations", "targets")
#: Smallest counts --budget may choose: 8 in / 8 out pool models per target on average, 2 pairs,
#: 8 general shadows, 2 iterations of 50 targets (200 non-member attempts, so TPR at 1% FPR rests
#: on at least 2 false positives), and one PDTP measurement per target.
MINIMUM = {"pdtp_iterations": 1, "shadow_pool": 16, "pairs": 2, "shadows": 8, "iterations": 2, "targets": 50}
#: Rows of the untargeted attack classifier's timing sample.
CLASSIFIER_SAMPLE = 2000
#: Seconds to start the --jobs worker processes (one value for every command: mptool.runtime.parallel).
WORKER_START_S = parallel.WORKER_START_S


def resolve_candidates(candidates: int | None, train_size: int | None, population_n: int) -> tuple[int, str]:
    """|D| and why: --candidates as given; else 2 x data.train_size, so the target models train
    on data.train_size records as in ``mptool pdtp``; else :data:`DEFAULT_CANDIDATES`. A default
    larger than the data is capped at the largest even number of usable rows."""
    if candidates is not None:
        return candidates, "--candidates"
    if train_size is not None:
        want, why = 2 * train_size, f"2 x data.train_size ({train_size})"
    else:
        want, why = DEFAULT_CANDIDATES, f"the default {DEFAULT_CANDIDATES} (data.train_size is null)"
    cap = population_n - population_n % 2
    if want > cap:
        return cap, f"{why}, capped at the {population_n} usable rows: target models train on {cap // 2}"
    return want, why


@dataclass(frozen=True)
class Needs:
    """What the chosen attacks and options make the run fit (Long et al. 5.3-5.4)."""

    evidence: bool  # targeted attacks or LiRA: pool or per-target pairs
    general: bool  # threshold, or untargeted on population data: general shadows (without a pool)
    synthetic: bool  # untargeted on synthetic shadow data
    untargeted: bool
    pdtp: bool  # PDTP is measured
    refit_pdtp: bool  # ... by refits: one leave-one-out fit per target per measured iteration
    replicates: int = 0  # --engine replicates: MIN replicates a side (the plan counts the first look only)
    replicates_max: int = 0  # ... and MAX: what --budget counts (:func:`most_work`)
    attribute: bool = False  # attribute:COLUMN: the target models refitted and queried per candidate value
    label_only: bool = False  # label_only: --shadows calibration models, the target models refitted and queried


def count_fits(o: Any, needs: Needs) -> dict[str, int]:
    """Model fits of A per phase under options ``o`` (an AttackOptions), as attack.json's ``fits``."""
    n_pdtp = min(o.pdtp_iterations, o.iterations) if needs.pdtp else 0
    fits = {"target": 2 * o.iterations}
    if n_pdtp:
        fits["pdtp_full"] = 2 * n_pdtp
        if needs.refit_pdtp and needs.replicates:  # the first look: MIN a side, more for undecided targets
            low = needs.replicates
            fits["pdtp_replicates"] = low * o.targets * n_pdtp + 2 * low * n_pdtp
        elif needs.refit_pdtp:
            fits["pdtp_refits"] = o.targets * n_pdtp
    if o.shadow_pool:
        fits["shadow_pool"] = o.shadow_pool
    else:
        if needs.general:
            fits["shadow_general"] = o.shadows
        if needs.evidence:
            fits["shadow_pairs"] = 2 * o.pairs * o.targets * o.iterations
    if needs.synthetic:
        fits["shadow_synthetic"] = o.shadows
    if needs.attribute:
        fits["attribute_target"] = 2 * o.iterations
    if needs.label_only:
        fits["label_only_shadow"] = o.shadows
        fits["label_only_target"] = 2 * o.iterations
    return fits


def most_work(needs: Needs) -> Needs:
    """``needs`` with the PDTP replicates counted at MAX a side (every target still undecided at the last
    look): what ``--budget`` bounds, since targets left undecided at MIN take more replicates, up to MAX
    (docs/randomness.md section 8). Unchanged without ``--engine replicates``."""
    if not needs.replicates:
        return needs
    return dataclasses.replace(needs, replicates=max(needs.replicates, needs.replicates_max))


def classifier_rows(o: Any, needs: Needs) -> int:
    """Rows of the untargeted attack classifier's training set: |D| per shadow model it learns from."""
    if not needs.untargeted:
        return 0
    models = min(o.shadow_pool, o.shadows) if o.shadow_pool and not needs.synthetic else o.shadows
    return models * o.candidates


@dataclass(frozen=True)
class Costs:
    """Timed costs of one run (seconds): the basis of the estimate."""

    fit_s: float  # one fit of A on a half of D
    predict_s: float  # its predictions on every record of D
    predict_one_s: float  # its prediction on one record
    classifier_row_s: float  # the untargeted attack classifier, per training row
    workers: int  # --jobs workers that run fits at once
    start_s: float = 0.0  # starting the worker processes (0 with one worker)
    speedup: float = 0.0  # how many fits the workers finish in the time of one (0: as many as workers)

    def as_dict(self) -> dict[str, float | int]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in dataclasses.asdict(self).items()}


def estimate_seconds(o: Any, needs: Needs, c: Costs) -> float:
    """Estimated wall time of the protocol's fits and the attack classifier under options ``o``."""
    fits = count_fits(o, needs)
    per_fit = {
        "target": c.fit_s + 2 * c.predict_s,
        "pdtp_full": c.fit_s,
        "pdtp_refits": c.fit_s + c.predict_one_s,
        "pdtp_replicates": c.fit_s + c.predict_one_s,
        "shadow_pool": c.fit_s + c.predict_s,
        "shadow_general": c.fit_s + c.predict_s,
        "shadow_pairs": c.fit_s + c.predict_one_s,
        "shadow_synthetic": c.fit_s + c.predict_s,
        "attribute_target": c.fit_s + c.predict_s,
        "label_only_shadow": c.fit_s + 2 * c.predict_s,  # targets x 33 queries: about |D| rows
        "label_only_target": c.fit_s + 2 * c.predict_s,
    }
    # math.fsum: correctly rounded on every Python (3.12's sum() compensates, 3.11's does not), so a plan
    # whose estimate lands on --budget exactly is chosen the same way everywhere
    parallel = math.fsum(n * per_fit[k] for k, n in fits.items()) / max(1.0, c.speedup or c.workers)
    return c.start_s + parallel + classifier_rows(o, needs) * c.classifier_row_s


def time_costs(
    template: Any,
    D: Any,
    half: np.ndarray,
    classes: np.ndarray,
    jobs: int,
    classifier: Callable[[np.ndarray], float] | None,
) -> Costs:
    """Time one fit of A on ``half`` of D and its predictions (the protocol's first fit, on the same
    half, has paid the one-off costs), and ``classifier(q)``: seconds the untargeted attack classifier
    takes on the first ``len(q)`` records of D with this model's outputs ``q``, per row. ``jobs``
    worker processes (1 = this process) add their start-up, :data:`WORKER_START_S`. On a machine
    loaded above one process per core the workers' speed-up shrinks by that load (measured here:
    two processes got no more CPU than one at load 16), and their start-up grows by it."""
    idx = np.flatnonzero(half)
    t0 = time.perf_counter()
    model = fit(template, D.X.iloc[idx], D.y[idx])
    t1 = time.perf_counter()
    q = proba_in(model, D.X, classes)
    t2 = time.perf_counter()
    proba_in(model, D.X.iloc[[int(idx[0])]], classes)
    t3 = time.perf_counter()
    rows = min(CLASSIFIER_SAMPLE, len(q))
    row_s = classifier(q[:rows]) / rows if classifier is not None else 0.0
    cores = os.cpu_count() or 1
    workers = max(1, min(jobs, cores))
    busy = max(1.0, (os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0) / cores)  # load per core
    start = WORKER_START_S * busy if workers > 1 else 0.0
    return Costs(t1 - t0, t2 - t1, t3 - t2, row_s, workers, start, max(1.0, workers / busy))


def fewer_workers(o: Any, needs: Needs, costs: Costs) -> Costs:
    """``costs`` run in this process alone (one worker, no start-up) when that is estimated faster
    than starting the workers: a small plan on a busy machine, where start-up outweighs the fits."""
    alone = dataclasses.replace(costs, workers=1, start_s=0.0, speedup=1.0)
    return alone if estimate_seconds(o, needs, alone) < estimate_seconds(o, needs, costs) else costs


def _floor(o: Any, key: str) -> int:
    """The smallest value --budget may give ``key``: MINIMUM, or the given value if lower."""
    return min(getattr(o, key), MINIMUM[key])


def _reducible(o: Any, needs: Needs) -> list[str]:
    """The counts of BUDGET_ORDER that change the work of this run."""
    keys = []
    for key in BUDGET_ORDER:
        if key == "pdtp_iterations" and not (needs.pdtp and o.pdtp_iterations):
            continue
        if key == "shadow_pool" and not o.shadow_pool:
            continue
        if key == "pairs" and (o.shadow_pool or not needs.evidence):
            continue
        if key == "shadows" and not (needs.synthetic or needs.untargeted or (needs.general and not o.shadow_pool)):
            continue
        if key == "targets" and not (needs.refit_pdtp or (needs.evidence and not o.shadow_pool)):
            continue
        keys.append(key)
    return keys


def size_to_budget(
    o: Any, needs: Needs, costs: Costs, budget: float, estimate: Callable[..., float] = estimate_seconds
) -> tuple[Any, list[str]]:
    """The largest plan within ``budget`` seconds: lower the counts in BUDGET_ORDER, each only as far
    as needed (never below MINIMUM); returns the options and what changed ("iterations 10 -> 4").
    Raises InputError when even the minimum plan's estimate exceeds the budget. PDTP replicates
    (``--engine replicates``) are counted at their most (:func:`most_work`), so the budget bounds them
    whatever the targets decide."""
    chosen, needs = o, most_work(needs)
    if estimate(chosen, needs, costs) > budget:
        for key in _reducible(o, needs):
            lo, hi = _floor(o, key), getattr(chosen, key)
            if estimate(dataclasses.replace(chosen, **{key: lo}), needs, costs) > budget:
                chosen = dataclasses.replace(chosen, **{key: lo})
                continue
            while hi - lo > 1:  # the estimate grows with every count: bisect for the largest that fits
                mid = (lo + hi) // 2
                fits = estimate(dataclasses.replace(chosen, **{key: mid}), needs, costs) <= budget
                lo, hi = (mid, hi) if fits else (lo, mid)
            chosen = dataclasses.replace(chosen, **{key: lo})
            break
        else:
            need = estimate(chosen, needs, costs)
            smallest = ", ".join(f"{k.replace('_', '-')} {getattr(chosen, k)}" for k in _reducible(o, needs))
            raise InputError(
                f"--budget {budget:g} s is too short: even the smallest plan ({smallest or 'as given'}; "
                f"{sum(count_fits(chosen, needs).values())} model fits"
                f"{', the pdtp replicates at their most' if needs.replicates else ''}) "
                f"needs an estimated {math.ceil(need)} s; "
                "raise --budget, or lower --candidates or the model's cost"
            )
    changes = [
        f"{k.replace('_', '-')} {getattr(o, k)} -> {getattr(chosen, k)}"
        for k in BUDGET_ORDER
        if getattr(o, k) != getattr(chosen, k)
    ]
    return chosen, changes


def plan_line(o: Any, needs: Needs, costs: Costs, budget: float | None, changes: list[str], alone: bool = False) -> str:
    """The one stderr line before the work: fits per phase, the estimate and what --budget chose
    (``alone``: --jobs 0 chose this process over starting workers, :func:`fewer_workers`)."""
    fits = count_fits(o, needs)
    parts = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in fits.items())
    rows = classifier_rows(o, needs)
    extra = f" + attack classifier on {rows:,} rows" if rows else ""
    seconds = estimate_seconds(o, needs, costs)
    line = (
        f"plan: {sum(fits.values()):,} model fits ({parts}){extra}; estimated {seconds:.0f} s "
        f"{'in this process (faster than starting workers here)' if alone else f'on {costs.workers} worker(s)'} "
        f"(an estimate: one fit of A on {o.candidates // 2:,} records took "
        f"{costs.fit_s:.3f} s)"
    )
    if needs.replicates:
        line += (f"; pdtp replicates counted at the first look ({needs.replicates} a side): targets still "
                 "undecided take more, so the run can take longer")
    if budget is not None:
        most = (f" (pdtp replicates counted at their most, {most_work(needs).replicates} a side: estimated "
                f"{estimate_seconds(o, most_work(needs), costs):.0f} s)" if needs.replicates else "")
        line += f"; --budget {budget:g} s{most}: " + ("; ".join(changes) if changes else "the full plan fits")
    return line

"""``mptool check``: what a run would do, worked out without running it (a dry run).

Reads the data and the spec exactly as ``pdtp`` does (every refusal is the same exit 2),
then says what T is, how each column is used, which leave-one-out engine each command
would take and why (:func:`mptool.loo.engine_reasons`), how many model fits each needs and
about how long they would take: one to three fits and, for an exact engine, its
leave-one-out are timed on a seeded subset of T (``TIMING_RECORDS``) and scaled linearly to
|T| -- a rough estimate (a refit's cost grows at least linearly with |T|).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mptool.api.pdtp import PdtpOptions, select_positions
from mptool.attacks import DEFAULT_SHADOW_POOL
from mptool.attacks.plan import Needs, count_fits, resolve_candidates
from mptool.attacks.protocol import AttackOptions
from mptool.inputs.data import Records, is_parquet
from mptool.inputs.models import column_uses
from mptool.inputs.prepare import Prepared, fit_checked, prepare
from mptool.inputs.spec import Spec
from mptool.loo import LooRequest, RefitEngine, check_before_work, engine_reasons, min_records, select_engine
from mptool.privacy.release import gate_policy, measured_note
from mptool.privacy.stability import stability_bound

#: Timing budget of the fits ``check`` times (seconds): at least one fit, at most three.
TIMING_BUDGET_S = 0.6
#: Size of the subset of T the fits and an exact engine's leave-one-out are timed on (times scale up to |T|).
TIMING_RECORDS = 100
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
    timed_fits: int = 0
    notes: tuple[str, ...] = ()


def _timing_set(prep: Prepared) -> Records:
    """A seeded subset of T of ``TIMING_RECORDS`` records (more for k-NN with more neighbours, whose
    leave-one-out needs k + 1) with every class (else T itself)."""
    T = prep.train
    size = max(TIMING_RECORDS, min_records(prep.template))
    if T.n <= size:
        return T
    idx = np.sort(np.random.default_rng(prep.spec.seed).choice(T.n, size=size, replace=False))
    sub = T.take(idx)
    return sub if len(set(sub.y.tolist())) == len(prep.classes) else T


def _time_fits(prep: Prepared, sub: Records) -> tuple[float, int, Any]:
    """CPU seconds of one fit of A(T), the number of fits timed, and the last model (fitted on ``sub``).

    The fastest of one to three fits on ``sub``, scaled by |T| / |sub|. The first fit also pays
    first-call costs inside scikit-learn; it is dropped when it was quick. CPU time, not wall
    time: the estimate should not depend on how busy the machine is right now.
    """
    t0 = time.process_time()
    model = fit_checked(prep.template, sub)
    times = [time.process_time() - t0]
    if times[0] < TIMING_BUDGET_S / 3:
        times = []  # a quick first fit was the warm-up: time up to three more
    while len(times) < 3 and sum(times) < TIMING_BUDGET_S:
        t0 = time.process_time()
        model = fit_checked(prep.template, sub)
        times.append(time.process_time() - t0)
    return min(times) * prep.train.n / sub.n, len(times), model


def _time_exact(prep: Prepared, engine: Any, sub: Records, full_model: Any) -> float:
    """CPU seconds per record of an exact engine's leave-one-out, timed on every record of ``sub`` (one process)."""
    positions = np.arange(sub.n, dtype=np.int64)
    req = LooRequest(prep.spec, prep.template, sub, full_model, prep.classes, positions, 1, "loky")
    t0 = time.process_time()
    engine.run(req, lambda n: None)
    return (time.process_time() - t0) / len(positions)


def _commands(prep: Prepared, engine: Any, t_fit: float, per_record: float, jobs: int, n: int) -> list[CommandPlan]:
    """Fit counts and estimated seconds of pdtp, reduce-dtp and attack (default options)."""
    T = prep.train
    exact = not isinstance(engine, RefitEngine)
    pdtp_fits = 1 if exact else T.n + 1
    pdtp_s = t_fit + (per_record * n if exact else n * t_fit / jobs)
    what = "1 fit of A(T) + closed-form leave-one-out" if exact else f"A(T) + {n} refits without one record"
    out = [CommandPlan("pdtp", engine.name, pdtp_fits, pdtp_s, f"{what}; {n} records")]
    out.append(
        CommandPlan(
            "reduce-dtp", engine.name, REDUCE_STEPS * pdtp_fits, REDUCE_STEPS * pdtp_s,
            f"at most {REDUCE_STEPS} removal steps (--max-removals), each a full PDTP of the records left",
        )
    )
    out.append(attack_plan(prep, engine.name, exact, t_fit, jobs))
    return out


def attack_plan(prep: Prepared, engine: str, exact: bool, t_fit: float, jobs: int) -> CommandPlan:
    """Fit count and estimated seconds of ``mptool attack`` with its defaults (:mod:`mptool.attacks.plan`).

    The counts are :func:`mptool.attacks.plan.count_fits` of the default options (every attack,
    a pool of :data:`~mptool.attacks.DEFAULT_SHADOW_POOL` shadow models, |D| = 2 x data.train_size);
    the time scales the one timed fit on T to the target models' training-set size. The attack
    classifiers and a pool grown to cover every target are left out: ``mptool attack`` prints its
    own, fuller plan line before it starts.
    """
    a = ATTACK_DEFAULTS
    n_cand, _ = resolve_candidates(None, prep.spec.data.train_size, prep.population.n)
    size = n_cand // 2
    needs = Needs(evidence=True, general=False, synthetic=False, untargeted=True, pdtp=True, refit_pdtp=not exact)
    fits = sum(count_fits(a, needs).values())
    scale = size / max(prep.train.n, 1)  # fits grow about linearly with the training-set size
    return CommandPlan(
        "attack", engine, fits, fits * t_fit * scale / jobs,
        f"default options: {a.iterations} iterations, {a.targets} targets, a pool of {a.shadow_pool} shadow "
        f"models, training sets of {size} records (the attack prints its own plan line)",
    )


def check_plan(
    data: Any, spec: Spec, engine: str = "auto", allow_import: tuple[str, ...] = (), jobs: int = 1,
    records: list[int] | None = None, sample: int | None = None,
) -> CheckPlan:
    """Validate ``spec`` against ``data`` as a run would, and work out the plan of each command."""
    prep = prepare(data, spec, allow_import)
    positions = select_positions(prep, records, sample)
    chosen = select_engine(engine, spec, prep.template)
    reasons = engine_reasons(spec, prep.template) if engine != "refit" else []
    sub = _timing_set(prep)
    t_fit, k, sub_model = _time_fits(prep, sub)  # fit_checked: the classifier interface, as pdtp checks it
    check_before_work(chosen, prep.template, prep.train, prep.classes, positions)  # pdtp refuses the same, first
    per_record = 0.0 if isinstance(chosen, RefitEngine) else _time_exact(prep, chosen, sub, sub_model)
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
        fit_seconds=t_fit,
        timed_fits=k,
        notes=prep.notes,
    )
    plan.commands = _commands(prep, chosen, t_fit, per_record, max(1, jobs), len(positions))
    return plan


__all__ = ["CheckPlan", "CommandPlan", "PdtpOptions", "check_plan"]

"""What a run will cost, phase by phase, from a few real fits of the sizes that will run (issue 30).

``mptool check`` and ``mptool mitigate``'s plan line price their work here. The basis is
measured, not assumed:

- one fit of A(T) (:func:`time_fit`): fitted on seeded subsets of T of growing size (100,
  400, 1,600, ... records) until all of T, or until the next size would take more than
  :data:`FIT_BUDGET_S` (all of T is fitted when predicted within :data:`FULL_FIT_S`); then the
  time at |T| is the measured one, or extrapolated from the last two sizes with the measured
  exponent (clamped to [1, 2]: a fit costs at least linear time);
- an exact engine's leave-one-out (:func:`time_exact`): run on 4 and then more records of T
  with the A(T) just fitted, which separates its set-up (e.g. Newton's polish of A(T)) from the
  cost per record at the real |T| (the cost per record grows with |T|: scaling a subset's time
  linearly under-estimated digits and breast_cancer 3-10x).

Times are wall seconds measured on this machine now, so they carry its load; parallel work is
divided as :func:`mptool.runtime.parallel.parallel_seconds` says (worker start, cores over load).
Every phase a run goes through is a :class:`Phase` with its fit count and seconds: the start
(the command's own start-up, which ``pdtp`` pays too) and reading the data, the randomness check
with its A(T) (refit engine under ``--engine auto``), A(T), the leave-one-out (refits, an exact
engine, or replicates from the first look to the last), the noise floor's refits. The bounds,
the table and the writing are left out: 0.1 to 0.3 s in every measured run (pdtp.json's timings).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mptool.api.pdtp import noise_floor_records
from mptool.inputs.data import Records
from mptool.inputs.prepare import fit_checked
from mptool.loo import LooRequest, RefitEngine, min_records
from mptool.loo.randomness import detect, seed_keys
from mptool.loo.replicates import DEFAULT_MAX, DEFAULT_MIN, ReplicateEngine
from mptool.privacy.noise import order_dependence
from mptool.runtime.parallel import choose_workers, parallel_seconds, resolve_jobs

#: Smallest subset of T a fit is timed on (k-NN: at least k + 1 records).
TIMING_RECORDS = 100
#: Wall seconds the timed fits may take together before the time at |T| is extrapolated.
FIT_BUDGET_S = 6.0
#: A fit of all of T predicted to take at most this many wall seconds is timed whatever the budget: a small
#: subset's time extrapolates badly (logistic regression on 100 Adult records took longer than on 1,000).
FULL_FIT_S = 20.0
#: Wall seconds the timed leave-one-out of an exact engine may take.
EXACT_BUDGET_S = 3.0
#: Records the exact engine is timed on first (the second run takes more, within EXACT_BUDGET_S).
EXACT_FIRST = 4


@dataclass(frozen=True)
class FitTime:
    """Wall seconds of one fit of A(T) and how they were found."""

    seconds: float  # at |T|
    sizes: tuple[tuple[int, float], ...]  # (records, seconds) of the timed fits, fastest per size
    exponent: float  # of the time in the training-set size (1 when one size was timed)
    model: Any  # the model fitted on the largest timed subset (A(T) itself when measured)
    subset: Records  # that subset

    def at(self, n: int) -> float:
        """Seconds of one fit on ``n`` records (the exponent from the timed sizes)."""
        size, t = self.sizes[-1]
        return t * (max(n, 1) / size) ** self.exponent


@dataclass(frozen=True)
class Phase:
    """One phase of a run: what it is, its model fits and its estimated wall seconds."""

    name: str
    fits: int
    seconds: float
    seconds_high: float | None = None  # replicates: if every record needs the last look


@dataclass
class Cost:
    """A command's phases; the total is their sum (a range when a phase has a high end)."""

    phases: list[Phase] = field(default_factory=list)

    @property
    def fits(self) -> int:
        return sum(p.fits for p in self.phases)

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.phases)

    @property
    def seconds_high(self) -> float | None:
        if all(p.seconds_high is None for p in self.phases):
            return None
        return sum(p.seconds if p.seconds_high is None else p.seconds_high for p in self.phases)

    def describe(self) -> str:
        """The phases with fits, e.g. 'A(T) 1 fit, 100 refits, noise floor 20 refits'."""
        return ", ".join(f"{p.name} {p.fits:,} fit(s)" if p.fits else p.name for p in self.phases)


def duration(seconds: float) -> str:
    """A rough duration: 0.4 s, 12 s, 3.5 min, 2.1 h."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 600:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def process_age() -> float:
    """Wall seconds since this process started (Linux /proc; 0.0 elsewhere): the start-up a command pays
    before its first line of work (the interpreter, mptool's and scikit-learn's imports). 0.0 when this
    process is not the ``mptool`` command itself (an API caller, a test runner: its age is not a start-up)."""
    if Path(sys.argv[0] if sys.argv else "").name not in ("mptool", "__main__.py"):
        return 0.0
    try:
        with open("/proc/self/stat") as fh:
            start_ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0


def subset(T: Records, size: int, seed: int, classes: np.ndarray) -> Records:
    """A seeded subset of ``size`` records of T holding every class (T itself when size >= |T|)."""
    if size >= T.n:
        return T
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 30, size]))
    idx = set(rng.choice(T.n, size=size, replace=False).tolist())
    y = np.asarray(T.y, dtype=object)
    for c in classes:  # a class the draw missed: its first record
        if not any(y[i] == c for i in idx):
            hits = np.flatnonzero(y == c)
            if hits.size:
                idx.add(int(hits[0]))
    return T.take(np.sort(np.fromiter(idx, dtype=np.int64)))


def _timed_fit(template: Any, sub: Records) -> tuple[float, Any]:
    t0 = time.perf_counter()
    model = fit_checked(template, sub)
    return time.perf_counter() - t0, model


def time_fit(template: Any, T: Records, seed: int, classes: np.ndarray, budget: float = FIT_BUDGET_S) -> FitTime:
    """Wall seconds of one fit of ``template`` on all of T, measured or extrapolated (module docstring).

    The first size is fitted twice (the first fit also pays first-call costs; the faster
    counts), larger sizes once. The next size is fitted only when its linear prediction keeps
    the total within ``budget``, or when it is all of T and predicted within :data:`FULL_FIT_S`.
    """
    size = min(T.n, max(TIMING_RECORDS, min_records(template)))
    sub = subset(T, size, seed, classes)
    t1, model = _timed_fit(template, sub)  # pays first-call costs (lazy imports, caches): a warm-up
    t, model = _timed_fit(template, sub)
    t = min(t, t1)
    sizes = [(sub.n, t)]
    spent = t
    while sub.n < T.n:
        nxt = T.n if 4 * sub.n >= T.n else 4 * sub.n
        predicted = t * nxt / sub.n  # linear: small subsets can be slower per record (e.g. separable for LR)
        if spent + predicted > budget and not (nxt == T.n and predicted <= FULL_FIT_S):
            break
        sub = subset(T, nxt, seed, classes)
        t, model = _timed_fit(template, sub)
        spent += t
        sizes.append((sub.n, t))
    exponent = 1.0
    if len(sizes) >= 2:
        (n1, t1), (n2, t2) = sizes[-2], sizes[-1]
        if t1 > 0 and t2 > 0 and n2 > n1:
            exponent = float(np.clip(np.log(t2 / t1) / np.log(n2 / n1), 1.0, 2.0))
    last_n, last_t = sizes[-1]
    seconds = last_t * (T.n / last_n) ** exponent
    return FitTime(seconds, tuple(sizes), exponent, model, sub)


@dataclass(frozen=True)
class ExactTime:
    """An exact engine's leave-one-out at |T|: set-up seconds, seconds per record (one process) and the
    records per task it hands to workers (0: it runs in this process whatever --jobs says)."""

    setup: float
    per_record: float
    batch: int = 0

    def seconds(self, n_audited: int, jobs: int | None, start: bool = True) -> float:
        """Wall seconds of the leave-one-out of ``n_audited`` records: in this process when it is one task."""
        alone = self.per_record * n_audited
        tasks = 1 if self.batch <= 0 else -(-n_audited // self.batch)
        return self.setup + (alone if tasks <= 1 else parallel_seconds(alone, resolve_jobs(jobs), start))


def newton_batch(model: Any, n: int) -> int:
    """Records per task of the exact Newton engine (:meth:`mptool.loo.newton.FullOptimum.batch_size`) from
    A(T)'s coefficients: n records, m score rows, D design columns with the intercept; 0 for another model."""
    from mptool.loo.newton import BATCH_FLOATS

    est = model.steps[-1][1] if hasattr(model, "steps") else model
    coef = getattr(est, "coef_", None)
    if coef is None:
        return 0
    m, D = int(coef.shape[0]), int(coef.shape[1]) + 1
    return int(max(1, min(256, BATCH_FLOATS // (n * m), BATCH_FLOATS // (m * D * m * (D + 3)))))


def _run_exact(engine: Any, spec: Any, template: Any, T: Records, model: Any, classes: np.ndarray,
               positions: np.ndarray) -> float:
    req = LooRequest(spec, template, T, model, classes, positions, 1, "loky")
    t0 = time.perf_counter()
    engine.run(req, lambda n: None)
    return time.perf_counter() - t0


def time_exact(engine: Any, spec: Any, template: Any, fit: FitTime, classes: np.ndarray, n: int, seed: int,
               budget: float = EXACT_BUDGET_S) -> ExactTime:
    """Set-up and per-record wall seconds of ``engine``'s leave-one-out on the largest timed subset (all of
    T when it was fitted), scaled to |T| = ``n`` when it was not: the set-up like a fit, the cost per
    record linearly (each record's update touches every record of T)."""
    T, model = fit.subset, fit.model
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 31]))
    order = rng.permutation(T.n)
    k1 = min(EXACT_FIRST, T.n)
    t1 = _run_exact(engine, spec, template, T, model, classes, np.sort(order[:k1]))
    per, setup = t1 / k1, 0.0
    if k1 < T.n and t1 < budget / 2:
        k2 = int(min(T.n, max(2 * k1, k1 * (budget / 2) / max(t1, 1e-3))))
        t2 = _run_exact(engine, spec, template, T, model, classes, np.sort(order[:k2]))
        slope = (t2 - t1) / (k2 - k1)
        if slope > 0:
            per, setup = slope, max(0.0, t1 - k1 * slope)
        else:
            per = t2 / k2
    scale = n / T.n
    batch = newton_batch(model, n) if getattr(engine, "name", "") == "exact-newton-logistic" else 0
    return ExactTime(setup * scale ** fit.exponent, per * scale, batch)


def _randomness_fits(template: Any) -> int:
    """Fits of the randomness check (:func:`mptool.loo.randomness.detect`) and the A(T) it compares with."""
    known = order_dependence(template).dependent
    return 2 + int(bool(seed_keys(template))) + (0 if known is False else 1 if known else 2)


def will_randomize(template: Any, fit: FitTime, classes: np.ndarray, seed: int) -> bool:
    """Whether the randomness check will find A randomized, by running it on the largest timed subset."""
    sub = fit.subset
    return detect(template, fit.model, sub.X, sub.y, classes, seed).randomized


def pdtp_cost(
    template: Any, engine: Any, fit: FitTime, n_T: int, n_audited: int, jobs: int | None, *,
    exact: ExactTime | None = None, randomized: bool = False, auto: bool = True, read_s: float = 0.0,
    noise_floor: int | None = None, replicates: tuple[int, int] = (DEFAULT_MIN, DEFAULT_MAX),
    backend: str = "loky", warm: bool = False,
) -> Cost:
    """The phases of ``mptool pdtp`` (:func:`mptool.api.pdtp.run_pdtp`) with their fits and wall seconds.

    ``jobs`` as ``--jobs`` gives it (None: every core, the refit engine choosing its workers).
    ``warm``: the workers are running already (a later step of reduce-dtp): no start-up.
    """
    start = not warm
    t_fit = fit.seconds
    phases = [Phase("start and reading the data", 0, read_s)] if read_s else []
    refits = isinstance(engine, RefitEngine) or isinstance(engine, ReplicateEngine)
    if refits and auto:
        k = _randomness_fits(template)
        phases.append(Phase("randomness check", k, k * t_fit))
    phases.append(Phase("A(T)", 1, t_fit))
    if randomized:
        lo, hi = replicates
        workers = resolve_jobs(jobs)
        per = fit.at(n_T - 1)
        phases.append(Phase(
            f"replicates ({lo} to {hi} per record)", lo * (n_audited + 1),
            parallel_seconds(lo * (n_audited + 1) * per, workers, start),
            parallel_seconds(hi * (n_audited + 1) * per, workers, start)))
        return Cost(phases)
    if exact is not None:
        phases.append(Phase("closed-form leave-one-out", 0, exact.seconds(n_audited, jobs, start)))
        return Cost(phases)
    k, _ = noise_floor_records(template, noise_floor, n_audited)
    per = fit.at(n_T - 1)
    workers = choose_workers(jobs, backend, n_audited + k, t_fit)["workers"]
    phases.append(Phase("refits without one record", n_audited, parallel_seconds(n_audited * per, workers, start)))
    if k:
        phases.append(Phase("noise floor", k, parallel_seconds(k * per, workers, False)))  # the same workers
    return Cost(phases)


def train_cost(prep: Any, n_audited: int, jobs: int | None, backend: str = "loky", fit_budget: float = FIT_BUDGET_S,
               exact_budget: float = EXACT_BUDGET_S) -> tuple[float, float, int, ExactTime | None, FitTime]:
    """One trained configuration of ``mptool mitigate`` (A(T) and the leave-one-out of ``n_audited`` records,
    :func:`mptool.api.mitigate.train_and_loo`): seconds of A(T) and the set-up, seconds of the leave-one-out
    in one process, the workers that share it, the exact timing (None: refits) and the fit timing."""
    from mptool.loo import select_engine

    T, seed = prep.train, prep.spec.seed
    engine = select_engine("auto", prep.spec, prep.template)
    fit = time_fit(prep.template, T, seed, prep.classes, fit_budget)
    if isinstance(engine, RefitEngine):
        workers = choose_workers(jobs, backend, n_audited, fit.seconds)["workers"]
        return fit.seconds, n_audited * fit.at(T.n - 1), workers, None, fit
    exact = time_exact(engine, prep.spec, prep.template, fit, prep.classes, T.n, seed, exact_budget)
    return fit.seconds + exact.setup, exact.per_record * n_audited, resolve_jobs(jobs), exact, fit


def mitigate_seconds(prep: Any, specs: list[Any], n_audited: int, jobs: int | None, *, sample: bool,
                     removal_steps: int, backend: str = "loky", scored: int = 0) -> tuple[float, float]:
    """(low, high) wall seconds of ``mptool mitigate``: its start and reading (:func:`process_age`), the
    baseline timed in full, each retrained setting priced by its own quick timing (1 s of fits, 0.5 s of
    leave-one-out) unless it is the baseline's estimator (then the baseline's cost), the workers started
    once; the removal family's reduce-dtp, ``removal_steps`` steps (it runs to its budget), each a fit and
    a full leave-one-out of T; and, in the high end only, the full audits that confirm a recommendation
    made on a sample (they run only when a setting passes on the sample; one per candidate until one
    passes: adult-lr --sample 100 confirmed two). ``scored``: settings whose utility is measured on the
    rows outside T (one prediction of those rows each, timed once)."""
    from mptool.inputs.prepare import respecified

    T = prep.train
    fixed, alone, workers, exact, fit = train_cost(prep, n_audited, jobs, backend)

    def loo(alone: float, workers: int, exact: ExactTime | None, start: bool) -> float:
        if exact is not None:  # ExactTime.seconds without its set-up (in ``fixed``)
            return exact.seconds(n_audited, jobs, start) - exact.setup
        return parallel_seconds(alone, workers, start)

    total = process_age() + fixed + loo(alone, workers, exact, True)
    for spec in specs:
        if spec.model.estimator == prep.spec.model.estimator:
            total += fixed + loo(alone, workers, exact, False)
        else:
            f, a, w, e, _ = train_cost(respecified(prep, spec), n_audited, jobs, backend, 1.0, 0.5)
            total += f + loo(a, w, e, False)
    full = fit.seconds + (exact.seconds(T.n, jobs, False) if exact is not None else 0.0)  # the workers run already
    if removal_steps and exact is not None:
        total += removal_steps * full  # greedy reduce-dtp runs to its removal budget, a full recompute per step
    if scored:  # each scored setting predicts the rows outside T (utility): timed once on every usable row
        t0 = time.perf_counter()
        fit.model.predict_proba(prep.population.X)
        total += scored * (time.perf_counter() - t0) * max(prep.population.n - T.n, 0) / max(prep.population.n, 1)
    confirms = 1 + len(specs)  # a candidate that fails its full audit hands over to the next (at most all)
    confirm = full * confirms if sample and exact is not None and n_audited < T.n else 0.0
    return total, total + confirm

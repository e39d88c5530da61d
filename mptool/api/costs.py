"""What a run will cost, phase by phase, from a few real fits of the sizes that will run (issue 30).

``mptool check`` and ``mptool mitigate``'s plan line price their work here. The basis is
measured, not assumed:

- one fit of A(T) (:func:`time_fit`): fitted on seeded subsets of T of growing size (100,
  400, 1,600, ... records; all of T once the next size would reach half of it) until all of T,
  or until the next fit would take the timing past :data:`FIT_BUDGET_S` CPU seconds; then the
  time at |T| is the measured one, or extrapolated from the last two sizes: with the measured
  exponent when it is 1 to 2, by the measured cost per record beyond the largest size when the
  time grew less than linearly (a fixed cost). The budget keeps ``mptool check`` to a few
  seconds (fitting all of T whenever it was predicted under 20 s made the MLP configs' check
  take 50-60 s at load 14);
- an exact engine's leave-one-out (:func:`time_exact`): run on real batches of the records of
  T with the A(T) just fitted, two of the batches the run hands to its workers (the Newton
  engine's batch size from A(T)'s coefficients), the time of each batch taken as it finishes:
  the first batch's finish holds the set-up (Newton's polish of A(T)), the second's does not,
  which separates the set-up from the cost per record (digits: timing 4 records in one run
  counted the 0.6 s set-up once per record, and the estimate came out 2-3x high at load 8);
- the randomness check (:func:`will_randomize`) on the largest timed subset, stopping at the
  first source it finds (a network: one fit with another seed).

The refit and replicate engines fit with one BLAS thread, while A(T) and the randomness check
run in the command's own process with its BLAS threads: for those engines the fits are timed
with one thread and one more fit, with the process's threads, prices A(T) and the check
(:attr:`FitTime.main_ratio`; a network at load 10 fitted 10x slower with two BLAS threads waiting
on each other than with one; timing it so made adult-nn's estimate 6-50x high). The replicate
engine's number of looks is known only as it runs (a record decided early takes MIN replicates,
one undecided to the end MAX): its phase is a range, and so is the command's total.

Times are wall seconds measured on this machine now, so they carry its load (a load that changes
between ``check`` and the run moves the real time, not the estimate); parallel work is divided as
:func:`mptool.runtime.parallel.parallel_seconds` says (worker start, cores over load: on a Linux
machine whose other load comes from other sessions, the scheduler shares the cores between
sessions, so more workers gain little there).
Every phase a run goes through is a :class:`Phase` with its fit count and seconds: the start
(the command's own start-up, which ``pdtp`` pays too) and reading the data, the randomness check
with its A(T) (refit engine under ``--engine auto``), A(T), the leave-one-out (refits, an exact
engine, or replicates from the first look to the last), the noise floor's refits. The bounds,
the table and the writing are left out: 0.1 to 0.3 s in most measured runs (pdtp.json's timings;
the full digits file: 2.5 s at load 10, beside 444 s of leave-one-out).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from mptool.api.pdtp import noise_floor_records
from mptool.inputs.data import Records
from mptool.inputs.models import model_numerics
from mptool.inputs.prepare import fit_checked
from mptool.loo import LooRequest, RefitEngine, min_records
from mptool.loo.randomness import detect, planned_fits
from mptool.loo.replicates import DEFAULT_MAX, DEFAULT_MIN, ReplicateEngine
from mptool.runtime.parallel import choose_workers, parallel_seconds, resolve_jobs

#: Smallest subset of T a fit is timed on (k-NN: at least k + 1 records).
TIMING_RECORDS = 100
#: CPU seconds the timed fits may take together before the time at |T| is extrapolated (the next size is
#: fitted only when the last one's CPU time, scaled linearly, keeps the total within it).
FIT_BUDGET_S = 2.0
#: CPU seconds of the first timed fit below which it is fitted again (its first-call costs, lazy imports and
#: caches, are then a visible part of it; a network's 1 s fit on 100 records is not fitted twice).
WARM_UP_S = 0.5
#: An exact engine's A(T) is fitted on all of T (its leave-one-out is timed on it) when one fit is extrapolated
#: to take at most this many wall seconds.
FULL_FIT_S = 10.0
#: Wall seconds the timed leave-one-out of an exact engine may take (after its first batch).
EXACT_BUDGET_S = 3.0
#: Records the exact engine is timed on first when it has no batches (the second run takes more, within
#: EXACT_BUDGET_S).
EXACT_FIRST = 4


@dataclass(frozen=True)
class FitTime:
    """Wall seconds of one fit of A(T) and how they were found."""

    seconds: float  # at |T|
    sizes: tuple[tuple[int, float], ...]  # (records, seconds) of the timed fits, fastest per size
    exponent: float  # of the time in the training-set size (1 when one size was timed)
    model: Any  # the model fitted on the largest timed subset (A(T) itself when measured)
    subset: Records  # that subset
    slope: float | None = None  # seconds per record beyond the largest size when the time grew less than linearly
    main_ratio: float = 1.0  # a fit with the process's BLAS threads over one with one thread (refit timings)
    one_thread: bool = False  # the fits were timed with one BLAS thread (as the refit and replicate engines fit)

    @property
    def main_seconds(self) -> float:
        """Seconds of one fit of A(T) in the command's own process, with its default BLAS threads: A(T) and
        the randomness check's refits run there (the refit and replicate engines fit with one BLAS thread)."""
        return self.seconds * self.main_ratio

    def at(self, n: int) -> float:
        """Seconds of one fit on ``n`` records: a power of the size from the largest timed size, or that
        size's time plus ``slope`` per record (a fixed cost and a linear one)."""
        size, t = self.sizes[-1]
        if self.slope is not None:
            return max(t + self.slope * (n - size), t * min(1.0, max(n, 1) / size))
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


def _timed_fit(template: Any, sub: Records) -> tuple[float, float, Any]:
    """Wall and CPU seconds of one fit on ``sub``, and the model."""
    t0, c0 = time.perf_counter(), time.process_time()
    model = fit_checked(template, sub)
    return time.perf_counter() - t0, time.process_time() - c0, model


def _extrapolated(sizes: list[tuple[int, float]], model: Any, sub: Records, n: int) -> FitTime:
    """The :class:`FitTime` at ``n`` records from the timed ``sizes`` (:func:`time_fit`)."""
    exponent, slope = 1.0, None
    if len(sizes) >= 2:
        (n1, t1), (n2, t2) = sizes[-2], sizes[-1]
        measured = float(np.log(t2 / t1) / np.log(n2 / n1)) if t1 > 0 and t2 > 0 and n2 > n1 else 1.0
        if measured >= 1.0:
            exponent = min(measured, 2.0)
        else:
            slope = max(0.0, (t2 - t1) / (n2 - n1))
    timed = FitTime(0.0, tuple(sizes), exponent, model, sub, slope)
    return FitTime(timed.at(n), tuple(sizes), exponent, model, sub, slope)


def one_blas_thread() -> AbstractContextManager[Any]:
    """BLAS limited to one thread, as the refit and replicate engines fit (:mod:`mptool.loo.refit`)."""
    return threadpool_limits(limits=1, user_api="blas")


def timing_sizes(template: Any, n: int) -> list[int]:
    """The subset sizes :func:`time_fit` may fit, smallest first (it stops early when the budget is spent)."""
    sizes = [min(n, max(TIMING_RECORDS, min_records(template)))]
    while sizes[-1] < n:
        sizes.append(n if 8 * sizes[-1] >= n else 4 * sizes[-1])
    return sizes


def max_timed_fits(template: Any, n: int, full: bool = False) -> int:
    """The most fits :func:`time_fit` makes on |T| = ``n``: two at the first size (three with one BLAS
    thread), one at each larger one, and all of T for ``full``."""
    return 2 + len(timing_sizes(template, n)) + int(full)


def time_fit(template: Any, T: Records, seed: int, classes: np.ndarray, budget: float = FIT_BUDGET_S,
             full: bool = False, reserve: int = 0, one_thread: bool = False,
             advance: Callable[[int], None] | None = None) -> FitTime:
    """Wall seconds of one fit of ``template`` on all of T, measured or extrapolated (module docstring).

    The first size is fitted twice when its first fit took under :data:`WARM_UP_S` of CPU (that
    fit also pays first-call costs; the faster counts), larger sizes once, each four times the
    last (all of T when that reaches half of T: 400 then 1,797 records, not 1,600 and 1,797).
    The next size is fitted while the CPU time of the timing stays within ``budget``, the next
    fit's CPU time predicted from the last as the square root of the size ratio (fits on small
    subsets pay fixed costs and, for logistic regression, more iterations: 0.4 s of CPU on 100
    Adult records, 0.8 s on 1,000); CPU, not wall, so the work ``check`` does stays the same on
    a loaded machine. ``full`` (an exact engine, whose leave-one-out is timed on A(T)): all of
    T is fitted last when the time extrapolated to it is at most :data:`FULL_FIT_S`. ``reserve``:
    fits the caller will make on the largest subset afterwards (the dry run's randomness check),
    counted in the budget.

    ``one_thread`` (the refit and replicate engines, which fit with one BLAS thread): the fits are
    timed so, the first one is a warm-up, and one fit of the first size with the process's own
    BLAS threads gives :attr:`FitTime.main_ratio` (A(T) and the randomness check run that way; a
    network on 400 Adult records at load 10: 12.7 s with two BLAS threads, 1.3 s with one, its
    threads waiting on each other under load; timing with two made adult-nn's estimate 6-50x high).
    ``advance(1)`` is called after each timed fit (a progress line).

    From two sizes or more the time grows from the largest with the measured exponent when it is
    1 to 2; below 1 (a fixed cost: a forest of 50 trees takes as long on 100 records as on 1,000)
    by the measured cost per record beyond that size: growing linearly from 100 records
    over-estimated both 5-10x.
    """
    step = advance or (lambda n: None)
    limit = one_blas_thread if one_thread else nullcontext

    def timed(sub: Records) -> tuple[float, float, Any]:
        with limit():
            out = _timed_fit(template, sub)
        step(1)
        return out

    size = min(T.n, max(TIMING_RECORDS, min_records(template)))
    sub = subset(T, size, seed, classes)
    t, c, model = timed(sub)  # pays first-call costs (lazy imports, caches): a warm-up
    spent, ratio = c, 1.0
    if one_thread:  # the warm-up done: the process's own BLAS threads once, then one thread again
        t_main, _, _ = _timed_fit(template, sub)
        step(1)
        t1, c, model = timed(sub)
        t, spent = min(t, t1), spent + c
        ratio = max(t_main, 1e-6) / max(t, 1e-6)
    elif c < WARM_UP_S:  # first-call costs matter: fitted again, the faster counts
        t1, c, model = timed(sub)
        t, spent = min(t, t1), spent + c
    sizes = [(sub.n, t)]
    while sub.n < T.n:
        nxt = T.n if 8 * sub.n >= T.n else 4 * sub.n
        if spent + (1 + reserve) * c * (nxt / sub.n) ** 0.5 > budget:
            break
        sub = subset(T, nxt, seed, classes)
        t, c, model = timed(sub)
        spent += c
        sizes.append((sub.n, t))
    out = _extrapolated(sizes, model, sub, T.n)
    if full and sub.n < T.n and out.seconds <= FULL_FIT_S:
        t, _, model = timed(T)
        out = _extrapolated([*sizes, (T.n, t)], model, T, T.n)
    return replace(out, main_ratio=ratio, one_thread=one_thread)


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
               positions: np.ndarray) -> tuple[float, list[tuple[float, int]]]:
    """Wall seconds of ``engine``'s leave-one-out of ``positions`` in this process, and (seconds since the
    start, records done) at each finished batch (the engine's progress calls)."""
    req = LooRequest(spec, template, T, model, classes, positions, 1, "loky")
    stamps: list[tuple[float, int]] = []
    t0 = time.perf_counter()
    engine.run(req, lambda n: stamps.append((time.perf_counter() - t0, n)))
    return time.perf_counter() - t0, stamps


def _per_batch(stamps: list[tuple[float, int]]) -> tuple[float, float] | None:
    """(set-up seconds, seconds per record) from the finish times of two or more batches run in turn: the
    records after the first batch over the time after it; None when fewer than two batches finished."""
    if len(stamps) < 2:
        return None
    (t_first, n_first), t_last = stamps[0], stamps[-1][0]
    after = sum(n for _, n in stamps[1:])
    if after <= 0 or t_last <= t_first:
        return None
    per = (t_last - t_first) / after
    return max(0.0, t_first - n_first * per), per


def time_exact(engine: Any, spec: Any, template: Any, fit: FitTime, classes: np.ndarray, n: int, seed: int,
               budget: float = EXACT_BUDGET_S) -> ExactTime:
    """Set-up and per-record wall seconds of ``engine``'s leave-one-out on the largest timed subset (all of
    T when it was fitted), scaled to |T| = ``n`` when it was not: the set-up like a fit, the cost per
    record linearly (each record's update touches every record of T).

    An engine that hands batches to workers (exact-newton-logistic) is timed on two of its real
    batches, run in turn in this process (:func:`_per_batch`). Another runs in one piece: it is
    timed on :data:`EXACT_FIRST` records and then on more within ``budget``, the slope between
    the two runs being the cost per record.
    """
    T, model = fit.subset, fit.model
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 31]))
    order = rng.permutation(T.n)
    newton = getattr(engine, "name", "") == "exact-newton-logistic"
    batch = newton_batch(model, T.n) if newton else 0
    if batch:
        k = min(T.n, 2 * batch)
        took, stamps = _run_exact(engine, spec, template, T, model, classes, np.sort(order[:k]))
        split = _per_batch(stamps)
        setup, per = split if split is not None else (0.0, took / max(k, 1))
    else:
        k1 = min(EXACT_FIRST, T.n)
        t1, _ = _run_exact(engine, spec, template, T, model, classes, np.sort(order[:k1]))
        per, setup = t1 / k1, 0.0
        if k1 < T.n and t1 < budget / 2:
            k2 = int(min(T.n, max(2 * k1, k1 * (budget / 2) / max(t1, 1e-3))))
            t2, _ = _run_exact(engine, spec, template, T, model, classes, np.sort(order[:k2]))
            slope = (t2 - t1) / (k2 - k1)
            if slope > 0:
                per, setup = slope, max(0.0, t1 - k1 * slope)
            else:
                per = t2 / k2
    scale = n / T.n
    return ExactTime(setup * scale ** fit.exponent, per * scale, newton_batch(model, n) if newton else 0)


def will_randomize(template: Any, fit: FitTime, classes: np.ndarray, seed: int) -> Any:
    """What the randomness check will find (a :class:`mptool.loo.randomness.Randomness`: ``randomized``, and
    ``seed`` when another seed changed A), by running it on the largest timed subset and stopping at the first
    source it finds (:func:`mptool.loo.randomness.detect` with ``first=True``).

    Not on a smaller subset: a decision tree of the bundled Adult config changes with its seed on 100
    records (ties between splits) and not on the 1,000 of T."""
    sub = fit.subset
    with one_blas_thread() if fit.one_thread else nullcontext():  # as fit.model was fitted
        return detect(template, fit.model, sub.X, sub.y, classes, seed, first=True)


def pdtp_cost(
    template: Any, engine: Any, fit: FitTime, n_T: int, n_audited: int, jobs: int | None, *,
    exact: ExactTime | None = None, randomized: bool = False, seed_found: bool = False, auto: bool = True,
    read_s: float = 0.0,
    noise_floor: int | None = None, replicates: tuple[int, int] = (DEFAULT_MIN, DEFAULT_MAX),
    backend: str = "loky", warm: bool = False,
) -> Cost:
    """The phases of ``mptool pdtp`` (:func:`mptool.api.pdtp.run_pdtp`) with their fits and wall seconds.

    ``jobs`` as ``--jobs`` gives it (None: every core, the refit engine choosing its workers).
    ``warm``: the workers are running already (a later step of reduce-dtp): no start-up.
    ``seed_found``: the dry run found another seed changes A, so the check is priced at one seed; a training
    found randomized by its row order alone has every seed tried first.
    """
    start = not warm
    t_fit = fit.main_seconds  # A(T) and the randomness check: this process, its own BLAS threads
    phases = [Phase("start and reading the data", 0, read_s)] if read_s else []
    refits = isinstance(engine, RefitEngine) or isinstance(engine, ReplicateEngine)
    if refits and auto:
        k = 1 + planned_fits(template, seed_found)  # the A(T) the check compares with, and the check's refits
        phases.append(Phase("randomness check", k, k * t_fit))
    phases.append(Phase("A(T)", 1, t_fit))
    if randomized:
        lo, hi = replicates
        workers = choose_workers(jobs, backend, lo * (n_audited + 1), t_fit)["workers"]  # as pdtp_workers
        phases.append(replicate_phase(fit, n_T, n_audited, replicates, workers, start))
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


def replicate_phase(fit: FitTime, n_T: int, n_audited: int, replicates: tuple[int, int], workers: int,
                    start: bool) -> Phase:
    """The replicate engine's looks (:mod:`mptool.loo.replicates`): MIN replicates of A(T) and of A(T minus t)
    per audited record at the least, MAX at the most (each record gets more while it is undecided; how many
    it needs is known only as the run decides it), the fits of |T| - 1 records shared by ``workers``."""
    lo, hi = replicates
    per = fit.at(n_T - 1)
    return Phase(f"replicates ({lo} to {hi} per record)", lo * (n_audited + 1),
                 parallel_seconds(lo * (n_audited + 1) * per, workers, start),
                 parallel_seconds(hi * (n_audited + 1) * per, workers, start))


def train_cost(prep: Any, n_audited: int, jobs: int | None, backend: str = "loky", fit_budget: float = FIT_BUDGET_S,
               exact_budget: float = EXACT_BUDGET_S) -> tuple[float, float, int, ExactTime | None, FitTime]:
    """One trained configuration of ``mptool mitigate`` (A(T) and the leave-one-out of ``n_audited`` records,
    :func:`mptool.api.mitigate.train_and_loo`): seconds of A(T) and the set-up, seconds of the leave-one-out
    in one process, the workers that share it, the exact timing (None: refits) and the fit timing."""
    from mptool.loo import select_engine

    T, seed = prep.train, prep.spec.seed
    engine = select_engine("auto", prep.spec, prep.template)
    refit = isinstance(engine, RefitEngine)
    full = not refit and fit_budget >= FIT_BUDGET_S  # the baseline's A(T): all of T
    fit = time_fit(prep.template, T, seed, prep.classes, fit_budget, full, one_thread=refit)
    if refit:  # A(T) in this process, the refits with one BLAS thread
        workers = choose_workers(jobs, backend, n_audited, fit.main_seconds)["workers"]
        return fit.main_seconds, n_audited * fit.at(T.n - 1), workers, None, fit
    exact = time_exact(engine, prep.spec, prep.template, fit, prep.classes, T.n, seed, exact_budget)
    return fit.seconds + exact.setup, exact.per_record * n_audited, resolve_jobs(jobs), exact, fit


def mitigate_seconds(prep: Any, specs: list[Any], n_audited: int, jobs: int | None, *, sample: bool,
                     removal_steps: int, backend: str = "loky", scored: int = 0,
                     replicates: tuple[int, int] | None = None) -> tuple[float, float]:
    """(low, high) wall seconds of ``mptool mitigate``: its start and reading (:func:`process_age`), the
    baseline timed in full, each retrained setting priced by its own quick timing (1 s of fits, 0.5 s of
    leave-one-out) unless it is the baseline's estimator (then the baseline's cost), the workers started
    once; the removal family's reduce-dtp, ``removal_steps`` steps (it runs to its budget), each a fit and
    a full leave-one-out of T; and, in the high end only, the full audits that confirm a recommendation
    made on a sample (they run only when a setting passes on the sample; one per candidate until one
    passes: adult-lr --sample 100 confirmed two). ``scored``: settings whose utility is measured on the
    rows outside T (one prediction of those rows each, timed once). ``replicates`` (MIN, MAX): training is
    randomized, every trained setting is audited with the replicate engine (:func:`mitigate_replicates`)."""
    from mptool.inputs.prepare import respecified

    if replicates is not None:
        return mitigate_replicates(prep, specs, n_audited, jobs, replicates, scored, backend)
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
    total += scoring_seconds(prep, fit.model, scored)
    confirms = 1 + len(specs)  # a candidate that fails its full audit hands over to the next (at most all)
    confirm = full * confirms if sample and exact is not None and n_audited < T.n else 0.0
    return total, total + confirm


def scoring_seconds(prep: Any, model: Any, scored: int) -> float:
    """Seconds of measuring ``scored`` settings' utility: each predicts the rows outside T once (timed here
    once on every usable row with ``model``, scaled to the rows outside T)."""
    if not scored:
        return 0.0
    t0 = time.perf_counter()
    with model_numerics():
        model.predict_proba(prep.population.X)
    n_out = max(prep.population.n - prep.train.n, 0)
    return scored * (time.perf_counter() - t0) * n_out / max(prep.population.n, 1)


def mitigate_replicates(prep: Any, specs: list[Any], n_audited: int, jobs: int | None,
                        replicates: tuple[int, int], scored: int = 0, backend: str = "loky") -> tuple[float, float]:
    """(low, high) wall seconds of ``mptool mitigate`` on randomized training (:mod:`mptool.api.mitigate_random`).

    Each trained configuration (the baseline, then ``specs``) fits A(T) in this process and runs the
    replicate engine on the workers the run chooses (:func:`mptool.api.mitigate.train_and_loo`: MIN
    replicates per record weighed against starting them), MIN to MAX replicates per record
    (:func:`replicate_phase`, the workers started once); each retrained setting first runs its own
    randomness check (A(T) and :func:`mptool.loo.randomness.planned_fits` refits, in this process); the
    baseline's ran before the plan line and is in :func:`process_age`. A setting of another estimator is
    timed on its own (1 CPU s of fits), one of the baseline's estimator takes the baseline's timing.
    Release settings reuse the baseline's replicates with no fit (:func:`mptool.loo.replicates.redecided`):
    nothing to add."""
    from mptool.inputs.prepare import respecified

    T, seed = prep.train, prep.spec.seed
    base = time_fit(prep.template, T, seed, prep.classes, one_thread=True)
    workers = choose_workers(jobs, backend, replicates[0] * (n_audited + 1), base.main_seconds)["workers"]
    lo = hi = process_age()
    for i, spec in enumerate([None, *specs]):
        sub = prep if spec is None else respecified(prep, spec)
        fit = base if spec is None or spec.model.estimator == prep.spec.model.estimator else time_fit(
            sub.template, T, seed, prep.classes, 1.0, one_thread=True)
        check = 0 if spec is None else 1 + planned_fits(sub.template)
        phase = replicate_phase(fit, T.n, n_audited, replicates, workers, start=i == 0)
        lo += (check + 1) * fit.main_seconds + phase.seconds
        hi += (check + 1) * fit.main_seconds + (phase.seconds_high or phase.seconds)
    extra = scoring_seconds(prep, base.model, scored)
    return lo + extra, hi + extra

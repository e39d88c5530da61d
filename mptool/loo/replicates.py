"""The replicate engine: a record's influence beyond training randomness, sequential and budgeted.

For an estimator whose fit depends on a seed or on the row order (:mod:`mptool.loo.randomness`
detects it), A(T) and A(T minus t) are trained R times each with common random numbers:
replicate r draws a seed and a row order of T from the spec's seed and r
(:func:`~mptool.loo.randomness.replicate_seed`, :func:`~mptool.loo.randomness.replicate_order`),
and T minus t keeps the same seed and the same order with t's row left out. The replicates of T
do not depend on t and are shared by every record. :mod:`mptool.privacy.influence` turns the
pairs into an estimate, an interval and a decision per record.

Sequential: every record starts with ``MIN`` replicates; records still undecided get more
(doubling up to ``MAX``), riskiest first (the screen of :mod:`mptool.loo.screen`), while the
budget of fits lasts. With ``--fail-fast`` a depth-first screen comes first: the riskiest records,
one at a time in risk order, get look after look (up to ``MAX``, while the estimate stays above
the threshold), the record at position i of the order tested for a violation at
``screen_level(i)`` = alpha/2 * 2^-(i+1) (a weighted Bonferroni: family-wise error <= alpha/2 under
any dependence); the run stops at the first record it rejects. Otherwise the records are
evaluated as without ``--fail-fast``, in risk order in batches of 1, 2, 4, ... records, their
violations judged at the other alpha/2 (:data:`~mptool.privacy.influence.SCREEN_SHARE`), and the
run stops at the first decided violation (``fail_fast["ended"]`` says whether a stop, a spent budget
or nothing ended the run; ``budget_exhausted`` is False after a stop). Batches, replicates and
decisions depend only on the spec's seed and the data, never on ``--jobs``.

Checkpoint (``--resume``): each finished task is saved in the run's checkpoint as it arrives
(:class:`mptool.runtime.checkpoint.Checkpoint`, the stage chunks the refit engine uses): a
replicate r of A(T) (stage :data:`FULL_STAGE`, item r) and a chunk of (t, r) pairs of A(T minus t)
(stage :data:`LOO_STAGE`, item t * :data:`PAIR_BASE` + r), raw probabilities before any release
policy. A resumed run makes the same looks in the same order (every choice is seeded, and the
budget counts the fits taken from the checkpoint as fits) and takes each saved fit instead of
refitting it, so its results are those of an uninterrupted run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from mptool.inputs.models import fit, proba_in
from mptool.loo.base import LooRequest, LooResult
from mptool.loo.design import class_index
from mptool.loo.randomness import replicate_order, replicate_seed, with_seed
from mptool.loo.refit import LooFitError, loo_fit_failed, refit_order
from mptool.outputs.ending import BUDGET, COMPLETE, STOP
from mptool.privacy.calibration import bin_probabilities
from mptool.privacy.influence import (
    ALPHA,
    SCREEN_SHARE,
    UNDECIDED,
    RecordStats,
    decide,
    record_stats,
    screen_level,
    screen_records,
)
from mptool.privacy.release import apply_policy
from mptool.runtime import signals
from mptool.runtime.errors import InputError
from mptool.runtime.parallel import chunk_limit, chunk_positions, one_thread, run_tasks

#: Replicates per record by default: start with MIN, double up to MAX.
DEFAULT_MIN, DEFAULT_MAX = 4, 32
#: Checkpoint stages: replicates of A(T) (item r) and of A(T minus t) (item t * PAIR_BASE + r, t a position in T).
FULL_STAGE, LOO_STAGE = "replicates_full", "replicates_loo"
#: More than any replicate index (MAX <= 1024, :func:`parse_replicates`): pairs (t, r) as one checkpoint item.
PAIR_BASE = 1024


@dataclass(frozen=True)
class ReplicatePlan:
    """How many replicates (``min_r`` doubling to ``max_r``), the fit budget, the error control, the verdict's scale."""

    min_r: int = DEFAULT_MIN
    max_r: int = DEFAULT_MAX
    budget: int | None = None  # fits of the engine (replicates of T and of T minus t); None: no limit
    control: str = "bh"
    threshold: float = 1.0
    bin_size: float = 0.01
    gate: str = "binned"
    release: Any = None

    def schedule(self) -> list[int]:
        """Replicates per record at each look: MIN, 2 MIN, 4 MIN, ... and MAX last."""
        out, r = [], self.min_r
        while r < self.max_r:
            out.append(r)
            r *= 2
        return [*out, self.max_r]


def parse_replicates(text: str | None) -> tuple[int, int]:
    """``--replicates MIN:MAX`` (or one number N for N:N) as two whole numbers, 2 <= MIN <= MAX <= 1024."""
    if text is None:
        return DEFAULT_MIN, DEFAULT_MAX
    parts = str(text).strip().split(":")
    try:
        lo, hi = (int(parts[0]), int(parts[-1])) if 1 <= len(parts) <= 2 else (0, -1)
    except ValueError:
        lo, hi = 0, -1
    if not 2 <= lo <= hi <= 1024:
        raise InputError("--replicates must be MIN:MAX (or N) with whole numbers 2 <= MIN <= MAX <= 1024, e.g. 4:32")
    return lo, hi


def full_replicates(template: Any, X: pd.DataFrame, y: np.ndarray, classes: np.ndarray, seed: int,
                    reps: list[int], audit: np.ndarray) -> np.ndarray:
    """p_{A_r(T)}(.|x_t) for the audited positions, one fit of T per replicate r: shape (len(reps), len(audit), k)."""
    out = np.empty((len(reps), len(audit), len(classes)))
    with one_thread("blas"):
        for i, r in enumerate(reps):
            signals.check()
            order = replicate_order(seed, r, len(y))
            try:
                model = fit(with_seed(template, replicate_seed(seed, r)), X.iloc[order], y[order])
                out[i] = proba_in(model, X.iloc[audit], classes)
            except (ValueError, TypeError) as exc:
                first = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
                raise InputError(f"model: a replicate of A(T) (another seed and row order) failed: {first}") from None
    return out


def loo_replicates(template: Any, X: pd.DataFrame, y: np.ndarray, classes: np.ndarray, seed: int,
                   pairs: np.ndarray) -> np.ndarray:
    """p_{A_r(T minus t)}(.|x_t) for each (t, r) row of ``pairs``: replicate r's seed and order, t's row left out."""
    out = np.empty((len(pairs), len(classes)))
    n = len(y)
    seeded: dict[int, tuple[Any, np.ndarray]] = {}  # per replicate: the seeded pipeline and T's order
    with one_thread("blas"):
        for i, (t, r) in enumerate(pairs.tolist()):
            signals.check()
            if r not in seeded:
                seeded[r] = (with_seed(template, replicate_seed(seed, r)), replicate_order(seed, r, n))
            model_r, order = seeded[r]
            order = order[order != t]
            try:
                model = fit(model_r, X.iloc[order], y[order])
                out[i] = proba_in(model, X.iloc[[t]], classes)[0]
            except (ValueError, TypeError) as exc:
                detail = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
                raise LooFitError(detail, int(t)) from None
    return out


@dataclass(frozen=True)
class ReplicateResult(LooResult):
    """The replicate engine's outcome for the reported records (``done``; all unless ``--fail-fast`` stopped).

    ``p_full``/``p_loo`` are the mean released probabilities over the replicates (raw, unbinned);
    ``stats`` are on the verdict's scale, ``raw`` on the unbinned one; ``decisions`` the
    ``violation`` values (True, False, ``undecided``).
    """

    stats: RecordStats | None = None
    raw: RecordStats | None = None
    decisions: np.ndarray | None = None
    replicates: np.ndarray | None = None
    sd_full: np.ndarray | None = None  # sd over the T replicates of p(y_t | x_t) (Long et al. Figure 7)
    done: np.ndarray | None = None
    stopped_at: int | None = None
    fits: int = 0
    full_replicates: int = 0
    order: str = "row"
    plan: ReplicatePlan = field(default_factory=ReplicatePlan)
    budget_exhausted: bool = False
    full_draws: np.ndarray | None = None  # (R_T, n, k) released probabilities of the T replicates (all records)
    loo_draws: np.ndarray | None = None  # (n, MAX, k) those of T minus t (NaN beyond a record's replicates)
    label_index: np.ndarray | None = None  # class index of each audited record's label
    fail_fast: dict[str, Any] | None = None  # --fail-fast: how alpha was spent, and what stopped the run

    @property
    def refits(self) -> int:
        """The fits this run made (replicates of T and of T minus t), as the refit engine's ``refits``."""
        return self.fits


class _State:
    """The replicates gathered so far and each record's smallest p-values over the looks."""

    def __init__(self, n: int, k: int, max_r: int) -> None:
        self.full = np.empty((0, n, k))  # (R_T, n, k) released raw probabilities of the T replicates
        self.loo = np.full((n, max_r, k), np.nan)
        self.have = np.zeros(n, dtype=np.int64)
        self.p_violation = np.full(n, np.nan)
        self.p_below = np.full(n, np.nan)
        self.saved_full: dict[int, np.ndarray] = {}  # from a checkpoint (--resume): replicate r -> (n, k)
        self.saved_loo: dict[int, np.ndarray] = {}  # pair item t * PAIR_BASE + r -> (k,)


def saved_fits(ckpt: Any, st: _State) -> None:
    """Put the fits an interrupted run saved in ``ckpt`` into ``st`` (raw probabilities; a wrong shape is refitted).

    The checkpoint verified every chunk when it was opened (key, HMAC, format): nothing else is read here.
    """
    if ckpt is None:
        return
    n, k = st.full.shape[1], st.full.shape[2]
    for r, item in ckpt.load(FULL_STAGE).items():
        if item.get("p", np.empty(0)).shape == (n, k):
            st.saved_full[int(r)] = item["p"]
    for pair, item in ckpt.load(LOO_STAGE).items():
        if item.get("p", np.empty(0)).shape == (k,):
            st.saved_loo[int(pair)] = item["p"]


class ReplicateEngine:
    """Replicates of A(T) and A(T minus t) per record, added where undecided (module docstring)."""

    name = "replicates"

    def __init__(self, plan: ReplicatePlan | None = None) -> None:
        self.plan = plan or ReplicatePlan()

    def refuses(self, spec: Any, template: Any) -> str | None:
        return None

    def _scale(self, p: np.ndarray, raw: bool = False) -> np.ndarray:
        """Probabilities as released and on the verdict's scale (binned, or floored when raw or gate raw)."""
        b = 0.0 if raw or self.plan.gate == "raw" else self.plan.bin_size
        return bin_probabilities(p, b)

    def run(self, request: LooRequest, advance: Callable[[int], None]) -> ReplicateResult:
        """Looks of growing replicate counts until every record is decided, MAX is reached or the budget is spent."""
        plan, T = self.plan, request.train
        positions = np.asarray(request.positions, dtype=np.int64)
        n, k = len(positions), len(request.classes)
        seed = int(request.spec.seed)
        p0 = proba_in(request.full_model, T.X.iloc[positions], request.classes)
        rank, order_name = refit_order(request, p0)
        schedule = plan.schedule()
        st = _State(n, k, plan.max_r)
        saved_fits(request.checkpoint, st)
        fits, stopped, exhausted = 0, None, False
        fail_fast = request.stop_on is not None
        alpha_v = ALPHA * (1 - SCREEN_SHARE) if fail_fast else None
        decisions = np.full(n, UNDECIDED, dtype=object)
        spending = None
        if fail_fast:
            fits, stopped, exhausted, spending = self._screen(request, positions, seed, rank, st, advance)
            decisions = decide(st.p_violation, st.p_below, plan.control, len(schedule), alpha_violation=alpha_v)
            if stopped is not None:
                decisions[stopped] = True
        for look, R in enumerate(schedule):
            if stopped is not None:
                break
            todo = [int(i) for i in rank if isinstance(decisions[i], str) and st.have[i] < R]
            if not todo:
                break
            need_full = max(0, R - len(st.full))
            if plan.budget is not None:
                room = plan.budget - fits - need_full
                take = []
                for i in todo:
                    cost = R - int(st.have[i])
                    if cost > room:
                        break
                    take.append(i)
                    room -= cost
                if len(take) < len(todo):
                    exhausted = True
                todo = take
                if not todo:
                    break
            if need_full:
                fits += self._grow_full(request, positions, seed, R, st)
            for batch in self._batches(todo, fail_fast, request.jobs):
                fits += self._grow_loo(request, positions, seed, R, st, np.array(batch, dtype=np.int64),
                                       advance if look == 0 else None)
                self._test(st, np.array(batch, dtype=np.int64), R)
                decisions = decide(st.p_violation, st.p_below, plan.control, len(schedule), alpha_violation=alpha_v)
                if fail_fast and any(v is True for v in decisions):
                    stopped = next(int(i) for i in rank if decisions[i] is True)
                    spending = {**spending, "stopped_by": "audit", "level": alpha_v}
                    break
            if stopped is not None:
                break
        # A look planned beyond the budget sets ``exhausted`` before its batches run; a --fail-fast stop in
        # them ends the run before the budget's cut is reached: the stop, not the budget, ended it.
        exhausted = exhausted and stopped is None
        if spending is not None:
            spending = {**spending, "ended": STOP if stopped is not None else BUDGET if exhausted else COMPLETE}
        label_index = class_index(T.y[positions], request.classes)
        res = self._result(st, decisions, stopped, fits, order_name, exhausted, label_index)
        return res if spending is None else replace(res, fail_fast=spending)

    def _screen(self, request: LooRequest, positions: np.ndarray, seed: int, rank: np.ndarray, st: _State,
                advance: Callable[[int], None]) -> tuple[int, int | None, bool, dict[str, Any]]:
        """``--fail-fast``'s depth-first screen: (fits, the record it rejected or None, budget cut, spending).

        The first :func:`screen_records` records of the risk order, one at a time: look after look
        (MIN doubling to MAX) while the record's estimate is above the threshold; the record at
        position j is a violation when its p-value, Bonferroni over the planned looks (valid
        whatever stopped its looks), is <= ``screen_level(j)``. Replicates made here count for the
        rest of the audit as any other.
        """
        plan, schedule = self.plan, self.plan.schedule()
        looks, n = len(schedule), len(rank)
        k = screen_records(n)
        spending = {
            "screen_alpha": ALPHA * SCREEN_SHARE, "audit_alpha_violations": ALPHA * (1 - SCREEN_SHARE),
            "audit_alpha_below": ALPHA, "screen_records": k,
            "rule": f"the record at position j (0-based) of the risk order tested at {ALPHA * SCREEN_SHARE:g} * "
            f"2^-(j+1) (weighted Bonferroni), the first {k} records, depth-first up to {plan.max_r} replicates; "
            "the rest of the audit's violations at the other share",
            "stopped_by": None, "level": None, "position": None,
        }
        fits = 0
        for j, i in enumerate(rank[:k].tolist()):
            level = screen_level(j)
            for look, R in enumerate(schedule):
                need_full = max(0, R - len(st.full))
                if plan.budget is not None and fits + need_full + R - int(st.have[i]) > plan.budget:
                    return fits, None, True, spending
                if need_full:
                    fits += self._grow_full(request, positions, seed, R, st)
                fits += self._grow_loo(request, positions, seed, R, st, np.array([i], dtype=np.int64))
                if look == 0:
                    advance(1)
                s = self._test(st, np.array([i], dtype=np.int64), R)
                if min(1.0, looks * float(st.p_violation[i])) <= level:
                    return fits, i, False, {**spending, "stopped_by": "screen", "level": level, "position": j}
                if not s.estimate[0] > plan.threshold:
                    break
        return fits, None, False, spending

    @staticmethod
    def _batches(todo: list[int], fail_fast: bool, jobs: int) -> list[list[int]]:
        """All records at once, or with ``--fail-fast`` batches of 1, 2, 4, ... records (never by ``jobs``)."""
        if not fail_fast:
            return [todo]
        out, i, size = [], 0, 1
        while i < len(todo):
            out.append(todo[i : i + size])
            i += size
            size = min(size * 2, 64)
        return out

    def _grow_full(self, request: LooRequest, positions: np.ndarray, seed: int, R: int, st: _State) -> int:
        """Replicates len(st.full) .. R-1 of A(T), predicted on every audited record (saved ones taken as saved)."""
        T, ckpt = request.train, request.checkpoint
        reps = list(range(len(st.full), R))
        todo = [r for r in reps if r not in st.saved_full]

        def save(i: int, part: np.ndarray) -> None:
            if ckpt is not None:
                ckpt.save(FULL_STAGE, np.array([todo[i]]), p=part)

        parts = run_tasks(
            full_replicates,
            ((request.template, T.X, T.y, request.classes, seed, [r], positions) for r in todo),
            jobs=request.jobs, backend=request.backend, shared=(request.template, T.X, T.y, request.classes),
            on_done=save,
        ) if todo else []
        got = dict(zip(todo, parts, strict=True))
        new = np.concatenate([got[r] if r in got else st.saved_full[r][None] for r in reps], axis=0)
        st.full = np.concatenate([st.full, apply_policy(new.reshape(-1, new.shape[-1]), self.plan.release)
                                  .reshape(new.shape)], axis=0)
        return len(reps)

    def _grow_loo(self, request: LooRequest, positions: np.ndarray, seed: int, R: int, st: _State,
                  batch: np.ndarray, advance: Callable[[int], None] | None = None) -> int:
        """Replicates have .. R-1 of A(T minus t) for the records ``batch`` (indices into ``positions``).

        Pairs an interrupted run saved are taken from the checkpoint; each chunk fitted now is saved there.
        ``advance(n)``: n more records of ``batch`` have all their pairs (progress as the chunks finish).
        """
        T, ckpt = request.train, request.checkpoint
        pairs = np.array([(i, r) for i in batch.tolist() for r in range(int(st.have[i]), R)],
                         dtype=np.int64)  # by record, so records finish as the chunks do (a chunk seeds each r once)
        if not len(pairs):
            return 0
        tr = np.column_stack([positions[pairs[:, 0]], pairs[:, 1]])
        items = tr[:, 0] * PAIR_BASE + tr[:, 1]
        saved = np.array([int(p) in st.saved_loo for p in items.tolist()], dtype=bool)
        chunks = chunk_positions(np.nonzero(~saved)[0], request.jobs, per_job=4, max_items=chunk_limit(request.fit_s))
        left = {int(r): int(c) for r, c in zip(*np.unique(pairs[~saved, 0], return_counts=True), strict=True)}
        if advance is not None and len(batch) > len(left):
            advance(len(batch) - len(left))  # records whose pairs were all saved

        def save(i: int, part: np.ndarray) -> None:
            if ckpt is not None:
                ckpt.save(LOO_STAGE, items[chunks[i]], p=part)
            if advance is not None:
                done = 0
                for rec in pairs[chunks[i], 0].tolist():
                    left[rec] -= 1
                    done += left[rec] == 0
                if done:
                    advance(done)

        try:
            parts = run_tasks(
                loo_replicates,
                ((request.template, T.X, T.y, request.classes, seed, tr[c]) for c in chunks),
                jobs=request.jobs, backend=request.backend, shared=(request.template, T.X, T.y, request.classes),
                on_done=save,
            ) if chunks else []
        except LooFitError as exc:
            raise loo_fit_failed(T, exc) from None
        raw = np.empty((len(pairs), len(request.classes)))
        for c, part in zip(chunks, parts, strict=True):
            raw[c] = part
        for j in np.nonzero(saved)[0].tolist():
            raw[j] = st.saved_loo[int(items[j])]
        got = apply_policy(raw, self.plan.release)
        st.loo[pairs[:, 0], pairs[:, 1]] = got
        st.have[batch] = R
        return len(pairs)

    def _test(self, st: _State, batch: np.ndarray, R: int) -> RecordStats:
        """This look's p-values of the records ``batch`` (R replicates each), kept if smaller than earlier looks'."""
        pt = self._scale(np.transpose(st.full[:R, batch], (1, 0, 2)))
        pl = self._scale(st.loo[batch, :R])
        s = record_stats(pt, pl, self.plan.threshold, 0.0 if self.plan.gate == "raw" else self.plan.bin_size)
        st.p_violation[batch] = np.fmin(st.p_violation[batch], s.p_violation)
        st.p_below[batch] = np.fmin(st.p_below[batch], s.p_below)
        return s

    def _result(self, st: _State, decisions: np.ndarray, stopped: int | None, fits: int, order_name: str,
                exhausted: bool, label_index: np.ndarray) -> ReplicateResult:
        """Per-record statistics at each record's last look; records never evaluated get NaN (undecided).

        ``lower``/``upper`` are the intersection of the record's repeated bounds over the planned looks it had
        (each at 0.05/L, so all hold at once with probability 0.95): a record decided below or above by its
        smallest p-value over the looks has its bound on the decided side of the threshold.

        After a ``--fail-fast`` stop only the records evaluated are reported (``done``).
        """
        n, k = len(st.have), st.full.shape[2]
        b = 0.0 if self.plan.gate == "raw" else self.plan.bin_size
        looks = len(self.plan.schedule())  # the bounds cover the record whichever look stopped it
        cols = {f: np.full(n, np.nan) for f in ("estimate", "lower", "upper", "p_violation", "p_below")}
        raw_cols = {f: np.full(n, np.nan) for f in cols}
        worst, raw_worst = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        m_full, m_loo = np.full((n, k), np.nan), np.full((n, k), np.nan)  # raw released means
        b_full, b_loo = np.full((n, k), np.nan), np.full((n, k), np.nan)  # on the verdict's scale
        for R in sorted(set(st.have[st.have > 0].tolist())):
            idx = np.nonzero(st.have == R)[0]
            pt_raw, pl_raw = np.transpose(st.full[:R, idx], (1, 0, 2)), st.loo[idx, :R]
            s = record_stats(self._scale(pt_raw), self._scale(pl_raw), self.plan.threshold, b, looks)
            r = record_stats(self._scale(pt_raw, raw=True), self._scale(pl_raw, raw=True), self.plan.threshold, 0.0,
                             looks)
            for f in cols:
                cols[f][idx], raw_cols[f][idx] = getattr(s, f), getattr(r, f)
            for early in (e for e in self.plan.schedule() if e < R):  # the bounds of every look the record had:
                pe, le = st.full[:early, idx].transpose(1, 0, 2), st.loo[idx, :early]  # simultaneous at 0.05/L,
                se = record_stats(self._scale(pe), self._scale(le), self.plan.threshold, b, looks)  # so their
                re = record_stats(self._scale(pe, raw=True), self._scale(le, raw=True), self.plan.threshold, 0.0,
                                  looks)  # intersection is too, and holds the look whose p-value decided
                for c, e in ((cols, se), (raw_cols, re)):
                    c["lower"][idx], c["upper"][idx] = np.fmax(c["lower"][idx], e.lower), np.fmin(c["upper"][idx],
                                                                                                  e.upper)
            worst[idx], raw_worst[idx] = s.worst, r.worst
            m_full[idx], m_loo[idx] = pt_raw.mean(axis=1), pl_raw.mean(axis=1)
            b_full[idx], b_loo[idx] = s.m_full, s.m_loo
        stats = RecordStats(**cols, worst=worst, m_full=b_full, m_loo=b_loo)
        raw = RecordStats(**raw_cols, worst=raw_worst, m_full=m_full, m_loo=m_loo)
        sd = spread(st.full, label_index)
        done = (st.have > 0) if stopped is not None else None
        if done is not None:
            stats, raw = _take(stats, done), _take(raw, done)
        keep = done if done is not None else np.ones(n, dtype=bool)
        return ReplicateResult(
            p_full=m_full[keep], p_loo=m_loo[keep], engine=self.name, stats=stats, raw=raw,
            decisions=decisions[keep], replicates=st.have[keep].copy(), sd_full=sd[keep], done=done,
            stopped_at=stopped, fits=fits, full_replicates=len(st.full), order=order_name, plan=self.plan,
            budget_exhausted=exhausted, full_draws=st.full, loo_draws=st.loo, label_index=label_index,
        )


def redecided(result: ReplicateResult, plan: ReplicatePlan) -> ReplicateResult:
    """``result``'s replicates judged again under ``plan`` (another release policy, threshold or scale): no fit.

    ``result`` must come from a run of every record (no ``--fail-fast`` stop) whose plan had no
    release policy (raw draws). Each record keeps the replicates it was given; its p-values are
    taken at every planned look up to them and Bonferroni-corrected over the planned looks, which
    is valid whatever rule chose how many it got (:mod:`mptool.privacy.influence`). A record that
    would have needed more replicates under ``plan`` stays undecided: fail closed.
    """
    if result.done is not None or result.full_draws is None or result.loo_draws is None:
        raise ValueError("redecided: needs the draws of a complete run")
    if result.plan.release is not None:
        raise ValueError("redecided: the run's draws must be raw (no release policy)")
    engine = ReplicateEngine(plan)
    n, k = result.loo_draws.shape[0], result.loo_draws.shape[2]
    st = _State(n, k, result.loo_draws.shape[1])
    full, loo = result.full_draws, result.loo_draws.copy()
    if plan.release is not None:
        full = apply_policy(full.reshape(-1, k), plan.release).reshape(full.shape)
        have = ~np.isnan(loo[..., 0])
        loo[have] = apply_policy(loo[have], plan.release)
    st.full, st.loo, st.have = full, loo, result.replicates.copy()
    for R in plan.schedule():
        batch = np.nonzero(st.have >= R)[0]
        if len(batch):
            engine._test(st, batch, R)
    decisions = decide(st.p_violation, st.p_below, plan.control, len(plan.schedule()))
    return engine._result(st, decisions, None, result.fits, result.order, result.budget_exhausted,
                          result.label_index)


def _take(s: RecordStats, mask: np.ndarray) -> RecordStats:
    """The records of ``mask`` only."""
    return RecordStats(*(getattr(s, f)[mask] for f in RecordStats.__dataclass_fields__))


def spread(full: np.ndarray, label_index: np.ndarray) -> np.ndarray:
    """sd over the replicates of p(y_t | x_t) per record, ``full`` of shape (R, n, k) (Long et al. Figure 7)."""
    if len(full) < 2:
        return np.full(full.shape[1], np.nan)
    return full[:, np.arange(full.shape[1]), label_index].std(axis=0, ddof=1)

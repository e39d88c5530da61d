"""The generic leave-one-out engine: refit the whole pipeline on T \\ {t} for every t.

Works for any spec. Both fits use the same ``random_state`` (the spec's seed). That pairs the
training noise only when the fit depends on T as a set; removing t also shifts every later
row, and a fit that depends on row positions (minibatch shuffling, bootstrap) changes for
that reason too. ``mptool.privacy.noise`` says which estimators are exactly paired and
measures the floor of the others. Records are processed in chunks across joblib workers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mptool.inputs.data import Records
from mptool.inputs.models import fit, proba_in
from mptool.inputs.spec import Spec
from mptool.loo.base import LooRequest, LooResult
from mptool.loo.screen import risk_order, screen_scores
from mptool.runtime import signals
from mptool.runtime.errors import InputError
from mptool.runtime.parallel import StopTasks, chunk_limit, chunk_positions, one_thread, run_tasks

#: Checkpoint stage name of the leave-one-out chunks (``mptool.runtime.checkpoint``).
CHECKPOINT_STAGE = "loo"


class LooFitError(InputError):
    """Fitting or predicting on T \\ {t} failed for a data/parameter reason (exit 2), at position ``t`` of T."""

    def __init__(self, detail: str, position: int) -> None:
        super().__init__(detail, position)  # both in args, so the error survives pickling from a worker
        self.detail, self.position = detail, position

    def __str__(self) -> str:
        return f"model: refitting without training record {self.position} failed: {self.detail}"


def loo_chunk(template: Any, X: pd.DataFrame, y: np.ndarray, classes: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """p_{A(T\\{t})}(.|x_t) for each position t in ``positions`` (one refit each).

    A ValueError/TypeError of the fit or prediction (e.g. k-NN with more neighbours than
    T \\ {t} has records) becomes :class:`LooFitError`, as the fit on T does in ``prepare``.
    An interrupt (SIGINT/SIGTERM) raises ``signals.Interrupted``; no fit cut short is returned.
    """
    out = np.empty((len(positions), len(classes)))
    keep = np.ones(len(y), dtype=bool)
    # One BLAS thread per fit: parallelism comes from the workers, and small fits are much
    # slower when BLAS threads compete with them for the same cores.
    with one_thread("blas"):
        for i, t in enumerate(positions):
            signals.check()  # threading workers see the main process's interrupt here and stop
            keep[t] = False
            try:
                model = fit(template, X.iloc[keep], y[keep])
                out[i] = proba_in(model, X.iloc[[t]], classes)[0]
            except (ValueError, TypeError) as exc:
                detail = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
                raise LooFitError(detail, int(t)) from None
            keep[t] = True
    return out


def loo_fit_failed(T: Records, exc: LooFitError) -> InputError:
    """The one-line error for a refit on T \\ {t} that failed (CSV row of t, the fit's reason, the fix)."""
    return InputError(
        f"model: refitting the pipeline without CSV row {T.rows[exc.position]} failed: {exc.detail}; "
        "T minus one record is too small or too uniform for these model.params "
        "(raise data.train_size or change the parameters)"
    )


@dataclass(frozen=True)
class RefitLooResult(LooResult):
    """LooResult plus how the refits ran: their order and, with ``--fail-fast``, where they stopped.

    ``done`` marks the requested records that were refitted and are reported (None = all);
    when the run stopped at a confirmed violator these are exactly the records up to and
    including it in the refit order, whatever ``--jobs`` is. ``stopped_at`` is that violator's
    index in ``request.positions``; ``refits`` counts the refits this call ran (with
    parallel chunks a few more than reported, and fewer when a checkpoint had some);
    ``order`` is ``row`` or the screen that set the risk order.
    """

    done: np.ndarray | None = None
    stopped_at: int | None = None
    refits: int = 0
    order: str = "row"


class FirstViolator:
    """Follows the refits in their order; settled once every record before the first violator is done.

    ``rank[i]`` is the place of record i (an index into the request's positions) in the
    refit order; ``violates(idx, p_loo)`` says which of records ``idx`` are confirmed
    violators given their leave-one-out probabilities.
    """

    def __init__(self, rank: np.ndarray, violates: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> None:
        self.rank, self.violates = rank, violates
        self.by_rank = np.argsort(rank)
        self.done = np.zeros(len(rank), dtype=bool)
        self.first: int | None = None  # lowest rank of a confirmed violator
        self.prefix = 0  # every record of rank < prefix is done

    def add(self, idx: np.ndarray, p_loo: np.ndarray) -> None:
        """Records ``idx`` are done with these leave-one-out probabilities."""
        self.done[idx] = True
        hits = np.asarray(idx)[np.asarray(self.violates(idx, p_loo), dtype=bool)]
        if hits.size:
            r = int(self.rank[hits].min())
            self.first = r if self.first is None else min(self.first, r)
        while self.prefix < len(self.rank) and self.done[self.by_rank[self.prefix]]:
            self.prefix += 1

    def settled(self) -> bool:
        """True when the first violator in the refit order is known (no record before it is pending)."""
        return self.first is not None and self.prefix >= self.first

    def reported(self) -> np.ndarray:
        """Mask of the records reported after a stop: ranks 0 .. first."""
        assert self.first is not None
        return self.rank <= self.first


def ramp_chunks(todo: np.ndarray, jobs: int, per_job: int = 8, max_items: int | None = None) -> list[np.ndarray]:
    """Consecutive chunks of ``todo`` growing 1, 2, 4 ... records (``jobs`` of each size) up to the usual size
    (:func:`mptool.runtime.parallel.chunk_positions`'s, ``max_items`` at most).

    Small first chunks let ``--fail-fast`` stop after few refits when the screen put a
    violator first; larger later chunks keep the dispatch overhead of a long run low.
    """
    cap = max(1, -(-len(todo) // max(1, jobs * per_job)))
    if max_items:
        cap = min(cap, max_items)
    out, i, size = [], 0, 1
    while i < len(todo):
        for _ in range(max(1, jobs)):
            if i < len(todo):
                out.append(todo[i : i + size])
                i += size
        size = min(cap, size * 2)
    return out


def refit_order(request: LooRequest, p_full: np.ndarray) -> tuple[np.ndarray, str]:
    """Indices into ``request.positions`` in refit order: screened risk first (``order == "risk"``) or as given.

    The screen (:mod:`mptool.loo.screen`) only sets the order, never a value: should it fail
    on an unusual estimator, the records are refitted in row order.
    """
    n = len(request.positions)
    if request.order != "risk" or n < 2:
        return np.arange(n, dtype=np.int64), "row"
    T = request.train
    floor = request.spec.output.bin_size / 2 if request.spec.output.bin_size > 0 else 1e-12
    X = T.X.iloc[request.positions]
    try:
        scores, name = screen_scores(request.full_model, X, T.y[request.positions], p_full, request.classes, floor)
    except Exception:  # noqa: BLE001 - the screen only orders the refits; whatever fails, row order is as good
        return np.arange(n, dtype=np.int64), "row"
    return risk_order(scores), name


class RefitEngine:
    """Refit per record; the reference every faster engine is checked against.

    With ``request.order == "risk"`` the records are refitted in the order of
    :mod:`mptool.loo.screen` (riskiest first); with ``request.stop_on`` (``--fail-fast``) the
    run stops once the first confirmed violator in that order is known. Results are the
    same whatever the order; only which records a stopped run reports depends on it.
    """

    name = "refit"

    def refuses(self, spec: Spec, template: Any) -> str | None:
        return None

    def run(self, request: LooRequest, advance: Callable[[int], None]) -> RefitLooResult:
        """Refit per record in chunks; with ``request.checkpoint``, reuse saved chunks and save new ones."""
        T = request.train
        k = len(request.classes)
        p_full = proba_in(request.full_model, T.X.iloc[request.positions], request.classes)
        order, order_name = refit_order(request, p_full)
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        index_of = {int(t): i for i, t in enumerate(request.positions.tolist())}
        stop_on = request.stop_on
        tracker = None
        if stop_on is not None:
            tracker = FirstViolator(rank, lambda idx, p_loo: stop_on(p_full[idx], p_loo))
        rows = self._saved(request, k)
        if rows:
            advance(len(rows))
            if tracker is not None:
                idx = np.array([index_of[t] for t in rows], dtype=np.int64)
                tracker.add(idx, np.array([rows[t] for t in rows]).reshape(-1, k))
        ordered = request.positions[order]
        todo = np.array([t for t in ordered.tolist() if t not in rows], dtype=np.int64)
        if tracker is not None and tracker.settled():
            todo = todo[:0]
        most = chunk_limit(request.fit_s)
        chunks = ramp_chunks(todo, request.jobs, max_items=most) if tracker is not None \
            else chunk_positions(todo, request.jobs, max_items=most)
        parts = self._refit(request, chunks, advance, tracker, index_of)
        refits = 0
        for c, part in zip(chunks, parts, strict=True):
            if part is not None:
                rows.update({int(t): part[j] for j, t in enumerate(c)})
                refits += len(c)
        done = None
        stopped = None
        if tracker is not None and tracker.settled():
            done, stopped = tracker.reported(), int(order[tracker.first])
        nan = np.full(k, np.nan)
        p_loo = np.array([rows.get(t, nan) for t in request.positions.tolist()], dtype=float).reshape(-1, k)
        if done is not None:
            p_loo[~done] = np.nan
        return RefitLooResult(p_full, p_loo, self.name, done=done, stopped_at=stopped, refits=refits,
                              order=order_name)

    @staticmethod
    def _saved(request: LooRequest, k: int) -> dict[int, np.ndarray]:
        """Leave-one-out rows of this request that ``request.checkpoint`` already holds."""
        ckpt = request.checkpoint
        saved = ckpt.load(CHECKPOINT_STAGE) if ckpt is not None else {}
        return {
            t: saved[t]["p_loo"]
            for t in request.positions.tolist()
            if t in saved and saved[t].get("p_loo", np.empty(0)).shape == (k,)
        }

    @staticmethod
    def _refit(request: LooRequest, chunks: list[np.ndarray], advance: Callable[[int], None],
               tracker: FirstViolator | None, index_of: dict[int, int]) -> list[np.ndarray | None]:
        """Run the chunks (in list order); each finished one is saved, counted and, with a tracker, checked.

        With a tracker (``--fail-fast``) the first chunk (one record, the riskiest) is refitted
        here before any worker starts: when it is a violator the run ends without the
        workers' start-up.
        """
        T, ckpt = request.train, request.checkpoint
        head = 1 if tracker is not None and len(chunks) > 1 else 0

        def done(i: int, part: np.ndarray) -> None:
            if ckpt is not None:
                ckpt.save(CHECKPOINT_STAGE, chunks[i], p_loo=part)
            advance(len(part))
            if tracker is not None:
                tracker.add(np.array([index_of[int(t)] for t in chunks[i]], dtype=np.int64), part)
                if tracker.settled():
                    raise StopTasks

        def run(part: list[np.ndarray], offset: int, jobs: int, backend: str) -> list[np.ndarray | None]:
            return run_tasks(
                loo_chunk,
                ((request.template, T.X, T.y, request.classes, c) for c in part),
                jobs=jobs,
                backend=backend,
                shared=(request.template, T.X, T.y, request.classes),
                on_done=lambda i, r: done(i + offset, r),
            )

        try:
            first = run(chunks[:head], 0, 1, "loky") if head else []  # jobs 1 on loky: in this process
            if tracker is not None and tracker.settled():
                return first + [None] * (len(chunks) - head)
            return first + run(chunks[head:], head, request.jobs, request.backend)
        except LooFitError as exc:
            raise loo_fit_failed(T, exc) from None
